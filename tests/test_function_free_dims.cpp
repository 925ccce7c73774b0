// keel::function's free dimensions: a -1 in input_signature (and one that reduce_retracing
// relaxes) makes one trace serve every size there, with eager's values at each size; the dry
// traces that fit the sizes have no effects on variables or random streams; what does not
// generalise (C++ work that depends on a size) traces per size and stays correct.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

using namespace keel;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

void check_close(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>();
  const auto y = b.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).epsilon(tol).margin(tol));
}

TensorSpec spec(Shape shape, DType dtype = DType::float32) { return TensorSpec{std::move(shape), dtype}; }

}  // namespace

TEST_CASE("a -1 batch dimension: one trace serves every batch size with eager's values", "[function]") {
  Variable w(random::normal({4, 3}), "w");
  Variable b(random::normal({3}), "b");
  int traced = 0;
  auto eager = [&](const Tensor& x) { return tanh(relu(matmul(x, w) + b) * 2.0 - 1.0); };
  auto f = keel::function(
      [&](const Tensor& x) {
        ++traced;
        return eager(x);
      },
      {.input_signature = {spec({-1, 4})}});
  const Tensor first = random::normal({6, 4});
  CHECK(values(f(first)) == values(eager(first)));
  // The call's trace, then dry ones at batch 2, 3 (the fit) and 5 (a check): C++ code in f runs
  // while tracing, so it ran for them too.
  const int after_first = traced;
  CHECK(after_first == 4);
  for (std::int64_t batch : {1, 2, 9, 64, 6, 3}) {
    const Tensor x = random::normal({batch, 4});
    const Tensor y = f(x);
    CHECK(y.shape() == Shape({batch, 3}));
    CHECK(values(y) == values(eager(x)));  // the same kernels on the same views: bit for bit
  }
  CHECK(f.trace_count() == 1);
  CHECK(traced == after_first);
}

TEST_CASE("the graph of a -1 signature shows the free sizes as -1", "[function]") {
  Variable w(random::normal({4, 3}), "w");
  auto f = keel::function([&](const Tensor& x) { return relu(matmul(x, w)); }, {.input_signature = {spec({-1, 4})}});
  const graph::Graph& g = f.concrete_graph(ones({5, 4}));
  bool saw_matmul = false;
  for (const auto& op : g.operations()) {
    if (op.type != "BatchMatMulV2") continue;
    saw_matmul = true;
    CHECK(op.input_shapes[0] == Shape({-1, 4}));
    CHECK(op.input_shapes[1] == Shape({4, 3}));
    CHECK(op.output_shapes[0] == Shape({-1, 3}));
  }
  CHECK(saw_matmul);
  CHECK(&f.concrete_graph(ones({8, 4})) == &g);  // another batch: the same graph, no trace
  CHECK(f.trace_count() == 1);
}

TEST_CASE("free dimensions: variables are read at call time and written once per call", "[function]") {
  Variable scale(constant(2.0), "scale");
  Variable total(constant(0.0), "total");
  auto f = keel::function(
      [&](const Tensor& x) {
        total.assign_add(reduce_sum(x));
        return x * scale;
      },
      {.input_signature = {spec({-1})}});
  CHECK(values(f(ones({3}))) == std::vector<float>(3, 2.0f));
  // The dry traces at sizes 2, 3 and 5 wrote nothing: only this call's 3 ones are counted.
  CHECK(total.value().item<float>() == 3.0f);
  scale.assign(constant(10.0));
  CHECK(values(f(ones({5}))) == std::vector<float>(5, 10.0f));
  CHECK(values(f(full({2}, 0.5))) == std::vector<float>(2, 5.0f));
  CHECK(total.value().item<float>() == 9.0f);  // 3 + 5 + 1
  CHECK(f.trace_count() == 1);
}

