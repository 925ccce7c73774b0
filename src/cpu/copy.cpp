#include "cpu/copy.hpp"

#include <cstring>
#include <limits>

#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/strided.hpp"

namespace keel::cpu {

namespace {

// The size-N value at s, stored at d, d + N, ... (n times).
template <std::size_t N>
void repeat(const char* s, std::int64_t n, char* d) {
  char v[N];
  std::memcpy(v, s, N);
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * static_cast<std::int64_t>(N), v, N);
}

}  // namespace

void copy_strided(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& src_strides,
                  const char* src, const std::vector<std::int64_t>& dst_strides, char* dst,
                  std::size_t itemsize) {
  const auto is = static_cast<std::int64_t>(itemsize);
  for_each_run<2>(shape, {&dst_strides, &src_strides},
                  [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                      const std::array<std::int64_t, 2>& st) {
                    char* d = dst + off[0] * is;
                    const char* s = src + off[1] * is;
                    if (st[0] == 1 && st[1] == 1) {
                      std::memcpy(d, s, static_cast<std::size_t>(n * is));
                      return;
                    }
                    if (st[0] == 1 && st[1] == 0 && (itemsize == 4 || itemsize == 8)) {
                      // One value repeated (a broadcast view): the same bytes stored n times,
                      // which the compiler turns into wide stores.
                      if (itemsize == 4) repeat<4>(s, n, d);
                      else repeat<8>(s, n, d);
                      return;
                    }
                    switch (itemsize) {  // fixed-size moves the compiler can inline
                      case 1: for (std::int64_t i = 0; i < n; ++i) d[i * st[0]] = s[i * st[1]]; break;
                      case 2:
                        for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * st[0] * 2, s + i * st[1] * 2, 2);
                        break;
                      case 4:
                        for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * st[0] * 4, s + i * st[1] * 4, 4);
                        break;
                      case 8:
                        for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * st[0] * 8, s + i * st[1] * 8, 8);
                        break;
                      default:
                        for (std::int64_t i = 0; i < n; ++i)
                          std::memcpy(d + i * st[0] * is, s + i * st[1] * is, itemsize);
                    }
                  });
}

void copy_to_contiguous(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& strides, const char* src, char* dst,
                        std::size_t itemsize) {
  std::vector<std::int64_t> dst_strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    dst_strides[i] = s;
    s *= shape[i];
  }
  copy_strided(shape, strides, src, dst_strides, dst, itemsize);
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = detail::empty_tensor(x.shape(), x.dtype(), x.device(), "contiguous");
  copy_to_contiguous(x.shape().dims(), x.strides(), static_cast<const char*>(x.raw_data()),
                     static_cast<char*>(out.raw_data()), itemsize(x.dtype()));
  return out;
}

Tensor compact_broadcast(const Tensor& x) {
  std::vector<std::int64_t> dims = x.shape().dims();
  bool repeated = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (x.strides()[i] != 0 || dims[i] <= 1) continue;
    dims[i] = 1;
    repeated = true;
  }
  return repeated ? detail::make_view(x, Shape(std::move(dims)), x.strides(), x.offset()) : x;
}

namespace {

template <class T> float to_float(T v) { return static_cast<float>(v); }
template <> float to_float<float16_t>(float16_t v) { return half_to_float(v); }
template <> float to_float<bfloat16_t>(bfloat16_t v) { return bfloat16_to_float(v); }

// Converts one value; the half types travel through float (or double for float64 targets).
template <class From, class To>
To convert_one(From v) {
  if constexpr (std::is_same_v<To, float16_t>) {
    if constexpr (std::is_same_v<From, float16_t>) return v;
    else return float_to_half(to_float(v));
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    if constexpr (std::is_same_v<From, bfloat16_t>) return v;
    else return float_to_bfloat16(to_float(v));
  } else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>) {
    return convert_one<float, To>(to_float(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Out-of-range float-to-int is undefined in C++: NaN gives 0 and the ends saturate, as
    // detail::convert and the CUDA cast do.
    if (v != v) return To{0};
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

void convert(DType from, const void* src, DType to, void* dst, std::int64_t n) {
  if (n == 0) return;  // empty tensors may have null buffers, which memcpy must not see
  if (from == to) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * itemsize(from));
    return;
  }
  detail::dispatch_all(from, "cast", [&]<class F>() {
    detail::dispatch_all(to, "cast", [&]<class T>() {
      const F* s = static_cast<const F*>(src);
      T* d = static_cast<T*>(dst);
      parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        if constexpr (std::is_same_v<F, bool>) {
          // Read bool bytes as bytes: any non-zero byte is true (a bool object holding another
          // value would be undefined behaviour).
          const auto* bytes = static_cast<const std::uint8_t*>(src);
          for (std::int64_t i = b; i < e; ++i) d[i] = convert_one<bool, T>(bytes[i] != 0);
        } else {
          for (std::int64_t i = b; i < e; ++i) d[i] = convert_one<F, T>(s[i]);
        }
      });
    });
  });
}

}  // namespace keel::cpu
