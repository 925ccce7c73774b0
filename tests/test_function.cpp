// keel::function: tracing once per signature, replay, TensorFlow's retracing rules, variables
// read at call time, side effects only while tracing, random ops, errors, the visible graph.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "graph/plan.hpp"

using namespace keel;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Every pass on (what keel::function runs), restored after each test that changes them.
struct PassGuard {
  graph::detail::PassOptions saved = graph::detail::default_pass_options();
  ~PassGuard() { graph::detail::default_pass_options() = saved; }
};

}  // namespace

TEST_CASE("a traced function gives eager's values on the first call and on replays", "[function]") {
  Variable w(random::normal({4, 3}), "w");
  Variable b(random::normal({3}), "b");
  auto eager = [&](const Tensor& x) { return tanh(relu(matmul(x, w) + b) * 2.0 - 1.0); };
  auto f = keel::function(eager);
  for (int call = 0; call < 3; ++call) {
    const Tensor x = random::normal({5, 4});
    const Tensor y = f(x);
    CHECK(y.shape() == Shape({5, 3}));
    CHECK(values(y) == values(eager(x)));  // the same kernels in the same order: bit for bit
  }
  CHECK(f.trace_count() == 1);
}

TEST_CASE("a new shape or dtype traces again; a known one replays", "[function]") {
  int traced = 0;  // C++ code in f runs only while tracing
  auto f = keel::function([&](const Tensor& x) {
    ++traced;
    return x * 3.0 + 1.0;
  });
  f(ones({2, 2}));
  f(ones({2, 2}));
  CHECK(f.trace_count() == 1);
  f(ones({3, 2}));
  CHECK(f.trace_count() == 2);
  f(ones({2, 2}, DType::float64));
  CHECK(f.trace_count() == 3);
  const Tensor y = f(full({2, 2}, 2.0));
  CHECK(f.trace_count() == 3);
  CHECK(traced == 3);
  CHECK(values(y) == std::vector<float>(4, 7.0f));
}

TEST_CASE("captured variables are read at call time, not frozen at trace time", "[function]") {
  Variable v(constant(2.0), "v");
  auto f = keel::function([&](const Tensor& x) { return x * v; });
  CHECK(f(constant(3.0)).item<float>() == 6.0f);
  v.assign(constant(10.0));
  CHECK(f(constant(3.0)).item<float>() == 30.0f);
  CHECK(f.trace_count() == 1);
}

TEST_CASE("variable writes inside a traced function happen on every call, in program order", "[function]") {
  Variable counter(constant(0.0), "counter");
  auto f = keel::function([&](const Tensor& x) {
    counter.assign_add(x);
    const Tensor after_add = counter.value() * 1.0;  // reads the new value
    counter.assign(counter.value() * 2.0);
    return after_add;
  });
  // counter: 0 -> (0 + 1) * 2 = 2 -> (2 + 1) * 2 = 6 -> (6 + 1) * 2 = 14
  CHECK(f(constant(1.0)).item<float>() == 1.0f);
  CHECK(counter.value().item<float>() == 2.0f);
  CHECK(f(constant(1.0)).item<float>() == 3.0f);
  CHECK(f(constant(1.0)).item<float>() == 7.0f);
  CHECK(counter.value().item<float>() == 14.0f);
  CHECK(f.trace_count() == 1);
}

TEST_CASE("results come back as the function returns them: one, several, a vector, none", "[function]") {
  auto pair = keel::function([](const Tensor& a, const Tensor& b) { return std::make_tuple(a + b, a - b); });
  auto [s, d] = pair(constant(5.0), constant(3.0));
  CHECK(s.item<float>() == 8.0f);
  CHECK(d.item<float>() == 2.0f);
  auto [s2, d2] = pair(constant(1.0), constant(1.0));
  CHECK(s2.item<float>() == 2.0f);
  CHECK(d2.item<float>() == 0.0f);

  auto vec = keel::function([](const std::vector<Tensor>& xs) {
    std::vector<Tensor> out;
    for (const auto& x : xs) out.push_back(square(x));
    return out;
  });
  for (int call = 0; call < 2; ++call) {
    const auto out = vec(std::vector<Tensor>{constant(2.0), constant(3.0 + call)});
    REQUIRE(out.size() == 2);
    CHECK(out[0].item<float>() == 4.0f);
    CHECK(out[1].item<float>() == static_cast<float>((3 + call) * (3 + call)));
  }

  Variable total(constant(0.0), "total");
  auto none = keel::function([&](const Tensor& x) { total.assign_add(x); });
  none(constant(2.0));
  none(constant(3.0));
  CHECK(total.value().item<float>() == 5.0f);

  // A result that is an argument, or a view of one, is the caller's data.
  auto same = keel::function([](const Tensor& x) { return reshape(x, {4}); });
  CHECK(values(same(full({2, 2}, 9.0))) == std::vector<float>(4, 9.0f));
  CHECK(values(same(full({2, 2}, 4.0))) == std::vector<float>(4, 4.0f));
}

