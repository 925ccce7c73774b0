#include "cpu/indexing_nd.hpp"

#include <algorithm>
#include <cstring>

#include "core/dispatch.hpp"
#include "cpu/copy.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

// Gathers only pay for threads once the rows moved are well beyond the caches.
constexpr std::int64_t kParallelBytes = std::int64_t{1} << 22;

// The row number of every index tuple (negative entries counted from the end), or the first bad
// tuple. Resolving all of them first is what lets a bad index leave the output untouched.
NdBadIndex resolve_rows(const NdLayout& l, const void* indices, DType index_dtype,
                        std::vector<std::int64_t>& rows) {
  const auto m = static_cast<std::int64_t>(l.dims.size());
  rows.assign(static_cast<std::size_t>(l.n), 0);
  NdBadIndex bad;
  detail::dispatch_index(index_dtype, "gather_nd", [&]<class I>() {
    const I* idx = static_cast<const I*>(indices);
    for (std::int64_t j = 0; j < l.n; ++j) {
      std::int64_t row = 0;
      for (std::int64_t k = 0; k < m; ++k) {
        const auto v = static_cast<std::int64_t>(idx[j * m + k]);
        const std::int64_t dim = l.dims[static_cast<std::size_t>(k)];
        if (v < -dim || v >= dim) {
          bad = {j, k, v};
          return;
        }
        row = row * dim + (v < 0 ? v + dim : v);
      }
      rows[static_cast<std::size_t>(j)] = row;
    }
  });
  return bad;
}

std::int64_t total_rows(const NdLayout& l) {
  std::int64_t n = 1;
  for (auto d : l.dims) n *= d;  // the op checked that the buffer's size fits
  return n;
}

template <class T>
void scatter_combine(ScatterMode mode, T* o, const T* u, std::int64_t n) {
  switch (mode) {
    case ScatterMode::add:
      for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(o[i] + u[i]);
      break;
    // A NaN update wins, so that NaN propagates as through tf.maximum.
    case ScatterMode::max:
      for (std::int64_t i = 0; i < n; ++i)
        if (u[i] > o[i] || u[i] != u[i]) o[i] = u[i];
      break;
    case ScatterMode::min:
      for (std::int64_t i = 0; i < n; ++i)
        if (u[i] < o[i] || u[i] != u[i]) o[i] = u[i];
      break;
    case ScatterMode::update: std::memcpy(o, u, static_cast<std::size_t>(n) * sizeof(T)); break;
  }
}

}  // namespace

NdBadIndex gather_nd(const NdLayout& l, const void* params, const void* indices, DType index_dtype, void* out) {
  std::vector<std::int64_t> rows;
  const NdBadIndex bad = resolve_rows(l, indices, index_dtype, rows);
  if (bad.position >= 0) return bad;
  const auto row = static_cast<std::int64_t>(l.row_bytes);
  const char* s = static_cast<const char*>(params);
  char* d = static_cast<char*>(out);
  const int nt = std::max(1, parallel_threads());
  const bool par = nt > 1 && l.n * row >= kParallelBytes;
  parallel_ranges(l.n, nt, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j)
      std::memcpy(d + j * row, s + rows[static_cast<std::size_t>(j)] * row, l.row_bytes);
  }, par);
  return {};
}

NdBadIndex scatter_nd(ScatterMode mode, DType dtype, const NdLayout& l, const void* base, const void* indices,
                      DType index_dtype, const void* updates, void* out) {
  std::vector<std::int64_t> rows;
  const NdBadIndex bad = resolve_rows(l, indices, index_dtype, rows);
  if (bad.position >= 0) return bad;
  const std::size_t bytes = static_cast<std::size_t>(total_rows(l)) * l.row_bytes;
  if (base == nullptr)
    std::memset(out, 0, bytes);  // all-zero bytes are 0 in every numeric dtype
  else if (base != out && bytes > 0)
    std::memcpy(out, base, bytes);
  const auto row = static_cast<std::int64_t>(l.row_bytes);
  char* o = static_cast<char*>(out);
  const char* u = static_cast<const char*>(updates);
  // In order, one thread: duplicate indices then add up (or the last update wins) the same way
  // on every run.
  if (mode == ScatterMode::update) {
    for (std::int64_t j = 0; j < l.n; ++j)
      std::memcpy(o + rows[static_cast<std::size_t>(j)] * row, u + j * row, l.row_bytes);
    return {};
  }
  detail::dispatch_numeric(dtype, "tensor_scatter_nd", [&]<class T>() {
    const auto per_row = static_cast<std::int64_t>(l.row_bytes / sizeof(T));
    for (std::int64_t j = 0; j < l.n; ++j)
      scatter_combine(mode, reinterpret_cast<T*>(o + rows[static_cast<std::size_t>(j)] * row),
              reinterpret_cast<const T*>(u + j * row), per_row);
  });
  return {};
}

void reverse(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, const char* x,
             const std::vector<bool>& flip, char* out, std::size_t itemsize) {
  for (auto d : shape)
    if (d == 0) return;
  // Read x from the far end of every flipped axis with that axis' stride negated: one strided
  // copy into the contiguous output.
  std::vector<std::int64_t> src_strides = strides;
  std::int64_t start = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!flip[d]) continue;
    start += (shape[d] - 1) * strides[d];
    src_strides[d] = -strides[d];
  }
  std::vector<std::int64_t> dst_strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    dst_strides[d] = s;
    s *= shape[d];
  }
  copy_strided(shape, src_strides, x + start * static_cast<std::int64_t>(itemsize), dst_strides, out, itemsize);
}

}  // namespace keel::cpu
