// NaN and +-inf through every CPU kernel family, at every SIMD level this processor runs
// (cpu::simd_levels(): AVX-512 and AVX2+FMA where present, and the SSE2 baseline): elementwise unary and
// binary kernels, reductions and arg-reductions, pooling, softmax / log_softmax / logsumexp, the
// cross-entropies, the ReLU layers, and the gradients that meet NaN.
//
// Expected values follow TensorFlow; each comes with its rule. The central one: a max/min-based
// kernel returns NaN when an input is NaN (x86's maxps and xsimd::max return their second operand
// instead, which is how relu(NaN) used to come out as 0).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/kernels.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Every special value next to ordinary ones of both signs (and 0, the kink of relu and sign).
const std::vector<double> kSpecials = {kNaN, kInf, -kInf, -1.5, 0.0, 0.5, 2.5, 7.0, -8.0};
// pow's own special operands: +-1, -0 and odd / even / fractional exponents of both signs.
const std::vector<double> kPowSpecials = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, -2.0, 0.5, -0.5};

template <class F>
void at_every_level(F&& body) {
  testing::at_every_simd_level([&](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      INFO(name(dtype));
      body(dtype);
    }
  });
}

// Both NaN, or equal (so infinities of the same sign), or finite and close: float32 kernels
// carry about 1e-6 of relative error.
bool same(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got) || std::isinf(want) || std::isinf(got)) return got == want;
  const double tol = dtype == DType::float32 ? 1e-5 : 1e-12;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

// "" when all agree, else one line per mismatch (what CHECK prints on failure).
std::string mismatches(const std::vector<double>& got, const std::vector<double>& want, DType dtype,
                       const std::vector<double>& input = {}) {
  std::ostringstream out;
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i], dtype)) {
      out << "[" << i << "]";
      if (!input.empty()) out << " x=" << input[i];
      out << " got " << got[i] << " want " << want[i] << "\n";
    }
  return out.str();
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
Tensor tensor(const std::vector<double>& v, DType dtype) {
  return constant(v, Shape{static_cast<std::int64_t>(v.size())}, DType::float64).astype(dtype);
}
Tensor tensor(const std::vector<double>& v, const Shape& shape, DType dtype) {
  return constant(v, shape, DType::float64).astype(dtype);
}

// The specials cycled over n elements from `shift` on: with n = 67 every value lands in full
// batches (of 2, 4 or 8 lanes) and, over the shifts, in every lane and in the padded tail.
std::vector<double> cycled(std::int64_t n, std::size_t shift) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = kSpecials[(i + shift) % kSpecials.size()];
  return v;
}

// n ordinary values (all in (-1, 1), none equal) with `special` at position p.
std::vector<double> with_one(std::int64_t n, std::int64_t p, double special) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.37 * static_cast<double>(i) + 0.1);
  v[static_cast<std::size_t>(p)] = special;
  return v;
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;  // TensorFlow's definition, evaluated in double
};

std::vector<UnaryCase> unary_cases() {
  const double c = std::sqrt(2 / std::numbers::pi);
  return {
      // IEEE arithmetic: -NaN, |NaN|, NaN^2 are NaN; (+-inf)^2 = inf; |-inf| = inf
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }},
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }},
      // tf.sign: NaN -> NaN, +-inf -> +-1, 0 -> 0
      {"sign", [](const Tensor& x) { return sign(x); },
       [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); }},
      // C99 / tf.math: sqrt(<0) and sqrt(-inf) are NaN, sqrt(inf) = inf; rsqrt(0) = inf, rsqrt(inf) = 0
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }},
      // exp(-inf) = 0, exp(inf) = inf; log(0) = -inf, log(<0) = NaN; log1p(-1.5) = NaN
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }},
      // sin(+-inf) and cos(+-inf) are NaN
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }},
      // tanh(+-inf) = +-1, erf(+-inf) = +-1, sigmoid(inf) = 1, sigmoid(-inf) = 0
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref},
      // tf.nn.relu(NaN) is NaN; relu(inf) = inf, relu(-inf) = 0
      {"relu", [](const Tensor& x) { return relu(x); },
       [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); }},
      // tf.nn.relu6 = min(max(x, 0), 6): NaN stays NaN, relu6(inf) = 6
      {"relu6", [](const Tensor& x) { return relu6(x); },
       [](double x) { return std::isnan(x) ? x : std::min(std::max(x, 0.0), 6.0); }},
      // tf.nn.leaky_relu: x > 0 ? x : alpha * x, so NaN -> alpha * NaN = NaN, -inf -> -inf
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); },
       [](double x) { return x > 0 ? x : 0.2 * x; }},
      // tf.nn.elu: x > 0 ? x : alpha * (exp(x) - 1): NaN -> NaN, elu(-inf) = -alpha
      {"elu", [](const Tensor& x) { return elu(x, 1.0); }, [](double x) { return x > 0 ? x : std::expm1(x); }},
      {"elu(alpha=0.5)", [](const Tensor& x) { return elu(x, 0.5); },
       [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }},
      // tf.nn.gelu's formula 0.5 x (1 + erf(x / sqrt 2)): gelu(inf) = inf, gelu(-inf) = -inf * 0 = NaN
      {"gelu", [](const Tensor& x) { return gelu(x, false); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      // approximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the same infinities
      {"gelu(approximate)", [](const Tensor& x) { return gelu(x, true); },
       [c](double x) { return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))); }},
      // tf.nn.softplus: softplus(inf) = inf, softplus(-inf) = 0, NaN -> NaN
      {"softplus", [](const Tensor& x) { return softplus(x); },
       [](double x) { return std::isnan(x) ? x : std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }},
      // tf.nn.silu = x * sigmoid(x): silu(inf) = inf, silu(-inf) = -inf * 0 = NaN
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }},
  };
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