TEST_CASE("results of one call are not overwritten by the next", "[function]") {
  auto f = keel::function([](const Tensor& x) { return exp(x) + x; });
  const Tensor a = f(constant(0.0));
  const Tensor b = f(constant(1.0));
  const Tensor c = f(constant(2.0));
  CHECK(a.item<float>() == 1.0f);
  CHECK(b.item<float>() == Approx(std::exp(1.0f) + 1.0f));
  CHECK(c.item<float>() == Approx(std::exp(2.0f) + 2.0f));
}

TEST_CASE("strided arguments replay correctly", "[function]") {
  auto f = keel::function([](const Tensor& x) { return x * 2.0; });
  const Tensor m = reshape(arange(6), {2, 3});
  f(transpose(m));  // traced with a strided argument (copied contiguous)
  const Tensor y = f(transpose(m * 10.0));
  CHECK(values(y) == std::vector<float>{0, 60, 20, 80, 40, 100});
}

TEST_CASE("random ops draw fresh numbers on each call, reproducibly under a seed", "[function]") {
  auto f = keel::function([](const Tensor& x) { return x + random::uniform({8}); });
  auto g = keel::function([](const Tensor& x) { return dropout(x, 0.5); });
  random::set_seed(42);
  const auto a1 = values(f(zeros({8})));
  const auto a2 = values(f(zeros({8})));
  const auto d1 = values(g(ones({64})));
  const auto d2 = values(g(ones({64})));
  CHECK(a1 != a2);
  CHECK(d1 != d2);
  // Eager draws from the same seed give the same numbers: the graph reserves as eager does.
  random::set_seed(42);
  CHECK(values(random::uniform({8})) == a1);
  CHECK(values(random::uniform({8})) == a2);
  CHECK(values(dropout(ones({64}), 0.5)) == d1);
  CHECK(values(dropout(ones({64}), 0.5)) == d2);
}

TEST_CASE("a host read of a traced value is an error naming the rule", "[function]") {
  auto f = keel::function([](const Tensor& x) {
    if (reduce_sum(x).item<float>() > 0) return x;
    return -x;
  });
  try {
    f(ones({2}));
    FAIL("no error");
  } catch (const ValueError& e) {
    CHECK_THAT(e.what(), Catch::Contains("keel::function") && Catch::Contains("keel::cond"));
  }
  CHECK(f.trace_count() == 0);
}

TEST_CASE("input_signature: calls must match it, and mismatches name both", "[function]") {
  auto f = keel::function([](const Tensor& x) { return x * 2.0; },
                          {.input_signature = {TensorSpec{Shape({-1, 3}), DType::float32}}, .name = "double_it"});
  CHECK(values(f(ones({2, 3}))) == std::vector<float>(6, 2.0f));
  try {
    f(ones({2, 4}));
    FAIL("no error");
  } catch (const ValueError& e) {
    CHECK_THAT(e.what(), Catch::Contains("double_it") && Catch::Contains("[2,4]") &&
                             Catch::Contains("TensorSpec(shape=[None,3], dtype=float32)"));
  }
  CHECK_THROWS_AS(f(ones({2, 3}, DType::float64)), ValueError);
}

