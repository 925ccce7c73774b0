// Every op family traced against eager: a traced function computing a loss and its gradients
// with a GradientTape inside gives eager's numbers, on the tracing call and on replays with new
// inputs (the forward and the backward kernels are both in the graph).
#include <catch2/catch.hpp>

#include <array>
#include <functional>
#include <string>
#include <vector>

#include <keel/keel.hpp>

#include "gradcheck.hpp"
#include "graph/plan.hpp"
#include "cpu/elementwise_program.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

using Body = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// The loss sum(body(inputs) * probe) and its gradients with respect to `vars`.
std::vector<Tensor> loss_and_grads(const Body& body, const std::vector<Variable*>& vars, const std::vector<Tensor>& inputs) {
  GradientTape tape;
  const Tensor y = body(inputs);
  const Tensor probe = reshape(cos(arange(static_cast<double>(y.size()))), y.shape());  // weighs each output
  const Tensor loss = reduce_sum(y * cast(probe, y.dtype()));
  std::vector<Tensor> sources;
  for (Variable* v : vars) sources.push_back(v->value());
  std::vector<Tensor> out{loss};
  for (const Tensor& g : tape.gradient(loss, sources)) out.push_back(g);
  return out;
}

void check_close(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).epsilon(1e-6).margin(1e-12));
}

// Calls the traced version with three sets of inputs (trace, then two replays).
void check_traced(const Body& body, const std::vector<Variable*>& vars,
                  const std::function<std::vector<Tensor>()>& make_inputs) {
  auto traced = keel::function([&](const std::vector<Tensor>& in) { return loss_and_grads(body, vars, in); });
  for (int call = 0; call < 3; ++call) {
    const auto inputs = make_inputs();
    const auto got = traced(inputs);
    const auto want = loss_and_grads(body, vars, inputs);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i]);
  }
  CHECK(traced.trace_count() == 1);
}

}  // namespace

TEST_CASE("traced elementwise, reductions and matmul match eager", "[function]") {
  Variable w(random::normal({6, 4}), "w");
  Variable b(random::normal({4}), "b");
  check_traced(
      [&](const std::vector<Tensor>& in) {
        const Tensor h = matmul(in[0], w) + b;
        const Tensor act = sigmoid(h) * tanh(h) + elu(h) - leaky_relu(h, 0.2) + square(softplus(h));
        return reduce_max(act, {1}) + reduce_mean(exp(-abs(act)), {1}) + reduce_logsumexp(act, {1});
      },
      {&w, &b}, [] { return std::vector<Tensor>{random::normal({5, 6})}; });
}

TEST_CASE("traced convolution, pooling, batch norm and resizing match eager", "[function]") {
  Variable k1(random::normal({3, 3, 2, 4}) * 0.3, "k1");
  Variable k2(random::normal({3, 3, 4, 1}) * 0.3, "k2");
  Variable gamma(ones({4}), "gamma");
  Variable beta(zeros({4}), "beta");
  check_traced(
      [&](const std::vector<Tensor>& in) {
        Tensor h = relu(conv2d(in[0], k1, {1, 1}, "same"));
        h = batch_norm(h, gamma, beta, zeros({4}), ones({4}), true).y;
        h = max_pool2d(h, {2, 2}, {2, 2});
        h = resize_bilinear(depthwise_conv2d(h, k2, {1, 1}, "same"), {6, 3});
        return avg_pool2d(h, {2, 2}, {1, 1}) + global_avg_pool2d(h, true);
      },
      {&k1, &k2, &gamma, &beta}, [] { return std::vector<Tensor>{random::normal({2, 8, 8, 2})}; });
}

TEST_CASE("traced shape ops, gathers and losses match eager", "[function]") {
  Variable table(random::normal({10, 3}), "table");
  Variable w(random::normal({3, 5}), "w");
  check_traced(
      [&](const std::vector<Tensor>& in) {
        const Tensor e = gather(table, in[0], 0);  // [4, 3]
        const Tensor logits = matmul(concat({e, slice(e, {0, 0}, {4, 3}) * 2.0}, 0), w);  // [8, 5]
        const Tensor padded = pad(transpose(logits), {{{1, 0}, {0, 2}}});
        const Tensor sce = sparse_softmax_cross_entropy_with_logits(in[1], logits);
        const Tensor ce = softmax_cross_entropy_with_logits(softmax(logits), logits);
        return reduce_sum(padded) + reduce_sum(tile(sce, {2})) + reduce_sum(ce) + reduce_sum(log_softmax(logits));
      },
      {&table, &w}, [] {
        return std::vector<Tensor>{random::uniform_int({4}, 0, 10), random::uniform_int({8}, 0, 5)};
      });
}

