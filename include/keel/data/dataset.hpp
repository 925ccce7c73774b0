#pragma once
// data::Dataset<T>: lazy, re-iterable input pipelines in the style of tf.data.
//
//   auto ds = data::Dataset<>::from_tensor_slices({x, y})
//                 .shuffle(1024, 42).map(augment, data::AUTOTUNE).batch(64).prefetch(data::AUTOTUNE);
//   for (auto& [xb, yb] : ds) { ... }      // every begin() starts a fresh pass (an epoch)
//
// A Dataset is a shared, immutable recipe: a function that starts a pass. A pass is a generator
// (std::function returning std::optional<T>; nullopt = end). Transformations wrap the recipe, so
// copying a Dataset is cheap and nothing runs until it is iterated.
//
// Threads: map(num_parallel_calls > 1) and prefetch() run keel-owned worker threads for the
// lifetime of one pass. They start when the pass starts and are stopped and joined when the pass
// ends or its iterator is destroyed (breaking out of a range-for included). An exception thrown
// on a worker thread is rethrown to the caller at that element's position. Worker threads
// inherit the default device of the thread that started the pass; they never record onto the
// caller's GradientTape (tapes are per thread).
//
// The concurrency machinery, the random numbers and the cache-file format are compiled once in
// src/data/; this header only holds the thin, type-dependent glue.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"

