// data::Dataset: the order and values of every transformation, seeds, repeat/take/skip, caches
// (memory and file, counting source calls), prefetch and parallel map threads, exceptions, and
// clean shutdown when a pipeline is abandoned mid-iteration.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace keel;
using data::Dataset;
using Catch::Matchers::Contains;

namespace {

using Pair = std::pair<Tensor, Tensor>;

// 0, 1, ..., n-1 as a generator dataset; `calls` (if given) counts the source's pulls.
Dataset<std::int64_t> range(std::int64_t n, std::shared_ptr<std::atomic<int>> calls = nullptr) {
  return Dataset<std::int64_t>::from_generator([i = std::int64_t{0}, n, calls]() mutable -> std::optional<std::int64_t> {
    if (calls) ++*calls;
    if (i < n) return i++;
    return std::nullopt;
  });
}

template <class T>
std::vector<T> collect(const Dataset<T>& ds) {
  std::vector<T> out;
  for (auto& e : ds) out.push_back(e);
  return out;
}

std::vector<float> values(const Dataset<Tensor>& ds) {
  std::vector<float> out;
  for (auto& t : ds) out.push_back(t.item<float>());
  return out;
}

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

std::string temp_dir() {
  const char* base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string tmpl = std::string(base) + "/keel_dataset_XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("from_tensor_slices yields the rows of the first axis in order, every pass afresh", "[data]") {
  auto x = reshape(arange(12), {4, 3});
  auto ds = Dataset<>::from_tensor_slices(x);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::vector<float>> rows;
    for (auto& row : ds) {
      CHECK(row.shape() == Shape{3});
      rows.push_back(row.to_vector<float>());
    }
    REQUIRE(rows.size() == 4);
    CHECK(rows[2] == std::vector<float>{6, 7, 8});
  }
}

TEST_CASE("from_tensor_slices on a pair slices both tensors together", "[data]") {
  auto x = reshape(arange(6), {3, 2});
  auto y = constant<std::int64_t>({10, 11, 12});
  auto ds = Dataset<Pair>::from_tensor_slices({x, y});
  std::vector<std::int64_t> labels;
  for (auto& [xi, yi] : ds) {
    CHECK(xi.shape() == Shape{2});
    CHECK(xi.to_vector<float>()[0] == 2.0f * static_cast<float>(labels.size()));
    labels.push_back(yi.item<std::int64_t>());
  }
  CHECK(labels == std::vector<std::int64_t>{10, 11, 12});
  CHECK_THROWS_AS(Dataset<Pair>::from_tensor_slices({x, constant<std::int64_t>({1, 2})}), ShapeError);
  CHECK_THROWS_AS(Dataset<>::from_tensor_slices(constant(1.0)), ShapeError);
}

TEST_CASE("from_generator restarts a copied generator each pass and calls a factory each pass", "[data]") {
  auto ds = range(4);
  CHECK(collect(ds) == iota(4));
  CHECK(collect(ds) == iota(4));  // the captured counter restarts

  int factory_calls = 0;
  auto made = Dataset<int>::from_generator([&factory_calls] {
    ++factory_calls;
    return [i = 0]() mutable -> std::optional<int> { return i < 3 ? std::optional<int>(i++) : std::nullopt; };
  });
  CHECK(collect(made) == std::vector<int>{0, 1, 2});
  CHECK(collect(made) == std::vector<int>{0, 1, 2});
  CHECK(factory_calls == 2);
}

TEST_CASE("map applies the function in order and may change the element type", "[data]") {
  auto ds = Dataset<>::from_tensor_slices(arange(5)).map([](const Tensor& t) { return t * 2.0; });
  CHECK(values(ds) == std::vector<float>{0, 2, 4, 6, 8});
  auto ints = range(4).map([](std::int64_t v) { return static_cast<double>(v) + 0.5; });
  CHECK(collect(ints) == std::vector<double>{0.5, 1.5, 2.5, 3.5});
}

TEST_CASE("map on pairs accepts the pair or its two members", "[data]") {
  auto ds = Dataset<Pair>::from_tensor_slices({arange(3), arange(10, 13)});
  auto sums = ds.map([](const Tensor& x, const Tensor& y) { return x + y; });
  CHECK(values(sums) == std::vector<float>{10, 12, 14});
  auto swapped = ds.map([](Pair p) { return Pair(p.second, p.first); });
  std::vector<float> firsts;
  for (auto& [a, b] : swapped) firsts.push_back(a.item<float>());
  CHECK(firsts == std::vector<float>{10, 11, 12});
}

