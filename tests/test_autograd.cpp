// GradientTape with TensorFlow 2 semantics: watching, Variables, persistence, nesting
// (higher-order gradients), stop_gradient, stop_recording, custom_gradient, unconnected
// sources, broadcasting, in-place writes detected, lists of sources, integer paths.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "autograd/tape_state.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using namespace keel;
using Catch::Contains;

namespace {

using D = std::vector<double>;
D dv(const Tensor& t) { return t.to_vector<double>(); }
Tensor f64(const D& v, Shape s) { return constant(v, std::move(s), DType::float64); }
Tensor scalar64(double v) { return constant(v, DType::float64); }

}  // namespace

TEST_CASE("a watched constant gets a gradient and an unwatched one does not", "[autograd][watch]") {
  const Tensor x = scalar64(3.0);
  const Tensor z = scalar64(4.0);
  GradientTape tape(true);
  tape.watch(x);
  const Tensor y = x * x * z;  // dy/dx = 2 x z = 24; z is not watched
  const Tensor g = tape.gradient(y, x);
  REQUIRE(g.defined());
  CHECK(g.item<double>() == 24.0);
  CHECK(g.dtype() == DType::float64);
  CHECK(g.shape() == Shape{});
  CHECK_FALSE(tape.gradient(y, z).defined());
  REQUIRE(tape.watched_tensors().size() == 1);
  CHECK(tape.watched_tensors()[0].id() == x.id());

  // watching after the op ran is too late: nothing was recorded for it (TF semantics)
  GradientTape late;
  const Tensor y2 = x * x;
  late.watch(x);
  CHECK_FALSE(late.gradient(y2, x).defined());
}

TEST_CASE("the gradient of a target with respect to itself is ones", "[autograd][watch]") {
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape;
  tape.watch(x);
  CHECK(dv(tape.gradient(x, x)) == D{1, 1, 1});
}

TEST_CASE("trainable Variables are watched automatically when read", "[autograd][variable]") {
  Variable v(scalar64(3.0), "v");
  Variable frozen(scalar64(5.0), "frozen", /*trainable=*/false);
  GradientTape tape(true);
  const Tensor y = v * v * frozen;  // dy/dv = 2 v frozen = 30
  const Tensor gv = tape.gradient(y, v);
  REQUIRE(gv.defined());
  CHECK(gv.item<double>() == 30.0);
  CHECK_FALSE(tape.gradient(y, frozen).defined());  // not trainable: not watched
  // the list form with Variable pointers
  const auto gs = tape.gradient(y, std::vector<Variable*>{&v, &frozen});
  REQUIRE(gs.size() == 2);
  CHECK(gs[0].item<double>() == 30.0);
  CHECK_FALSE(gs[1].defined());

  // a non-trainable variable that is watched explicitly gets a gradient: d(v^2 frozen)/dfrozen = 9
  GradientTape explicit_tape;
  explicit_tape.watch(frozen);
  const Tensor y2 = v * v * frozen;
  CHECK(explicit_tape.gradient(y2, frozen).item<double>() == 9.0);
}

TEST_CASE("watch_accessed_variables=false turns automatic watching off", "[autograd][variable]") {
  Variable v(scalar64(3.0), "v");
  Variable w(scalar64(2.0), "w");
  GradientTape tape(/*persistent=*/true, /*watch_accessed_variables=*/false);
  tape.watch(w);
  const Tensor y = v * w;
  CHECK_FALSE(tape.gradient(y, v).defined());
  CHECK(tape.gradient(y, w).item<double>() == 3.0);  // d(v w)/dw = v
}

TEST_CASE("a Variable read before the tape existed is not watched", "[autograd][variable]") {
  Variable v(scalar64(3.0), "v");
  const Tensor read_before = v.value() * 1.0;
  GradientTape tape;
  const Tensor y = read_before * 2.0;
  CHECK_FALSE(tape.gradient(y, v).defined());
}

TEST_CASE("a non-persistent tape refuses a second gradient() call", "[autograd][persistent]") {
  const Tensor x = scalar64(2.0);
  GradientTape tape;
  CHECK_FALSE(tape.persistent());
  tape.watch(x);
  const Tensor y = x * x;
  CHECK(tape.gradient(y, x).item<double>() == 4.0);
  CHECK_THROWS_AS(tape.gradient(y, x), keel::Error);
  CHECK_THROWS_WITH(tape.gradient(y, x), Contains("persistent"));
}

