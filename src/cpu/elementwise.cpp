#include "cpu/elementwise.hpp"

#include <cmath>
#include <type_traits>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "cpu/copy.hpp"
#include "cpu/rows.hpp"
#include "cpu/strided.hpp"
#include "keel/core/error.hpp"

namespace keel::cpu {

std::vector<std::int64_t> broadcast_strides(const Tensor& x, const Shape& shape) {
  const auto r = static_cast<std::size_t>(shape.rank());
  const auto xr = static_cast<std::size_t>(x.rank());
  std::vector<std::int64_t> s(r, 0);
  for (std::size_t i = 0; i < xr; ++i) {
    const std::size_t o = r - xr + i;
    s[o] = x.shape()[static_cast<std::int64_t>(i)] == 1 ? 0 : x.strides()[i];
  }
  return s;
}

namespace {

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

template <class T>
bool negative(T v) {
  if constexpr (std::is_signed_v<T>) return v < 0;
  else return false;  // uint8
}

// Integer arithmetic (no SIMD kernels: the compiler vectorises these loops at -O3).
template <class T>
T int_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::add: return static_cast<T>(a + b);
    case BinaryOp::sub: return static_cast<T>(a - b);
    case BinaryOp::mul: return static_cast<T>(a * b);
    case BinaryOp::div: return b == 0 ? T(0) : static_cast<T>(a / b);
    case BinaryOp::pow: {
      if (b < 0) return a == 1 ? T(1) : T(0);
      T r = 1, base = a;
      for (auto e = b; e > 0; e >>= 1) {
        if (e & 1) r = static_cast<T>(r * base);
        base = static_cast<T>(base * base);
      }
      return r;
    }
    case BinaryOp::maximum: return a > b ? a : b;
    case BinaryOp::minimum: return a < b ? a : b;
    case BinaryOp::relu_grad: return b > 0 ? a : T(0);
    // TensorFlow's FloorDiv / FloorMod of integers: truncate, then step toward -inf when the
    // remainder is non-zero and the signs differ. The op layer rejects a zero divisor; the
    // checks here keep the kernel from trapping (x86 faults on / 0 and on lowest / -1).
    case BinaryOp::floor_div: {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(a));  // wraps for lowest
      }
      const T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
      return r != 0 && (negative(r) != negative(b)) ? static_cast<T>(q - 1) : q;
    }
    case BinaryOp::floor_mod: {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
      }
      const T r = static_cast<T>(a % b);
      return r != 0 && (negative(r) != negative(b)) ? static_cast<T>(r + b) : r;
    }
    case BinaryOp::atan2: return T(0);  // float only: the op layer sends no integers
  }
  return T(0);
}

template <class T>
T int_unary(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::neg: return static_cast<T>(-x);
    case UnaryOp::abs: return x < 0 ? static_cast<T>(-x) : x;
    case UnaryOp::sign: return static_cast<T>((x > 0) - (x < 0));
    case UnaryOp::square: return static_cast<T>(x * x);
    case UnaryOp::relu: return x > 0 ? x : T(0);
    default: return x;  // the op layer only sends the ops above for integers
  }
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double alpha) {
  detail::dispatch_numeric(x.dtype(), "unary", [&]<class T>() {
    const T* xp = ptr<T>(x);
    T* yp = ptr<T>(out);
    if constexpr (std::is_floating_point_v<T>) {
      const auto& k = typed_kernels<T>();
      if (x.is_contiguous()) {
        parallel_for(out.size(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          k.unary(op, xp + b, yp + b, e - b, static_cast<T>(alpha));
        });
        return;
      }
      const auto os = contiguous_strides(out.shape());
      for_each_run<2>(out.shape().dims(), {&os, &x.strides()},
                      [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                          const std::array<std::int64_t, 2>& st) {
                        if (st[1] == 1) {
                          k.unary(op, xp + off[1], yp + off[0], n, static_cast<T>(alpha));
                        } else {
                          for (std::int64_t i = 0; i < n; ++i) yp[off[0] + i] = xp[off[1] + i * st[1]];
                          k.unary(op, yp + off[0], yp + off[0], n, static_cast<T>(alpha));
                        }
                      });
    } else {
      const auto os = contiguous_strides(out.shape());
      for_each_run<2>(out.shape().dims(), {&os, &x.strides()},
                      [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                          const std::array<std::int64_t, 2>& st) {
                        for (std::int64_t i = 0; i < n; ++i)
                          yp[off[0] + i] = int_unary<T>(op, xp[off[1] + i * st[1]]);
                      });
    }
  });
}