double max_ref(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double min_ref(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }

std::vector<BinaryCase> binary_cases() {
  return {
      // IEEE: NaN in -> NaN out; inf - inf, 0 * inf, inf / inf are NaN
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](double a, double b) { return a / b; }},
      // tf.pow follows C99 (std::pow): NaN in -> NaN, except pow(x, 0) = 1 and pow(1, y) = 1;
      // pow(0, y < 0) = inf, pow(inf, 0) = 1, pow(-1, +-inf) = 1, pow(<0, non-integer) = NaN
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      // tf.maximum / tf.minimum: NaN if either operand is NaN, else the larger / smaller
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, max_ref},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, min_ref},
  };
}

}  // namespace

TEST_CASE("unary kernels return NaN for NaN and TensorFlow's values for +-inf at every SIMD level", "[nan]") {
  at_every_level([](DType dtype) {
    for (const UnaryCase& u : unary_cases()) {
      INFO(u.name);
      for (std::size_t shift = 0; shift < kSpecials.size(); ++shift) {
        const std::vector<double> x = cycled(67, shift);
        std::vector<double> want;
        for (double v : x) want.push_back(u.ref(v));
        CHECK(mismatches(values(u.op(tensor(x, dtype))), want, dtype, x) == "");
      }
    }
  });
}

TEST_CASE("unary kernels on strided views propagate NaN as on contiguous input", "[nan]") {
  at_every_level([](DType dtype) {
    // Every other element of [kSpecials ...]: the strided path copies, then runs in place.
    std::vector<double> base;
    for (int r = 0; r < 5; ++r)
      for (double v : kSpecials) base.push_back(v);
    const Tensor x = transpose(tensor(base, Shape{5, 9}, dtype));  // [9, 5], not contiguous
    const std::vector<double> xv = values(x);
    for (const UnaryCase& u : unary_cases()) {
      INFO(u.name);
      std::vector<double> want;
      for (double v : xv) want.push_back(u.ref(v));
      CHECK(mismatches(values(u.op(x)), want, dtype, xv) == "");
    }
  });
}

TEST_CASE("binary kernels propagate NaN; maximum and minimum follow tf.maximum at every SIMD level", "[nan]") {
  at_every_level([](DType dtype) {
    // Every ordered pair of specials, 86 elements: full batches and a tail.
    std::vector<double> a, b;
    for (std::size_t i = 0; i < 86; ++i) {
      a.push_back(kSpecials[i % kSpecials.size()]);
      b.push_back(kSpecials[(i / kSpecials.size()) % kSpecials.size()]);
    }
    for (const BinaryCase& c : binary_cases()) {
      INFO(c.name);
      std::vector<double> want;
      for (std::size_t i = 0; i < a.size(); ++i) want.push_back(c.ref(a[i], b[i]));
      CHECK(mismatches(values(c.op(tensor(a, dtype), tensor(b, dtype))), want, dtype, a) == "");
      // A scalar on either side (the kernels' broadcast cases), special or not.
      for (double s : kSpecials) {
        INFO("scalar " << s);
        std::vector<double> left, right;
        for (double v : a) {
          left.push_back(c.ref(s, v));
          right.push_back(c.ref(v, s));
        }
        const Tensor st = tensor({s}, Shape{}, dtype);
        CHECK(mismatches(values(c.op(st, tensor(a, dtype))), left, dtype, a) == "");
        CHECK(mismatches(values(c.op(tensor(a, dtype), st)), right, dtype, a) == "");
      }
    }
    // Broadcasting a row over a [4, 9] matrix (strided runs of stride 0 and 1).
    std::vector<double> m;
    for (int r = 0; r < 4; ++r)
      for (std::size_t j = 0; j < kSpecials.size(); ++j) m.push_back(kSpecials[(j + r) % kSpecials.size()]);
    const Tensor row = tensor(kSpecials, Shape{1, 9}, dtype);
    std::vector<double> want;
    for (std::size_t i = 0; i < m.size(); ++i) want.push_back(max_ref(m[i], kSpecials[i % 9]));
    CHECK(mismatches(values(maximum(tensor(m, Shape{4, 9}, dtype), row)), want, dtype, m) == "");
  });
}