TEST_CASE("a persistent tape answers many gradient() calls", "[autograd][persistent]") {
  const Tensor x = scalar64(2.0);
  GradientTape tape(true);
  CHECK(tape.persistent());
  tape.watch(x);
  const Tensor y = x * x;         // 2x = 4
  const Tensor z = y * y;         // 4x^3 = 32
  const Tensor w = exp(x) + 1.0;  // e^x
  CHECK(tape.gradient(y, x).item<double>() == 4.0);
  CHECK(tape.gradient(z, x).item<double>() == 32.0);
  CHECK(tape.gradient(w, x).item<double>() == Approx(std::exp(2.0)));
  CHECK(tape.gradient(y, x).item<double>() == 4.0);  // again
  CHECK(tape.gradient(z, y).item<double>() == 8.0);  // dz/dy = 2y, an intermediate as source
}

TEST_CASE("nested tapes give second derivatives: d2/dx2 of x^3 at 2 is 12", "[autograd][higher]") {
  const Tensor x = scalar64(2.0);
  GradientTape outer;
  outer.watch(x);
  Tensor dy_dx;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = x * x * x;
    dy_dx = inner.gradient(y, x);  // 3 x^2 = 12, recorded by the outer tape
  }
  CHECK(dy_dx.item<double>() == 12.0);
  const Tensor d2y_dx2 = outer.gradient(dy_dx, x);  // 6 x = 12
  REQUIRE(d2y_dx2.defined());
  CHECK(d2y_dx2.item<double>() == 12.0);
}

TEST_CASE("third derivatives work through three tapes and unary ops", "[autograd][higher]") {
  // f = sin(x): f' = cos x, f'' = -sin x, f''' = -cos x
  const Tensor x = scalar64(0.7);
  GradientTape t3;
  t3.watch(x);
  GradientTape t2;
  t2.watch(x);
  GradientTape t1;
  t1.watch(x);
  const Tensor f = sin(x);
  const Tensor d1 = t1.gradient(f, x);
  const Tensor d2 = t2.gradient(d1, x);
  const Tensor d3 = t3.gradient(d2, x);
  CHECK(d1.item<double>() == Approx(std::cos(0.7)).epsilon(1e-14));
  CHECK(d2.item<double>() == Approx(-std::sin(0.7)).epsilon(1e-14));
  CHECK(d3.item<double>() == Approx(-std::cos(0.7)).epsilon(1e-14));
}

TEST_CASE("a Hessian-vector product matches the hand-derived value", "[autograd][higher]") {
  // f(x) = sum(x^2 * y) + (sum x)^2
  //   grad_i = 2 x_i y_i + 2 S,   S = sum x
  //   H_ij   = 2 y_i delta_ij + 2
  //   (H v)_i = 2 y_i v_i + 2 sum(v)
  // x = [1,2,3], y = [4,5,6], v = [1,-1,2] (sum 2): Hv = [8+4, -10+4, 24+4] = [12, -6, 28]
  // and grad = [8+12, 20+12, 36+12] = [20, 32, 48]
  const Tensor x = f64({1, 2, 3}, {3});
  const Tensor y = f64({4, 5, 6}, {3});
  const Tensor v = f64({1, -1, 2}, {3});
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor f = reduce_sum(square(x) * y) + square(reduce_sum(x));
    g = inner.gradient(f, x);
  }
  CHECK(dv(g) == D{20, 32, 48});
  const Tensor gv = reduce_sum(g * v);
  const Tensor hv = outer.gradient(gv, x);
  REQUIRE(hv.defined());
  CHECK(hv.shape() == Shape{3});
  CHECK(dv(hv) == D{12, -6, 28});
}

TEST_CASE("a gradient penalty: the gradient of a gradient's norm", "[autograd][higher]") {
  // f(w) = sum(w^3); g = 3 w^2; p = sum(g^2) = 9 sum(w^4); dp/dw = 36 w^3
  // w = [1, 2]: p = 9 (1 + 16) = 153, dp/dw = [36, 288]
  Variable w(f64({1, 2}, {2}), "w");
  GradientTape outer;
  Tensor g;
  {
    GradientTape inner;
    const Tensor f = reduce_sum(pow(w.value(), 3.0));
    g = inner.gradient(f, w);
  }
  const Tensor p = reduce_sum(square(g));
  CHECK(p.item<double>() == Approx(9.0 * (1 + 16)));
  const Tensor dp = outer.gradient(p, w);
  REQUIRE(dp.defined());
  CHECK(dv(dp)[0] == Approx(36.0));
  CHECK(dv(dp)[1] == Approx(288.0));
}