namespace keel::data {

// Pass as num_parallel_calls, prefetch's buffer_size or interleave's cycle_length to let keel
// choose (worker threads: config::num_threads(); prefetch: a buffer that grows while the
// consumer has to wait, up to 16 elements).
inline constexpr int AUTOTUNE = -1;

template <class T = Tensor>
class Dataset;

namespace detail {

// ---- element trees: a Tensor, or a std::pair whose members are element trees ------------------
template <class T> struct is_pair : std::false_type {};
template <class A, class B> struct is_pair<std::pair<A, B>> : std::true_type {};

template <class T> struct tensor_tree : std::false_type {
  static constexpr std::size_t leaves = 0;
};
template <> struct tensor_tree<Tensor> : std::true_type {
  static constexpr std::size_t leaves = 1;
};
template <class A, class B>
struct tensor_tree<std::pair<A, B>>
    : std::bool_constant<tensor_tree<A>::value && tensor_tree<B>::value> {
  static constexpr std::size_t leaves = tensor_tree<A>::leaves + tensor_tree<B>::leaves;
};

inline void flatten(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
template <class A, class B>
void flatten(const std::pair<A, B>& p, std::vector<Tensor>& out) {
  flatten(p.first, out);
  flatten(p.second, out);
}
template <class T>
T unflatten(std::vector<Tensor>& leaves, std::size_t& i) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return std::move(leaves[i++]);
  } else {
    // Two statements: the members must be taken in order (argument order is unspecified).
    auto a = unflatten<typename T::first_type>(leaves, i);
    auto b = unflatten<typename T::second_type>(leaves, i);
    return T(std::move(a), std::move(b));
  }
}

// Stacks (or pads to the largest shape, then stacks) each column of leaves along a new axis 0.
// `op` names the transformation in error messages.
std::vector<Tensor> combine_columns(std::vector<std::vector<Tensor>>& columns, bool padded,
                                    double padding_value, const char* op);

template <class T>
T combine(std::vector<T>& elements, bool padded, double padding_value, const char* op) {
  std::vector<std::vector<Tensor>> columns(tensor_tree<T>::leaves);
  std::vector<Tensor> leaves;
  for (auto& e : elements) {
    leaves.clear();
    flatten(e, leaves);
    for (std::size_t j = 0; j < leaves.size(); ++j) columns[j].push_back(std::move(leaves[j]));
  }
  std::vector<Tensor> out = combine_columns(columns, padded, padding_value, op);
  std::size_t i = 0;
  return unflatten<T>(out, i);
}

// ---- calling user functions on elements ---------------------------------------------------
template <class> inline constexpr bool always_false = false;

// f(element), or f(first, second) for a pair element when f takes two arguments (the way
// tf.data unpacks tuples into a map function's arguments).
template <class F, class E>
decltype(auto) invoke_element(F& f, E&& e) {
  if constexpr (std::is_invocable_v<F&, E&&>) {
    return std::invoke(f, std::forward<E>(e));
  } else if constexpr (is_pair<std::remove_cvref_t<E>>::value) {
    static_assert(std::is_invocable_v<F&, decltype((std::forward<E>(e).first)),
                                      decltype((std::forward<E>(e).second))>,
                  "keel::data: the function must accept the element, or a pair's two members");
    return std::invoke(f, std::forward<E>(e).first, std::forward<E>(e).second);
  } else {
    static_assert(always_false<F>, "keel::data: the function must accept the dataset's element type");
  }
}
template <class F, class T>
using map_result_t = std::remove_cvref_t<decltype(invoke_element(std::declval<F&>(), std::declval<T>()))>;

// A filter predicate may return bool (or anything convertible) or a one-element Tensor.
inline bool truthy(bool b) { return b; }
bool truthy(const Tensor& t);

// num_parallel_calls → number of worker threads (1 = run inline); ValueError when invalid.
int resolve_workers(int num_parallel_calls, const char* op);
void check_count(std::int64_t n, std::int64_t min, const char* op, const char* what);
// ValueError unless num_shards >= 1 and 0 <= index < num_shards (Dataset::shard; dataset_shard.cpp).
void check_shard(std::int64_t num_shards, std::int64_t index);

// ---- background threads (src/data/async_pipe.cpp) -------------------------------------------
// Elements cross threads type-erased, so the threading code is compiled once, not per T.
using Box = std::shared_ptr<void>;

// Pulls items from `pull` (called by one thread at a time; nullptr = end) on `workers` threads,
// applies `work` (empty = identity) and hands the results to next() — in pull order when
// `ordered`. At most `capacity` items are pulled but not yet taken; with `autotune` the capacity
// doubles (up to 16) whenever next() has to wait. The destructor stops and joins the threads.
class AsyncPipe {
 public:
  AsyncPipe(std::function<Box()> pull, std::function<Box(Box)> work, int workers,
            std::int64_t capacity, bool ordered, bool autotune);
  ~AsyncPipe();
  AsyncPipe(const AsyncPipe&) = delete;
  AsyncPipe& operator=(const AsyncPipe&) = delete;
  Box next();  // nullptr at the end; rethrows an item's exception at its position

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <class T, class U>
std::function<std::optional<U>()> async_pass(std::function<std::optional<T>()> up,
                                             std::function<Box(Box)> work, int workers,
                                             std::int64_t capacity, bool ordered, bool autotune) {
  auto pipe = std::make_shared<AsyncPipe>(
      [up = std::move(up)]() -> Box {
        auto e = up();
        if (!e) return nullptr;
        return std::make_shared<T>(std::move(*e));
      },
      std::move(work), workers, capacity, ordered, autotune);
  return [pipe]() -> std::optional<U> {
    Box b = pipe->next();
    if (!b) return std::nullopt;
    return std::optional<U>(std::move(*static_cast<U*>(b.get())));
  };
}

// ---- random numbers for shuffle (Philox, src/data/dataset.cpp) ---------------------------
class ShuffleRng {
 public:
  ShuffleRng(std::uint64_t key, std::uint64_t pass) : key_(key), pass_(pass) {}
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n), unbiased

 private:
  std::uint64_t key_, pass_, block_ = 0;
  std::uint32_t words_[4] = {};
  int used_ = 4;
};
// A shuffle key from the global generator: reproducible after random::set_seed.
std::uint64_t fresh_shuffle_key();

// ---- cache files (src/data/cache_file.cpp) ----------------------------------------------
bool file_exists(const std::string& path);
// Streams elements (each `leaves` tensors) into a temporary file next to `path`; commit()
// completes the header, syncs and renames it into place. Destroyed uncommitted (an interrupted
// pass), it deletes the temporary file, so `path` only ever holds complete caches.
class CacheWriter {
 public:
  CacheWriter(std::string path, std::size_t leaves);
  ~CacheWriter();
  void append(const std::vector<Tensor>& element);
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Validates the header when opened and each record before trusting it; IOError names the file
// and the byte offset.
class CacheReader {
 public:
  CacheReader(std::string path, std::size_t leaves);
  ~CacheReader();
  bool next(std::vector<Tensor>& element);  // false after the last element

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Dataset<Tensor> tensor_slices(const Tensor& x);
Dataset<std::pair<Tensor, Tensor>> tensor_slices(const Tensor& x, const Tensor& y);

}  // namespace detail

template <class A, class B>
Dataset<std::pair<A, B>> zip(const Dataset<A>& a, const Dataset<B>& b);

template <class T>
class Dataset {
 public:
  using value_type = T;
  using Next = std::function<std::optional<T>()>;  // one pass; nullopt = end
  using Start = std::function<Next()>;             // starts a fresh pass

