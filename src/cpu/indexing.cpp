#include "cpu/indexing.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dispatch.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

// Parallel copying only pays once the data is well beyond the caches.
constexpr std::int64_t kParallelCopyBytes = std::int64_t{1} << 22;

int threads() { return std::max(1, parallel_threads()); }

std::vector<std::int64_t> read_ids(const void* ids, DType dtype, std::int64_t n, const char* op) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  if (dtype == DType::uint8) {
    const auto* p = static_cast<const std::uint8_t*>(ids);
    std::copy(p, p + n, out.begin());
    return out;
  }
  detail::dispatch_index(dtype, op, [&]<class I>() {
    const I* p = static_cast<const I*>(ids);
    for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(p[i]);
  });
  return out;
}

}  // namespace

BadIndex gather_rows(const void* params, std::int64_t outer, std::int64_t dim, std::size_t row,
                     const void* indices, DType index_dtype, std::int64_t n, void* out) {
  const auto idx = read_ids(indices, index_dtype, n, "gather");
  for (std::size_t j = 0; j < idx.size(); ++j)
    if (idx[j] < 0 || idx[j] >= dim) return {static_cast<std::int64_t>(j), idx[j]};
  const char* s = static_cast<const char*>(params);
  char* d = static_cast<char*>(out);
  const std::int64_t total = outer * n;
  const int nt = threads();
  const bool par = nt > 1 && total * static_cast<std::int64_t>(row) >= kParallelCopyBytes;
  if ((row == 1 || row == 2 || row == 4 || row == 8) && outer >= nt) {
    // Single elements (a gather along the last axis): a typed copy per element, the index
    // arithmetic per slice. A division and a memcpy call per element took 7 ns each (512 of 1024
    // columns of 4096 rows: 14 ms).
    const auto elements = [&]<class U>(U) {
      parallel_ranges(outer, nt, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o) {
          const U* so = reinterpret_cast<const U*>(s) + o * dim;
          U* dout = reinterpret_cast<U*>(d) + o * n;
          for (std::int64_t j = 0; j < n; ++j) dout[j] = so[idx[static_cast<std::size_t>(j)]];
        }
      }, par);
    };
    if (row == 1) elements(std::uint8_t{});
    else if (row == 2) elements(std::uint16_t{});
    else if (row == 4) elements(std::uint32_t{});
    else elements(std::uint64_t{});
    return {};
  }
  parallel_ranges(total, nt, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t o = t / n, j = t % n;
      std::memcpy(d + t * static_cast<std::int64_t>(row),
                  s + (o * dim + idx[static_cast<std::size_t>(j)]) * static_cast<std::int64_t>(row), row);
    }
  }, par);
  return {};
}

SegmentIds segment_sum(DType dtype, const void* data, std::int64_t n, std::int64_t inner, const void* id_data,
                       DType id_dtype, std::int64_t num_segments, void* out) {
  const auto ids = read_ids(id_data, id_dtype, n, "unsorted_segment_sum");
  SegmentIds r;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    // Negative ids are dropped, like TensorFlow; too-large ones are an error.
    if (ids[i] < 0) r.has_negative = true;
    if (ids[i] >= num_segments) {
      r.bad = {static_cast<std::int64_t>(i), ids[i]};
      return r;
    }
  }
  detail::dispatch_numeric(dtype, "unsorted_segment_sum", [&]<class T>() {
    T* o = static_cast<T*>(out);
    const T* s = static_cast<const T*>(data);
    std::fill_n(o, num_segments * inner, T(0));
    // Threads own disjoint column ranges, so the sum order (and result) does not depend on the
    // thread count and no atomics are needed.
    const int nt = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads(), inner / 64)));
    const bool par = nt > 1 && n * inner >= (std::int64_t{1} << 16);
    parallel_ranges(inner, nt, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = ids[static_cast<std::size_t>(i)];
        if (id < 0) continue;
        T* orow = o + id * inner;
        const T* srow = s + i * inner;
        for (std::int64_t k = lo; k < hi; ++k) orow[k] += srow[k];
      }
    }, par);
  });
  return r;
}

void fill_bytes(void* dst, std::int64_t n, std::uint64_t bits, std::size_t item) {
  unsigned char value[8];
  std::memcpy(value, &bits, sizeof value);
  auto typed = [&]<class W>() {
    W w;
    std::memcpy(&w, value, sizeof(W));
    std::fill_n(static_cast<W*>(dst), n, w);
  };
  switch (item) {
    case 1: typed.template operator()<std::uint8_t>(); break;
    case 2: typed.template operator()<std::uint16_t>(); break;
    case 4: typed.template operator()<std::uint32_t>(); break;
    default: typed.template operator()<std::uint64_t>(); break;
  }
}

void one_hot(const void* indices, DType index_dtype, std::int64_t n, std::int64_t depth, std::uint64_t on_bits,
             std::uint64_t off_bits, std::size_t item, void* out) {
  const auto idx = read_ids(indices, index_dtype, n, "one_hot");
  auto* o = static_cast<unsigned char*>(out);
  fill_bytes(o, n * depth, off_bits, item);
  // Out-of-range indices leave an all-off row, as in TensorFlow.
  for (std::size_t i = 0; i < idx.size(); ++i)
    if (idx[i] >= 0 && idx[i] < depth)
      std::memcpy(o + (static_cast<std::int64_t>(i) * depth + idx[i]) * static_cast<std::int64_t>(item), &on_bits, item);
}

}  // namespace keel::cpu
