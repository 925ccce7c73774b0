#include "cpu/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
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
      const auto in_place = [&](const T* from) {
        parallel_for(out.size(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          k.unary(op, from + b, yp + b, e - b, static_cast<T>(alpha));
        });
      };
      if (x.is_contiguous()) return in_place(xp);
      if (x.strides().back() != 1) {
        // Strided along the last axis (a transpose): gathered a run at a time, every element was
        // a cache line of its own (exp of a transposed [4096, 1024] 18-35 ms). Copied into out
        // first (copy_strided's tiles), then the op in place.
        copy_to_contiguous(x.shape().dims(), x.strides(), static_cast<const char*>(x.raw_data()),
                           static_cast<char*>(out.raw_data()), sizeof(T));
        return in_place(yp);
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

// A broadcast operand whose runs along the output's trailing axes are shorter than
// kShortBroadcastRun is widened until they hold kMinBroadcastRun elements. Runs of 64 floats
// already measured faster as they are: widened to 2048 ([64, 32, 32, 64] * [64]), 1.6-1.7 ms
// against 1.15-1.45 at one thread.
constexpr std::int64_t kShortBroadcastRun = 64;
constexpr std::int64_t kMinBroadcastRun = 256;

// A contiguous operand smaller than the output that repeats along some of the output's trailing
// axes (GroupNormalization's statistics [N, 1, 1, G, 1] over [N, H, W, G, C/G]) leaves runs as
// short as its trailing block: a kernel call per 8 elements took 14 ms for 4M floats. It is laid
// out over the output's trailing axes until its runs hold kMinBroadcastRun elements (see above), a
// copy of at most a quarter of the output; the results are the same bits (runs do not change an
// element's arithmetic).
Tensor widen_operand(const Tensor& x, const Shape& out) {
  const std::int64_t n = out.num_elements();
  if (x.size() <= 1 || x.size() >= n) return x;
  const auto& od = out.dims();
  const std::size_t r = od.size(), pad = r - static_cast<std::size_t>(x.rank());
  std::vector<std::int64_t> xd(r, 1), xs(r, 0);
  for (std::size_t i = pad; i < r; ++i) {
    xd[i] = x.shape()[static_cast<std::int64_t>(i - pad)];
    xs[i] = xd[i] == 1 ? 0 : x.strides()[i - pad];
  }
  std::size_t j = r;
  std::int64_t run = 1, wide = x.size();
  while (j > 0 && xd[j - 1] == od[j - 1]) run *= od[--j];
  const std::size_t shared = j;
  if (run >= kShortBroadcastRun) return x;
  while (j > 0 && run < kMinBroadcastRun) {
    const std::int64_t next = wide / xd[j - 1] * od[j - 1];
    if (next > n / 4) break;
    wide = next;
    run *= od[--j];
  }
  if (j == shared || run < kMinBroadcastRun) return x;
  std::vector<std::int64_t> shape(xd);
  for (std::size_t i = j; i < r; ++i) shape[i] = od[i];
  return contiguous(detail::make_view(x, Shape(shape), xs, x.offset()));
}

// The length of the row a contiguous operand repeats over the output's leading axes (its shape,
// less leading 1s, is the output's trailing axes: a bias [C] over [N, H, W, C]), or 0.
std::int64_t repeated_row(const Tensor& x, const Shape& out) {
  if (!x.is_contiguous() || x.size() <= 1 || x.size() >= out.num_elements()) return 0;
  const std::int64_t r = out.rank(), pad = r - x.rank();
  std::int64_t first = 0;  // x's first axis other than 1
  while (first < x.rank() && x.shape()[first] == 1) ++first;
  for (std::int64_t i = first; i < x.rank(); ++i)
    if (x.shape()[i] != out[pad + i]) return 0;
  return x.size();
}

// The length of the rows over which a contiguous operand repeats each of its values (its shape
// is the output's leading axes, then 1s: row sums [N, 1] over [N, C]), or 0.
std::int64_t repeated_column(const Tensor& x, const Shape& out) {
  if (!x.is_contiguous() || x.size() <= 1 || x.size() >= out.num_elements()) return 0;
  const std::int64_t r = out.rank(), pad = r - x.rank();
  std::int64_t i = r, c = 1;
  while (i > pad && x.shape()[i - 1 - pad] == 1) c *= out[--i];
  for (std::int64_t k = 0; k < i; ++k)
    if ((k < pad ? 1 : x.shape()[k - pad]) != out[k]) return 0;
  return c;
}

}  // namespace

void binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  detail::dispatch_numeric(out.dtype(), "binary", [&]<class T>() {
    // Contiguous float operands leave innermost runs of stride 0 or 1 only: the SIMD kernels'
    // cases. Other views are copied once rather than walked element by element.
    const bool fp = std::is_floating_point_v<T>;
    const Tensor a = fp ? widen_operand(float_operand(a_in), out.shape()) : a_in;
    const Tensor b = fp ? widen_operand(float_operand(b_in), out.shape()) : b_in;
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
      // One operand whole, the other a row repeating over the leading axes, or a value per row
      // (a column): whole rows per part, one kernel call each.
      const std::int64_t ra = bc ? repeated_row(a, out.shape()) : 0, rb = ac ? repeated_row(b, out.shape()) : 0;
      if (ra > 0 || rb > 0) {
        const std::int64_t c = ra > 0 ? ra : rb;
        const T* full = ra > 0 ? bp : ap;
        const T* row = ra > 0 ? ap : bp;
        parallel_for(n / c, row_grain(c), [&](std::int64_t r0, std::int64_t r1) {
          k.binary_repeat(op, full + r0 * c, row, c, ra > 0, yp + r0 * c, (r1 - r0) * c);
        });
        return;
      }
      const std::int64_t ca = bc ? repeated_column(a, out.shape()) : 0;
      const std::int64_t cb = ac ? repeated_column(b, out.shape()) : 0;
      if (ca > 0 || cb > 0) {
        const std::int64_t c = ca > 0 ? ca : cb;
        const T* full = ca > 0 ? bp : ap;
        const T* column = ca > 0 ? ap : bp;
        // Parts of whole tiles of rows, so that each part's output keeps the batch alignment.
        const std::int64_t rows = n / c, tiles = (rows + kColumnTileRows - 1) / kColumnTileRows;
        parallel_for(tiles, std::max<std::int64_t>(1, row_grain(c) / kColumnTileRows),
                     [&](std::int64_t t0, std::int64_t t1) {
                       const std::int64_t r0 = t0 * kColumnTileRows, r1 = std::min(rows, t1 * kColumnTileRows);
                       k.binary_columns(op, full + r0 * c, column + r0, c, ca > 0, yp + r0 * c, (r1 - r0) * c);
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

// z[i] = f(x[i * sx], y[i * sy]) over one run, with contiguous runs and scalars (strides 1 and
// 0) as loops of their own, which the compiler vectorises: with a stride multiply and the op's
// switch in every element, greater() on 4M floats took 6 ms, 0.06x a memcpy of its bytes.
template <class Z, class X, class Y, class F>
void run2(F f, const X* x, std::int64_t sx, const Y* y, std::int64_t sy, Z* z, std::int64_t n) {
  if (sx == 1 && sy == 1) {
    for (std::int64_t i = 0; i < n; ++i) z[i] = static_cast<Z>(f(x[i], y[i]));
  } else if (sx == 1 && sy == 0) {
    const Y v = *y;
    for (std::int64_t i = 0; i < n; ++i) z[i] = static_cast<Z>(f(x[i], v));
  } else if (sx == 0 && sy == 1) {
    const X v = *x;
    for (std::int64_t i = 0; i < n; ++i) z[i] = static_cast<Z>(f(v, y[i]));
  } else {
    for (std::int64_t i = 0; i < n; ++i) z[i] = static_cast<Z>(f(x[i * sx], y[i * sy]));
  }
}

// fn(f) with f the comparison op stands for, chosen once rather than per element.
template <class T, class Fn>
void with_compare(CompareOp op, Fn&& fn) {
  switch (op) {
    case CompareOp::eq: return fn([](T a, T b) { return a == b; });
    case CompareOp::ne: return fn([](T a, T b) { return a != b; });
    case CompareOp::lt: return fn([](T a, T b) { return a < b; });
    case CompareOp::le: return fn([](T a, T b) { return a <= b; });
    case CompareOp::gt: return fn([](T a, T b) { return a > b; });
    case CompareOp::ge: return fn([](T a, T b) { return a >= b; });
  }
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
    with_compare<T>(op, [&](auto f) {
      for_each_run<3>(out.shape().dims(), {&os, &as, &bs},
                      [&](const std::array<std::int64_t, 3>& off, std::int64_t n,
                          const std::array<std::int64_t, 3>& st) {
                        run2(f, x + off[1], st[1], y + off[2], st[2], z + off[0], n);
                      });
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
  const auto each = [&](auto f) {
    for_each_run<3>(out.shape().dims(), {&os, &as, &bs},
                    [&](const std::array<std::int64_t, 3>& off, std::int64_t n,
                        const std::array<std::int64_t, 3>& st) {
                      run2(f, x + off[1], st[1], y + off[2], st[2], z + off[0], n);
                    });
  };
  using B = std::uint8_t;
  if (op == LogicalOp::and_) each([](B u, B v) { return (u != 0) & (v != 0); });
  else if (op == LogicalOp::or_) each([](B u, B v) { return (u != 0) | (v != 0); });
  else each([](B u, B v) { return (u != 0) != (v != 0); });
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
                      const std::uint8_t* cr = c + off[1];
                      const T* xr = x + off[2];
                      const T* yr = y + off[3];
                      T* zr = z + off[0];
                      // A contiguous condition with contiguous or scalar values (a mask, where(m, x,
                      // 0)) as loops that pick with a bit mask: a branch per element mispredicted
                      // on every other one of a random mask (4M floats: 9 ms), and the masks
                      // vectorise. Otherwise element by element.
                      const auto choose = [](std::uint8_t k, T u, T v) {
                        const T mask = static_cast<T>(0) - static_cast<T>(k != 0);
                        return static_cast<T>((u & mask) | (v & static_cast<T>(~mask)));
                      };
                      if (st[1] == 1 && st[2] == 1 && st[3] == 1) {
                        for (std::int64_t i = 0; i < n; ++i) zr[i] = choose(cr[i], xr[i], yr[i]);
                      } else if (st[1] == 1 && st[2] == 1 && st[3] == 0) {
                        const T v = *yr;
                        for (std::int64_t i = 0; i < n; ++i) zr[i] = choose(cr[i], xr[i], v);
                      } else if (st[1] == 1 && st[2] == 0 && st[3] == 1) {
                        const T v = *xr;
                        for (std::int64_t i = 0; i < n; ++i) zr[i] = choose(cr[i], v, yr[i]);
                      } else {
                        for (std::int64_t i = 0; i < n; ++i)
                          zr[i] = cr[i * st[1]] ? xr[i * st[2]] : yr[i * st[3]];
                      }
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
