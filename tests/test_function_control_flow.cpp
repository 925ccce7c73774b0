// keel::cond and keel::while_loop: eagerly, traced (both branches in one graph), and under a
// tape (one graph: a cond of the branches' gradients; a loop taking each iteration's backward
// over the values the forward kept; unrolled per trip count under nested tapes).
#include <cmath>
#include <functional>
#include <utility>

#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "gradcheck.hpp"

using namespace keel;

namespace {

// d sum(f(x)) / dx under an inner tape, and the gradient of its sum under an outer one.
std::pair<Tensor, Tensor> first_and_second(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(reduce_sum(f(x)), x);
  }
  return {g, outer.gradient(reduce_sum(g), x)};
}

}  // namespace

TEST_CASE("cond: eagerly one branch runs; traced, each call picks its branch", "[function][control_flow]") {
  auto branchy = [](const Tensor& x) {
    return keel::cond(reduce_sum(x) > 0.0, [&] { return x * 2.0; }, [&] { return -x + 100.0; });
  };
  CHECK(branchy(constant(3.0)).item<float>() == 6.0f);
  CHECK(branchy(constant(-3.0)).item<float>() == 103.0f);
  auto f = keel::function(branchy);
  CHECK(f(constant(3.0)).item<float>() == 6.0f);     // traced with the then branch taken
  CHECK(f(constant(-3.0)).item<float>() == 103.0f);  // the else branch, from the graph
  CHECK(f(constant(5.0)).item<float>() == 10.0f);
  CHECK(f.trace_count() == 1);
  bool has_if = false;
  for (const auto& op : f.concrete_graph(constant(1.0)).operations()) has_if = has_if || op.type == "If";
  CHECK(has_if);
}

TEST_CASE("cond: the branch not taken while tracing has no effects until a call takes it", "[function][control_flow]") {
  Variable hits(constant(0.0), "hits");
  auto f = keel::function([&](const Tensor& x) {
    return keel::cond(x > 0.0, [&] { return x + 1.0; }, [&] {
      hits.assign_add(constant(1.0));
      return x - 1.0;
    });
  });
  CHECK(f(constant(1.0)).item<float>() == 2.0f);
  CHECK(hits.value().item<float>() == 0.0f);  // traced, not run
  CHECK(f(constant(-1.0)).item<float>() == -2.0f);
  CHECK(hits.value().item<float>() == 1.0f);
  CHECK_THROWS_AS(keel::cond(ones({2}), [] { return constant(1.0); }, [] { return constant(2.0); }), ShapeError);
  auto mismatched = keel::function([](const Tensor& x) {
    return keel::cond(x > 0.0, [&] { return x; }, [&] { return concat({x, x}, 0); });
  });
  CHECK_THROWS_AS(mismatched(ones({1})), ValueError);
}

TEST_CASE("while_loop: eager and traced loops run as many iterations as the data says", "[function][control_flow]") {
  // Halvings until below 1: a data-dependent count (6: 6 3 1.5 0.75, three).
  auto steps = [](const Tensor& n0) {
    const auto out = keel::while_loop([](const std::vector<Tensor>& v) { return v[0] >= 1.0; },
                                      [](const std::vector<Tensor>& v) {
                                        return std::vector<Tensor>{v[0] / 2.0, v[1] + 1.0};
                                      },
                                      {n0, zeros_like(n0)});
    return out[1];
  };
  CHECK(steps(constant(6.0, DType::float64)).item<double>() == 3.0);
  auto f = keel::function(steps);
  CHECK(f(constant(6.0, DType::float64)).item<double>() == 3.0);
  CHECK(f(constant(100.0, DType::float64)).item<double>() == 7.0);  // 100 ... 1.5625 -> 0.78
  CHECK(f(constant(0.5, DType::float64)).item<double>() == 0.0);
  CHECK(f.trace_count() == 1);
  // A loop traced without running its body still runs it when a call needs it.
  auto g = keel::function(steps);
  CHECK(g(constant(0.5, DType::float64)).item<double>() == 0.0);
  CHECK(g(constant(6.0, DType::float64)).item<double>() == 3.0);
  // maximum_iterations caps the count, eagerly and traced.
  auto capped = [](const Tensor& x) {
    return keel::while_loop([](const std::vector<Tensor>&) { return constant(1.0, DType::bool_); },
                            [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + 1.0}; }, {x}, 5)[0];
  };
  CHECK(capped(constant(0.0)).item<float>() == 5.0f);
  auto h = keel::function(capped);
  CHECK(h(constant(0.0)).item<float>() == 5.0f);
  CHECK(h(constant(10.0)).item<float>() == 15.0f);
}

