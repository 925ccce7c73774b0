// gather, unsorted_segment_sum and one_hot on the GPU (see cuda/indexing.hpp).
//
// Bad indices are found on the device: a check kernel walks the index array and keeps the lowest
// position of a bad index with atomicMin in a small scratch buffer, which the host reads back
// (copy_to_host waits for the stream). The lowest position is the one the CPU's sequential loop
// reports first, so both devices throw the same message. The copy and sum kernels skip bad
// indices on their own, so no kernel ever reads or writes out of bounds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/element_types.cuh"
#include "cuda/indexing.hpp"

namespace keel::cuda {

namespace {

using elem::thread_count;
using elem::thread_index;

// How an index array is stored; a runtime switch in the kernels keeps one instantiation each.
enum IndexKind : int { kInt32 = 0, kInt64 = 1, kUint8 = 2 };

int index_kind(DType dt, const char* op, bool allow_uint8) {
  if (dt == DType::int32) return kInt32;
  if (dt == DType::int64) return kInt64;
  if (allow_uint8 && dt == DType::uint8) return kUint8;
  throw DTypeError(std::string(op) + ": unsupported dtype " + std::string(name(dt)) +
                   (allow_uint8 ? " (expected int32, int64 or uint8)" : " (expected int32 or int64)"));
}

__device__ __forceinline__ std::int64_t load_index(const void* p, int kind, std::int64_t i) {
  switch (kind) {
    case kInt64: return static_cast<const std::int64_t*>(p)[i];
    case kUint8: return static_cast<const std::uint8_t*>(p)[i];
    default: return static_cast<const std::int32_t*>(p)[i];
  }
}

constexpr unsigned long long kNoPosition = ~0ull;

// flags[0] = the lowest i whose index is outside [0, limit) (negatives are fine when
// `drop_negative`: those set flags[1] = 1 instead). flags[0] starts at kNoPosition, flags[1] at 0.
__global__ void __launch_bounds__(kThreads)
    check_kernel(const void* ids, int kind, std::int64_t n, std::int64_t limit, bool drop_negative,
                 unsigned long long* flags) {
  bool negative = false;
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    const std::int64_t id = load_index(ids, kind, i);
    if (id >= limit || (id < 0 && !drop_negative))
      atomicMin(&flags[0], static_cast<unsigned long long>(i));
    else if (id < 0)
      negative = true;
  }
  if (negative) flags[1] = 1;  // every writer writes the same value: no atomic needed
}

// The flags after every kernel queued so far has finished (copy_to_host waits for the stream).
void read_flags(const Scratch& flags, unsigned long long* host_flags, int device) {
  copy_to_host(host_flags, flags.get(), 2 * sizeof(unsigned long long), device);
}

// The value of index `pos` (after a check found it bad).
std::int64_t read_index(const void* ids, int kind, std::int64_t pos, int device) {
  const auto* base = static_cast<const unsigned char*>(ids);
  switch (kind) {
    case kInt64: {
      std::int64_t v = 0;
      copy_to_host(&v, base + pos * 8, sizeof v, device);
      return v;
    }
    case kUint8: {
      std::uint8_t v = 0;
      copy_to_host(&v, base + pos, sizeof v, device);
      return v;
    }
    default: {
      std::int32_t v = 0;
      copy_to_host(&v, base + pos * 4, sizeof v, device);
      return v;
    }
  }
}

// Scratch flags initialised for check_kernel, queued on the device's stream.
void reset_flags(const Scratch& flags, int device) {
  auto* f = flags.as<unsigned long long>();
  check(cudaMemsetAsync(f, 0xFF, sizeof(unsigned long long), stream(device)),
        "cudaMemsetAsync (index check flags)", device);
  check(cudaMemsetAsync(f + 1, 0, sizeof(unsigned long long), stream(device)),
        "cudaMemsetAsync (index check flags)", device);
}

void launch_check(const void* ids, int kind, std::int64_t n, std::int64_t limit, bool drop_negative,
                  const Scratch& flags, int device) {
  check_kernel<<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
      ids, kind, n, limit, drop_negative, flags.as<unsigned long long>());
  check_launch("index check kernel", device);
}