TEST_CASE("free dimensions: random draws are fresh per call and the dry traces draw none", "[function]") {
  // Against a function without the -1 on the same sizes (it never retraces): the same numbers
  // only if tracing at other sizes left the streams where they were.
  auto draws = [](bool free) {
    random::set_seed(11);
    FunctionOptions o;
    if (free) o.input_signature = {spec({-1, 3})};
    auto f = keel::function([](const Tensor& x) { return x + random::uniform(x.shape()); }, o);
    std::vector<std::vector<float>> out;
    for (int i = 0; i < 3; ++i) out.push_back(values(f(zeros({4, 3}))));
    out.push_back(values(random::uniform({2})));  // the global stream after the calls
    return out;
  };
  const auto a = draws(true);
  CHECK(a == draws(false));
  CHECK(a[0] != a[1]);
}

TEST_CASE("two free dimensions: sizes that are products of both (a reshape of batch x time)", "[function]") {
  Variable w(random::normal({3, 2}), "w");
  auto eager = [&](const Tensor& x) {
    const Tensor rows = reshape(x, {-1, 3});  // [B*T, 3]
    return reduce_sum(reshape(matmul(rows, w), {x.shape()[0], -1}), {1});
  };
  int traced = 0;
  auto f = keel::function(
      [&](const Tensor& x) {
        ++traced;
        const Tensor rows = reshape(x, {-1, 3});
        return reduce_sum(reshape(matmul(rows, w), {x.shape()[0], -1}), {1});
      },
      {.input_signature = {spec({-1, -1, 3})}});
  for (auto [batch, time] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4, 6}, {2, 9}, {1, 1}, {7, 3}, {5, 5}}) {
    const Tensor x = random::normal({batch, time, 3});
    check_close(f(x), eager(x));
  }
  // The first call (4, 6) fitted both sizes: 4 dry traces on the grid and one check.
  CHECK(f.trace_count() == 1);
  CHECK(traced == 1 + 4 + 1);
}

TEST_CASE("free dimensions of one size vary together; a call where they differ traces and fails as eager", "[function]") {
  Variable w(random::normal({3}), "w");
  auto eager = [&](const Tensor& x, const Tensor& y) { return reduce_mean(square(reduce_sum(x * w, {1}) - y)); };
  auto f = keel::function(eager, {.input_signature = {spec({-1, 3}), spec({-1})}});
  for (std::int64_t batch : {8, 5, 1}) {
    const Tensor x = random::normal({batch, 3});
    const Tensor y = random::normal({batch});
    check_close(f(x, y), eager(x, y));
  }
  CHECK(f.trace_count() == 1);
  CHECK_THROWS_AS(f(ones({4, 3}), ones({6})), ShapeError);
}

TEST_CASE("convolution and pooling over a -1 batch", "[function]") {
  Variable k(random::normal({3, 3, 2, 4}), "k");
  auto eager = [&](const Tensor& x) {
    return max_pool2d(relu(conv2d(x, k, {1, 1}, "same")), {2, 2}, {2, 2}) * 0.5;
  };
  auto f = keel::function(eager, {.input_signature = {spec({-1, 6, 6, 2})}});
  for (std::int64_t batch : {4, 1, 7}) {
    const Tensor x = random::normal({batch, 6, 6, 2});
    check_close(f(x), eager(x), 1e-5);
  }
  CHECK(f.trace_count() == 1);
}

TEST_CASE("a free image size traces per size and stays correct", "[function]") {
  // A convolution's replay takes only its batch from its operands; its output rows, columns and
  // padding are the trace's, so free height and width must not be generalised: each side
  // traces, with eager's values.
  Variable k(random::normal({3, 3, 2, 4}), "k");
  auto eager = [&](const Tensor& x) { return relu(conv2d(x, k, {1, 1}, "same")); };
  auto f = keel::function(eager, {.input_signature = {spec({2, -1, -1, 2})}});
  for (std::int64_t side : {6, 8, 6}) {
    const Tensor x = random::normal({2, side, side, 2});
    check_close(f(x), eager(x), 1e-5);
  }
  CHECK(f.trace_count() == 2);
}