TEST_CASE("eager cond and while_loop carry gradients through the path taken", "[function][control_flow]") {
  const Tensor x = constant(3.0, DType::float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = keel::cond(x > 0.0, [&] { return x * x; }, [&] { return -x; });
  // d(x^2)/dx = 2x = 6
  CHECK(tape.gradient(y, x).item<double>() == 6.0);
  GradientTape tape2;
  tape2.watch(x);
  const auto out = keel::while_loop([](const std::vector<Tensor>& v) { return v[1] < 3.0; },
                                    [](const std::vector<Tensor>& v) {
                                      return std::vector<Tensor>{v[0] * 2.0, v[1] + 1.0};
                                    },
                                    {x, constant(0.0, DType::float64)});
  // three doublings: y = 8x, dy/dx = 8
  CHECK(tape2.gradient(out[0], x).item<double>() == 8.0);
}

TEST_CASE("traced cond and while_loop under a tape are one graph with eager's gradients at every trip count",
          "[function][control_flow]") {
  int traces_run = 0;
  // cond on the sign of sum(x); a loop doubling x until its sum passes 10.
  auto f = keel::function([&](const Tensor& x) {
    ++traces_run;
    const Tensor y = keel::cond(reduce_sum(x) > 0.0, [&] { return x * x; }, [&] { return sin(x); });
    return keel::while_loop([](const std::vector<Tensor>& v) { return reduce_sum(v[0]) < 10.0; },
                            [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] * 2.0}; }, {y}, 8)[0];
  });
  const auto eager = [](const Tensor& x) {
    Tensor y = reduce_sum(x).item<double>() > 0 ? x * x : sin(x);
    for (int i = 0; i < 8 && reduce_sum(y).item<double>() < 10.0; ++i) y = y * 2.0;
    return y;
  };
  const auto grad = [](const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = fn(x);
    return std::make_pair(y, tape.gradient(reduce_sum(y), x));
  };
  const Tensor pos = constant<double>({1.0, 0.5}, Shape{2}), neg = constant<double>({-1.0, -0.5}, Shape{2});
  const Tensor pos2 = constant<double>({2.0, 1.5}, Shape{2});  // another trip count of the loop
  for (const Tensor& x : {pos, neg, pos, pos2, neg, pos2}) {
    const auto [ty, tg] = grad([&](const Tensor& v) { return f(v); }, x);
    const auto [ey, eg] = grad(eager, x);
    CHECK(ty.to_vector<double>() == ey.to_vector<double>());
    CHECK(tg.to_vector<double>() == eg.to_vector<double>());
  }
  // One trace for both branches and every trip count (3 doublings, 8, 1).
  CHECK(f.trace_count() == 1);
  CHECK(traces_run == 1);
  // Without a tape another plan holds both paths (one more trace, for the plain call).
  CHECK(f(neg).to_vector<double>() == eager(neg).to_vector<double>());
  CHECK(f(pos).to_vector<double>() == eager(pos).to_vector<double>());
  CHECK(f.trace_count() == 2);
}