// ---- gather ------------------------------------------------------------------------------------

// Splits t into (row r, word w) of rows `words` long and r into (outer o, position j) of n.
// `narrow` (every number below 2^32) runs the divisions in 32 bits.
__device__ __forceinline__ void split3(std::int64_t t, std::int64_t words, std::int64_t n, bool narrow,
                                       std::int64_t& o, std::int64_t& j, std::int64_t& w) {
  if (narrow) {
    const auto t32 = static_cast<std::uint32_t>(t), w32 = static_cast<std::uint32_t>(words),
               n32 = static_cast<std::uint32_t>(n);
    const std::uint32_t r = t32 / w32, o32 = r / n32;
    w = t32 - r * w32;
    j = r - o32 * n32;
    o = o32;
    return;
  }
  const std::int64_t r = t / words;
  w = t - r * words;
  o = r / n;
  j = r - o * n;
}

// out[o, j, w] = params[o, ids[j], w] in words of type W; rows of bad indices are zero.
template <class W>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const W* src, W* dst, const void* ids, int kind, std::int64_t n, std::int64_t dim,
                  std::int64_t words, std::int64_t total, bool narrow) {
  for (std::int64_t t = thread_index(), step = thread_count(); t < total; t += step) {
    std::int64_t o, j, w;
    split3(t, words, n, narrow, o, j, w);
    const std::int64_t id = load_index(ids, kind, j);
    dst[t] = (id >= 0 && id < dim) ? src[(o * dim + id) * words + w] : W{};
  }
}

template <class W>
void launch_gather(const void* params, void* out, const void* ids, int kind, std::int64_t outer,
                   std::int64_t dim, std::int64_t n, std::size_t row_bytes, int device) {
  const auto words = static_cast<std::int64_t>(row_bytes / sizeof(W));
  const std::int64_t total = outer * n * words;
  const bool narrow = total < (std::int64_t{1} << 32);
  gather_kernel<W><<<blocks_for(total, device), kThreads, 0, stream(device)>>>(
      static_cast<const W*>(params), static_cast<W*>(out), ids, kind, n, dim, words, total, narrow);
  check_launch("gather kernel", device);
}

bool aligned_to(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

// ---- unsorted_segment_sum ----------------------------------------------------------------------

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(std::int32_t* p, std::int32_t v) {
  atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v));
}
// Two's complement: an unsigned 64-bit add wraps exactly as the signed sum does.
__device__ __forceinline__ void atomic_add(std::int64_t* p, std::int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
__device__ __forceinline__ void atomic_add(unsigned* p, unsigned v) { atomicAdd(p, v); }

// acc[ids[i], k] += data[i, k] for ids in [0, num_segments); A is the accumulator's type (T
// itself, or unsigned for uint8, which has no atomic add: the low byte of the 32-bit sum is
// the uint8 sum modulo 256, as the CPU's wrapping gives).
template <class T, class A>
__global__ void __launch_bounds__(kThreads)
    segment_sum_kernel(const T* data, A* acc, const void* ids, int kind, std::int64_t inner,
                       std::int64_t num_segments, std::int64_t total, bool narrow) {
  for (std::int64_t t = thread_index(), step = thread_count(); t < total; t += step) {
    std::int64_t i, k;
    if (narrow) {
      const auto t32 = static_cast<std::uint32_t>(t), in32 = static_cast<std::uint32_t>(inner);
      const std::uint32_t i32 = t32 / in32;
      i = i32;
      k = t32 - i32 * in32;
    } else {
      i = t / inner;
      k = t - i * inner;
    }
    const std::int64_t id = load_index(ids, kind, i);
    if (id < 0 || id >= num_segments) continue;
    atomic_add(acc + id * inner + k, static_cast<A>(data[t]));
  }
}

__global__ void __launch_bounds__(kThreads)
    low_bytes_kernel(const unsigned* acc, std::uint8_t* out, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step)
    out[i] = static_cast<std::uint8_t>(acc[i]);
}