TEST_CASE("traced recurrent cells, layer norm and moments match eager", "[function]") {
  Variable kernel(random::normal({3, 16}) * 0.3, "kernel");
  Variable recurrent(random::normal({4, 16}) * 0.3, "recurrent");
  Variable bias(zeros({16}), "bias");
  Variable gk(random::normal({3, 12}) * 0.3, "gk");
  Variable gr(random::normal({4, 12}) * 0.3, "gr");
  check_traced(
      [&](const std::vector<Tensor>& in) {
        const auto seq = lstm(in[0], zeros({2, 4}), zeros({2, 4}), kernel, recurrent, bias);
        const Tensor g = gru_cell(slice(in[0], {0, 0, 0}, {2, 1, 3}).reshape({2, 3}), seq.h, gk, gr, Tensor());
        const auto [m, v] = moments(seq.outputs, {0, 1}, true);  // the fused moments kernel
        return layer_norm(seq.outputs, Tensor(), Tensor()) * 0.5 + reduce_sum(g) + m * v;
      },
      {&kernel, &recurrent, &bias, &gk, &gr}, [] { return std::vector<Tensor>{random::normal({2, 5, 3})}; });
}

TEST_CASE("a label out of range is caught on every replayed call, as eagerly", "[function]") {
  auto f = keel::function([](const Tensor& labels, const Tensor& logits) {
    return sparse_softmax_cross_entropy_with_logits(labels, logits);
  });
  const Tensor logits = random::normal({2, 3});
  f(constant(std::vector<std::int64_t>{0, 2}, {2}, DType::int64), logits);
  CHECK_THROWS_AS(f(constant(std::vector<std::int64_t>{0, 3}, {2}, DType::int64), logits), ValueError);
  CHECK(f.trace_count() == 1);
}

TEST_CASE("elementwise fusion gives the unfused results bit for bit", "[function]") {
  graph::detail::PassOptions& passes = graph::detail::default_pass_options();
  const graph::detail::PassOptions saved = passes;
  Variable b(random::normal({32}), "b");
  auto body = [&](const Tensor& x) { return tanh(relu(x * 1.5 + b) - 0.25) * x + sigmoid(x); };
  const Tensor x = random::normal({300, 32});
  passes.fuse_elementwise = false;
  auto plain = keel::function(body);
  const auto unfused = plain(x).to_vector<float>();
  CHECK(plain(x).to_vector<float>() == unfused);
  passes.fuse_elementwise = true;
  auto fused = keel::function(body);
  const graph::Graph& g = fused.concrete_graph(x);
  passes = saved;
  std::size_t fused_nodes = 0;
  for (const auto& op : g.operations()) fused_nodes += op.type == "FusedElementwise";
  CHECK(fused_nodes == 1);
  CHECK(g.num_nodes() < plain.concrete_graph(x).num_nodes());
  CHECK(fused(x).to_vector<float>() == unfused);
  CHECK(fused(x * 2.0).to_vector<float>() == plain(x * 2.0).to_vector<float>());
}

TEST_CASE("a fused program reads each row sliced from one argument, not the first one again", "[function]") {
  // The three rows are views of one buffer at other offsets: three inputs of the program (they
  // were one, keyed by buffer, so a replay added the first row three times).
  auto sum_rows = [](const Tensor& x) {
    Tensor s = zeros({2});
    for (std::int64_t i = 0; i < 3; ++i) s = s + x.slice({keel::range(i, i + 1)}).reshape({2});
    return s * 1.0;
  };
  auto f = keel::function(sum_rows);
  const Tensor x = constant<float>({1, 2, 10, 20, 100, 200}, Shape{3, 2});
  CHECK(f(x).to_vector<float>() == std::vector<float>{111, 222});
  CHECK(f(x).to_vector<float>() == std::vector<float>{111, 222});  // the replay
  CHECK(f(x * 2.0).to_vector<float>() == std::vector<float>{222, 444});
  std::size_t fused = 0;
  for (const auto& op : f.concrete_graph(x).operations()) fused += op.type == "FusedElementwise";
  CHECK(fused == 1);
}