TEST_CASE("a whole training step with a cond traces once and takes each call's branch", "[function][control_flow]") {
  // The tape inside f records through keel::cond (a clipped update when the gradient is large).
  Variable w(constant<double>({0.5, -0.25}, Shape{2}), "w");
  auto step = keel::function([&](const Tensor& x) {
    Tensor g;
    {
      GradientTape tape;
      const Tensor loss = keel::cond(reduce_sum(x * w.value()) > 0.0, [&] { return reduce_sum(square(x * w.value())); },
                                     [&] { return reduce_sum(x * w.value()); });
      g = tape.gradient(loss, w);
    }
    w.assign_sub(g * 0.1);
    return g;
  });
  Variable we(constant<double>({0.5, -0.25}, Shape{2}), "we");
  const auto eager_step = [&](const Tensor& x) {
    GradientTape tape;
    const Tensor s = reduce_sum(x * we.value());
    const Tensor loss = s.item<double>() > 0 ? reduce_sum(square(x * we.value())) : s;
    const Tensor g = tape.gradient(loss, we);
    we.assign_sub(g * 0.1);
    return g;
  };
  for (const auto& xv : std::vector<std::vector<double>>{{1, 1}, {-3, 1}, {1, 1}, {-3, 1}}) {
    const Tensor x = constant<double>(xv, Shape{2});
    CHECK(step(x).to_vector<double>() == eager_step(x).to_vector<double>());
    CHECK(w.value().to_vector<double>() == we.value().to_vector<double>());
  }
  CHECK(step.trace_count() == 1);
}

TEST_CASE("variable writes around and inside traced control flow under a tape happen once per call",
          "[function][control_flow]") {
  // The body counts its iterations in a variable its gradient does not read.
  Variable steps(zeros(Shape{}, DType::float64), "steps");
  Variable v(zeros(Shape{}, DType::float64), "v");
  auto counted = keel::function([&](const Tensor& x) {
    v.assign_add(ones(Shape{}, DType::float64));
    const Tensor z = keel::cond(reduce_sum(x) > 0.0, [&] { return x * 2.0; }, [&] { return -x; });
    return keel::while_loop([](const std::vector<Tensor>& s) { return reduce_sum(s[0]) < 10.0; },
                            [&](const std::vector<Tensor>& s) {
                              steps.assign_add(ones(Shape{}, DType::float64));
                              return std::vector<Tensor>{s[0] * 3.0};
                            }, {z})[0];
  });
  // x = 1: z = 2, 6, 18 (two iterations); x = -4: z = 4, 12 (one); x = 0.25: z = 0.5 ... 13.5 (three).
  for (const auto& [a, n] : std::vector<std::pair<double, int>>{{1.0, 2}, {-4.0, 1}, {0.25, 3}, {1.0, 2}}) {
    const Tensor x = constant<double>({a}, Shape{1});
    GradientTape tape;
    tape.watch(x);
    const double s0 = steps.value().item<double>(), v0 = v.value().item<double>();
    const Tensor y = counted(x);
    CHECK(steps.value().item<double>() == s0 + n);
    CHECK(v.value().item<double>() == v0 + 1);
    // dy/dx = (a > 0 ? 2 : -1) * 3^n
    CHECK(tape.gradient(reduce_sum(y), x).item<double>() == (a > 0 ? 2.0 : -1.0) * std::pow(3.0, n));
  }
  CHECK(counted.trace_count() == 1);
  // A body whose gradient reads a variable it writes is refused: each iteration's backward would
  // read the last value.
  Variable w(ones(Shape{1}, DType::float64), "w");
  auto rewrites = keel::function([&](const Tensor& x) {
    return keel::while_loop([](const std::vector<Tensor>& s) { return reduce_sum(s[0]) < 10.0; },
                            [&](const std::vector<Tensor>& s) {
                              const Tensor next = s[0] * w.value();
                              w.assign(w.value() + 1.0);
                              return std::vector<Tensor>{next};
                            }, {x})[0];
  });
  const Tensor x = constant<double>({1.0}, Shape{1});
  {
    GradientTape tape;
    tape.watch(x);
    CHECK_THROWS_WITH(rewrites(x), Catch::Contains("while_loop") && Catch::Contains("writes a variable"));
  }
  // Under nested tapes inside f the loop is unrolled, a guard per test: a variable written
  // before it is refused by name (a call with another trip count would write it twice).
  auto nested = keel::function([&](const Tensor& y) {
    GradientTape outer, inner;
    outer.watch(y);
    inner.watch(y);
    v.assign_add(ones(Shape{}, DType::float64));
    const Tensor z = keel::while_loop([](const std::vector<Tensor>& s) { return reduce_sum(s[0]) < 10.0; },
                                      [](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] * 3.0}; },
                                      {y})[0];
    return inner.gradient(reduce_sum(z), y);
  });
  CHECK_THROWS_WITH(nested(x), Catch::Contains("written before keel::while_loop"));
}