TEST_CASE("parallel map keeps the input order although workers finish out of order", "[data][threads]") {
  auto slow_first = range(40).map(
      [](std::int64_t v) {
        // Early elements take longest, so completion order differs from input order.
        std::this_thread::sleep_for(std::chrono::microseconds(v % 4 == 0 ? 3000 : 100));
        return v * 10;
      },
      4);
  std::vector<std::int64_t> expected;
  for (auto v : iota(40)) expected.push_back(v * 10);
  CHECK(collect(slow_first) == expected);
  CHECK(collect(slow_first) == expected);  // a second pass starts new workers
}

TEST_CASE("parallel map with deterministic=false still yields every element once", "[data][threads]") {
  auto ds = range(100).map(
      [](std::int64_t v) {
        std::this_thread::sleep_for(std::chrono::microseconds((v * 37) % 5 * 200));
        return v;
      },
      data::AUTOTUNE, false);
  auto out = collect(ds);
  std::sort(out.begin(), out.end());
  CHECK(out == iota(100));
}

TEST_CASE("map runs tensor ops on worker threads with the same results", "[data][threads]") {
  auto x = random::normal({64, 8}, 0, 1, DType::float32);
  auto f = [](const Tensor& row) { return reduce_sum(square(row)); };
  auto serial = Dataset<>::from_tensor_slices(x).map(f);
  auto parallel = Dataset<>::from_tensor_slices(x).map(f, 3);
  CHECK(values(serial) == values(parallel));
}

TEST_CASE("filter keeps the elements whose predicate holds (bool or a boolean tensor)", "[data]") {
  CHECK(collect(range(10).filter([](std::int64_t v) { return v % 3 == 0; })) == std::vector<std::int64_t>{0, 3, 6, 9});
  auto ds = Dataset<>::from_tensor_slices(arange(6)).filter([](const Tensor& t) { return t > 2.5; });
  CHECK(values(ds) == std::vector<float>{3, 4, 5});
  auto pairs = Dataset<Pair>::from_tensor_slices({arange(4), arange(4) * 2.0})
                   .filter([](const Tensor& x, const Tensor& y) { return x.item<float>() + y.item<float>() > 4; });
  CHECK(collect(pairs).size() == 2);
  auto bad = Dataset<>::from_tensor_slices(arange(4)).filter([](const Tensor&) { return ones({2}, DType::bool_); });
  CHECK_THROWS_AS(collect(bad), ValueError);
}

TEST_CASE("batch stacks consecutive elements along a new first axis", "[data]") {
  auto x = reshape(arange(14), {7, 2});
  auto batches = collect(Dataset<>::from_tensor_slices(x).batch(3));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].shape() == Shape{3, 2});
  CHECK(batches[0].to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(batches[2].shape() == Shape{1, 2});
  CHECK(batches[2].to_vector<float>() == std::vector<float>{12, 13});
}

TEST_CASE("batch with drop_remainder drops the last, smaller batch", "[data]") {
  auto batches = collect(Dataset<>::from_tensor_slices(arange(7)).batch(3, true));
  REQUIRE(batches.size() == 2);
  CHECK(batches[1].to_vector<float>() == std::vector<float>{3, 4, 5});
  CHECK(collect(Dataset<>::from_tensor_slices(arange(2)).batch(3, true)).empty());
}

TEST_CASE("batch of pairs stacks each member; mismatched shapes name padded_batch", "[data]") {
  auto ds = Dataset<Pair>::from_tensor_slices({reshape(arange(8), {4, 2}), constant<std::int64_t>({0, 1, 2, 3})}).batch(2);
  auto b = collect(ds);
  REQUIRE(b.size() == 2);
  CHECK(b[1].first.shape() == Shape{2, 2});
  CHECK(b[1].second.dtype() == DType::int64);
  CHECK(b[1].second.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 3});

  auto ragged = range(3).map([](std::int64_t n) { return ones({n + 1}); });
  CHECK_THROWS_WITH(collect(ragged.batch(3)), Contains("padded_batch"));
  CHECK_THROWS_AS(range(3).map([](std::int64_t) { return ones({1}); }).batch(0), ValueError);
}