TEST_CASE("fused programs over tiny tensors (plain loops) match the unfused kernels bit for bit", "[function]") {
  // Programs of add / sub / mul / div / neg / square over at most 16 elements run as plain loops
  // instead of a SIMD kernel call per step; with a scalar and a row operand, in float32 and
  // float64, at every size up to past the threshold, against the eager (SIMD) kernels.
  for (const DType dtype : {DType::float32, DType::float64}) {
    for (std::int64_t n : {1, 2, 3, 4, 7, 8, 15, 16, 17, 33}) {
      INFO(keel::name(dtype) << ", " << n << " elements");
      const Tensor row = random::normal({n}, 0, 1, dtype);
      auto body = [&](const Tensor& x) { return -square((x + row) * 1.7 - x / 3.1) + x * x; };
      const Tensor x = random::normal({2, n}, 0, 1, dtype);
      auto traced = keel::function(body);
      traced(x);
      const Tensor got = traced(x), want = body(x);
      if (dtype == DType::float32) CHECK(got.to_vector<float>() == want.to_vector<float>());
      else CHECK(got.to_vector<double>() == want.to_vector<double>());
      std::size_t fused = 0;
      for (const auto& op : traced.concrete_graph(x).operations()) fused += op.type == "FusedElementwise";
      CHECK(fused == 1);
    }
  }
}

TEST_CASE("fused programs over large tensors match the unfused kernels at every SIMD level", "[function]") {
  // 1.25M floats (5 MB), with a row input (a bias), a tail tile and two results (one also read
  // inside the chain); written through cached tiles with streaming stores (the threshold set
  // below the size, as on a machine with a small cache) and directly (the threshold above it).
  const Tensor x = random::normal({1250, 1000});
  const Tensor bias = random::normal({1000});
  auto body = [&](const Tensor& t) {
    const Tensor h = relu(t * 0.5 + bias);
    return std::make_tuple(h, h * t - 1.0);
  };
  struct Restore {
    ~Restore() { cpu::set_program_stream_bytes(0); }
  } restore;
  for (std::size_t threshold : {std::size_t{4} << 20, std::size_t{64} << 20}) {
    cpu::set_program_stream_bytes(threshold);
    testing::at_every_simd_level([&](const std::string& level) {
      INFO(level << ", streaming from " << threshold << " bytes");
      auto traced = keel::function(body);
      traced(x);
      const std::tuple<Tensor, Tensor> got = traced(x), want = body(x);
      CHECK(std::get<0>(got).to_vector<float>() == std::get<0>(want).to_vector<float>());
      CHECK(std::get<1>(got).to_vector<float>() == std::get<1>(want).to_vector<float>());
    });
  }
}

TEST_CASE("a traced function under an outer tape gives eager's gradients on every call", "[function][autograd]") {
  Variable w(random::normal({4, 3}, 0, 1, DType::float64), "w");
  Variable b(random::normal({3}, 0, 1, DType::float64), "b");
  auto body = [&](const Tensor& x) { return std::make_tuple(tanh(matmul(x, w) + b), reduce_sum(square(x))); };
  auto traced = keel::function(body);
  for (int call = 0; call < 3; ++call) {
    const Tensor x = random::normal({5, 4}, 0, 1, DType::float64);
    auto grads = [&](bool use_traced) {
      GradientTape tape;
      tape.watch(x);
      const auto [y, s] = use_traced ? traced(x) : body(x);
      const Tensor loss = reduce_sum(y * y) + s * 0.5;
      return tape.gradient(loss, {Tensor(x), w.value(), b.value()});
    };
    const auto want = grads(false), got = grads(true);
    for (std::size_t i = 0; i < want.size(); ++i) {
      const auto a = got[i].to_vector<double>(), e = want[i].to_vector<double>();
      REQUIRE(a.size() == e.size());
      for (std::size_t k = 0; k < a.size(); ++k) CHECK(a[k] == Approx(e[k]).epsilon(1e-12));
    }
  }
  CHECK(traced.trace_count() == 1);  // one differentiable graph serves every taped call
}