  Dataset() : Dataset(Start([] { return Next([] { return std::optional<T>(); }); })) {}  // empty
  explicit Dataset(Start start) : start_(std::make_shared<const Start>(std::move(start))) {}

  // A fresh pass as a generator (what begin() uses; handy for custom transformations).
  Next start() const { return (*start_)(); }

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = T*;
    using reference = T&;
    iterator() = default;  // the end
    explicit iterator(Next next) : s_(std::make_shared<State>(State{std::move(next), {}})) { ++*this; }
    reference operator*() const { return *s_->current; }
    pointer operator->() const { return &*s_->current; }
    iterator& operator++() {
      s_->current = s_->next();
      if (!s_->current) s_.reset();  // the pass is over: release it (and its threads) now
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(const iterator& o) const { return s_ == o.s_; }

   private:
    struct State {
      Next next;
      std::optional<T> current;
    };
    std::shared_ptr<State> s_;
  };
  iterator begin() const { return iterator(start()); }
  iterator end() const { return iterator(); }

  // ---- sources ----
  // Slices the first axis: element i is x[i] (a view). The pair form slices both tensors, which
  // must have the same first dimension.
  static Dataset<Tensor> from_tensor_slices(const Tensor& x) { return detail::tensor_slices(x); }
  static Dataset<std::pair<Tensor, Tensor>> from_tensor_slices(const std::pair<Tensor, Tensor>& xy) {
    return detail::tensor_slices(xy.first, xy.second);
  }
  // g is either a generator (callable returning std::optional<T>; nullopt ends the pass), which
  // is copied at the start of every pass so that its captured state restarts, or a callable
  // returning such a generator, called once per pass (like tf.data's from_generator).
  template <class G>
  static Dataset from_generator(G g) {
    using R = std::invoke_result_t<G&>;
    if constexpr (std::is_convertible_v<R, std::optional<T>>) {
      return Dataset([g = std::move(g)] { return Next(g); });
    } else {
      static_assert(std::is_convertible_v<std::invoke_result_t<R&>, std::optional<T>>,
                    "from_generator: g must return std::optional<T>, or a generator of them");
      return Dataset([g = std::move(g)]() mutable { return Next(g()); });
    }
  }
  template <class A, class B>
  static Dataset<std::pair<A, B>> zip(const Dataset<A>& a, const Dataset<B>& b) {
    return data::zip(a, b);
  }

  // ---- transformations ----
  // f(element) (or f(first, second) for pairs). num_parallel_calls > 1 (or AUTOTUNE) runs f on
  // that many threads at once, so f must be safe to call concurrently; results keep the input
  // order unless deterministic = false (then they come as they finish).
  template <class F>
  auto map(F f, int num_parallel_calls = 1, bool deterministic = true) const {
    using U = detail::map_result_t<F, T>;
    static_assert(!std::is_void_v<U>, "map: the function must return the new element");
    auto fp = std::make_shared<F>(std::move(f));
    const int workers = detail::resolve_workers(num_parallel_calls, "map");
    return Dataset<U>([src = start_, fp, workers, deterministic] {
      if (workers <= 1) {
        return std::function<std::optional<U>()>([up = (*src)(), fp]() -> std::optional<U> {
          auto e = up();
          if (!e) return std::nullopt;
          return std::optional<U>(detail::invoke_element(*fp, std::move(*e)));
        });
      }
      return detail::async_pass<T, U>(
          (*src)(),
          [fp](detail::Box b) -> detail::Box {
            return std::make_shared<U>(detail::invoke_element(*fp, std::move(*static_cast<T*>(b.get()))));
          },
          workers, 2 * static_cast<std::int64_t>(workers), deterministic, false);
    });
  }