TEST_CASE("stop_gradient blocks the gradient but keeps the value", "[autograd][stop]") {
  const Tensor x = scalar64(3.0);
  GradientTape tape;
  tape.watch(x);
  const Tensor s = stop_gradient(x);
  CHECK(s.item<double>() == 3.0);
  // y = x * stop(x): dy/dx = stop(x) = 3 (not 2x = 6)
  const Tensor y = x * s;
  CHECK(tape.gradient(y, x).item<double>() == 3.0);
}

TEST_CASE("nothing is recorded while stop_recording() lives", "[autograd][stop]") {
  const Tensor x = scalar64(3.0);
  GradientTape tape(true);
  tape.watch(x);
  Tensor z;
  {
    auto pause = tape.stop_recording();
    z = x * x;  // not recorded
  }
  const Tensor y = x * 2.0 + z;  // recorded again: dy/dx = 2 (z is a constant to the tape)
  CHECK(tape.gradient(y, x).item<double>() == 2.0);
  CHECK_FALSE(tape.gradient(z, x).defined());
  CHECK(y.item<double>() == 15.0);
}

TEST_CASE("custom_gradient: an identity whose gradient is clipped to [-1, 1]",
          "[autograd][custom_gradient]") {
  auto clip_gradient = custom_gradient(
      [](const Tensor& x) -> std::pair<Tensor, std::function<Tensor(const Tensor&)>> {
        return {x * 1.0, [](const Tensor& dy) { return clip_by_value(dy, -1.0, 1.0); }};
      });
  const Tensor x = f64({0.5, -2.0, 3.0}, {3});
  GradientTape tape(true);
  tape.watch(x);
  const Tensor y = clip_gradient(x);
  CHECK(dv(y) == dv(x));  // the forward is the identity
  // upstream 5 -> 1; upstream -5 -> -1; upstream [0.25, 5, -3] -> [0.25, 1, -1]
  CHECK(dv(tape.gradient(reduce_sum(y * 5.0), x)) == D{1, 1, 1});
  CHECK(dv(tape.gradient(reduce_sum(y * -5.0), x)) == D{-1, -1, -1});
  const Tensor up = f64({0.25, 5, -3}, {3});
  CHECK(dv(tape.gradient(reduce_sum(y * up), x)) == D{0.25, 1, -1});
  // without the custom gradient it would be the upstream itself
  CHECK(dv(tape.gradient(reduce_sum(x * up), x)) == D{0.25, 5, -3});
}