TEST_CASE("errors found while tracing name the op as eager does", "[function]") {
  auto f = keel::function([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  try {
    f(ones({2, 3}), ones({4, 5}));
    FAIL("no error");
  } catch (const ShapeError& e) {
    CHECK_THAT(e.what(), Catch::Contains("matmul"));
  }
  CHECK(f.trace_count() == 0);
  CHECK(f(ones({2, 3}), ones({3, 5})).shape() == Shape({2, 5}));
}

TEST_CASE("a nested traced function is inlined into the outer graph", "[function]") {
  auto inner = keel::function([](const Tensor& x) { return x * 2.0; });
  auto outer = keel::function([&](const Tensor& x) { return inner(x) + 1.0; });
  CHECK(outer(constant(3.0)).item<float>() == 7.0f);
  CHECK(outer(constant(4.0)).item<float>() == 9.0f);
  CHECK(inner.trace_count() == 0);
  CHECK(outer.trace_count() == 1);
}

TEST_CASE("under a recording tape a traced function gives eager's gradients", "[function]") {
  Variable w(constant(std::vector<double>{1.0, 2.0}, {2}, DType::float64), "w");
  auto f = keel::function([&](const Tensor& x) { return reduce_sum(square(x * w)); });
  const Tensor x = constant(std::vector<double>{3.0, -1.0}, {2}, DType::float64);
  f(x);  // traced
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  const auto g = tape.gradient(y, {Tensor(x), w.value()});
  // d/dx sum((x w)^2) = 2 x w^2; d/dw = 2 w x^2
  CHECK(g[0].to_vector<double>() == std::vector<double>{6.0, -8.0});
  CHECK(g[1].to_vector<double>() == std::vector<double>{18.0, 4.0});
}

TEST_CASE("the visible graph: operations with TensorFlow's names, shapes, Graphviz", "[function]") {
  Variable w(random::normal({4, 3}), "w");
  auto f = keel::function([&](const Tensor& x) { return relu(matmul(x, w)); }, {.name = "dense"});
  const graph::Graph& g = f.concrete_graph(ones({2, 4}));
  CHECK(f.trace_count() == 1);
  const auto ops = g.operations();
  REQUIRE(ops.size() == g.num_nodes());
  bool has_matmul = false, has_relu = false;
  for (const auto& op : ops) {
    if (op.type == "BatchMatMulV2") {
      has_matmul = true;
      CHECK(op.input_shapes == std::vector<Shape>{Shape({2, 4}), Shape({4, 3})});
      CHECK(op.output_shapes == std::vector<Shape>{Shape({2, 3})});
    }
    has_relu = has_relu || op.type == "Relu";
  }
  CHECK(has_matmul);
  CHECK(has_relu);
  const std::string dot = g.to_dot();
  CHECK_THAT(dot, Catch::StartsWith("digraph \"dense\"") && Catch::Contains("Placeholder 0") &&
                      Catch::Contains("Captured") && Catch::Contains("BatchMatMulV2") && Catch::Contains("Result 0"));
  // concrete_graph of a traced signature does not trace again.
  f.concrete_graph(ones({2, 4}));
  CHECK(f.trace_count() == 1);
}

TEST_CASE("dead-code elimination drops work no result or variable needs", "[function]") {
  PassGuard guard;
  auto body = [](const Tensor& x) {
    const Tensor unused = exp(x) * 5.0;  // computed eagerly while tracing, dead in the graph
    (void)unused;
    return x + 1.0;
  };
  graph::detail::default_pass_options().fuse_elementwise = false;  // count the kernels one by one
  graph::detail::default_pass_options().eliminate_dead_code = false;
  auto kept = keel::function(body);
  const std::size_t all = kept.concrete_graph(ones({3})).num_nodes();
  graph::detail::default_pass_options().eliminate_dead_code = true;
  auto pruned = keel::function(body);
  const graph::Graph& g = pruned.concrete_graph(ones({3}));
  CHECK(g.num_nodes() < all);
  for (const auto& op : g.operations()) CHECK(op.type != "Exp");
  CHECK(values(pruned(full({3}, 2.0))) == std::vector<float>(3, 3.0f));
}

TEST_CASE("common-subexpression elimination computes a repeated call once", "[function]") {
  PassGuard guard;
  graph::detail::default_pass_options().fuse_elementwise = false;  // count the kernels one by one
  Variable w(random::normal({3, 2}), "w");
  // exp(x) and x @ w twice each, and the same scalar multiple of them (each `* 2.0` makes its
  // own constant, equal in value).
  auto body = [&](const Tensor& x) {
    const Tensor a = exp(x) * 2.0 + reduce_sum(matmul(x, w));
    const Tensor b = exp(x) * 2.0 - reduce_sum(matmul(x, w));
    return a * b;
  };
  auto count = [](const graph::Graph& g, const std::string& type) {
    std::size_t n = 0;
    for (const auto& op : g.operations()) n += op.type == type;
    return n;
  };
  graph::detail::default_pass_options().eliminate_common_subexpressions = false;
  auto plain = keel::function(body);
  const Tensor x = random::normal({4, 3});
  const graph::Graph& all = plain.concrete_graph(x);
  CHECK(count(all, "Exp") == 2);
  CHECK(count(all, "BatchMatMulV2") == 2);
  graph::detail::default_pass_options().eliminate_common_subexpressions = true;
  auto merged = keel::function(body);
  const graph::Graph& g = merged.concrete_graph(x);
  CHECK(count(g, "Exp") == 1);
  CHECK(count(g, "BatchMatMulV2") == 1);
  CHECK(g.num_nodes() <= all.num_nodes() - 3);  // one Exp, one MatMul, one Mul by 2 fewer
  for (int call = 0; call < 3; ++call) {
    const Tensor xi = random::normal({4, 3});
    CHECK(values(merged(xi)) == values(body(xi)));
    w.assign(random::normal({3, 2}));  // read at call time by the one MatMul left
  }
}

TEST_CASE("common-subexpression elimination keeps a repeat whose input was written in between", "[function]") {
  PassGuard guard;
  graph::detail::default_pass_options().fuse_elementwise = false;
  Variable v(constant<float>({1, 2}), "v");
  auto f = keel::function([&](const Tensor& x) {
    const Tensor before = v.value() * x;
    v.assign_add(constant<float>({10, 10}));
    const Tensor after = v.value() * x;  // the same kernel on the same view, of new values
    return before + after;
  });
  // v = (1, 2): before = (1, 2) * 3, then v = (11, 12): after = (33, 36).
  CHECK(values(f(full({2}, 3.0))) == std::vector<float>{36, 42});
  // The replay starts from v = (11, 12): before (33, 36), then v = (21, 22): after (63, 66).
  CHECK(values(f(full({2}, 3.0))) == std::vector<float>{96, 102});
  std::size_t muls = 0;
  for (const auto& op : f.concrete_graph(full({2}, 3.0)).operations()) muls += op.type == "Mul";
  CHECK(muls == 2);
}

TEST_CASE("memory planning shares buffers between values that are not alive together", "[function]") {
  PassGuard guard;
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 8; ++i) y = sqrt(y + 1.0);
    return y;
  };
  graph::detail::default_pass_options().fuse_elementwise = false;
  auto f = keel::function(chain);
  const Tensor x = random::uniform({1024});
  const graph::Graph& g = f.concrete_graph(x);
  CHECK(g.unplanned_bytes() >= 15 * 4096);  // 15 intermediates of 4 KiB: 8 adds, 7 roots
  // Each add and root writes over its input, which dies there: one place, whatever the length.
  CHECK(g.planned_bytes() == 4096);
  CHECK(values(f(x)) == values(chain(x)));
}