TEST_CASE("pow follows C99's special cases (as tf.pow and CUDA's pow) at every SIMD level", "[nan]") {
  at_every_level([](DType dtype) {
    std::vector<double> a, b, want;
    for (double x : kPowSpecials)
      for (double y : kPowSpecials) {
        a.push_back(x);
        b.push_back(y);
        // std::pow is C99 Annex F: pow(NaN, 0) = 1, pow(1, NaN) = 1, pow(0, NaN) = NaN,
        // pow(-0, -3) = -inf, pow(0, -2) = inf, pow(-inf, 3) = -inf, pow(-8, 0.5) = NaN, ...
        want.push_back(std::pow(x, y));
      }
    const std::vector<double> got = values(pow(tensor(a, dtype), tensor(b, dtype)));
    std::string bad;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool sign_ok = std::isnan(want[i]) || std::signbit(got[i]) == std::signbit(want[i]);
      if (!same(got[i], want[i], dtype) || !sign_ok)
        bad += "pow(" + std::to_string(a[i]) + ", " + std::to_string(b[i]) + ") = " + std::to_string(got[i]) +
               ", want " + std::to_string(want[i]) + "\n";
    }
    CHECK(bad == "");
  });
}

TEST_CASE("clip_by_value keeps NaN and clips +-inf", "[nan]") {
  at_every_level([](DType dtype) {
    // tf.clip_by_value = minimum(maximum(x, lo), hi): NaN stays NaN, inf -> hi, -inf -> lo
    const std::vector<double> x = cycled(67, 0);
    std::vector<double> want;
    for (double v : x) want.push_back(std::isnan(v) ? v : std::min(std::max(v, 0.0), 1.0));
    CHECK(mismatches(values(clip_by_value(tensor(x, dtype), 0.0, 1.0)), want, dtype, x) == "");
    // The same with tensor bounds.
    const Tensor lo = tensor({0.0}, Shape{}, dtype), hi = tensor({1.0}, Shape{}, dtype);
    CHECK(mismatches(values(clip_by_value(tensor(x, dtype), lo, hi)), want, dtype, x) == "");
    // maximum(x, scalar) (the double overload used by clipping and optimisers)
    std::vector<double> want_max;
    for (double v : x) want_max.push_back(max_ref(v, 0.0));
    CHECK(mismatches(values(maximum(tensor(x, dtype), 0.0)), want_max, dtype, x) == "");
  });
}

TEST_CASE("reduce_max and reduce_min are NaN when any element is NaN, wherever it is", "[nan]") {
  at_every_level([](DType dtype) {
    // 67 = two blocks of four 8-lane accumulators + a 3-element tail (float32 AVX2): a NaN at
    // every position goes through each accumulator, the single-batch loop and the tail.
    constexpr std::int64_t n = 67;
    for (std::int64_t p = 0; p < n; ++p) {
      INFO("NaN at " << p);
      const Tensor x = tensor(with_one(n, p, kNaN), dtype);
      // tf.reduce_max / tf.reduce_min: NaN if any element is NaN
      CHECK(std::isnan(reduce_max(x).item<double>()));
      CHECK(std::isnan(reduce_min(x).item<double>()));
      // tf.reduce_sum / tf.reduce_prod: NaN by arithmetic
      CHECK(std::isnan(reduce_sum(x).item<double>()));
      CHECK(std::isnan(reduce_prod(x).item<double>()));
      // Along the last axis ([3, n] rows) only the row holding the NaN is NaN.
      std::vector<double> rows = with_one(n, 0, 0.25);
      const std::vector<double> mid = with_one(n, p, kNaN);
      rows.insert(rows.end(), mid.begin(), mid.end());
      const std::vector<double> last = with_one(n, 0, 0.5);
      rows.insert(rows.end(), last.begin(), last.end());
      const std::vector<double> mx = values(reduce_max(tensor(rows, Shape{3, n}, dtype), {1}));
      CHECK(!std::isnan(mx[0]));
      CHECK(std::isnan(mx[1]));
      CHECK(!std::isnan(mx[2]));
      // Along the first axis ([n, 5], the row-accumulating path) only column 2 is NaN.
      std::vector<double> cols(static_cast<std::size_t>(n * 5), 0.125);
      cols[static_cast<std::size_t>(p * 5 + 2)] = kNaN;
      const std::vector<double> mn = values(reduce_min(tensor(cols, Shape{n, 5}, dtype), {0}));
      CHECK(mismatches(mn, {0.125, 0.125, kNaN, 0.125, 0.125}, dtype) == "");
    }
  });
}

