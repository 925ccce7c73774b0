// fill and copy: constant fills, strided copies and dtype conversions on one device. Conversions
// follow keel's CPU rules (src/core/tensor_util.hpp): float to integer truncates and saturates
// with NaN giving 0, integer to integer wraps, anything to bool is "non-zero", and float16 and
// bfloat16 are reached through float32 with one round to nearest even.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "cuda/element_types.cuh"

namespace keel::cuda {

namespace {

using namespace elem;

// bool's storage in conversions: a byte written as 0 or 1 (std::uint8_t is the uint8 dtype).
struct Bool8 {
  std::uint8_t byte;
};

// ---- one value to each destination type --------------------------------------------------------
// A source value arrives as float (float32, float16, bfloat16), double (float64) or int64 (the
// integers and bool, whose values int64 holds exactly). Converting from the int64 gives the
// integer's own result: wrapping to a narrower integer and rounding to a float depend only on
// the value.

template <class To, class From>
__device__ __forceinline__ To saturate(From v) {
  if (v != v) return To(0);
  if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
  if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
  return static_cast<To>(v);
}

template <class To, class From>
__device__ __forceinline__ To convert_value(From v) {
  if constexpr (std::is_same_v<To, Bool8>) {
    return Bool8{static_cast<std::uint8_t>(v != From(0) ? 1 : 0)};
  } else if constexpr (std::is_same_v<To, float16_t>) {
    float16_t r;
    r.bits = elem::float_to_half(static_cast<float>(v));
    return r;
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    bfloat16_t r;
    r.bits = elem::float_to_bfloat16(static_cast<float>(v));
    return r;
  } else if constexpr (std::is_floating_point_v<To> || !std::is_floating_point_v<From>) {
    return static_cast<To>(v);
  } else {
    return saturate<To>(v);
  }
}

// Reads element `off` of `src` (dtype `from`) and converts it to To.
template <class To>
__device__ __forceinline__ To load_converted(const void* src, DType from, std::int64_t off) {
  switch (from) {
    case DType::float32: return convert_value<To>(static_cast<const float*>(src)[off]);
    case DType::float64: return convert_value<To>(static_cast<const double*>(src)[off]);
    case DType::float16:
      return convert_value<To>(elem::half_to_float(static_cast<const std::uint16_t*>(src)[off]));
    case DType::bfloat16:
      return convert_value<To>(elem::bfloat16_to_float(static_cast<const std::uint16_t*>(src)[off]));
    case DType::int32: return convert_value<To>(std::int64_t{static_cast<const std::int32_t*>(src)[off]});
    case DType::int64: return convert_value<To>(static_cast<const std::int64_t*>(src)[off]);
    case DType::uint8: return convert_value<To>(std::int64_t{static_cast<const std::uint8_t*>(src)[off]});
    case DType::bool_:
      return convert_value<To>(std::int64_t{static_cast<const std::uint8_t*>(src)[off] != 0 ? 1 : 0});
  }
  return convert_value<To>(std::int64_t{0});
}

// ---- kernels -----------------------------------------------------------------------------------

// Operand 0 is the source, 1 the destination (both strided).
template <class To>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const void* src, DType from, To* dst, Strided<2> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[2];
    ix.offsets(i, off);
    dst[off[1]] = load_converted<To>(src, from, off[0]);
  }
}

// Same dtype: move the bits (NaN payloads included) as unsigned integers of the dtype's width.
template <class W>
__global__ void __launch_bounds__(kThreads)
    copy_kernel(const W* src, W* dst, Strided<2> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[2];
    ix.offsets(i, off);
    dst[off[1]] = src[off[0]];
  }
}

template <class W>
__global__ void __launch_bounds__(kThreads) fill_kernel(W* dst, W bits, Strided<1> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[1];
    ix.offsets(i, off);
    dst[off[0]] = bits;
  }
}

// ---- host side ---------------------------------------------------------------------------------

template <class T>
std::uint64_t saturated_bits(double v) {
  T r;
  if (v != v) r = T(0);
  else if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) r = std::numeric_limits<T>::lowest();
  else if (v >= static_cast<double>(std::numeric_limits<T>::max())) r = std::numeric_limits<T>::max();
  else r = static_cast<T>(v);
  using U = std::make_unsigned_t<T>;
  return static_cast<U>(r);
}