void bias_unary(UnaryOp op, bool linear, const Tensor& x, const Tensor& bias, const Tensor& out) {
  const std::int64_t c = bias.size();
  if (c == 0 || out.size() == 0) return;
  detail::dispatch_float(x.dtype(), "bias_add", [&]<class T>() {
    const T* xp = ptr<T>(x);
    const T* bp = ptr<T>(bias);
    T* yp = ptr<T>(out);
    const auto& k = typed_kernels<T>();
    // An empty call asks the kernel whether it has this op, before any part runs.
    if (!k.bias_unary(op, linear, xp, bp, c, yp, 0))
      throw ValueError(fmt::format("bias_add: unary kernel {} is not one it fuses (relu, sigmoid, tanh, exp)",
                                   static_cast<int>(op)));
    // Whole rows per part, so that each part starts its bias at element 0.
    parallel_for(out.size() / c, row_grain(c), [&](std::int64_t r0, std::int64_t r1) {
      k.bias_unary(op, linear, xp + r0 * c, bp, c, yp + r0 * c, (r1 - r0) * c);
    });
  });
}

namespace {

// A float operand of binary() as the kernels take it: contiguous, or a broadcast view narrowed
// to the values it repeats (compact_broadcast), which then broadcast like any smaller operand,
// where that leaves a scalar or rows of at least 16 elements. A sum's gradient ([1] repeated over
// 4M elements) was copied out in full before a mul: 2.2 ms, then 0.44 ms like a plain mul. With
// shorter rows ([n, 3] from [n, 1]) a kernel call per row costs more than copying it out.
Tensor float_operand(const Tensor& x) {
  if (x.is_contiguous()) return x;
  const Tensor narrow = compact_broadcast(x);
  if (narrow.impl() != x.impl() && (narrow.size() == 1 || x.shape()[x.rank() - 1] >= 16)) return contiguous(narrow);
  return contiguous(x);
}

}  // namespace

void binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  detail::dispatch_numeric(out.dtype(), "binary", [&]<class T>() {
    // Contiguous float operands leave innermost runs of stride 0 or 1 only: the SIMD kernels'
    // cases. Other views are copied once rather than walked element by element.
    const bool fp = std::is_floating_point_v<T>;
    const Tensor a = fp ? float_operand(a_in) : a_in;
    const Tensor b = fp ? float_operand(b_in) : b_in;
    const T* ap = ptr<T>(a);
    const T* bp = ptr<T>(b);
    T* yp = ptr<T>(out);
    const std::int64_t n = out.size();
    if constexpr (std::is_floating_point_v<T>) {
      const auto& k = typed_kernels<T>();
      // The common cases without any index arithmetic: same-shape contiguous, or a scalar.
      const bool ac = a.is_contiguous() && a.size() == n, bc = b.is_contiguous() && b.size() == n;
      if ((ac || a.size() == 1) && (bc || b.size() == 1)) {
        const std::int64_t sa = ac ? 1 : 0, sb = bc ? 1 : 0;
        parallel_for(n, kParallelGrain, [&](std::int64_t s, std::int64_t e) {
          k.binary(op, ap + s * sa, sa, bp + s * sb, sb, yp + s, e - s);
        });
        return;
      }
    }
    const auto os = contiguous_strides(out.shape());
    const auto as = broadcast_strides(a, out.shape());
    const auto bs = broadcast_strides(b, out.shape());
    for_each_run<3>(out.shape().dims(), {&os, &as, &bs},
                    [&](const std::array<std::int64_t, 3>& off, std::int64_t len,
                        const std::array<std::int64_t, 3>& st) {
                      const T* x = ap + off[1];
                      const T* y = bp + off[2];
                      T* z = yp + off[0];
                      if constexpr (std::is_floating_point_v<T>) {
                        typed_kernels<T>().binary(op, x, st[1], y, st[2], z, len);
                      } else {
                        for (std::int64_t i = 0; i < len; ++i) z[i] = int_binary<T>(op, x[i * st[1]], y[i * st[2]]);
                      }
                    });
  });
}