TEST_CASE("reduce_max and reduce_min with +-inf", "[nan]") {
  at_every_level([](DType dtype) {
    for (std::int64_t p : {0, 9, 33, 66}) {
      INFO("special at " << p);
      // max with an inf is inf; min with a -inf is -inf; the other side ignores them
      CHECK(reduce_max(tensor(with_one(67, p, kInf), dtype)).item<double>() == kInf);
      CHECK(reduce_min(tensor(with_one(67, p, -kInf), dtype)).item<double>() == -kInf);
      CHECK(reduce_max(tensor(with_one(67, p, -kInf), dtype)).item<double>() < 1.0);
      CHECK(reduce_min(tensor(with_one(67, p, kInf), dtype)).item<double>() > -1.0);
    }
    // all -inf: tf.reduce_max = -inf (not the identity's stand-in, not NaN)
    CHECK(reduce_max(tensor(std::vector<double>(19, -kInf), dtype)).item<double>() == -kInf);
    CHECK(reduce_min(tensor(std::vector<double>(19, kInf), dtype)).item<double>() == kInf);
    // inf + -inf in one sum is NaN (IEEE)
    CHECK(std::isnan(reduce_sum(tensor({kInf, 1.0, -kInf}, dtype)).item<double>()));
  });
}

TEST_CASE("large tensors keep a NaN from any thread's part and through streaming stores", "[nan]") {
  const int threads = config::num_threads();
  for (int t : {1, 2}) {
    config::set_num_threads(t);
    INFO(t << " threads");
    at_every_level([](DType dtype) {
      // 2^20 + 5 elements: a long row split between threads, the partial results combined
      // afterwards; elementwise outputs of 4 MiB and more (one thread) use streaming stores.
      constexpr std::int64_t n = (std::int64_t{1} << 20) + 5;
      for (std::int64_t p : {std::int64_t{0}, n / 2 + 1, n - 1}) {
        INFO("NaN at " << p);
        const Tensor x = tensor(with_one(n, p, kNaN), dtype);
        // tf.reduce_max / reduce_min: NaN if any element is NaN
        CHECK(std::isnan(reduce_max(x).item<double>()));
        CHECK(std::isnan(reduce_min(x).item<double>()));
        // tf.nn.relu(NaN) = NaN and only there; tf.maximum(NaN, 0) = NaN
        const std::vector<double> r = values(relu(x));
        CHECK(std::isnan(r[static_cast<std::size_t>(p)]));
        CHECK(!std::isnan(r[static_cast<std::size_t>((p + 1) % n)]));
        const std::vector<double> m = values(maximum(x, tensor({0.0}, Shape{}, dtype)));
        CHECK(std::isnan(m[static_cast<std::size_t>(p)]));
      }
    });
  }
  config::set_num_threads(threads);
}

TEST_CASE("argmax and argmin return the index of the first NaN", "[nan]") {
  at_every_level([](DType dtype) {
    for (std::int64_t p : {0, 1, 8, 30, 65}) {
      INFO("first NaN at " << p);
      std::vector<double> v = with_one(67, p, kNaN);
      v[66] = kNaN;  // a second NaN later on
      v[static_cast<std::size_t>(p == 0 ? 1 : 0)] = kInf;  // and an inf, which NaN still beats
      const Tensor x = tensor(v, dtype);
      // tf.math.argmax / numpy.argmax: NaN counts as the extreme, and the first one wins
      CHECK(argmax(x).item<std::int64_t>() == p);
      CHECK(argmin(x).item<std::int64_t>() == p);
    }
    // No NaN: +inf is the max and -inf the min
    const Tensor y = tensor({1.0, kInf, -kInf, 2.0, kInf}, dtype);
    CHECK(argmax(y).item<std::int64_t>() == 1);
    CHECK(argmin(y).item<std::int64_t>() == 2);
  });
}