TEST_CASE("custom_gradient: log1pexp with a hand-written stable gradient",
          "[autograd][custom_gradient]") {
  // y = log(1 + e^x); dy/dx = e^x / (1 + e^x) = 1 - 1 / (1 + e^x), which stays finite when
  // e^x overflows (x = 1000: e^x = inf, the naive e^x / (1 + e^x) = inf / inf = NaN).
  auto log1pexp = custom_gradient(
      [](const Tensor& x) -> std::pair<Tensor, std::function<Tensor(const Tensor&)>> {
        const Tensor e = exp(x);
        return {log(1.0 + e), [e](const Tensor& dy) { return dy * (1.0 - 1.0 / (1.0 + e)); }};
      });
  const Tensor x = f64({0.0, 1000.0, -3.0}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = log1pexp(x);
  const auto yv = dv(y);
  CHECK(yv[0] == Approx(std::log(2.0)));  // log(1 + 1)
  CHECK(yv[2] == Approx(std::log1p(std::exp(-3.0))));
  const auto g = dv(tape.gradient(reduce_sum(y), x));
  REQUIRE(g.size() == 3);
  CHECK(g[0] == Approx(0.5));  // 1 - 1/2
  CHECK(std::isfinite(g[1]));
  CHECK(g[1] == 1.0);  // 1 - 1/inf
  CHECK(g[2] == Approx(1.0 / (1.0 + std::exp(3.0))));  // sigmoid(-3)
}

TEST_CASE("custom_gradient with several inputs and nested in other ops",
          "[autograd][custom_gradient]") {
  // f(a, b) = a * b with a deliberately "wrong" gradient (2 dy b, 3 dy a) to prove it is used
  auto f = custom_gradient(
      [](const std::vector<Tensor>& in) -> std::pair<Tensor, CustomGradFn> {
        const Tensor a = in[0], b = in[1];
        return {a * b, [a, b](const Tensor& dy) {
                  return std::vector<Tensor>{dy * b * 2.0, dy * a * 3.0};
                }};
      });
  const Tensor a = scalar64(2.0), b = scalar64(5.0);
  GradientTape tape;
  tape.watch(a);
  tape.watch(b);
  const Tensor y = square(f({a, b}));  // y = (ab)^2, dy/d(ab) = 2ab = 20
  CHECK(y.item<double>() == 100.0);
  const auto g = tape.gradient(y, std::vector<Tensor>{a, b});
  REQUIRE(g.size() == 2);
  CHECK(g[0].item<double>() == 20.0 * 5.0 * 2.0);  // 2 dy b
  CHECK(g[1].item<double>() == 20.0 * 2.0 * 3.0);  // 3 dy a
}

TEST_CASE("unconnected sources give an undefined Tensor, or zeros on request",
          "[autograd][unconnected]") {
  const Tensor x = f64({1, 2}, {2});
  const Tensor z = f64({1, 2, 3}, {3});
  GradientTape tape(true);
  tape.watch(x);
  tape.watch(z);
  const Tensor y = reduce_sum(x * 2.0);
  CHECK_FALSE(tape.gradient(y, z).defined());
  const Tensor zero = tape.gradient(y, z, UnconnectedGradients::zero);
  REQUIRE(zero.defined());
  CHECK(zero.shape() == Shape{3});
  CHECK(zero.dtype() == DType::float64);
  CHECK(dv(zero) == D{0, 0, 0});
  const auto both = tape.gradient(y, std::vector<Tensor>{x, z});
  CHECK(dv(both[0]) == D{2, 2});
  CHECK_FALSE(both[1].defined());
  const auto both_zero = tape.gradient(y, std::vector<Tensor>{x, z}, UnconnectedGradients::zero);
  CHECK(dv(both_zero[1]) == D{0, 0, 0});
}

TEST_CASE("the gradient for a broadcast input has the input's shape", "[autograd][broadcast]") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = f64({10, 20, 30}, {3});
  const Tensor col = f64({1, 2}, {2, 1});
  const Tensor s = scalar64(7.0);
  GradientTape tape(true);
  for (const Tensor* t : {&a, &row, &col, &s}) tape.watch(*t);
  const Tensor y = reduce_sum(a * row + col * s);
  // dy/drow_j = sum_i a_ij = [5, 7, 9]; dy/dcol_i = 3 s = 21; dy/ds = 3 * (1 + 2) = 9
  const Tensor grow = tape.gradient(y, row);
  CHECK(grow.shape() == Shape{3});
  CHECK(dv(grow) == D{5, 7, 9});
  const Tensor gcol = tape.gradient(y, col);
  CHECK(gcol.shape() == Shape{2, 1});
  CHECK(dv(gcol) == D{21, 21});
  const Tensor gs = tape.gradient(y, s);
  CHECK(gs.shape() == Shape{});
  CHECK(gs.item<double>() == 9.0);
  // da_ij = row_j
  CHECK(dv(tape.gradient(y, a)) == D{10, 20, 30, 10, 20, 30});
}

TEST_CASE("overwriting a Variable the tape saved makes gradient() throw", "[autograd][version]") {
  Variable v(f64({1, 2, 3}, {3}), "v");
  GradientTape tape;
  const Tensor y = reduce_sum(v * v);  // saves v's value for the backward pass
  v.assign(f64({4, 5, 6}, {3}));
  CHECK_THROWS_AS(tape.gradient(y, v), keel::Error);

  // assign_add / assign_sub count as writes too
  Variable w(f64({1, 2}, {2}), "w");
  GradientTape tape2;
  const Tensor y2 = reduce_sum(sin(w.value()));  // sin saves its input for cos(x)
  w.assign_sub(f64({0.5, 0.5}, {2}));
  CHECK_THROWS_AS(tape2.gradient(y2, w), keel::Error);

  // writes after gradient() are fine, and an op that saves nothing is not affected
  Variable u(f64({1, 2}, {2}), "u");
  GradientTape tape3(true);
  const Tensor y3 = reduce_sum(u.value() + 1.0);  // add saves no tensors
  u.assign_add(f64({1, 1}, {2}));
  CHECK(dv(tape3.gradient(y3, u)) == D{1, 1});
}