TEST_CASE("a traced cond under a tape is one graph whose gradient takes each call's branch",
          "[function][control_flow]") {
  int traces_run = 0;
  Variable w(constant<double>({0.5, -2.0, 1.5}, Shape{3}), "w");
  // The then branch saves a tensor it made (sin x) for its backward and reads w; the else
  // branch reads neither.
  const auto body = [&](const Tensor& x) {
    return keel::cond(reduce_sum(x) > 0.0, [&] {
      const Tensor s = sin(x);
      return s * s * w.value();
    }, [&] { return exp(x) * 3.0; });
  };
  auto f = keel::function([&](const Tensor& x) {
    ++traces_run;
    return body(x);
  });
  const Tensor pos = constant<double>({1.0, 0.5, -0.25}, Shape{3});
  const Tensor neg = constant<double>({-1.0, 0.5, -0.75}, Shape{3});
  for (const Tensor& x : {pos, neg, pos, neg}) {
    std::vector<Tensor> got, want;
    for (bool traced : {true, false}) {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = traced ? f(x) : body(x);
      std::vector<Tensor> g = tape.gradient(reduce_sum(y), std::vector<Tensor>{x, w.value()});
      g.insert(g.begin(), y);
      (traced ? got : want) = g;
    }
    CHECK(got[0].to_vector<double>() == want[0].to_vector<double>());
    CHECK(got[1].to_vector<double>() == want[1].to_vector<double>());
    // w unread on the else path: eagerly no gradient, in the graph zeros (as TensorFlow's cond
    // gradient gives the branch that does not read it).
    if (want[2].defined()) {
      CHECK(got[2].to_vector<double>() == want[2].to_vector<double>());
    } else {
      CHECK(got[2].to_vector<double>() == std::vector<double>(3, 0.0));
    }
  }
  CHECK(f.trace_count() == 1);
  CHECK(traces_run == 1);
  // A branch returning its input as it is, the other a constant: gradient ones, then zeros.
  auto pass = keel::function([](const Tensor& x) {
    return keel::cond(reduce_sum(x) > 0.0, [&] { return x; }, [&] { return full(Shape{3}, 2.0, DType::float64); });
  });
  for (const Tensor& x : {pos, neg}) {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(pass(x)), x);
    CHECK(g.to_vector<double>() == std::vector<double>(3, reduce_sum(x).item<double>() > 0 ? 1.0 : 0.0));
  }
  CHECK(pass.trace_count() == 1);
  // Against finite differences of the traced function itself, on both branches.
  for (const Tensor& x : {pos, neg})
    keel_test::check_gradients([&](const std::vector<Tensor>& xs) { return f(xs[0]); }, {x});
}

TEST_CASE("second-order gradients through a traced cond take each call's branch", "[function][control_flow]") {
  // then: sin(x)^2, whose first gradient 2 sin x cos x reads the branch's own sin x, so the
  // second order flows back through it: d2/dx2 = 2 cos 2x. else: x^3, d2/dx2 = 6x.
  auto f = keel::function([](const Tensor& x) {
    return keel::cond(reduce_sum(x) > 0.0, [&] {
      const Tensor s = sin(x);
      return s * s;
    }, [&] { return x * x * x; });
  });
  const Tensor pos = constant<double>({1.0, 0.5}, Shape{2}), neg = constant<double>({-1.0, 0.25}, Shape{2});
  for (const Tensor& x : {pos, neg, pos, neg}) {
    const auto [g, h] = first_and_second([&](const Tensor& v) { return f(v); }, x);
    const std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>(), hs = h.to_vector<double>();
    const bool then = reduce_sum(x).item<double>() > 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CHECK(gs[i] == Approx(then ? std::sin(2 * xs[i]) : 3 * xs[i] * xs[i]).epsilon(1e-12));
      CHECK(hs[i] == Approx(then ? 2 * std::cos(2 * xs[i]) : 6 * xs[i]).epsilon(1e-12));
    }
  }
  CHECK(f.trace_count() == 1);
}