TEST_CASE("max_pool2d: a NaN in a window makes that window NaN; avg_pool2d carries NaN and inf", "[nan]") {
  at_every_level([](DType dtype) {
    // 1, 3, 16, 19 and 37 channels: the kernels' scalar tail and their blocks of 1, 4 and 8
    // vectors; the specials sit in the first and in the last channel.
    for (std::int64_t c : {1, 3, 16, 19, 37}) {
      for (std::int64_t ch : {std::int64_t{0}, c - 1}) {
        INFO(c << " channels, specials in channel " << ch);
        // [1, 4, 4, c], 2x2 windows with stride 2: four windows, 4 taps each.
        std::vector<double> x(static_cast<std::size_t>(16 * c));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * static_cast<double>(i));
        auto at = [&](std::int64_t h, std::int64_t w) -> double& {
          return x[static_cast<std::size_t>((h * 4 + w) * c + ch)];
        };
        at(1, 1) = kNaN;   // window (0, 0), its last tap
        at(0, 2) = kInf;   // window (0, 1): inf
        at(2, 0) = kInf;   // window (1, 0): inf and -inf
        at(2, 1) = -kInf;
        for (std::int64_t h = 2; h < 4; ++h)  // window (1, 1): all -inf
          for (std::int64_t w = 2; w < 4; ++w) at(h, w) = -kInf;
        const Tensor xt = tensor(x, Shape{1, 4, 4, c}, dtype);
        const std::vector<double> mx = values(max_pool2d(xt, {2, 2}, {2, 2}));
        const std::vector<double> av = values(avg_pool2d(xt, {2, 2}, {2, 2}));
        auto out = [&](const std::vector<double>& y, std::int64_t oh, std::int64_t ow, std::int64_t k) {
          return y[static_cast<std::size_t>((oh * 2 + ow) * c + k)];
        };
        // tf.nn.max_pool: NaN in the window -> NaN; max with inf = inf; all -inf -> -inf
        CHECK(std::isnan(out(mx, 0, 0, ch)));
        CHECK(out(mx, 0, 1, ch) == kInf);
        CHECK(out(mx, 1, 0, ch) == kInf);
        CHECK(out(mx, 1, 1, ch) == -kInf);
        // tf.nn.avg_pool: the mean: NaN -> NaN, inf -> inf, inf + -inf -> NaN, all -inf -> -inf
        CHECK(std::isnan(out(av, 0, 0, ch)));
        CHECK(out(av, 0, 1, ch) == kInf);
        CHECK(std::isnan(out(av, 1, 0, ch)));
        CHECK(out(av, 1, 1, ch) == -kInf);
        // the other channels hold ordinary values: their max is the largest of their taps
        for (std::int64_t k = 0; k < c; ++k) {
          if (k == ch) continue;
          const double want = std::max({x[static_cast<std::size_t>(k)], x[static_cast<std::size_t>(c + k)],
                                        x[static_cast<std::size_t>(4 * c + k)], x[static_cast<std::size_t>(5 * c + k)]});
          CHECK(out(mx, 0, 0, k) == Approx(want));
        }
      }
    }
  });
}

TEST_CASE("max_pool2d's gradient goes to the NaN its forward picked", "[nan]") {
  // The forward picks a window's first NaN (in row-major tap order), as argmax does; the
  // gradient goes where the forward's value came from (TF's MaxPoolGrad routes to the argmax).
  for (std::int64_t c : {1, 16}) {
    INFO(c << " channels");
    std::vector<double> x(static_cast<std::size_t>(4 * c), 0.5);
    x[static_cast<std::size_t>(1 * c)] = kNaN;  // tap 1 of the single 2x2 window
    x[static_cast<std::size_t>(3 * c)] = kNaN;  // tap 3: a later NaN
    x[static_cast<std::size_t>(2 * c)] = 9.0;   // the largest number: not the max once a NaN is there
    const Tensor xt = tensor(x, Shape{1, 2, 2, c}, DType::float64);
    GradientTape tape;
    tape.watch(xt);
    const Tensor y = max_pool2d(xt, {2, 2}, {2, 2});
    const std::vector<double> g = values(tape.gradient(reduce_sum(y), xt));
    CHECK(g[static_cast<std::size_t>(1 * c)] == 1.0);
    CHECK(g[static_cast<std::size_t>(2 * c)] == 0.0);
    CHECK(g[static_cast<std::size_t>(3 * c)] == 0.0);
  }
  // +inf and -inf in one window (no NaN): the gradient goes to the +inf, the max
  for (std::int64_t c : {1, 16}) {
    INFO(c << " channels, +-inf");
    std::vector<double> x(static_cast<std::size_t>(4 * c), 0.5);
    x[0] = -kInf;
    x[static_cast<std::size_t>(2 * c)] = kInf;
    const Tensor xt = tensor(x, Shape{1, 2, 2, c}, DType::float64);
    GradientTape tape;
    tape.watch(xt);
    const std::vector<double> g = values(tape.gradient(reduce_sum(max_pool2d(xt, {2, 2}, {2, 2})), xt));
    CHECK(g[0] == 0.0);
    CHECK(g[static_cast<std::size_t>(2 * c)] == 1.0);
  }
}

TEST_CASE("global_max_pool2d is NaN for a channel with a NaN", "[nan]") {
  at_every_level([](DType dtype) {
    std::vector<double> x(2 * 3 * 3 * 4, 0.5);
    x[(1 * 9 + 4) * 4 + 2] = kNaN;  // image 1, pixel (1, 1), channel 2
    const std::vector<double> y = values(global_max_pool2d(tensor(x, Shape{2, 3, 3, 4}, dtype)));
    // tf.keras GlobalMaxPooling2D = reduce_max over H, W: NaN only in (image 1, channel 2)
    CHECK(mismatches(y, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, kNaN, 0.5}, dtype) == "");
  });
}