  // Keeps the elements for which pred(element) is true (bool or a one-element Tensor).
  template <class P>
  Dataset filter(P pred) const {
    auto p = std::make_shared<P>(std::move(pred));
    return Dataset([src = start_, p] {
      return Next([up = (*src)(), p]() -> std::optional<T> {
        while (auto e = up())
          if (detail::truthy(detail::invoke_element(*p, std::as_const(*e)))) return std::optional<T>(std::move(*e));
        return std::nullopt;
      });
    });
  }

  // Stacks `size` consecutive elements along a new axis 0 (each member of a pair separately).
  // The last, smaller batch is dropped when drop_remainder.
  Dataset batch(std::int64_t size, bool drop_remainder = false) const {
    return batched(size, drop_remainder, false, 0.0, "batch");
  }
  // Like batch, for elements of different shapes (e.g. rank-1 sequences of different lengths):
  // each element is padded with padding_value at the end of every axis to the largest shape in
  // its batch.
  Dataset padded_batch(std::int64_t size, double padding_value = 0, bool drop_remainder = false) const {
    return batched(size, drop_remainder, true, padding_value, "padded_batch");
  }

  // Fills a buffer of buffer_size elements and emits a uniformly chosen one, replacing it with
  // the next input element. With a seed the order is reproducible; reshuffle_each_iteration
  // gives each pass its own (still reproducible) order. Without a seed the key comes from the
  // global generator when shuffle() is called, so random::set_seed makes it reproducible too.
  Dataset shuffle(std::int64_t buffer_size, std::optional<std::uint64_t> seed = {},
                  bool reshuffle_each_iteration = true) const {
    detail::check_count(buffer_size, 1, "shuffle", "buffer_size");
    const std::uint64_t key = seed ? *seed : detail::fresh_shuffle_key();
    auto passes = std::make_shared<std::atomic<std::uint64_t>>(0);
    return Dataset([src = start_, buffer_size, key, passes, reshuffle_each_iteration] {
      struct State {
        Next up;
        std::vector<T> buffer;
        detail::ShuffleRng rng;
        bool filled = false, up_done = false;
      };
      const std::uint64_t pass = reshuffle_each_iteration ? passes->fetch_add(1) : 0;
      auto s = std::make_shared<State>(State{(*src)(), {}, detail::ShuffleRng(key, pass)});
      return Next([s, buffer_size]() -> std::optional<T> {
        auto pull = [&]() -> std::optional<T> {
          if (s->up_done) return std::nullopt;
          auto e = s->up();
          if (!e) s->up_done = true;
          return e;
        };
        if (!s->filled) {
          s->filled = true;
          while (static_cast<std::int64_t>(s->buffer.size()) < buffer_size)
            if (auto e = pull()) s->buffer.push_back(std::move(*e)); else break;
        }
        if (s->buffer.empty()) return std::nullopt;
        const auto i = static_cast<std::size_t>(s->rng.below(s->buffer.size()));
        std::optional<T> out(std::move(s->buffer[i]));
        if (auto e = pull()) {
          s->buffer[i] = std::move(*e);
        } else {
          if (i + 1 != s->buffer.size()) s->buffer[i] = std::move(s->buffer.back());
          s->buffer.pop_back();
        }
        return out;
      });
    });
  }

  // count passes over the input (-1: forever). Each repetition starts a fresh input pass, so a
  // shuffle upstream reshuffles. An input pass that yields nothing ends the repetition (instead
  // of spinning forever).
  Dataset repeat(std::int64_t count = -1) const {
    detail::check_count(count, -1, "repeat", "count");
    return Dataset([src = start_, count] {
      struct State {
        Next current;
        std::int64_t started = 0;
        bool any = false, done = false;
      };
      auto s = std::make_shared<State>();
      return Next([src, count, s]() -> std::optional<T> {
        while (!s->done) {
          if (!s->current) {
            if (count >= 0 && s->started >= count) break;
            s->current = (*src)();
            ++s->started;
            s->any = false;
          }
          if (auto e = s->current()) {
            s->any = true;
            return e;
          }
          s->current = nullptr;  // end this pass (and its threads) before the next one starts
          if (!s->any) break;
        }
        s->done = true;
        return std::nullopt;
      });
    });
  }

  // The first n elements (-1: all).
  Dataset take(std::int64_t n) const {
    detail::check_count(n, -1, "take", "count");
    if (n < 0) return *this;
    return Dataset([src = start_, n] {
      return Next([up = Next(), src, n, i = std::int64_t{0}]() mutable -> std::optional<T> {
        if (i >= n) {
          up = nullptr;  // stop the input (and its threads) as soon as the last element is out
          return std::nullopt;
        }
        if (!up) up = (*src)();
        auto e = up();
        if (e) ++i; else i = n;
        return e;
      });
    });
  }