template <class T, class A>
void launch_segment_sum(const void* data, A* acc, const void* ids, int kind, std::int64_t n,
                        std::int64_t inner, std::int64_t num_segments, int device) {
  const std::int64_t total = n * inner;
  const bool narrow = total < (std::int64_t{1} << 32);
  segment_sum_kernel<T, A><<<blocks_for(total, device), kThreads, 0, stream(device)>>>(
      static_cast<const T*>(data), acc, ids, kind, inner, num_segments, total, narrow);
  check_launch("unsorted_segment_sum kernel", device);
}

// ---- one_hot -----------------------------------------------------------------------------------

template <class W>
__global__ void __launch_bounds__(kThreads)
    one_hot_kernel(const void* ids, int kind, std::int64_t depth, W on, W off, W* out,
                   std::int64_t total, bool narrow) {
  for (std::int64_t t = thread_index(), step = thread_count(); t < total; t += step) {
    std::int64_t i, c;
    if (narrow) {
      const auto t32 = static_cast<std::uint32_t>(t), d32 = static_cast<std::uint32_t>(depth);
      const std::uint32_t i32 = t32 / d32;
      i = i32;
      c = t32 - i32 * d32;
    } else {
      i = t / depth;
      c = t - i * depth;
    }
    // c is in [0, depth), so an index outside that range never matches: an all-off row.
    out[t] = load_index(ids, kind, i) == c ? on : off;
  }
}

template <class W>
void launch_one_hot(const void* ids, int kind, std::int64_t n, std::int64_t depth,
                    std::uint64_t on_bits, std::uint64_t off_bits, void* out, int device) {
  const std::int64_t total = n * depth;
  const bool narrow = total < (std::int64_t{1} << 32);
  // The low bytes of the little-endian bit patterns are the value's bytes.
  one_hot_kernel<W><<<blocks_for(total, device), kThreads, 0, stream(device)>>>(
      ids, kind, depth, static_cast<W>(on_bits), static_cast<W>(off_bits), static_cast<W*>(out),
      total, narrow);
  check_launch("one_hot kernel", device);
}

}  // namespace

BadIndex gather_rows(const void* params, std::int64_t outer, std::int64_t dim, std::size_t row_bytes,
                     const void* indices, DType index_dtype, std::int64_t n, void* out, int device) {
  const int kind = index_kind(index_dtype, "gather", false);
  BadIndex bad;
  if (n <= 0) return bad;
  use_device(device);
  Scratch flags(2 * sizeof(unsigned long long), device);
  reset_flags(flags, device);
  launch_check(indices, kind, n, dim, /*drop_negative=*/false, flags, device);
  if (outer > 0 && row_bytes > 0) {
    // The widest word that divides the rows and fits the alignment of both buffers.
    auto fits = [&](std::size_t w) {
      return row_bytes % w == 0 && aligned_to(params, w) && aligned_to(out, w);
    };
    if (fits(16))
      launch_gather<uint4>(params, out, indices, kind, outer, dim, n, row_bytes, device);
    else if (fits(8))
      launch_gather<unsigned long long>(params, out, indices, kind, outer, dim, n, row_bytes, device);
    else if (fits(4))
      launch_gather<unsigned>(params, out, indices, kind, outer, dim, n, row_bytes, device);
    else if (fits(2))
      launch_gather<unsigned short>(params, out, indices, kind, outer, dim, n, row_bytes, device);
    else
      launch_gather<unsigned char>(params, out, indices, kind, outer, dim, n, row_bytes, device);
  }
  unsigned long long host_flags[2] = {kNoPosition, 0};
  read_flags(flags, host_flags, device);
  if (host_flags[0] != kNoPosition) {
    bad.position = static_cast<std::int64_t>(host_flags[0]);
    bad.value = read_index(indices, kind, bad.position, device);
  }
  return bad;
}

