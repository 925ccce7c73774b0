// Searching sorted rows (searchsorted), distinct values (unique) and counting (bincount).
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/copy.hpp"
#include "cpu/scan_sort.hpp"
#include "cpu/sort_keys.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

void search_sorted(const Tensor& sorted_in, const Tensor& values_in, bool right, const Tensor& out) {
  if (out.size() == 0) return;
  const Tensor s = contiguous(sorted_in), v = contiguous(values_in);
  const std::int64_t n = s.shape()[s.rank() - 1], m = v.shape()[v.rank() - 1];
  auto* o = static_cast<std::int32_t*>(out.raw_data());
  detail::dispatch_numeric(s.dtype(), "searchsorted", [&]<class T>() {
    const T* ss = s.data<T>();
    const T* vs = v.data<T>();
    const std::int64_t total = out.size();
    const int nt = std::max(1, parallel_threads());
    // A binary search costs about log2(n) probes, each a cache miss on a long row.
    const bool par = nt > 1 && total * 16 >= kParallelGrain;
    parallel_ranges(total, nt, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t t = b; t < e; ++t) {
        const T* row = ss + (t / m) * n;
        const auto kv = sort_keys::key(vs[t]);
        // The keys of the row are computed on the probes only: a search touches log2(n) of them.
        std::int64_t lo = 0, hi = n;
        while (lo < hi) {
          const std::int64_t mid = lo + (hi - lo) / 2;
          const auto km = sort_keys::key(row[mid]);
          if (right ? km <= kv : km < kv)
            lo = mid + 1;
          else
            hi = mid;
        }
        o[t] = static_cast<std::int32_t>(lo);
      }
    }, par);
  });
}

Tensor unique(const Tensor& x_in, const Tensor& idx) {
  const Tensor x = contiguous(x_in);
  const std::int64_t n = x.size();
  auto* id = static_cast<std::int32_t*>(idx.raw_data());
  Tensor y;
  const auto run = [&]<class T>() {
    const T* xs = x.data<T>();
    std::vector<std::int64_t> first;  // the position of each distinct value's first occurrence
    std::unordered_map<sort_keys::Key<T>, std::int32_t> seen;
    seen.reserve(static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 20)));
    for (std::int64_t i = 0; i < n; ++i) {
      const T v = xs[i];
      const auto next = static_cast<std::int32_t>(first.size());
      if constexpr (std::is_floating_point_v<T>) {
        // Every NaN is a value of its own, as in TensorFlow (whose hash map finds no NaN again).
        if (v != v) {
          first.push_back(i);
          id[i] = next;
          continue;
        }
      }
      const auto [it, inserted] = seen.try_emplace(sort_keys::key(v), next);
      if (inserted) first.push_back(i);
      id[i] = it->second;
    }
    y = detail::empty_tensor(Shape{static_cast<std::int64_t>(first.size())}, x.dtype(), Device::cpu(), "unique");
    T* ys = static_cast<T*>(y.raw_data());
    for (std::size_t u = 0; u < first.size(); ++u) ys[u] = xs[first[u]];
  };
  if (x.dtype() == DType::bool_)
    run.template operator()<std::uint8_t>();  // one byte, 0 or 1
  else
    detail::dispatch_numeric(x.dtype(), "unique", run);
  return y;
}

void bincount(const Tensor& x_in, const Tensor& weights_in, const Tensor& out) {
  const std::int64_t length = out.size();
  const Tensor x = contiguous(x_in);
  const Tensor w = weights_in.defined() ? contiguous(weights_in) : Tensor();
  detail::dispatch_numeric(out.dtype(), "bincount", [&]<class W>() {
    W* o = static_cast<W*>(out.raw_data());
    std::fill_n(o, length, W(0));
    const W* ws = w.defined() ? w.data<W>() : nullptr;
    detail::dispatch_index(x.dtype(), "bincount", [&]<class I>() {
      const I* xs = x.data<I>();
      for (std::int64_t i = 0; i < x.size(); ++i) {
        const std::int64_t v = xs[i];
        if (v < 0 || v >= length) continue;
        o[v] = ws ? static_cast<W>(o[v] + ws[i]) : static_cast<W>(o[v] + 1);
      }
    });
  });
}

}  // namespace keel::cpu