TEST_CASE("padded_batch pads variable-length sequences to the longest in each batch", "[data]") {
  auto seqs = range(5).map([](std::int64_t n) { return full({n + 1}, static_cast<double>(n + 1)); });
  auto b = collect(seqs.padded_batch(2, -1));
  REQUIRE(b.size() == 3);
  CHECK(b[0].shape() == Shape{2, 2});
  CHECK(b[0].to_vector<float>() == std::vector<float>{1, -1, 2, 2});
  CHECK(b[1].shape() == Shape{2, 4});
  CHECK(b[1].to_vector<float>() == std::vector<float>{3, 3, 3, -1, 4, 4, 4, 4});
  CHECK(b[2].shape() == Shape{1, 5});
  CHECK(collect(seqs.padded_batch(2, 0, true)).size() == 2);
}

TEST_CASE("shuffle with a seed is a reproducible permutation", "[data][shuffle]") {
  auto a = collect(range(100).shuffle(20, 7));
  auto b = collect(range(100).shuffle(20, 7));
  CHECK(a == b);
  CHECK(a != iota(100));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(100));
  CHECK(collect(range(100).shuffle(20, 8)) != a);
  // A buffer of one element cannot reorder anything.
  CHECK(collect(range(10).shuffle(1, 3)) == iota(10));
  CHECK_THROWS_AS(range(3).shuffle(0), ValueError);
}

TEST_CASE("shuffle reshuffles each pass reproducibly, or repeats its order when asked", "[data][shuffle]") {
  auto ds = range(50).shuffle(50, 11);
  auto first = collect(ds), second = collect(ds);
  CHECK(first != second);
  auto again = range(50).shuffle(50, 11);
  CHECK(collect(again) == first);
  CHECK(collect(again) == second);

  auto fixed = range(50).shuffle(50, 11, false);
  CHECK(collect(fixed) == collect(fixed));
  // Repeating a shuffled dataset reshuffles every repetition.
  auto reps = collect(range(30).shuffle(30, 5).repeat(2));
  CHECK(std::vector<std::int64_t>(reps.begin(), reps.begin() + 30) != std::vector<std::int64_t>(reps.begin() + 30, reps.end()));
}

TEST_CASE("shuffle without a seed follows random::set_seed", "[data][shuffle]") {
  random::set_seed(123);
  auto a = collect(range(64).shuffle(64));
  random::set_seed(123);
  auto b = collect(range(64).shuffle(64));
  CHECK(a == b);
}

TEST_CASE("repeat runs count passes, forever with -1, and ends on an empty input", "[data]") {
  CHECK(collect(range(3).repeat(2)) == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2});
  CHECK(collect(range(3).repeat(0)).empty());
  CHECK(collect(range(3).repeat().take(7)) == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0});
  CHECK(collect(range(0).repeat()).empty());  // would otherwise spin forever
}

TEST_CASE("take and skip cut the stream, -1 meaning all", "[data]") {
  CHECK(collect(range(10).take(3)) == std::vector<std::int64_t>{0, 1, 2});
  CHECK(collect(range(3).take(10)) == iota(3));
  CHECK(collect(range(5).take(-1)) == iota(5));
  CHECK(collect(range(5).skip(3)) == std::vector<std::int64_t>{3, 4});
  CHECK(collect(range(5).skip(9)).empty());
  CHECK(collect(range(5).skip(-1)).empty());
  CHECK(collect(range(10).skip(2).take(3)) == std::vector<std::int64_t>{2, 3, 4});
  auto calls = std::make_shared<std::atomic<int>>(0);
  CHECK(collect(range(1000, calls).take(2)).size() == 2);
  CHECK(*calls == 2);  // take stops pulling its input
}

TEST_CASE("cache in memory replays the first complete pass without the source", "[data][cache]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = range(5, calls).map([](std::int64_t v) { return v * v; }).cache();
  CHECK(collect(ds) == std::vector<std::int64_t>{0, 1, 4, 9, 16});
  const int after_first = *calls;
  CHECK(after_first == 6);  // five elements and the end
  CHECK(collect(ds) == std::vector<std::int64_t>{0, 1, 4, 9, 16});
  CHECK(*calls == after_first);

  // A pass abandoned halfway leaves no partial cache.
  auto calls2 = std::make_shared<std::atomic<int>>(0);
  auto partial = range(5, calls2).cache();
  for (auto& v : partial)
    if (v == 1) break;
  CHECK(collect(partial) == iota(5));
  CHECK(collect(partial) == iota(5));
  CHECK(*calls2 == 2 + 6);
}