TEST_CASE("reduce_logsumexp with NaN and +-inf follows TensorFlow", "[nan]") {
  at_every_level([](DType dtype) {
    auto lse = [&](std::vector<double> v) { return reduce_logsumexp(tensor(v, dtype)).item<double>(); };
    // tf.reduce_logsumexp shifts by the max only where it is finite (else by 0):
    CHECK(lse({kInf, 1.0}) == kInf);               // log(inf + e) = inf
    CHECK(lse({-kInf, -kInf}) == -kInf);           // log(0 + 0) = -inf
    CHECK(lse({kInf, -kInf}) == kInf);
    CHECK(std::isnan(lse({kNaN, 1.0})));           // NaN in -> NaN
    CHECK(std::isnan(lse({1.0, 2.0, kNaN})));
    CHECK(lse({-kInf, 1.0}) == Approx(1.0));       // exp(-inf) adds 0
    // Along an axis: each row on its own.
    const Tensor m = tensor({kInf, 1.0, -kInf, -kInf, kNaN, 0.0, 0.0, 0.0}, Shape{4, 2}, dtype);
    CHECK(mismatches(values(reduce_logsumexp(m, {1})), {kInf, -kInf, kNaN, std::log(2.0)}, dtype) == "");
  });
}

TEST_CASE("softmax and log_softmax with NaN and +-inf follow TensorFlow's Softmax kernel", "[nan]") {
  at_every_level([](DType dtype) {
    // TF's Softmax and LogSoftmax subtract the row max as it is: a NaN, a +inf (inf - inf) or a
    // row of only -inf (-inf + inf) makes the whole row NaN; -inf next to finite values is 0
    // (log_softmax: -inf).
    const Tensor x = tensor({kNaN, 1.0, 2.0,     //
                             kInf, 1.0, 2.0,     //
                             -kInf, -kInf, -kInf,  //
                             -kInf, 0.0, 0.0,    //
                             0.0, 0.0, 0.0},
                            Shape{5, 3}, dtype);
    const double third = 1.0 / 3.0, lthird = std::log(third);
    CHECK(mismatches(values(softmax(x, -1)),
                     {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0.0, 0.5, 0.5, third, third, third},
                     dtype) == "");
    CHECK(mismatches(values(log_softmax(x, -1)),
                     {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, -kInf, std::log(0.5),
                      std::log(0.5), lthird, lthird, lthird},
                     dtype) == "");
  });
}

TEST_CASE("the cross-entropies are NaN for a NaN prediction: clipping keeps NaN", "[nan]") {
  at_every_level([](DType dtype) {
    const Tensor onehot = tensor({0.0, 1.0, 0.0, 1.0, 0.0, 0.0}, Shape{2, 3}, dtype);
    const Tensor probs = tensor({0.2, kNaN, 0.3, 0.7, 0.2, 0.1}, Shape{2, 3}, dtype);
    // Keras clips probabilities to [eps, 1 - eps] with clip_by_value: clip(NaN) is NaN, so the
    // row with the NaN has a NaN loss and the other row a finite one (-log 0.7).
    CHECK(mismatches(values(losses::categorical_crossentropy(onehot, probs)), {kNaN, -std::log(0.7)}, dtype) ==
          "");
    const Tensor ids = constant(std::vector<std::int64_t>{1, 0}, Shape{2});
    CHECK(mismatches(values(losses::sparse_categorical_crossentropy(ids, probs)), {kNaN, -std::log(0.7)}, dtype) ==
          "");
    // binary_crossentropy: mean over the last axis of -(y log p + (1 - y) log(1 - p)), p clipped
    const Tensor bt = tensor({1.0, 0.0}, Shape{1, 2}, dtype);
    CHECK(std::isnan(losses::binary_crossentropy(bt, tensor({kNaN, 0.5}, Shape{1, 2}, dtype)).item<double>()));
    // a probability of inf is clipped to 1 - eps, -inf to eps: finite losses, as Keras
    CHECK(std::isfinite(losses::binary_crossentropy(bt, tensor({kInf, -kInf}, Shape{1, 2}, dtype)).item<double>()));
    CHECK(std::isnan(losses::kl_divergence(bt, tensor({kNaN, 0.5}, Shape{1, 2}, dtype)).item<double>()));
  });
}