TEST_CASE("memory planning writes in place only where each element is read before it is written", "[function]") {
  PassGuard guard;
  graph::detail::default_pass_options().fuse_elementwise = false;
  // a dies at the add that reads it both as is and transposed: that add must not write over it.
  auto twisted = [](const Tensor& x) {
    const Tensor a = x + 1.0;
    return a + transpose(a);
  };
  auto f = keel::function(twisted);
  const Tensor x = random::uniform({64, 64});
  CHECK(values(f(x)) == values(twisted(x)));
  CHECK(values(f(x)) == values(twisted(x)));  // a replay, on the planned memory
  // Values of several sizes alive in overlapping spans share one arena without overlapping: the
  // results equal eager's, and the arena is smaller than a buffer per value.
  auto sizes = [](const Tensor& x) {
    const Tensor a = x * 2.0;                  // 4 KiB
    const Tensor b = concat({a, a}, 0);        // 8 KiB
    const Tensor c = b * 3.0 + reduce_sum(a);  // 8 KiB
    const Tensor d = exp(slice(c, {0}, {1024}) - a);
    return reduce_sum(d * a) + reduce_sum(c);
  };
  auto h = keel::function(sizes);
  const Tensor y = random::uniform({1024});
  CHECK(values(h(y)) == values(sizes(y)));
  CHECK(values(h(y)) == values(sizes(y)));
  const graph::Graph& g = h.concrete_graph(y);
  CHECK(g.planned_bytes() < g.unplanned_bytes());
}