TEST_CASE("cache to a file lets a later pipeline read it without touching the source", "[data][cache]") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/pairs.cache";
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto source = [&] {
    return range(6, calls).map([](std::int64_t v) {
      return Pair(full({2, 3}, static_cast<double>(v)), constant<std::int64_t>({v}, {1}));
    });
  };
  auto first = collect(source().cache(file));
  REQUIRE(first.size() == 6);
  REQUIRE(std::filesystem::exists(file));
  const int source_calls = *calls;

  auto replay = collect(source().cache(file));  // a new pipeline object, e.g. the next run
  CHECK(*calls == source_calls);
  REQUIRE(replay.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(replay[i].first.shape() == Shape{2, 3});
    CHECK(replay[i].first.to_vector<float>() == first[i].first.to_vector<float>());
    CHECK(replay[i].second.dtype() == DType::int64);
    CHECK(replay[i].second.item<std::int64_t>() == static_cast<std::int64_t>(i));
  }
  // Batching and repeating on top of the file cache.
  auto epochs = source().cache(file).batch(4).repeat(2);
  CHECK(collect(epochs).size() == 4);
  CHECK(*calls == source_calls);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an interrupted cache-file pass leaves no file; a corrupt one is an IOError naming it", "[data][cache]") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/t.cache";
  auto ds = Dataset<>::from_tensor_slices(reshape(arange(20), {10, 2})).cache(file);
  for (auto& t : ds)
    if (t.to_vector<float>()[0] >= 4) break;
  CHECK_FALSE(std::filesystem::exists(file));
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 0);
  CHECK(collect(ds).size() == 10);
  REQUIRE(std::filesystem::exists(file));

  // Truncate the complete file: the size recorded in the header no longer matches.
  const auto full_size = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, full_size - 5);
  CHECK_THROWS_AS(collect(ds), IOError);
  CHECK_THROWS_WITH(collect(ds), Contains(file) && Contains("byte offset"));
  // Something that is not a cache file is never overwritten.
  { std::ofstream(file, std::ios::trunc) << "not a cache file at all, just some text"; }
  CHECK_THROWS_WITH(collect(ds), Contains(file) && Contains("byte offset 0"));
  CHECK_THROWS_AS(range(3).cache(file), ValueError);  // int elements cannot go to a file
  std::filesystem::remove_all(dir);
}

TEST_CASE("prefetch yields the same elements in order from a background thread", "[data][threads]") {
  CHECK(collect(range(50).prefetch(4)) == iota(50));
  CHECK(collect(range(50).prefetch(data::AUTOTUNE)) == iota(50));
  CHECK(collect(range(5).prefetch(0)) == iota(5));
  auto producer = std::make_shared<std::atomic<std::thread::id>>();
  auto ds = range(3).map([producer](std::int64_t v) {
    producer->store(std::this_thread::get_id());
    return v;
  }).prefetch(2);
  CHECK(collect(ds) == iota(3));
  CHECK(producer->load() != std::this_thread::get_id());
  CHECK_THROWS_AS(range(3).prefetch(-2), ValueError);
}

TEST_CASE("zip pairs two datasets and ends with the shorter", "[data]") {
  auto z = data::zip(range(5), Dataset<>::from_tensor_slices(arange(3)));
  std::vector<std::int64_t> firsts;
  for (auto& [i, t] : z) {
    CHECK(t.item<float>() == static_cast<float>(i));
    firsts.push_back(i);
  }
  CHECK(firsts == iota(3));
  auto same = Dataset<>::zip(range(2), range(2));
  CHECK(collect(same).size() == 2);
}

