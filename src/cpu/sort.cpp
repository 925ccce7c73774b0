// Sorting and top-k selection along one axis, on the order-preserving integer keys of
// sort_keys.hpp. sort: an LSD radix sort of (key, position) pairs per row (stable by
// construction, so equal values keep their order; 11-bit digits, a pass whose digit is the same
// for the whole row skipped); short rows use std::sort on (key, position), which is as stable
// since positions are distinct. top_k: a heap of the k best for small k (one compare per
// element, like std::partial_sort), nth_element + sort for large k.
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "core/dispatch.hpp"
#include "cpu/copy.hpp"
#include "cpu/kernels.hpp"
#include "cpu/rows.hpp"
#include "cpu/scan_sort.hpp"
#include "cpu/sort_keys.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"
#include "keel/core/storage.hpp"

namespace keel::cpu {

namespace {

template <class K>
struct Item {
  K key;
  std::uint32_t pos;
};

// (key, pos) lexicographic: with distinct positions a total order, so unstable algorithms on
// it give stable results.
template <class K>
bool before(const Item<K>& a, const Item<K>& b) {
  return a.key < b.key || (a.key == b.key && a.pos < b.pos);
}

// Rows shorter than this are sorted by comparison (each radix pass walks 2048 counters).
constexpr std::int64_t kRadixMin = 1024;

// Digits of this many bits per pass: 3 passes for 32-bit keys, 6 for 64-bit ones (2048 counters
// still fit in L1; measured faster than 8-bit digits on 1M floats).
constexpr int kDigitBits = 11;
constexpr std::uint32_t kDigits = 1u << kDigitBits;

// Sorts items[0, n) by key, stably; tmp has room for n items.
template <class K>
void radix_sort(Item<K>* items, Item<K>* tmp, std::int64_t n) {
  constexpr int kPasses = (static_cast<int>(sizeof(K)) * 8 + kDigitBits - 1) / kDigitBits;
  std::vector<std::uint32_t> counts(static_cast<std::size_t>(kPasses) * kDigits, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    K k = items[i].key;
    for (int p = 0; p < kPasses; ++p, k >>= kDigitBits) ++counts[p * kDigits + (k & (kDigits - 1))];
  }
  Item<K>* src = items;
  Item<K>* dst = tmp;
  for (int p = 0; p < kPasses; ++p) {
    std::uint32_t* c = counts.data() + static_cast<std::size_t>(p) * kDigits;
    const int shift = kDigitBits * p;
    // Every pass permutes the same multiset of digits: when one digit value covers the whole row,
    // the pass would change nothing.
    if (c[(items[0].key >> shift) & (kDigits - 1)] == static_cast<std::uint32_t>(n)) continue;
    std::uint32_t offset = 0;
    for (std::uint32_t d = 0; d < kDigits; ++d) {
      const std::uint32_t count = c[d];
      c[d] = offset;
      offset += count;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const Item<K> it = src[i];
      dst[c[(it.key >> shift) & (kDigits - 1)]++] = it;
    }
    std::swap(src, dst);
  }
  if (src != items) std::memcpy(items, src, static_cast<std::size_t>(n) * sizeof(Item<K>));
}

template <class T>
void sort_rows(const T* x, std::int64_t outer, std::int64_t n, std::int64_t inner, bool descending, T* values,
               std::int32_t* indices) {
  using K = sort_keys::Key<T>;
  const std::int64_t rows = outer * inner;
  const int nt = std::max(1, parallel_threads());
  const bool par = nt > 1 && rows > 1 && rows * n >= kParallelGrain;
  parallel_ranges(rows, nt, [&](std::int64_t r0, std::int64_t r1) {
    // Scratch without zero-filling (every entry is written before it is read), from the tensors'
    // caching allocator: fresh pages for every call cost more than the sort of a large row.
    const Storage scratch(static_cast<std::size_t>(n) * (n >= kRadixMin ? 2 : 1) * sizeof(Item<K>), Device::cpu());
    Item<K>* const items = static_cast<Item<K>*>(scratch.data());
    Item<K>* const tmp = n >= kRadixMin ? items + n : nullptr;
    for (std::int64_t r = r0; r < r1; ++r) {
      // (Along the last axis without the divisions: two per row were a third of sorting rows of 4.)
      const std::int64_t base = inner == 1 ? r * n : (r / inner) * n * inner + r % inner;
      const T* row = x + base;
      for (std::int64_t j = 0; j < n; ++j) {
        const K k = sort_keys::key(row[j * inner]);
        items[static_cast<std::size_t>(j)] = {descending ? static_cast<K>(~k) : k, static_cast<std::uint32_t>(j)};
      }
      if (n >= kRadixMin)
        radix_sort(items, tmp, n);
      else
        std::sort(items, items + n, before<K>);
      for (std::int64_t j = 0; j < n; ++j) {
        const std::uint32_t p = items[static_cast<std::size_t>(j)].pos;
        if (values) values[base + j * inner] = row[static_cast<std::int64_t>(p) * inner];
        if (indices) indices[base + j * inner] = static_cast<std::int32_t>(p);
      }
    }
  }, par);
}

// top_k keeps up to this many best values in a sorted array (an insertion moves a few items),
// more in a heap: the heap's pop and push cost several times the insertion at k = 8.
constexpr std::int64_t kSortedBest = 32;

// "a ranks above b" for top_k: the larger key, the lower position among equal keys.
template <class K>
bool better(const Item<K>& a, const Item<K>& b) {
  return a.key > b.key || (a.key == b.key && a.pos < b.pos);
}

template <class T>
void top_k_row(const T* row, std::int64_t n, std::int64_t k, bool sorted, Item<sort_keys::Key<T>>* scratch,
               T* values, std::int32_t* indices) {
  using K = sort_keys::Key<T>;
  if (k == 0) return;
  if (k * 16 <= n) {
    const std::span<Item<K>> items(scratch, static_cast<std::size_t>(k));
    for (std::int64_t j = 0; j < k; ++j) items[static_cast<std::size_t>(j)] = {sort_keys::key(row[j]), static_cast<std::uint32_t>(j)};
    // The k best so far, and the worst of them: up to kSortedBest as an array kept best first (a
    // newcomer moves down past the few it beats), beyond that a heap whose top is the worst.
    // The positions come in increasing order, so a newcomer equal to the worst loses the tie and
    // only a strictly larger key gets in.
    const bool sorted_array = k <= kSortedBest;
    if (sorted_array) std::sort(items.begin(), items.end(), better<K>);
    else std::make_heap(items.begin(), items.end(), better<K>);
    const auto worst_item = [&]() -> const Item<K>& { return sorted_array ? items.back() : items.front(); };
    K worst = worst_item().key;
    T worst_value = row[worst_item().pos];
    // `v <= worst_value` rejects exactly the values whose key is <= worst (equal values have
    // equal keys; a NaN v is never <= anything and a NaN worst rejects nothing), in the values'
    // own type: the common case of a rejection is one compare.
    const auto consider = [&](std::int64_t j) {
      if (row[j] <= worst_value) return;
      const K kj = sort_keys::key(row[j]);
      if (kj <= worst) return;
      const Item<K> item{kj, static_cast<std::uint32_t>(j)};
      if (sorted_array) {
        std::size_t at = items.size() - 1;
        for (; at > 0 && better(item, items[at - 1]); --at) items[at] = items[at - 1];
        items[at] = item;
      } else {
        std::pop_heap(items.begin(), items.end(), better<K>);
        items.back() = item;
        std::push_heap(items.begin(), items.end(), better<K>);
      }
      worst = worst_item().key;
      worst_value = row[worst_item().pos];
    };
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Floats: the kernel table's scan skips to the next value above the worst at SIMD width.
      const auto next_above = typed_kernels<T>().next_above;
      for (std::int64_t j = k + next_above(row + k, n - k, worst_value); j < n;
           j += 1 + next_above(row + j + 1, n - j - 1, worst_value))
        consider(j);
    } else {
      constexpr std::int64_t kBlock = 32;
      std::int64_t j = k;
      for (; j + kBlock <= n; j += kBlock) {
        bool any = false;
        for (std::int64_t i = 0; i < kBlock; ++i) any |= !(row[j + i] <= worst_value);
        if (!any) continue;
        for (std::int64_t i = 0; i < kBlock; ++i) consider(j + i);
      }
      for (; j < n; ++j) consider(j);
    }
    if (sorted) {
      if (!sorted_array) std::sort_heap(items.begin(), items.end(), better<K>);  // best first
    } else
      std::sort(items.begin(), items.end(), [](const Item<K>& a, const Item<K>& b) { return a.pos < b.pos; });
  } else {
    const std::span<Item<K>> items(scratch, static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) items[static_cast<std::size_t>(j)] = {sort_keys::key(row[j]), static_cast<std::uint32_t>(j)};
    const auto kth = items.begin() + k;
    if (k < n) std::nth_element(items.begin(), kth, items.end(), better<K>);
    if (sorted)
      std::sort(items.begin(), kth, better<K>);
    else
      std::sort(items.begin(), kth, [](const Item<K>& a, const Item<K>& b) { return a.pos < b.pos; });
  }
  for (std::int64_t j = 0; j < k; ++j) {
    const std::uint32_t p = scratch[j].pos;
    values[j] = row[p];
    indices[j] = static_cast<std::int32_t>(p);
  }
}

}  // namespace

