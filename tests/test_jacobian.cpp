// GradientTape::jacobian and batch_jacobian against central finite differences in float64 (on
// matmul, softmax and an LSTM cell), their closed forms where they are short (matmul's
// d(xW)/dx = I (x) W^T, softmax's diag(s) - s s^T), nested tapes (the jacobian differentiated
// again), unconnected sources and shape errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <functional>
#include <vector>

using namespace keel;

namespace {

Tensor iota(Shape shape, double scale, double shift) {
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(i) * scale + shift);
  return constant(v, shape);
}

// J[i, j] = (f(x + eps e_j)[i] - f(x - eps e_j)[i]) / 2 eps, as [f.size, x.size] row-major.
std::vector<double> numeric_jacobian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                                     double eps = 1e-6) {
  std::vector<double> xv = x.to_vector<double>();
  const std::size_t n = xv.size();
  const std::size_t m = static_cast<std::size_t>(f(x).size());
  std::vector<double> j(m * n);
  for (std::size_t c = 0; c < n; ++c) {
    const double saved = xv[c];
    xv[c] = saved + eps;
    const auto up = f(constant(xv, x.shape())).to_vector<double>();
    xv[c] = saved - eps;
    const auto down = f(constant(xv, x.shape())).to_vector<double>();
    xv[c] = saved;
    for (std::size_t r = 0; r < m; ++r) j[r * n + c] = (up[r] - down[r]) / (2 * eps);
  }
  return j;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-7) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(tol));
}

}  // namespace

TEST_CASE("jacobian of matmul is I (x) W^T and matches finite differences", "[jacobian]") {
  const Tensor w = iota({3, 4}, 0.7, 0.1);
  const Tensor x = iota({2, 3}, 0.3, -0.5);
  auto f = [&](const Tensor& v) { return matmul(v, w); };
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  const Tensor j = tape.jacobian(y, x);
  REQUIRE(j.shape() == Shape({2, 4, 2, 3}));
  // d y[i,a] / d x[k,b] = delta_ik * w[b,a].
  const auto jv = j.to_vector<double>(), wv = w.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int a = 0; a < 4; ++a)
      for (int k = 0; k < 2; ++k)
        for (int b = 0; b < 3; ++b)
          CHECK(jv[((i * 4 + a) * 2 + k) * 3 + b] == Approx(i == k ? wv[b * 4 + a] : 0.0).margin(1e-15));
  check_close(jv, numeric_jacobian(f, x));
}

TEST_CASE("jacobian of softmax is diag(s) - s s^T", "[jacobian]") {
  const Tensor x = constant<double>({0.5, -1.0, 2.0}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor s = softmax(x);
  const Tensor j = tape.jacobian(s, x);
  const auto sv = s.to_vector<double>(), jv = j.to_vector<double>();
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) CHECK(jv[r * 3 + c] == Approx((r == c ? sv[r] : 0.0) - sv[r] * sv[c]).margin(1e-14));
  check_close(jv, numeric_jacobian([](const Tensor& v) { return softmax(v); }, x));
}

TEST_CASE("jacobian of an LSTM cell's state matches finite differences for every input", "[jacobian]") {
  const int batch = 2, in = 3, units = 2;
  const Tensor x = iota({batch, in}, 0.9, 0.2), h = iota({batch, units}, 0.4, -1.0), c = iota({batch, units}, 1.3, 0.5);
  const Tensor k = iota({in, 4 * units}, 0.37, 0.0), rk = iota({units, 4 * units}, 0.61, 1.0);
  const Tensor b = iota({4 * units}, 0.5, -0.3);
  auto cell_h = [&](const Tensor& xx, const Tensor& kk) { return lstm_cell(xx, h, c, kk, rk, b).h; };
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(k);
  const LSTMState st = lstm_cell(x, h, c, k, rk, b);
  const Tensor jx = tape.jacobian(st.h, x);
  const Tensor jk = tape.jacobian(st.c, k);
  REQUIRE(jx.shape() == Shape({batch, units, batch, in}));
  check_close(jx.to_vector<double>(), numeric_jacobian([&](const Tensor& v) { return cell_h(v, k); }, x));
  check_close(jk.to_vector<double>(),
              numeric_jacobian([&](const Tensor& v) { return lstm_cell(x, h, c, v, rk, b).c; }, k));
  // batch_jacobian: rows do not mix across the batch, so it is jx's block diagonal.
  const Tensor bj = tape.batch_jacobian(st.h, x);
  REQUIRE(bj.shape() == Shape({batch, units, in}));
  const auto bv = bj.to_vector<double>(), jv = jx.to_vector<double>();
  for (int i = 0; i < batch; ++i)
    for (int u = 0; u < units; ++u)
      for (int f = 0; f < in; ++f)
        CHECK(bv[(i * units + u) * in + f] == Approx(jv[((i * units + u) * batch + i) * in + f]).margin(1e-15));
}

TEST_CASE("a jacobian computed under an outer tape can be differentiated again", "[jacobian][nested]") {
  // y = x^3 elementwise: J = diag(3x^2); sum(J) = sum 3x^2, whose gradient is 6x.
  const Tensor x = constant<double>({0.5, -2.0, 1.5}, {3});
  GradientTape outer;
  outer.watch(x);
  Tensor j;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = mul(x, mul(x, x));
    j = inner.jacobian(y, x);
  }
  CHECK(j.to_vector<double>() == std::vector<double>{0.75, 0, 0, 0, 12, 0, 0, 0, 6.75});
  const Tensor g = outer.gradient(reduce_sum(j), x);
  REQUIRE(g.defined());
  const auto gv = g.to_vector<double>();
  CHECK(gv[0] == Approx(3.0));
  CHECK(gv[1] == Approx(-12.0));
  CHECK(gv[2] == Approx(9.0));
}

TEST_CASE("jacobian of a Variable, unconnected sources, spent tapes and batch errors", "[jacobian][errors]") {
  Variable v(constant<double>({1, 2}, {2}));
  const Tensor other = constant<double>({3}, {1});
  GradientTape tape;
  tape.watch(other);
  const Tensor y = mul(v.value(), scalar_like(v.value(), 3.0));
  CHECK(tape.jacobian(y, v).to_vector<double>() == std::vector<double>{3, 0, 0, 3});
  // The non-persistent tape is spent after one jacobian, as after one gradient.
  CHECK_THROWS_AS(tape.jacobian(y, v), ValueError);

  GradientTape t2(/*persistent=*/true);
  t2.watch(other);
  const Tensor z = mul(v.value(), scalar_like(v.value(), 2.0));
  CHECK_FALSE(t2.jacobian(z, other).defined());
  CHECK(t2.jacobian(z, other, UnconnectedGradients::zero).to_vector<double>() == std::vector<double>{0, 0});
  CHECK_THROWS_AS(t2.batch_jacobian(z, constant<double>({1, 2, 3}, {3})), ShapeError);
}