TEST_CASE("the fused cross-entropies with logits are NaN for a NaN or +inf logit", "[nan]") {
  at_every_level([](DType dtype) {
    const Tensor labels = tensor({0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0}, Shape{3, 3}, dtype);
    const Tensor logits = tensor({1.0, kNaN, 0.0,   // NaN logit
                                  kInf, 1.0, 0.0,   // +inf logit: inf - inf
                                  0.0, 1.0, 2.0},   // finite
                                 Shape{3, 3}, dtype);
    // TF's SoftmaxCrossEntropyWithLogits shifts by the row max as it is: NaN for the first two
    // rows; the third is logsumexp([0, 1, 2]) - 2.
    const double third = std::log(1.0 + std::exp(1.0) + std::exp(2.0)) - 2.0;
    CHECK(mismatches(values(softmax_cross_entropy_with_logits(labels, logits)), {kNaN, kNaN, third}, dtype) == "");
    const Tensor ids = constant(std::vector<std::int64_t>{1, 0, 2}, Shape{3});
    CHECK(mismatches(values(sparse_softmax_cross_entropy_with_logits(ids, logits)), {kNaN, kNaN, third}, dtype) ==
          "");
    // tf.nn.sigmoid_cross_entropy_with_logits = max(x, 0) - x z + log1p(exp(-|x|)): NaN -> NaN;
    // x = inf, z = 0: x z = inf * 0 = NaN; x = -inf, z = 1: 0 + inf + log1p(0) = inf
    const Tensor z = tensor({1.0, 0.0, 1.0}, dtype);
    const std::vector<double> s = values(sigmoid_cross_entropy_with_logits(z, tensor({kNaN, kInf, -kInf}, dtype)));
    CHECK(mismatches(s, {kNaN, kNaN, kInf}, dtype) == "");
  });
}

TEST_CASE("the ReLU layers propagate NaN in every variant", "[nan]") {
  const Tensor x = constant({kNaN, -2.0, 0.5, 3.0, 8.0, kInf, -kInf}, {7}, DType::float32);
  auto run = [&](layers::ReLUOptions o) { return values(layers::ReLU(std::move(o))(x)); };
  // Keras ReLU(max_value, negative_slope, threshold) (keras.activations.relu):
  //   plain: tf.nn.relu
  CHECK(mismatches(run({}), {kNaN, 0.0, 0.5, 3.0, 8.0, kInf, 0.0}, DType::float32) == "");
  //   max_value = 6: tf.nn.relu6
  CHECK(mismatches(run({.max_value = 6.0}), {kNaN, 0.0, 0.5, 3.0, 6.0, 6.0, 0.0}, DType::float32) == "");
  //   max_value = 4: relu, then clip to [0, 4] (clip keeps NaN)
  CHECK(mismatches(run({.max_value = 4.0}), {kNaN, 0.0, 0.5, 3.0, 4.0, 4.0, 0.0}, DType::float32) == "");
  //   negative_slope only: tf.nn.leaky_relu (NaN * slope = NaN)
  CHECK(mismatches(run({.negative_slope = 0.5}), {kNaN, -1.0, 0.5, 3.0, 8.0, kInf, -kInf}, DType::float32) == "");
  //   threshold = 1: x * (x > 1), so NaN * 0 = NaN and -inf * 0 = NaN, as Keras multiplies
  CHECK(mismatches(run({.threshold = 1.0}), {kNaN, 0.0, 0.0, 3.0, 8.0, kInf, kNaN}, DType::float32) == "");
  //   all three: x (x > 1) clipped to 4, minus 0.5 relu(1 - x)
  CHECK(mismatches(run({.max_value = 4.0, .negative_slope = 0.5, .threshold = 1.0}),
                   {kNaN, -1.5, -0.25, 3.0, 4.0, 4.0, kNaN}, DType::float32) == "");
  // LeakyReLU layer: tf.nn.leaky_relu(x, 0.3)
  const std::vector<double> leaky = values(layers::LeakyReLU()(x));
  CHECK(mismatches(leaky, {kNaN, -0.6, 0.5, 3.0, 8.0, kInf, -kInf}, DType::float32) == "");
}

TEST_CASE("float16 and bfloat16 relu, maximum and reduce_max keep NaN", "[nan]") {
  for (DType half : {DType::float16, DType::bfloat16}) {
    INFO(name(half));
    const Tensor x = constant({kNaN, -1.0, 2.0, kInf}, {4}, DType::float64).astype(half);
    // the float32 kernels' rules, rounded once: relu(NaN) = NaN, maximum(NaN, 0) = NaN
    CHECK(mismatches(values(relu(x)), {kNaN, 0.0, 2.0, kInf}, DType::float32) == "");
    CHECK(mismatches(values(maximum(x, 0.0)), {kNaN, 0.0, 2.0, kInf}, DType::float32) == "");
    CHECK(std::isnan(reduce_max(x).item<double>()));
    CHECK(argmax(x).item<std::int64_t>() == 0);
  }
}