  // Drops the first n elements (-1: all).
  Dataset skip(std::int64_t n) const {
    detail::check_count(n, -1, "skip", "count");
    return Dataset([src = start_, n] {
      return Next([up = (*src)(), n, skipped = false]() mutable -> std::optional<T> {
        if (!skipped) {
          skipped = true;
          for (std::int64_t i = 0; n < 0 || i < n; ++i)
            if (!up()) return std::nullopt;
          if (n < 0) return std::nullopt;
        }
        return up();
      });
    });
  }

  // tf.data's shard: every num_shards-th element starting at index (elements index,
  // index + num_shards, ...), so the num_shards shards of one pass cover each element once.
  Dataset shard(std::int64_t num_shards, std::int64_t index) const {
    detail::check_shard(num_shards, index);
    return Dataset([src = start_, num_shards, index] {
      return Next([up = (*src)(), num_shards, index, i = std::int64_t{0}]() mutable -> std::optional<T> {
        while (auto e = up())
          if (i++ % num_shards == index) return e;
        return std::nullopt;
      });
    });
  }

  // The first complete pass records the elements; later passes replay them without touching
  // the input. filename empty: in memory. Otherwise a file (Tensor elements or pairs of them):
  // written during the first complete pass (a temporary file renamed into place at its end, so
  // an interrupted pass leaves no cache), read by every pass that starts once it exists — also
  // in later runs of the program. A file that exists but is not a valid cache is an IOError
  // (delete it to rebuild), never silently overwritten.
  Dataset cache(std::string filename = "") const {
    if (filename.empty()) return memory_cache();
    if constexpr (detail::tensor_tree<T>::value) {
      return Dataset([src = start_, filename] {
        constexpr std::size_t leaves = detail::tensor_tree<T>::leaves;
        if (detail::file_exists(filename)) {
          auto reader = std::make_shared<detail::CacheReader>(filename, leaves);
          return Next([reader]() -> std::optional<T> {
            std::vector<Tensor> v;
            if (!reader->next(v)) return std::nullopt;
            std::size_t i = 0;
            return detail::unflatten<T>(v, i);
          });
        }
        auto writer = std::make_shared<detail::CacheWriter>(filename, leaves);
        return Next([up = (*src)(), writer]() -> std::optional<T> {
          auto e = up();
          if (!e) {
            writer->commit();
            return std::nullopt;
          }
          std::vector<Tensor> v;
          detail::flatten(*e, v);
          writer->append(v);
          return e;
        });
      });
    } else {
      throw ValueError("cache(filename): only Tensor elements (or pairs of them) can be cached in a file; "
                       "use cache() to cache in memory");
    }
  }

  // Runs the input on a background thread that keeps up to buffer_size elements ready
  // (AUTOTUNE: adapts; 0: no prefetching).
  Dataset prefetch(std::int64_t buffer_size) const {
    detail::check_count(buffer_size, AUTOTUNE, "prefetch", "buffer_size");
    if (buffer_size == 0) return *this;
    return Dataset([src = start_, buffer_size] {
      const bool autotune = buffer_size == AUTOTUNE;
      return detail::async_pass<T, T>((*src)(), nullptr, 1, autotune ? 2 : buffer_size, true, autotune);
    });
  }