TEST_CASE("a traced while_loop under a tape is one graph whose gradient runs each iteration's backward",
          "[function][control_flow]") {
  // State (a, b, i): a <- sin(a) * b + W a (its backward reads the iteration's sin a, a and b),
  // b <- a (the old a: the gradients cross between variables), i <- i + 1, while i < n and
  // sum(a) < 50; W a variable, c a captured tensor returned as it is when i reaches 2.
  Variable w(constant<double>({0.5, -0.25, 0.75, 1.0}, Shape{2, 2}), "w");
  const Tensor c = constant<double>({0.5, 2.0}, Shape{2});
  const auto body = [&](const std::vector<Tensor>& s) {
    const Tensor a = sin(s[0]) * s[1] + reshape(matmul(reshape(s[0], {1, 2}), w.value()), {2});
    return std::vector<Tensor>{a, s[0], s[2] + 1.0, keel::cond(s[2] >= 2.0, [&] { return c; }, [&] { return s[3]; })};
  };
  const auto loop = [&](const Tensor& x, const Tensor& n, int cap) {
    const std::vector<Tensor> out = keel::while_loop(
        [&](const std::vector<Tensor>& s) { return logical_and(s[2] < n, reduce_sum(s[0]) < 50.0); }, body,
        {x, x * 0.5, constant(0.0, DType::float64), x * 3.0}, cap);
    return out[0] * out[3] + out[1];
  };
  auto f = keel::function([&](const Tensor& x, const Tensor& n) { return loop(x, n, 6); });
  int checked = 0;
  for (double trips : {3.0, 0.0, 1.0, 5.0, 2.0, 9.0}) {
    const Tensor x = constant<double>({0.75, -0.5}, Shape{2}), n = constant(trips, DType::float64);
    std::vector<Tensor> got, want;
    for (bool traced : {true, false}) {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = traced ? f(x, n) : loop(x, n, 6);
      std::vector<Tensor> g = tape.gradient(reduce_sum(y), std::vector<Tensor>{x, w.value()});
      g.insert(g.begin(), y);
      (traced ? got : want) = g;
    }
    for (std::size_t k = 0; k < 3; ++k) {
      if (want[k].defined()) {
        CHECK(got[k].to_vector<double>() == want[k].to_vector<double>());
        ++checked;
      } else {  // w with no iteration run: eagerly no gradient, in the graph zeros (as TensorFlow's)
        CHECK(got[k].to_vector<double>() == std::vector<double>(4, 0.0));
      }
    }
  }
  CHECK(checked == 17);
  CHECK(f.trace_count() == 1);
  // Finite differences of the traced function, at 0, 2 and 6 (the cap) iterations.
  for (double trips : {0.0, 2.0, 9.0})
    keel_test::check_gradients([&](const std::vector<Tensor>& xs) { return f(xs[0], constant(trips, DType::float64)); },
                               {constant<double>({0.75, -0.5}, Shape{2})});
}