TEST_CASE("relu's one-pass gradient kernel is upstream * (x > 0) at every SIMD level", "[nan]") {
  // Every ordered pair (upstream, x) of specials, 81 elements: full batches and a tail. The
  // reference is TensorFlow's ReluGrad, g * (x > 0 ? 1 : 0): NaN or inf upstream times 0 is NaN.
  at_every_level([](DType dtype) {
    std::vector<double> up, x, want;
    for (double g : kSpecials)
      for (double v : kSpecials) {
        up.push_back(g);
        x.push_back(v);
        want.push_back(g * (v > 0 ? 1.0 : 0.0));
      }
    const Tensor xt = tensor(x, dtype);
    GradientTape tape;
    tape.watch(xt);
    const Tensor loss = reduce_sum(mul(relu(xt), tensor(up, dtype)));
    CHECK(mismatches(values(tape.gradient(loss, xt)), want, dtype, x) == "");
  });
}

TEST_CASE("gradients meet NaN as TensorFlow's: relu masks by multiplying", "[nan]") {
  const Tensor x = constant({-1.0, 2.0, kNaN, 0.0}, {4}, DType::float64);
  {
    // tf ReluGrad = upstream * (x > 0): an upstream NaN where x <= 0 stays NaN (NaN * 0)
    GradientTape tape;
    tape.watch(x);
    const Tensor up = constant({kNaN, 3.0, 1.0, kNaN}, {4}, DType::float64);
    const std::vector<double> g = values(tape.gradient(reduce_sum(mul(relu(x), up)), x));
    CHECK(mismatches(g, {kNaN, 3.0, 0.0, kNaN}, DType::float64) == "");
  }
  {
    // at x = NaN with a finite upstream: (NaN > 0) is false, so 0 (tf.nn.relu's gradient)
    GradientTape tape;
    tape.watch(x);
    CHECK(mismatches(values(tape.gradient(reduce_sum(relu(x)), x)), {0.0, 1.0, 0.0, 0.0}, DType::float64) == "");
  }
  {
    // tf Relu6Grad = upstream * (0 < x < 6)
    GradientTape tape;
    tape.watch(x);
    const Tensor up = constant({kNaN, 1.0, 1.0, 1.0}, {4}, DType::float64);
    const std::vector<double> g = values(tape.gradient(reduce_sum(mul(relu6(x), up)), x));
    CHECK(mismatches(g, {kNaN, 1.0, 0.0, 0.0}, DType::float64) == "");
  }
  {
    // tf.maximum's gradient: x gets it where x >= y; (NaN >= y) is false, so y gets it
    const Tensor a = constant({kNaN, 1.0, 2.0}, {3}, DType::float64);
    const Tensor b = constant({1.0, kNaN, 2.0}, {3}, DType::float64);
    GradientTape tape(true);
    tape.watch(a);
    tape.watch(b);
    const Tensor y = reduce_sum(maximum(a, b));
    CHECK(std::isnan(y.item<double>()));
    CHECK(mismatches(values(tape.gradient(y, a)), {0.0, 0.0, 1.0}, DType::float64) == "");
    CHECK(mismatches(values(tape.gradient(y, b)), {1.0, 1.0, 0.0}, DType::float64) == "");
  }
  {
    // tf.reduce_max's gradient: upstream / count of elements equal to the max; with a NaN max
    // no element equals it and 0 / 0 is NaN everywhere
    GradientTape tape;
    tape.watch(x);
    const std::vector<double> g = values(tape.gradient(reduce_max(x), x));
    CHECK(mismatches(g, {kNaN, kNaN, kNaN, kNaN}, DType::float64) == "");
  }
}

TEST_CASE("a Dense + relu model fed NaN reports a NaN loss", "[nan]") {
  // The symptom: relu(NaN) = 0 gave a finite loss for NaN input.
  models::Sequential model;
  model.add(layers::Dense(4, {.activation = "relu"}));
  model.add(layers::Dense(1));
  const Tensor x = constant({kNaN, 1.0, 2.0, 3.0}, {2, 2}, DType::float32);
  const Tensor pred = model(x);
  const Tensor loss = reduce_mean(losses::mean_squared_error(zeros_like(pred), pred));
  CHECK(std::isnan(loss.item<double>()));
}

TEST_CASE("fit on NaN input through relu reports a NaN loss and TerminateOnNaN stops it", "[nan]") {
  // The symptom, end to end: with relu(NaN) = 0 the loss stayed finite and
  // TerminateOnNaN never fired. Keras: a NaN loss, and TerminateOnNaN ends fit after that batch.
  models::Sequential model;
  model.add(layers::Dense(4, {.activation = "relu"}));
  model.add(layers::Dense(1));
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  const Tensor x = constant({NAN, 1.f, 2.f, 3.f}, {2, 2});
  const Tensor y = constant({1.f, 2.f}, {2, 1});
  const auto h = model.fit(x, y, {.batch_size = 2, .epochs = 3, .verbose = 0,
                                  .callbacks = {std::make_shared<callbacks::TerminateOnNaN>()}, .shuffle = false});
  REQUIRE(h.history.at("loss").size() == 1);
  CHECK(std::isnan(h.history.at("loss")[0]));
}