  // f(element) returns a Dataset<U>; the results of cycle_length elements at a time are
  // interleaved, block_length elements from each in turn (tf.data's interleave order).
  template <class F>
  auto interleave(F f, std::int64_t cycle_length = AUTOTUNE, std::int64_t block_length = 1) const {
    using D = detail::map_result_t<F, T>;
    using U = typename D::value_type;
    static_assert(std::is_same_v<D, Dataset<U>>, "interleave: the function must return a Dataset");
    const std::int64_t cycle =
        cycle_length == AUTOTUNE ? detail::resolve_workers(AUTOTUNE, "interleave") : cycle_length;
    detail::check_count(cycle, 1, "interleave", "cycle_length");
    detail::check_count(block_length, 1, "interleave", "block_length");
    auto fp = std::make_shared<F>(std::move(f));
    using NextU = std::function<std::optional<U>()>;
    return Dataset<U>([src = start_, fp, cycle, block_length] {
      struct State {
        Next input;
        std::vector<NextU> slots;
        std::size_t index = 0;
        std::int64_t in_block = 0, open = 0;
        bool input_done = false;
      };
      auto s = std::make_shared<State>();
      s->input = (*src)();
      s->slots.resize(static_cast<std::size_t>(cycle));
      return NextU([s, fp, block_length]() -> std::optional<U> {
        auto advance = [&] {
          s->in_block = 0;
          s->index = (s->index + 1) % s->slots.size();
        };
        while (!s->input_done || s->open > 0) {
          NextU& slot = s->slots[s->index];
          if (slot) {
            if (auto e = slot()) {
              if (++s->in_block == block_length) advance();
              return e;
            }
            slot = nullptr;
            --s->open;
            advance();
          } else if (!s->input_done) {
            if (auto in = s->input()) {
              slot = detail::invoke_element(*fp, std::move(*in)).start();
              ++s->open;
            } else {
              s->input_done = true;
            }
          } else {
            advance();
          }
        }
        return std::nullopt;
      });
    });
  }
  // interleave with one input at a time: the concatenation of f's datasets.
  template <class F>
  auto flat_map(F f) const { return interleave(std::move(f), 1, 1); }

 private:
  Dataset batched(std::int64_t size, bool drop_remainder, bool padded, double padding_value,
                  const char* op) const {
    static_assert(detail::tensor_tree<T>::value,
                  "batch: elements must be Tensors or (nested) std::pairs of Tensors");
    detail::check_count(size, 1, op, "batch_size");
    return Dataset([src = start_, size, drop_remainder, padded, padding_value, op] {
      return Next([up = (*src)(), size, drop_remainder, padded, padding_value, op,
                   done = false]() mutable -> std::optional<T> {
        if (done) return std::nullopt;
        std::vector<T> elements;
        while (static_cast<std::int64_t>(elements.size()) < size) {
          auto e = up();
          if (!e) {
            done = true;
            break;
          }
          elements.push_back(std::move(*e));
        }
        if (elements.empty() || (drop_remainder && static_cast<std::int64_t>(elements.size()) < size))
          return std::nullopt;
        return detail::combine(elements, padded, padding_value, op);
      });
    });
  }

  Dataset memory_cache() const {
    struct Memo {
      std::mutex mutex;
      std::shared_ptr<const std::vector<T>> complete;
    };
    auto memo = std::make_shared<Memo>();
    return Dataset([src = start_, memo] {
      std::shared_ptr<const std::vector<T>> cached;
      {
        std::lock_guard<std::mutex> lock(memo->mutex);
        cached = memo->complete;
      }
      if (cached) {
        return Next([cached, i = std::size_t{0}]() mutable -> std::optional<T> {
          if (i >= cached->size()) return std::nullopt;
          return (*cached)[i++];
        });
      }
      // Each filling pass records privately and publishes only when it completes: a pass
      // abandoned halfway leaves no partial cache (as in tf.data).
      auto recording = std::make_shared<std::vector<T>>();
      return Next([up = (*src)(), memo, recording]() -> std::optional<T> {
        auto e = up();
        if (!e) {
          std::lock_guard<std::mutex> lock(memo->mutex);
          if (!memo->complete && recording) memo->complete = recording;
          return std::nullopt;
        }
        recording->push_back(*e);
        return e;
      });
    });
  }

  template <class>
  friend class Dataset;
  std::shared_ptr<const Start> start_;
};

// Pairs the elements of a and b; ends with the shorter one.
template <class A, class B>
Dataset<std::pair<A, B>> zip(const Dataset<A>& a, const Dataset<B>& b) {
  using P = std::pair<A, B>;
  return Dataset<P>([a, b] {
    return std::function<std::optional<P>()>([na = a.start(), nb = b.start()]() -> std::optional<P> {
      auto x = na();
      if (!x) return std::nullopt;
      auto y = nb();
      if (!y) return std::nullopt;
      return P(std::move(*x), std::move(*y));
    });
  });
}

// The common element types are compiled once in the library.
extern template class Dataset<Tensor>;
extern template class Dataset<std::pair<Tensor, Tensor>>;

}  // namespace keel::data