TEST_CASE("a traced function trains in an eager loop as the eager function does", "[function][autograd]") {
  auto run = [](bool use_traced) {
    random::set_seed(5);
    Variable w(random::normal({3, 1}), "w");
    const Tensor x = random::normal({16, 3}), y = random::normal({16, 1});
    auto model = [&](const Tensor& in) { return matmul(in, w); };
    auto traced = keel::function(model);
    optimizers::SGD opt(0.1);
    for (int step = 0; step < 5; ++step) {
      GradientTape tape;
      const Tensor pred = use_traced ? traced(x) : model(x);
      const Tensor loss = reduce_mean(square(pred - y));
      opt.apply_gradients({{tape.gradient(loss, w), &w}});
    }
    return w.value().to_vector<float>();
  };
  CHECK(run(true) == run(false));
}

TEST_CASE("a persistent tape may ask a traced function's gradient twice; nested tapes take its second order",
          "[function][autograd]") {
  // runs counts executions of f's C++ body: traces only. A gradient recorded by another tape (a
  // gradient of the gradient) is a traced function of its own, traced once and then replayed, and
  // so is the gradient of that (third order).
  int runs = 0;
  auto f = keel::function([&](const Tensor& x) {
    ++runs;
    return x * x * x;
  });
  const Tensor x = constant(2.0, DType::float64);
  {
    GradientTape tape(true);
    tape.watch(x);
    const Tensor y = f(x);
    CHECK(tape.gradient(y, x).item<double>() == 12.0);  // 3 x^2
    CHECK(tape.gradient(y, x).item<double>() == 12.0);
    CHECK(runs == 1);  // the trace; the gradients replay it
  }
  for (int call = 0; call < 3; ++call) {
    GradientTape outer;
    outer.watch(x);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      const Tensor z = f(x);
      g = inner.gradient(z, x);  // recorded by `outer`: the traced gradient function
    }
    CHECK(g.item<double>() == 12.0);
    CHECK(outer.gradient(g, x).item<double>() == 12.0);  // 6 x
    CHECK(runs == 2);  // the gradient function's trace, on the first call only
  }
  for (int call = 0; call < 3; ++call) {
    GradientTape third;
    third.watch(x);
    Tensor g2;
    {
      GradientTape outer;
      outer.watch(x);
      Tensor g;
      {
        GradientTape inner;
        inner.watch(x);
        g = inner.gradient(f(x), x);
      }
      g2 = outer.gradient(g, x);  // recorded by `third`: the gradient function's gradient function
    }
    CHECK(g2.item<double>() == 12.0);
    CHECK(third.gradient(g2, x).item<double>() == 6.0);
    CHECK(runs == 3);
  }
}

TEST_CASE("second-order gradients through a traced function match eager ones and finite differences",
          "[function][autograd]") {
  using keel_test::check_gradients;
  random::set_seed(21);
  Variable w(random::normal({3, 3}, 0, 1, DType::float64), "w");
  const auto body = [&](const Tensor& a) { return tanh(matmul(a, w.value())) * reduce_sum(a, {1}, true); };
  auto traced = keel::function(body);
  const Tensor a = random::normal({2, 3}, 0, 1, DType::float64);
  // d/da and d/dw of sum(grad_a(sum f)^2): traced against eager.
  const auto penalty = [&](const std::function<Tensor(const Tensor&)>& fn) {
    GradientTape outer;
    outer.watch(a);
    Tensor ga;
    {
      GradientTape inner;
      inner.watch(a);
      ga = inner.gradient(reduce_sum(fn(a)), a);
    }
    const Tensor p = reduce_sum(square(ga));
    std::vector<Tensor> out = outer.gradient(p, std::vector<Tensor>{a, w.value()});
    out.insert(out.begin(), ga);
    return out;
  };
  // The inner tape asking for the weights' gradient too: another traced gradient function (one
  // per set of inputs that need a gradient), d/da and d/dw of sum(grad_a^2) + sum(grad_w^2).
  const auto both = [&](const std::function<Tensor(const Tensor&)>& fn) {
    GradientTape outer;
    outer.watch(a);
    std::vector<Tensor> g;
    {
      GradientTape inner;
      inner.watch(a);
      g = inner.gradient(reduce_sum(fn(a)), std::vector<Tensor>{a, w.value()});
    }
    const Tensor p = reduce_sum(square(g[0])) + reduce_sum(square(g[1]));
    std::vector<Tensor> out = outer.gradient(p, std::vector<Tensor>{a, w.value()});
    out.insert(out.end(), g.begin(), g.end());
    return out;
  };
  using Way = std::function<std::vector<Tensor>(const std::function<Tensor(const Tensor&)>&)>;
  for (const Way& way : {Way(penalty), Way(both)}) {
    const auto t = way([&](const Tensor& v) { return traced(v); });
    const auto e = way(body);
    REQUIRE(t.size() == e.size());
    for (std::size_t i = 0; i < e.size(); ++i) {
      INFO("result " << i);
      const auto tv = t[i].to_vector<double>(), ev = e[i].to_vector<double>();
      REQUIRE(tv.size() == ev.size());
      for (std::size_t j = 0; j < tv.size(); ++j) CHECK(tv[j] == Approx(ev[j]).margin(1e-12));
    }
  }
  // The gradient of the traced gradient, against finite differences of it (float64).
  check_gradients([&](const std::vector<Tensor>& xs) {
    GradientTape inner;
    inner.watch(xs[0]);
    return inner.gradient(reduce_sum(traced(xs[0])), xs[0]);
  }, {a});
}