TEST_CASE("work that depends on a free size in C++ traces per size and stays correct", "[function]") {
  SECTION("a host-made constant from the size") {
    // 1/batch is computed on the host: a constant that differs between sizes.
    auto eager = [](const Tensor& x) { return reduce_sum(x, {0}) * constant(1.0 / static_cast<double>(x.shape()[0])); };
    auto f = keel::function(eager, {.input_signature = {spec({-1, 2})}});
    for (std::int64_t batch : {4, 3, 8, 4}) {
      const Tensor x = random::normal({batch, 2});
      check_close(f(x), eager(x));
    }
    CHECK(f.trace_count() == 3);
  }
  SECTION("a C++ loop over the rows") {
    auto eager = [](const Tensor& x) {
      Tensor s = zeros({2});
      for (std::int64_t i = 0; i < x.shape()[0]; ++i) s = s + x.slice({keel::range(i, i + 1)}).reshape({2});
      return s;
    };
    auto f = keel::function(eager, {.input_signature = {spec({-1, 2})}});
    for (std::int64_t batch : {3, 5, 3}) {
      const Tensor x = random::normal({batch, 2});
      check_close(f(x), eager(x));
    }
    CHECK(f.trace_count() == 2);
  }
}

TEST_CASE("under a tape, a -1 batch signature's traced forward and backward serve every batch", "[function]") {
  Variable w(random::normal({4, 3}, 0, 1, DType::float64), "w");
  auto eager = [&](const Tensor& x) { return reduce_mean(square(tanh(matmul(x, w)))); };
  auto f = keel::function(eager, {.input_signature = {spec({-1, 4}, DType::float64)}});
  for (std::int64_t batch : {6, 2, 9, 1}) {
    const Tensor x = random::normal({batch, 4}, 0, 1, DType::float64);
    std::vector<Tensor> traced, expected;
    {
      GradientTape tape(/*persistent=*/true);
      tape.watch(x);
      const Tensor y = f(x);
      traced = {tape.gradient(y, x), tape.gradient(y, w)};
    }
    {
      GradientTape tape(/*persistent=*/true);
      tape.watch(x);
      const Tensor y = eager(x);
      expected = {tape.gradient(y, x), tape.gradient(y, w)};
    }
    check_close(traced[0], expected[0], 1e-12);
    check_close(traced[1], expected[1], 1e-12);
  }
  CHECK(f.trace_count() == 1);
}

TEST_CASE("a trace that makes a variable is not generalised; the next one is", "[function]") {
  std::unique_ptr<Variable> made;
  auto f = keel::function(
      [&](const Tensor& x) {
        if (!made) made = std::make_unique<Variable>(ones({3}), "made");  // made in the first trace
        return x * made->value();
      },
      {.input_signature = {spec({-1, 3})}});
  f(ones({2, 3}));
  CHECK(f.trace_count() == 1);
  f(ones({4, 3}));  // a trace that finds the variable made: generalised
  CHECK(f.trace_count() == 2);
  made->assign(full({3}, 2.0));
  for (std::int64_t batch : {7, 1, 2}) CHECK(values(f(ones({batch, 3}))) == std::vector<float>(batch * 3, 2.0f));
  CHECK(f.trace_count() == 2);
}

TEST_CASE("reduce_retracing: the second trace relaxes the changed dimensions to -1", "[function]") {
  int traced = 0;
  auto eager = [](const Tensor& x) { return sigmoid(x * 3.0 + 1.0); };
  auto f = keel::function(
      [&](const Tensor& x) {
        ++traced;
        return eager(x);
      },
      {.reduce_retracing = true});
  f(ones({4, 3}));
  f(ones({4, 3}));
  CHECK(f.trace_count() == 1);
  CHECK(traced == 1);  // the first trace is concrete, as TensorFlow's
  const Tensor x6 = random::normal({6, 3});
  check_close(f(x6), eager(x6));
  CHECK(f.trace_count() == 2);  // relaxed to [None, 3]
  for (std::int64_t batch : {9, 1, 4, 6}) {
    const Tensor x = random::normal({batch, 3});
    check_close(f(x), eager(x));
  }
  CHECK(f.trace_count() == 2);
  // Another dimension changes: relaxed to [None, None].
  const Tensor x25 = random::normal({2, 5});
  check_close(f(x25), eager(x25));
  CHECK(f.trace_count() == 3);
  const Tensor x37 = random::normal({3, 7});
  check_close(f(x37), eager(x37));
  CHECK(f.trace_count() == 3);
  // A new dtype or rank is a new signature, as always.
  f(ones({2, 2}, DType::float64));
  CHECK(f.trace_count() == 4);
}

