// The core layers composed: in Sequential and functional models (shapes, parameter counts,
// summaries, training with GradientTape), in user-written layers that track sublayers, and
// Keras 3's build rules for custom layers and compute_output_shape.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "layer_checks.hpp"

using namespace keel;
using Catch::Contains;
using keel_test::check_values;
using keel_test::param_count;

namespace {

// A user-written layer, as the Keras guide writes one: a residual block y = x + W2 relu(W1 x + b1)
// + b2. Its two Dense and the Add are members, registered with track() so that weights,
// freezing, training flags and summary() reach them.
class ResidualBlock : public layers::Layer {
 public:
  explicit ResidualBlock(int units, std::string name = "")
      : Layer(std::move(name)),
        inner_(track(std::make_shared<layers::Dense>(units, layers::DenseOptions{.activation = "relu"}))),
        outer_(track(std::make_shared<layers::Dense>(units))),
        add_(track(std::make_shared<layers::Add>())) {}
  KEEL_LAYER_BOILERPLATE(ResidualBlock)
  using Layer::call;
  Tensor call(const Tensor& x, bool training) override {
    return (*add_)({x, (*outer_)((*inner_)(x, training), training)}, training);
  }
  layers::Dense& inner() { return *inner_; }

 private:
  std::shared_ptr<layers::Dense> inner_, outer_;
  std::shared_ptr<layers::Add> add_;
};

}  // namespace

// ---- models ------------------------------------------------------------------------------------

TEST_CASE("core layers in a Sequential: shapes, parameter counts and summary", "[layers][models]") {
  models::Sequential model{layers::InputLayer({4}), layers::Dense(8, {.activation = "relu"}), layers::Dense(2)};
  CHECK(model.count_params() == (4 * 8 + 8) + (8 * 2 + 2));
  CHECK(model.trainable_weights().size() == 4);
  random::set_seed(2);
  const Tensor y = model(random::normal({3, 4}));
  CHECK(y.shape() == Shape{3, 2});
  std::ostringstream out;
  model.summary(out);
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Contains("(Dense)"));
  CHECK_THAT(text, Contains("(None, 8)"));
  CHECK_THAT(text, Contains("(None, 2)"));
  CHECK_THAT(text, Contains("Total params: 58"));
  CHECK_THAT(text, Contains("Trainable params: 58"));
  CHECK_THAT(text, Contains("Non-trainable params: 0"));

  // A Sequential of reshaping layers, Keras' usual convolution-free classifier head.
  models::Sequential head{layers::InputLayer({4, 4, 1}), layers::Rescaling(1.0 / 255), layers::Flatten(),
                          layers::Dense(5), layers::Dropout(0.2), layers::Softmax()};
  CHECK(head.count_params() == 16 * 5 + 5);
  const Tensor p = head(full({2, 4, 4, 1}, 128));
  CHECK(p.shape() == Shape{2, 5});
  check_values(reduce_sum(p, {1}), {1, 1}, 1e-5);
}

TEST_CASE("a functional model with a residual Add trains with GradientTape", "[layers][models]") {
  random::set_seed(7);
  const Tensor inputs = models::Input(Shape{4});
  const Tensor h = layers::Dense(4, {.activation = "tanh"})(inputs);
  const Tensor r = layers::Add()({h, inputs});
  const Tensor outputs = layers::Dense(1)(r);
  models::Model model(inputs, outputs);
  CHECK(model.count_params() == (4 * 4 + 4) + (4 + 1));
  std::ostringstream out;
  model.summary(out);
  CHECK_THAT(out.str(), Contains("(Add)"));
  CHECK_THAT(out.str(), Contains("Total params: 25"));

  const Tensor x = random::normal({64, 4});
  const Tensor y = reduce_sum(x, {1}, true) * 0.5 + 1.0;
  auto step = [&] {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(model(x, true) - y));
    const auto weights = model.trainable_weights();
    const auto grads = tape.gradient(loss, weights);
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i]->assign_sub(grads[i] * 0.1);
    return loss.item<double>();
  };
  const double first = step();
  double last = first;
  for (int i = 0; i < 30; ++i) last = step();
  CHECK(last < 0.2 * first);
}