TEST_CASE("gradient of a list of sources", "[autograd][sources]") {
  // y = x0 x1 + x2^2 -> [x1, x0, 2 x2] = [3, 2, 10]
  const Tensor x0 = scalar64(2.0), x1 = scalar64(3.0), x2 = scalar64(5.0);
  GradientTape tape;
  for (const Tensor* t : {&x0, &x1, &x2}) tape.watch(*t);
  const Tensor y = x0 * x1 + square(x2);
  const auto g = tape.gradient(y, std::vector<Tensor>{x0, x1, x2});
  REQUIRE(g.size() == 3);
  CHECK(g[0].item<double>() == 3.0);
  CHECK(g[1].item<double>() == 2.0);
  CHECK(g[2].item<double>() == 10.0);
}

TEST_CASE("gradient with an explicit output_gradient", "[autograd][sources]") {
  // y = x^2 elementwise, upstream [1, 10, 100]: dx = 2 x upstream
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = square(x);
  const auto g = tape.gradient(y, std::vector<Tensor>{x}, f64({1, 10, 100}, {3}));
  REQUIRE(g.size() == 1);
  CHECK(dv(g[0]) == D{2, 40, 600});
}

TEST_CASE("a non-scalar target is summed (TF semantics)", "[autograd][sources]") {
  const Tensor x = f64({1, 2, 3}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;  // implicit upstream of ones: 2x
  CHECK(dv(tape.gradient(y, x)) == D{2, 4, 6});
}

TEST_CASE("no gradient flows through integer ops", "[autograd][integer]") {
  const Tensor x = f64({1.5, 2.5}, {2});
  GradientTape tape(true);
  tape.watch(x);
  const Tensor i = cast(x, DType::int32);         // [1, 2]
  const Tensor y = cast(i * 2.0, DType::float64);  // through int32: no gradient
  CHECK(dv(y) == D{2, 4});
  CHECK_FALSE(tape.gradient(reduce_sum(y), x).defined());
  // mixed: the float path still gets its gradient
  const Tensor z = reduce_sum(x * 3.0 + y);
  CHECK(dv(tape.gradient(z, x)) == D{3, 3});
  // comparisons and argmax are not differentiable either
  const Tensor b = cast(x > 2.0, DType::float64);
  CHECK_FALSE(tape.gradient(reduce_sum(b), x).defined());
  const Tensor am = cast(argmax(x, 0), DType::float64);
  CHECK_FALSE(tape.gradient(am, x).defined());
}

TEST_CASE("gradients flow through a tiny training step on Variables", "[autograd][variable]") {
  // loss = mean((x w + b - y)^2) with x = [1, 2], y = [3, 5], w = 0, b = 0:
  // residuals r = [-3, -5]; dloss/dw = mean(2 r x) = (2*-3*1 + 2*-5*2) / 2 = -13,
  // dloss/db = mean(2 r) = -8
  Variable w(scalar64(0.0), "w");
  Variable b(scalar64(0.0), "b");
  const Tensor x = f64({1, 2}, {2});
  const Tensor y = f64({3, 5}, {2});
  GradientTape tape;
  const Tensor loss = reduce_mean(square(x * w + b - y));
  const auto g = tape.gradient(loss, {&w, &b});  // a braced list of Variable pointers
  REQUIRE(g.size() == 2);
  CHECK(g[0].item<double>() == -13.0);
  CHECK(g[1].item<double>() == -8.0);
  w.assign_sub(g[0] * 0.1);
  b.assign_sub(g[1] * 0.1);
  CHECK(w.value().item<double>() == Approx(1.3));
  CHECK(b.value().item<double>() == Approx(0.8));
}

TEST_CASE("tapes on the stack record independently", "[autograd][nesting]") {
  const Tensor x = scalar64(2.0);
  const Tensor z = scalar64(3.0);
  GradientTape a(true);
  a.watch(x);
  GradientTape b(true);
  b.watch(z);
  const Tensor y = x * z;
  CHECK(a.gradient(y, x).item<double>() == 3.0);
  CHECK_FALSE(a.gradient(y, z).defined());
  CHECK(b.gradient(y, z).item<double>() == 2.0);
  CHECK_FALSE(b.gradient(y, x).defined());
  a.reset();
  CHECK(a.watched_tensors().empty());
}

TEST_CASE("a tape keeps what a unary op's gradient reads: a relu its output, an exp its output, a sin its input",
          "[autograd][memory]") {
  // Each case: x (1 MiB) is made, f(x) recorded, then x dropped. The tape holds x only when the
  // derivative reads it: relu (from the output, as TensorFlow's ReluGrad) and exp (e^x = y) let
  // it go; sin (cos x) keeps it.
  const auto held_after_drop = [](Tensor (*f)(const Tensor&)) {
    Variable w(random::uniform({256, 1024}, -1.0, 1.0));
    GradientTape tape;
    Tensor y;
    std::int64_t with_x = 0;
    {
      const Tensor x = w.value() * 2.0;
      y = f(x);
      with_x = static_cast<std::int64_t>(config::host_memory_stats().allocated_bytes);
    }
    const std::int64_t freed = with_x - static_cast<std::int64_t>(config::host_memory_stats().allocated_bytes);
    // The gradients stay right either way: d relu = (x > 0), d exp = e^x, d sin = cos x (x = 2w, times 2).
    const Tensor g = tape.gradient(reduce_sum(y), w);
    const Tensor x = w.value() * 2.0;
    const Tensor expected = f == static_cast<Tensor (*)(const Tensor&)>(relu) ? cast(x > 0.0, DType::float32) * 2.0
                            : f == static_cast<Tensor (*)(const Tensor&)>(exp) ? exp(x) * 2.0
                                                                                : cos(x) * 2.0;
    CHECK(reduce_max(abs(g - expected)).item<double>() < 1e-5);
    return freed;
  };
  const std::int64_t mib = 256 * 1024 * 4;
  CHECK(held_after_drop(relu) >= mib);
  CHECK(held_after_drop(exp) >= mib);
  CHECK(held_after_drop(sin) == 0);
}

TEST_CASE("an observer hears of each source's gradient as soon as no node left adds to it", "[autograd][observer]") {
  // z = sum(tanh(x * w1) * w2) + sum(w1 * w1), recorded as nodes 0 x*w1, 1 tanh, 2 *w2, 3 sum,
  // 4 w1*w1, 5 sum, 6 add. The reverse pass runs 6..0: w2 is final after node 2, w1 only after
  // node 0 (its first reader), and `unused` (read by no node) before any node runs.
  Variable w1(f64({0.5, -1.0}, {2}), "w1"), w2(f64({2.0, 3.0}, {2}), "w2"), unused(f64({1.0}, {1}), "unused");
  const Tensor x = f64({1.0, 2.0}, {2});
  std::vector<std::string> log;
  std::vector<Tensor> heard(3);
  keel::detail::GradientObserver observer{[&](std::size_t i, const Tensor& g) {
                                            log.push_back("ready " + std::to_string(i));
                                            heard[i] = g;
                                          },
                                          [&] { log.push_back("node"); }};
  GradientTape tape;
  const Tensor first = reduce_sum(tanh(x * w1.value()) * w2.value());  // statements: in this order
  const Tensor second = reduce_sum(w1.value() * w1.value());
  const Tensor z = first + second;
  std::vector<Tensor> grads;
  {
    keel::detail::GradientObserverScope watch(&observer);
    grads = tape.gradient(z, std::vector<Variable*>{&w1, &w2, &unused});
  }
  // "node": before each node runs.
  const std::vector<std::string> expected{"ready 2", "node", "node", "node",    "node",
                                          "node",    "ready 1", "node", "node", "ready 0"};
  CHECK(log == expected);
  // What the observer heard is what gradient() returns: d/dw1 = x (1 - tanh^2(x w1)) w2 + 2 w1,
  // d/dw2 = tanh(x w1); `unused` is unconnected (undefined, as TensorFlow's None).
  for (std::size_t i = 0; i < 2; ++i) CHECK(dv(heard[i]) == dv(grads[i]));
  CHECK_FALSE(heard[2].defined());
  CHECK_FALSE(grads[2].defined());
  const double t0 = std::tanh(0.5), t1 = std::tanh(-2.0);
  CHECK(dv(grads[0])[0] == Approx(1.0 * (1 - t0 * t0) * 2.0 + 1.0));
  CHECK(dv(grads[0])[1] == Approx(2.0 * (1 - t1 * t1) * 3.0 - 2.0));
  CHECK(dv(grads[1]) == D{t0, t1});
  // Outside the scope nobody listens.
  log.clear();
  GradientTape tape3;
  const Tensor v = reduce_sum(w2.value() * w2.value());
  tape3.gradient(v, w2);
  CHECK(log.empty());
}