void sort(const Tensor& x_in, int axis, bool descending, const Tensor& values, const Tensor& indices) {
  if (x_in.size() == 0) return;
  const Tensor x = contiguous(x_in);
  const AxisLines lines = axis_lines(x.shape().dims(), axis);
  const std::int64_t outer = lines.outer, n = lines.n, inner = lines.inner;
  std::int32_t* idx = indices.defined() ? static_cast<std::int32_t*>(indices.raw_data()) : nullptr;
  detail::dispatch_numeric(x.dtype(), "sort", [&]<class T>() {
    T* v = values.defined() ? static_cast<T*>(values.raw_data()) : nullptr;
    sort_rows<T>(x.data<T>(), outer, n, inner, descending, v, idx);
  });
}

void top_k(const Tensor& x_in, std::int64_t k, bool sorted, const Tensor& values, const Tensor& indices) {
  if (values.size() == 0) return;
  const Tensor x = contiguous(x_in);
  const std::int64_t n = x.shape()[x.rank() - 1];
  const std::int64_t rows = n == 0 ? 0 : x.size() / n;
  auto* idx = static_cast<std::int32_t*>(indices.raw_data());
  detail::dispatch_numeric(x.dtype(), "top_k", [&]<class T>() {
    const T* xs = x.data<T>();
    T* vs = static_cast<T*>(values.raw_data());
    const int nt = std::max(1, parallel_threads());
    const bool par = nt > 1 && rows > 1 && x.size() >= kParallelGrain;
    parallel_ranges(rows, nt, [&](std::int64_t r0, std::int64_t r1) {
      using I = Item<sort_keys::Key<T>>;
      const Storage scratch(static_cast<std::size_t>(k * 16 <= n ? k : n) * sizeof(I), Device::cpu());
      for (std::int64_t r = r0; r < r1; ++r)
        top_k_row<T>(xs + r * n, n, k, sorted, static_cast<I*>(scratch.data()), vs + r * k, idx + r * k);
    }, par);
  });
}

}  // namespace keel::cpu