TEST_CASE("a recorded gradient of a traced call is refused where running f again would differ", "[function][autograd]") {
  const Tensor x = random::normal({4, 3}, 0, 1, DType::float64);
  const auto nested_gradient = [&](auto& fn) {
    GradientTape outer;
    outer.watch(x);
    GradientTape inner;
    inner.watch(x);
    const Tensor z = reduce_sum(fn(x));
    return inner.gradient(z, x);
  };
  SECTION("f draws random numbers") {
    auto f = keel::function([](const Tensor& v) { return dropout(v, 0.5); });
    CHECK_THROWS_WITH(nested_gradient(f), Catch::Contains("random"));
  }
  SECTION("f writes a variable") {
    Variable counter(zeros(Shape{}, DType::float64), "counter");
    auto f = keel::function([&](const Tensor& v) {
      counter.assign_add(ones(Shape{}, DType::float64));
      return v * v;
    });
    CHECK_THROWS_WITH(nested_gradient(f), Catch::Contains("writes variables"));
  }
  SECTION("a variable it read was assigned since the call") {
    Variable w(ones(Shape{3}, DType::float64), "w");
    auto f = keel::function([&](const Tensor& v) { return v * w.value(); });
    GradientTape outer;
    outer.watch(x);
    GradientTape inner;
    inner.watch(x);
    const Tensor z = reduce_sum(f(x));
    w.assign(full(Shape{3}, 2.0, DType::float64));
    CHECK_THROWS_WITH(inner.gradient(z, x), Catch::Contains("written since the call"));
  }
}

TEST_CASE("a traced function's traced backward and eager cond / while_loop pass finite differences", "[function][autograd]") {
  using keel_test::check_gradients;
  // The finite differences call f eagerly; the tape's gradient goes through the traced
  // function's one node (its backward replayed) and through the control flow's path taken.
  auto traced = keel::function(
      [](const Tensor& a, const Tensor& b) { return tanh(matmul(a, b)) * reduce_sum(a, {1}, true); });
  const Tensor a = random::normal({2, 3}, 0, 1, DType::float64), b = random::normal({3, 3}, 0, 1, DType::float64);
  check_gradients([&](const std::vector<Tensor>& xs) { return traced(xs[0], xs[1]); }, {a, b});
  check_gradients([](const std::vector<Tensor>& xs) {
    return keel::cond(reduce_sum(xs[0]) > -100.0, [&] { return exp(xs[0]) * xs[0]; }, [&] { return xs[0]; });
  }, {a});
  check_gradients([](const std::vector<Tensor>& xs) {
    return keel::while_loop([](const std::vector<Tensor>& v) { return v[1] < 3.0; },
                            [](const std::vector<Tensor>& v) {
                              return std::vector<Tensor>{sin(v[0]) * v[0], v[1] + 1.0};
                            },
                            {xs[0], constant(0.0, DType::float64)})[0];
  }, {a});
}