TEST_CASE("a user-written residual layer tracks its Dense sublayers in Sequential and functional models",
          "[layers][models][custom]") {
  auto block = std::make_shared<ResidualBlock>(4, "res");
  models::Sequential model{layers::InputLayer({4}), block, layers::Dense(1)};
  CHECK(block->count_params() == 2 * (4 * 4 + 4));
  CHECK(block->trainable_weights().size() == 4);
  CHECK(model.count_params() == 2 * (4 * 4 + 4) + 5);
  std::ostringstream out;
  model.summary(out);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("res (ResidualBlock)"));
  CHECK_THAT(out.str(), Contains("Total params: 45"));

  // y = x + outer(relu(inner(x))): with the outer kernel and bias at zero the block is the identity.
  // trainable_weights(): inner kernel, inner bias, outer kernel, outer bias.
  const auto block_weights = block->trainable_weights();
  CHECK(block_weights[0] == &block->inner().kernel());
  block_weights[2]->assign(zeros({4, 4}));
  block_weights[3]->assign(zeros({4}));
  const Tensor x = random::normal({3, 4});
  check_values((*block)(x), x.to_vector<double>());

  // Freezing the block freezes both Dense; the last Dense stays trainable.
  block->set_trainable(false);
  CHECK(param_count(model.trainable_weights()) == 5);
  CHECK(param_count(model.non_trainable_weights()) == 40);
  block->set_trainable(true);

  // In a functional model, as a temporary (KEEL_LAYER_BOILERPLATE moves it to the heap), and
  // gradients reach the weights of its sublayers.
  const Tensor in = models::Input(Shape{4});
  const Tensor out_t = layers::Dense(2)(ResidualBlock(4)(in));
  models::Model functional(in, out_t);
  CHECK(functional.count_params() == 40 + 10);
  GradientTape tape;
  const Tensor loss = reduce_sum(square(functional(random::normal({5, 4}))));
  const auto weights = functional.trainable_weights();
  REQUIRE(weights.size() == 6);
  const auto grads = tape.gradient(loss, weights);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    INFO(weights[i]->name());
    CHECK(grads[i].defined());
  }
}

// ---- Keras 3's build rules, compute_output_shape, Masking, Constant ----------------------------

namespace {
// A custom layer as users write one: weights in build(), no guard against a second build.
class Scale : public layers::Layer {
 public:
  KEEL_LAYER_BOILERPLATE(Scale)
  int builds = 0;
  void build(const Shape& s) override {
    ++builds;
    w_ = &add_weight("w", Shape{s[s.rank() - 1]}, "ones");
  }
  Tensor call(const Tensor& x, bool) override { return x * w_->value(); }

 private:
  Variable* w_ = nullptr;
};
}  // namespace

TEST_CASE("a direct build() call marks the layer built, so the first call does not build again", "[layers]") {
  Scale custom;
  custom.build(Shape{2, 3});
  CHECK(custom.built());
  custom(ones({2, 3}));
  CHECK(custom.builds == 1);
  CHECK(custom.weights().size() == 1);  // not two "w"s
  // built-in layers follow the same rule
  layers::Conv2D conv(4, {3, 3});
  conv.build(Shape{1, 5, 5, 2});
  CHECK(conv.built());
  const Tensor y = conv(ones({1, 5, 5, 2}));
  CHECK(conv.weights().size() == 2);  // kernel and bias, once
  CHECK(y.shape() == Shape{1, 3, 3, 4});
  layers::BatchNormalization bn;
  bn.build(Shape{2, 3});
  bn(ones({2, 3}));
  CHECK(bn.weights().size() == 4);
}

TEST_CASE("the default compute_output_shape keeps the batch of the shape asked about", "[layers]") {
  layers::TimeDistributed td(layers::Dense(4));
  CHECK(td.compute_output_shape(Shape{32, 10, 8}) == Shape{32, 10, 4});
  layers::Flatten flatten;
  CHECK(flatten.compute_output_shape(Shape{7, 2, 3}) == Shape{7, 6});
  CHECK(flatten.compute_output_shape(Shape{-1, 2, 3}) == Shape{-1, 6});  // None stays None
}