// The bits of `value` in dtype dt, in the low itemsize(dt) bytes: detail::convert<U>(double).
std::uint64_t value_bits(DType dt, double value) {
  switch (dt) {
    case DType::float32: {
      const auto f = static_cast<float>(value);
      std::uint32_t b;
      std::memcpy(&b, &f, sizeof b);
      return b;
    }
    case DType::float64: {
      std::uint64_t b;
      std::memcpy(&b, &value, sizeof b);
      return b;
    }
    case DType::float16: return keel::float_to_half(static_cast<float>(value)).bits;
    case DType::bfloat16: return keel::float_to_bfloat16(static_cast<float>(value)).bits;
    case DType::int32: return saturated_bits<std::int32_t>(value);
    case DType::int64: return saturated_bits<std::int64_t>(value);
    case DType::uint8: return saturated_bits<std::uint8_t>(value);
    case DType::bool_: return value != 0.0 ? 1 : 0;
  }
  return 0;
}

// Whether the plan walks the destination (operand k) in order with no gaps.
template <int K>
bool dense(const Strided<K>& ix, int k) {
  return ix.rank == 0 || (ix.rank == 1 && ix.strides[k][0] == 1);
}

}  // namespace

void fill(const View& out, double value) {
  check_rank(out, "fill");
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[1] = {&out};
  const Strided<1> ix = make_strided<1>(out, ops);
  const std::uint64_t bits = value_bits(out.dtype, value);
  const int device = out.device;
  use_device(device);
  const auto size = itemsize(out.dtype);
  if (dense(ix, 0) && (bits == 0 || size == 1)) {
    check(cudaMemsetAsync(out.data, static_cast<int>(bits & 0xFFu), static_cast<std::size_t>(n) * size, stream(device)),
          "fill (cudaMemsetAsync)", device);
    return;
  }
  dispatch_width(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    fill_kernel<W><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(static_cast<W*>(out.data),
                                                                          static_cast<W>(bits), ix, n);
    check_launch("fill", device);
  });
}

void copy(const View& src, const View& dst) {
  check_rank(src, "copy");
  check_rank(dst, "copy");
  bool same_shape = src.rank == dst.rank;
  for (int i = 0; same_shape && i < src.rank; ++i) same_shape = src.shape[i] == dst.shape[i];
  if (!same_shape)
    throw ShapeError("copy: source " + describe(src) + " and destination " + describe(dst) + " differ in shape");
  const std::int64_t n = numel(dst);
  if (n == 0) return;
  const View* ops[2] = {&src, &dst};
  const Strided<2> ix = make_strided<2>(dst, ops);
  const bool same_dtype = src.dtype == dst.dtype;
  const bool contiguous = dense(ix, 0) && dense(ix, 1);
  const auto bytes = static_cast<std::size_t>(n) * itemsize(dst.dtype);
  if (src.device != dst.device) {
    // Between GPUs only whole buffers move (through the runtime's peer copy).
    if (!same_dtype || !contiguous)
      throw DeviceError("copy: a strided or converting copy between devices is not supported (source " +
                        describe(src) + ", destination " + describe(dst) + ")");
    copy_between(dst.data, dst.device, src.data, src.device, bytes);
    return;
  }
  const int device = dst.device;
  use_device(device);
  if (same_dtype && contiguous) {
    check(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice, stream(device)),
          "copy (cudaMemcpyAsync)", device);
    return;
  }
  if (same_dtype) {
    dispatch_width(dst.dtype, [&](auto tag) {
      using W = typename decltype(tag)::type;
      copy_kernel<W><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
          static_cast<const W*>(src.data), static_cast<W*>(dst.data), ix, n);
      check_launch("copy", device);
    });
    return;
  }
  auto run = [&](auto tag) {
    using To = typename decltype(tag)::type;
    convert_kernel<To><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(src.data, src.dtype,
                                                                              static_cast<To*>(dst.data), ix, n);
    check_launch("copy (convert)", device);
  };
  switch (dst.dtype) {
    case DType::float32: run(Tag<float>{}); break;
    case DType::float64: run(Tag<double>{}); break;
    case DType::float16: run(Tag<float16_t>{}); break;
    case DType::bfloat16: run(Tag<bfloat16_t>{}); break;
    case DType::int32: run(Tag<std::int32_t>{}); break;
    case DType::int64: run(Tag<std::int64_t>{}); break;
    case DType::uint8: run(Tag<std::uint8_t>{}); break;
    case DType::bool_: run(Tag<Bool8>{}); break;
  }
}

}  // namespace keel::cuda