TEST_CASE("a training step with a -1 batch: one graph for every batch, Adam's updates as eager's", "[function]") {
  auto make = [](std::uint64_t seed) {
    random::set_seed(seed);
    return std::pair{Variable(random::normal({3, 2}), "w"), Variable(zeros({2}), "b")};
  };
  auto [w, b] = make(3);
  auto [we, be] = make(3);
  optimizers::Adam opt(0.05);
  optimizers::Adam opt_eager(0.05);
  auto step_of = [](Variable& wv, Variable& bv, optimizers::Optimizer& o) {
    return [&wv, &bv, &o](const Tensor& x, const Tensor& y) {
      GradientTape tape;
      const Tensor loss = reduce_mean(square(matmul(x, wv) + bv - y));
      const std::vector<Tensor> grads = tape.gradient(loss, {&wv, &bv});
      o.apply_gradients({{grads[0], &wv}, {grads[1], &bv}});
      return loss;
    };
  };
  auto step = keel::function(step_of(w, b, opt), {.input_signature = {spec({-1, 3}), spec({-1, 2})}});
  auto eager_step = step_of(we, be, opt_eager);
  for (std::int64_t batch : {8, 5, 3, 8, 5, 1}) {
    const Tensor x = random::normal({batch, 3});
    const Tensor y = random::normal({batch, 2});
    check_close(step(x, y), eager_step(x, y), 1e-5);
    check_close(w.value(), we.value(), 1e-5);
    check_close(b.value(), be.value(), 1e-5);
  }
  // The optimizer's update is one host step of the graph (Adam makes its slots there, outside
  // the graph, on the first call): the first trace serves every batch.
  CHECK(step.trace_count() == 1);
}

TEST_CASE("Keras models over a -1 batch: every batch size as eager, one trace", "[function]") {
  // The kernel families the layers use (convolution, pooling, batch norm in both modes, the
  // recurrent cells, embedding lookups, layer norm, softmax) each replay at every batch.
  random::set_seed(17);
  struct Case {
    const char* name;
    std::function<void(models::Sequential&)> layers;
    Shape input;  // without the batch
    bool ids;
  };
  const std::vector<Case> cases = {
      {"cnn",
       [](models::Sequential& m) {
         m.add(layers::Conv2D(4, 3, {.padding = "same", .activation = "relu"}));
         m.add(layers::BatchNormalization());
         m.add(layers::MaxPooling2D(2));
         m.add(layers::Flatten());
         m.add(layers::Dense(5, {.activation = "softmax"}));
       },
       Shape({8, 8, 3}), false},
      {"lstm",
       [](models::Sequential& m) {
         m.add(layers::LSTM(6));
         m.add(layers::Dense(1));
       },
       Shape({5, 3}), false},
      {"gru",
       [](models::Sequential& m) {
         m.add(layers::GRU(4, {.return_sequences = true}));
         m.add(layers::Dense(2));
       },
       Shape({4, 3}), false},
      {"embedding",
       [](models::Sequential& m) {
         m.add(layers::Embedding(20, 4));
         m.add(layers::GlobalAveragePooling1D());
         m.add(layers::LayerNormalization());
         m.add(layers::Dense(3));
       },
       Shape({6}), true},
  };
  for (const Case& c : cases) {
    for (const bool training : {false, true}) {
      INFO(c.name << (training ? ", training" : ", inference"));
      models::Sequential model;
      model.add(layers::InputLayer(c.input));
      c.layers(model);
      std::vector<std::int64_t> dims = {-1};
      for (std::int64_t d : c.input.dims()) dims.push_back(d);
      auto f = keel::function([&](const Tensor& x) { return model(x, training); },
                              {.input_signature = {spec(Shape(dims), c.ids ? DType::int64 : DType::float32)}});
      for (std::int64_t batch : {4, 1, 3, 7}) {
        Shape shape = Shape(dims);
        shape[0] = batch;
        const Tensor x = c.ids ? random::uniform_int(shape, 0, 20) : random::normal(shape);
        check_close(f(x), model(x, training), 1e-5);
      }
      CHECK(f.trace_count() == 1);
    }
  }
}