namespace {
template <class T>
bool cmp(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::eq: return a == b;
    case CompareOp::ne: return a != b;
    case CompareOp::lt: return a < b;
    case CompareOp::le: return a <= b;
    case CompareOp::gt: return a > b;
    case CompareOp::ge: return a >= b;
  }
  return false;
}
}  // namespace

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto os = contiguous_strides(out.shape());
  const auto as = broadcast_strides(a, out.shape());
  const auto bs = broadcast_strides(b, out.shape());
  auto* z = ptr<std::uint8_t>(out);
  auto body = [&]<class T>() {
    const T* x = ptr<T>(a);
    const T* y = ptr<T>(b);
    for_each_run<3>(out.shape().dims(), {&os, &as, &bs},
                    [&](const std::array<std::int64_t, 3>& off, std::int64_t n,
                        const std::array<std::int64_t, 3>& st) {
                      for (std::int64_t i = 0; i < n; ++i)
                        z[off[0] + i] = cmp<T>(op, x[off[1] + i * st[1]], y[off[2] + i * st[2]]);
                    });
  };
  if (a.dtype() == DType::bool_) {
    body.template operator()<std::uint8_t>();
  } else {
    detail::dispatch_numeric(a.dtype(), "compare", body);
  }
}

void logical(LogicalOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto os = contiguous_strides(out.shape());
  const auto as = broadcast_strides(a, out.shape());
  const auto bs = broadcast_strides(b, out.shape());
  const auto* x = ptr<std::uint8_t>(a);
  const auto* y = ptr<std::uint8_t>(b);
  auto* z = ptr<std::uint8_t>(out);
  for_each_run<3>(out.shape().dims(), {&os, &as, &bs},
                  [&](const std::array<std::int64_t, 3>& off, std::int64_t n,
                      const std::array<std::int64_t, 3>& st) {
                    for (std::int64_t i = 0; i < n; ++i) {
                      const bool u = x[off[1] + i * st[1]] != 0, v = y[off[2] + i * st[2]] != 0;
                      z[off[0] + i] = op == LogicalOp::and_ ? (u && v) : op == LogicalOp::or_ ? (u || v) : (u != v);
                    }
                  });
}

void logical_not(const Tensor& x, const Tensor& out) {
  const auto os = contiguous_strides(out.shape());
  const auto* xp = ptr<std::uint8_t>(x);
  auto* z = ptr<std::uint8_t>(out);
  for_each_run<2>(out.shape().dims(), {&os, &x.strides()},
                  [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                      const std::array<std::int64_t, 2>& st) {
                    for (std::int64_t i = 0; i < n; ++i) z[off[0] + i] = xp[off[1] + i * st[1]] == 0;
                  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto os = contiguous_strides(out.shape());
  const auto cs = broadcast_strides(cond, out.shape());
  const auto as = broadcast_strides(a, out.shape());
  const auto bs = broadcast_strides(b, out.shape());
  const auto* c = ptr<std::uint8_t>(cond);
  const auto is = static_cast<std::int64_t>(itemsize(out.dtype()));
  auto body = [&]<class T>() {
    const T* x = ptr<T>(a);
    const T* y = ptr<T>(b);
    T* z = ptr<T>(out);
    for_each_run<4>(out.shape().dims(), {&os, &cs, &as, &bs},
                    [&](const std::array<std::int64_t, 4>& off, std::int64_t n,
                        const std::array<std::int64_t, 4>& st) {
                      for (std::int64_t i = 0; i < n; ++i)
                        z[off[0] + i] = c[off[1] + i * st[1]] ? x[off[2] + i * st[2]] : y[off[3] + i * st[3]];
                    });
  };
  switch (is) {  // where only moves values: dispatch on width, not dtype
    case 1: body.template operator()<std::uint8_t>(); break;
    case 2: body.template operator()<std::uint16_t>(); break;
    case 4: body.template operator()<std::uint32_t>(); break;
    default: body.template operator()<std::uint64_t>(); break;
  }
}

void float_test(FloatTest test, const Tensor& x, const Tensor& out) {
  const auto os = contiguous_strides(out.shape());
  auto* z = ptr<std::uint8_t>(out);
  detail::dispatch_float(x.dtype(), "is_finite", [&]<class T>() {
    const T* xp = ptr<T>(x);
    for_each_run<2>(out.shape().dims(), {&os, &x.strides()},
                    [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                        const std::array<std::int64_t, 2>& st) {
                      for (std::int64_t i = 0; i < n; ++i) {
                        const T v = xp[off[1] + i * st[1]];
                        z[off[0] + i] = test == FloatTest::nan ? std::isnan(v)
                                        : test == FloatTest::inf ? std::isinf(v)
                                                                 : std::isfinite(v);
                      }
                    });
  });
}

}  // namespace keel::cpu