TEST_CASE("interleave follows tf.data's cycle and block order", "[data]") {
  // The example of tf.data.Dataset.interleave's documentation.
  auto ds = Dataset<std::int64_t>::from_generator([i = std::int64_t{1}]() mutable -> std::optional<std::int64_t> {
              return i <= 5 ? std::optional<std::int64_t>(i++) : std::nullopt;
            }).interleave([](std::int64_t x) {
              return Dataset<std::int64_t>::from_generator([x, n = 0]() mutable -> std::optional<std::int64_t> {
                return n++ < 6 ? std::optional<std::int64_t>(x) : std::nullopt;
              });
            }, 2, 4);
  CHECK(collect(ds) == std::vector<std::int64_t>{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4,
                                                 5, 5, 5, 5, 5, 5});
  auto flat = range(3).flat_map([](std::int64_t n) { return range(n); });
  CHECK(collect(flat) == std::vector<std::int64_t>{0, 0, 1});
}

TEST_CASE("an exception thrown by a map function reaches the caller at that element", "[data][errors]") {
  auto f = [](std::int64_t v) {
    if (v == 5) throw ValueError("bad element 5");
    return v;
  };
  for (int workers : {1, 3}) {
    for (bool prefetch : {false, true}) {
      auto ds = range(20).map(f, workers);
      if (prefetch) ds = ds.prefetch(2);
      std::vector<std::int64_t> seen;
      CHECK_THROWS_WITH(
          [&] {
            for (auto& v : ds) seen.push_back(v);
          }(),
          Contains("bad element 5"));
      CHECK(seen == iota(5));
    }
  }
  auto failing_source = Dataset<int>::from_generator([i = 0]() mutable -> std::optional<int> {
    if (i == 2) throw IOError("source broke");
    return i++;
  });
  CHECK_THROWS_AS(collect(failing_source.prefetch(1)), IOError);
  CHECK_THROWS_AS(collect(failing_source.map([](int v) { return v; }, 2)), IOError);
}

TEST_CASE("breaking out of a prefetched parallel pipeline stops its threads promptly", "[data][threads]") {
  auto running = std::make_shared<std::atomic<int>>(0);
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = range(1000)
                .repeat()
                .map(
                    [running, calls](std::int64_t v) {
                      ++*running;
                      ++*calls;
                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                      --*running;
                      return Tensor(full({4}, static_cast<double>(v)));
                    },
                    4)
                .batch(8)
                .prefetch(data::AUTOTUNE);
  const auto start = std::chrono::steady_clock::now();
  int n = 0;
  for (auto& b : ds) {
    CHECK(b.shape() == Shape{8, 4});
    if (++n == 5) break;
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed < std::chrono::seconds(5));
  CHECK(*running == 0);  // every worker has returned and been joined
  const int after = *calls;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(*calls == after);  // nothing runs in the background any more

  // Destroying an iterator that was never advanced past its first element is clean too.
  { auto it = ds.begin(); CHECK(it != ds.end()); }
  CHECK(*running == 0);
}

TEST_CASE("a pass outlives the Dataset object it was started from", "[data]") {
  Dataset<std::int64_t>::iterator it;
  {
    auto ds = range(3).map([](std::int64_t v) { return v + 1; }, 2).prefetch(1);
    it = ds.begin();
  }
  std::vector<std::int64_t> got;
  for (; it != Dataset<std::int64_t>::iterator(); ++it) got.push_back(*it);
  CHECK(got == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("a typical training pipeline: shuffle, parallel augment, batch, prefetch, epochs", "[data]") {
  auto x = reshape(arange(2 * 4 * 4 * 1), {2 * 1, 4, 4, 1});
  x = concat({x, x, x, x, x}, 0);  // 10 images
  auto y = arange(0, 10, 1, DType::int64);
  auto ds = Dataset<Pair>::from_tensor_slices({x, y})
                .shuffle(10, 1)
                .map([](const Tensor& img, const Tensor& label) {
                  return Pair(data::image::random_flip_left_right(img, 3), label);
                }, 2)
                .batch(4)
                .prefetch(data::AUTOTUNE);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<std::int64_t> labels;
    std::vector<std::int64_t> sizes;
    for (auto& [xb, yb] : ds) {
      sizes.push_back(xb.shape()[0]);
      CHECK(xb.shape().dims() == std::vector<std::int64_t>{xb.shape()[0], 4, 4, 1});
      for (auto l : yb.to_vector<std::int64_t>()) labels.insert(l);
    }
    CHECK(sizes == std::vector<std::int64_t>{4, 4, 2});
    CHECK(labels.size() == 10);
  }
}