SegmentIds segment_sum(DType dtype, const void* data, std::int64_t n, std::int64_t inner,
                       const void* ids, DType id_dtype, std::int64_t num_segments, void* out,
                       int device) {
  const int kind = index_kind(id_dtype, "unsorted_segment_sum", false);
  if (dtype != DType::float32 && dtype != DType::float64 && dtype != DType::int32 &&
      dtype != DType::int64 && dtype != DType::uint8)
    throw DTypeError(std::string("unsorted_segment_sum: unsupported dtype ") + std::string(name(dtype)) +
                     " (expected float32, float64, int32, int64 or uint8)");
  SegmentIds result;
  use_device(device);
  const std::int64_t out_count = num_segments * inner;
  // All-zero bytes are 0 in every one of these dtypes.
  if (out_count > 0)
    check(cudaMemsetAsync(out, 0, static_cast<std::size_t>(out_count) * itemsize(dtype), stream(device)),
          "cudaMemsetAsync (unsorted_segment_sum)", device);
  if (n <= 0) return result;
  Scratch flags(2 * sizeof(unsigned long long), device);
  reset_flags(flags, device);
  launch_check(ids, kind, n, num_segments, /*drop_negative=*/true, flags, device);
  if (out_count > 0 && n * inner > 0) {
    switch (dtype) {
      case DType::float32:
        launch_segment_sum<float>(data, static_cast<float*>(out), ids, kind, n, inner, num_segments, device);
        break;
      case DType::float64:
        launch_segment_sum<double>(data, static_cast<double*>(out), ids, kind, n, inner, num_segments, device);
        break;
      case DType::int32:
        launch_segment_sum<std::int32_t>(data, static_cast<std::int32_t*>(out), ids, kind, n, inner,
                                         num_segments, device);
        break;
      case DType::int64:
        launch_segment_sum<std::int64_t>(data, static_cast<std::int64_t*>(out), ids, kind, n, inner,
                                         num_segments, device);
        break;
      default: {  // uint8: 32-bit sums in scratch, then their low bytes
        Scratch acc(static_cast<std::size_t>(out_count) * sizeof(unsigned), device);
        check(cudaMemsetAsync(acc.get(), 0, static_cast<std::size_t>(out_count) * sizeof(unsigned),
                              stream(device)),
              "cudaMemsetAsync (unsorted_segment_sum)", device);
        launch_segment_sum<std::uint8_t>(data, acc.as<unsigned>(), ids, kind, n, inner, num_segments, device);
        low_bytes_kernel<<<blocks_for(out_count, device), kThreads, 0, stream(device)>>>(
            acc.as<unsigned>(), static_cast<std::uint8_t*>(out), out_count);
        check_launch("unsorted_segment_sum uint8 kernel", device);
        break;
      }
    }
  }
  unsigned long long host_flags[2] = {kNoPosition, 0};
  read_flags(flags, host_flags, device);
  result.has_negative = host_flags[1] != 0;
  if (host_flags[0] != kNoPosition) {
    result.bad.position = static_cast<std::int64_t>(host_flags[0]);
    result.bad.value = read_index(ids, kind, result.bad.position, device);
  }
  return result;
}

void one_hot(const void* indices, DType index_dtype, std::int64_t n, std::int64_t depth,
             std::uint64_t on_bits, std::uint64_t off_bits, std::size_t item, void* out, int device) {
  const int kind = index_kind(index_dtype, "one_hot", true);
  if (n <= 0 || depth <= 0) return;
  use_device(device);
  switch (item) {
    case 1: launch_one_hot<std::uint8_t>(indices, kind, n, depth, on_bits, off_bits, out, device); break;
    case 2: launch_one_hot<std::uint16_t>(indices, kind, n, depth, on_bits, off_bits, out, device); break;
    case 4: launch_one_hot<std::uint32_t>(indices, kind, n, depth, on_bits, off_bits, out, device); break;
    case 8: launch_one_hot<std::uint64_t>(indices, kind, n, depth, on_bits, off_bits, out, device); break;
    default:
      throw DTypeError("one_hot: unsupported element size " + std::to_string(item) + " on cuda:" +
                       std::to_string(device));
  }
}

}  // namespace keel::cuda