TEST_CASE("a training step traced with a data-dependent loop trains as the eager step does",
          "[function][control_flow]") {
  // h <- tanh(h W) for n steps (n an argument): loss sum(h^2); W -= 0.1 dW.
  const auto make_step = [](Variable& w) {
    return [&w](const Tensor& h0, const Tensor& n) {
      GradientTape tape;
      const Tensor h = keel::while_loop([&](const std::vector<Tensor>& s) { return s[1] < n; },
                                        [&](const std::vector<Tensor>& s) {
                                          return std::vector<Tensor>{tanh(matmul(s[0], w.value())), s[1] + 1.0};
                                        },
                                        {h0, constant(0.0, DType::float64)})[0];
      const Tensor loss = reduce_sum(square(h));
      const Tensor g = tape.gradient(loss, w);
      if (g.defined()) w.assign_sub(g * 0.1);  // eagerly none with no step run; traced, zeros
      return loss;
    };
  };
  const Tensor w0 = random::normal({3, 3}, 0, 0.5, DType::float64);
  Variable wt(w0, "wt"), we(w0, "we");
  auto traced = keel::function(make_step(wt));
  auto eager = make_step(we);
  const Tensor h0 = random::normal({2, 3}, 0, 1, DType::float64);
  for (double n : {3.0, 1.0, 0.0, 4.0, 3.0}) {
    const Tensor nt = constant(n, DType::float64);
    CHECK(traced(h0, nt).item<double>() == eager(h0, nt).item<double>());
    CHECK(wt.value().to_vector<double>() == we.value().to_vector<double>());
  }
  CHECK(traced.trace_count() == 1);
}

TEST_CASE("second-order gradients through a traced while_loop match eager ones", "[function][control_flow]") {
  // x <- x * x twice: y = x^4, y' = 4x^3, y'' = 12x^2 (the gradient's own gradient runs the
  // loop unrolled under both tapes).
  auto f = keel::function([](const Tensor& x) {
    return keel::while_loop([](const std::vector<Tensor>& s) { return s[1] < 2.0; },
                            [](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] * s[0], s[1] + 1.0}; },
                            {x, constant(0.0, DType::float64)})[0];
  });
  for (double a : {1.5, -0.5, 1.5}) {
    const auto [g, h] = first_and_second([&](const Tensor& v) { return f(v); }, constant<double>({a}, Shape{1}));
    CHECK(g.item<double>() == Approx(4 * a * a * a).epsilon(1e-12));
    CHECK(h.item<double>() == Approx(12 * a * a).epsilon(1e-12));
  }
  CHECK(f.trace_count() == 1);
}

TEST_CASE("a traced loop under a tape gives each of two loop variables holding one tensor its gradient",
          "[function][control_flow]") {
  // (a, b) <- (a * b, b + 1) from (x, x), twice: a = x * x * (x + 1), da/dx = 3x^2 + 2x.
  auto f = keel::function([](const Tensor& x) {
    return keel::while_loop([](const std::vector<Tensor>& s) { return s[2] < 2.0; },
                            [](const std::vector<Tensor>& s) {
                              return std::vector<Tensor>{s[0] * s[1], s[1] + 1.0, s[2] + 1.0};
                            },
                            {x, x, constant(0.0, DType::float64)})[0];
  });
  for (double a : {0.5, 2.0}) {
    const Tensor x = constant<double>({a}, Shape{1});
    GradientTape tape;
    tape.watch(x);
    CHECK(tape.gradient(reduce_sum(f(x)), x).item<double>() == Approx(3 * a * a + 2 * a).epsilon(1e-12));
  }
  // A loop over what no tape watches (a constant made in f) carries no gradient: y = x * 2^k
  // with k doublings of 1.5 until past 10 (three: 12), dy/dx = 12.
  auto g = keel::function([](const Tensor& x) {
    const Tensor k = keel::while_loop([](const std::vector<Tensor>& s) { return reduce_sum(s[0]) < 10.0; },
                                      [](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] * 2.0}; },
                                      {full(Shape{1}, 1.5, DType::float64)})[0];
    return x * k;
  });
  for (double a : {1.0, -3.0}) {
    const Tensor x = constant<double>({a}, Shape{1});
    GradientTape tape;
    tape.watch(x);
    const Tensor y = g(x);
    CHECK(y.item<double>() == 12.0 * a);
    CHECK(tape.gradient(reduce_sum(y), x).item<double>() == 12.0);
  }
  CHECK(g.trace_count() == 1);
}
