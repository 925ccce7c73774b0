// Models: Sequential, the functional API, subclassed models, summary(), freezing.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <sstream>

using namespace keel;
using Catch::Matchers::Contains;

namespace {

// A user-written dense layer: all a custom layer needs is build() and call().
class TestDense : public layers::Layer {
 public:
  explicit TestDense(int units, std::string name = "") : Layer(std::move(name)), units_(units) {}
  void build(const Shape& s) override {
    kernel_ = &add_weight("kernel", {s[s.rank() - 1], units_}, "ones");
    bias_ = &add_weight("bias", {units_}, "zeros");
  }
  Tensor call(const Tensor& x, bool) override { return matmul(x, *kernel_) + *bias_; }
  KEEL_LAYER_BOILERPLATE(TestDense)

 private:
  int units_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// Adds its two inputs (a multi-input layer).
class TestAdd : public layers::Layer {
 public:
  Tensor call(const std::vector<Tensor>& xs, bool) override { return xs.at(0) + xs.at(1); }
  KEEL_LAYER_BOILERPLATE(TestAdd)
};

// A subclassed model holding two layers through track().
class TwoLayerModel : public models::Model {
 public:
  TwoLayerModel() : Model("two_layer") {
    first_ = track(std::make_shared<TestDense>(3));
    second_ = track(std::make_shared<TestDense>(1));
  }
  Tensor call(const Tensor& x, bool training) override { return (*second_)((*first_)(x, training), training); }

 private:
  std::shared_ptr<TestDense> first_, second_;
};

}  // namespace

TEST_CASE("Sequential applies its layers in order and counts their parameters", "[models]") {
  models::Sequential model{layers::InputLayer({4}), TestDense(3), TestDense(2)};
  REQUIRE(model.built());
  // 4*3 + 3 = 15 and 3*2 + 2 = 8 parameters
  CHECK(model.count_params() == 23);
  CHECK(model.layers().size() == 2);  // the InputLayer is not listed, as in Keras
  // all-ones kernels, zero biases: each unit of layer 1 is sum(x) = 10, of layer 2 is 3*10 = 30
  const Tensor y = model(constant({1.f, 2.f, 3.f, 4.f}, {1, 4}));
  CHECK(y.shape() == Shape{1, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{30.f, 30.f});
}

TEST_CASE("Sequential builds on its first call when it has no InputLayer", "[models]") {
  models::Sequential model;
  model.add(TestDense(5));
  CHECK_FALSE(model.built());
  const Tensor y = model(ones({2, 3}));
  CHECK(y.shape() == Shape{2, 5});
  CHECK(model.built());
  CHECK(model.trainable_weights().size() == 2);
}

TEST_CASE("the functional API records layer calls on symbolic tensors", "[models]") {
  auto inputs = models::Input({4});
  auto h = TestDense(2)(inputs);
  auto shortcut = TestDense(2)(inputs);
  auto out = TestAdd()({h, shortcut});
  models::Model model(inputs, out);
  CHECK(model.is_functional());
  CHECK(model.layers().size() == 3);
  CHECK(model.count_params() == 2 * (4 * 2 + 2));
  // both branches give sum(x) = 10 per unit: 10 + 10 = 20
  const Tensor y = model(constant({1.f, 2.f, 3.f, 4.f, 0.f, 0.f, 0.f, 1.f}, {2, 4}));
  CHECK(y.to_vector<float>() == std::vector<float>{20.f, 20.f, 2.f, 2.f});
}

TEST_CASE("a shared layer appears once and its weights are reused", "[models]") {
  auto a = models::Input({3});
  auto b = models::Input({3});
  auto shared = std::make_shared<TestDense>(2);
  auto ya = (*shared)(a);
  auto yb = (*shared)(b);
  models::Model model(std::vector<Tensor>{a, b}, std::vector<Tensor>{TestAdd()({ya, yb})});
  CHECK(model.num_inputs() == 2);
  CHECK(model.trainable_weights().size() == 2);
  const Tensor y = model(std::vector<Tensor>{ones({1, 3}), ones({1, 3})});
  CHECK(y.to_vector<float>() == std::vector<float>{6.f, 6.f});
}

TEST_CASE("a functional model with several outputs returns all of them from call_all", "[models]") {
  auto in = models::Input({2});
  auto o1 = TestDense(1)(in);
  auto o2 = TestDense(3)(in);
  models::Model model(std::vector<Tensor>{in}, std::vector<Tensor>{o1, o2});
  const auto ys = model.call_all({ones({4, 2})}, false);
  REQUIRE(ys.size() == 2);
  CHECK(ys[0].shape() == Shape{4, 1});
  CHECK(ys[1].shape() == Shape{4, 3});
}

TEST_CASE("a functional model rejects inputs it was not built on", "[models][errors]") {
  auto in = models::Input({4});
  auto other = models::Input({4});
  auto out = TestAdd()({TestDense(2)(in), TestDense(2)(other)});
  CHECK_THROWS_AS(models::Model(in, out), ValueError);
  CHECK_THROWS_WITH(models::Model(in, out), Contains("disconnected"));
  models::Model ok(in, TestDense(2)(in));
  CHECK_THROWS_AS(ok(ones({2, 5})), ShapeError);
  CHECK_THROWS_WITH(ok(ones({2, 5})), Contains("[2,5]"));
}

TEST_CASE("a subclassed model trains its tracked layers", "[models]") {
  TwoLayerModel model;
  const Tensor x = constant({1.f, 2.f}, {1, 2});
  GradientTape tape;
  const Tensor loss = reduce_sum(model(x, true));
  const auto grads = tape.gradient(loss, model.trainable_weights());
  REQUIRE(grads.size() == 4);
  // layer 2 is y = sum_j h_j with h_j = x1 + x2 = 3: dy/dkernel2_j = h_j = 3
  CHECK(grads[2].to_vector<float>() == std::vector<float>{3.f, 3.f, 3.f});
  for (const auto& g : grads) CHECK(g.defined());
}

TEST_CASE("set_trainable(false) freezes every weight of a model", "[models]") {
  models::Sequential model{layers::InputLayer({2}), TestDense(3), TestDense(1)};
  model.layers()[0]->set_trainable(false);
  CHECK(model.trainable_weights().size() == 2);
  CHECK(model.non_trainable_weights().size() == 2);
  model.set_trainable(false);
  CHECK(model.trainable_weights().empty());
  CHECK(model.weights().size() == 4);
}

TEST_CASE("summary prints Keras' table with output shapes and parameter totals", "[models][summary]") {
  models::Sequential model({}, "my_model");
  model.add(layers::InputLayer({4}));
  model.add(TestDense(8, "first"));
  model.add(TestDense(2, "second"));
  std::ostringstream out;
  model.summary(out);
  const std::string s = out.str();
  CHECK_THAT(s, Contains("Model: \"my_model\""));
  CHECK_THAT(s, Contains("Layer (type)"));
  CHECK_THAT(s, Contains("first (TestDense)"));
  CHECK_THAT(s, Contains("(None, 8)"));
  CHECK_THAT(s, Contains("(None, 2)"));
  // 4*8 + 8 = 40 and 8*2 + 2 = 18: 58 in all
  CHECK_THAT(s, Contains("Total params: 58"));
  CHECK_THAT(s, Contains("Trainable params: 58"));
  CHECK_THAT(s, Contains("Non-trainable params: 0"));
}

TEST_CASE("summary of a model that was never built is an error", "[models][errors]") {
  models::Sequential model;
  model.add(TestDense(3));
  std::ostringstream out;
  CHECK_THROWS_AS(model.summary(out), ValueError);
}

TEST_CASE("layer names are unique Keras-style snake case", "[models]") {
  CHECK(layers::to_snake_case("Conv2D") == "conv2d");
  CHECK(layers::to_snake_case("BatchNormalization") == "batch_normalization");
  CHECK(layers::to_snake_case("GRUCell") == "gru_cell");
  const std::string a = layers::unique_name("SomeNewLayer"), b = layers::unique_name("SomeNewLayer");
  CHECK(a == "some_new_layer");
  CHECK(b == "some_new_layer_1");
}

TEST_CASE("a layer rejects inputs whose last dimension differs from the built one", "[models][errors]") {
  TestDense dense(2, "checked");
  dense(ones({1, 3}));
  CHECK_THROWS_AS(dense(ones({1, 4})), ShapeError);
  CHECK_THROWS_WITH(dense(ones({1, 4})), Contains("checked") && Contains("[1,4]") && Contains("[1,3]"));
}

TEST_CASE("a Keras mask rides along with a tensor", "[models]") {
  const Tensor x = ones({2, 3});
  CHECK_FALSE(layers::get_mask(x).defined());
  const Tensor mask = constant({true, false, true, true, true, false}, {2, 3});
  const Tensor m = layers::with_mask(x, mask);
  CHECK(layers::get_mask(m).to_vector<bool>() == mask.to_vector<bool>());
  CHECK(m.to_vector<float>() == x.to_vector<float>());
}

namespace {
// The residual identity block of the TensorFlow guide ("Making new layers and models via
// subclassing"), in C++: 1x1 conv, BN, relu, kxk conv, BN, relu, 1x1 conv, BN, + input, relu.
class ResnetIdentityBlock : public layers::Layer {
 public:
  ResnetIdentityBlock(int kernel_size, std::array<int, 3> filters) {
    conv2a_ = track(std::make_shared<layers::Conv2D>(filters[0], std::array<int, 2>{1, 1}));
    bn2a_ = track(std::make_shared<layers::BatchNormalization>());
    conv2b_ = track(std::make_shared<layers::Conv2D>(filters[1], std::array<int, 2>{kernel_size, kernel_size},
                                                     layers::Conv2DOptions{.padding = "same"}));
    bn2b_ = track(std::make_shared<layers::BatchNormalization>());
    conv2c_ = track(std::make_shared<layers::Conv2D>(filters[2], std::array<int, 2>{1, 1}));
    bn2c_ = track(std::make_shared<layers::BatchNormalization>());
  }
  Tensor call(const Tensor& x, bool training) override {
    Tensor h = relu((*bn2a_)((*conv2a_)(x), training));
    h = relu((*bn2b_)((*conv2b_)(h), training));
    h = (*bn2c_)((*conv2c_)(h), training);
    return relu(h + x);
  }
  KEEL_LAYER_BOILERPLATE(ResnetIdentityBlock)

 private:
  std::shared_ptr<layers::Conv2D> conv2a_, conv2b_, conv2c_;
  std::shared_ptr<layers::BatchNormalization> bn2a_, bn2b_, bn2c_;
};

// A subclassed model made of two blocks and a classifier head.
class TinyResNet : public models::Model {
 public:
  TinyResNet() : Model("tiny_resnet") {
    block1_ = track(std::make_shared<ResnetIdentityBlock>(3, std::array<int, 3>{2, 2, 3}));
    block2_ = track(std::make_shared<ResnetIdentityBlock>(3, std::array<int, 3>{2, 2, 3}));
    pool_ = track(std::make_shared<layers::GlobalAveragePooling2D>());
    head_ = track(std::make_shared<layers::Dense>(4));
  }
  Tensor call(const Tensor& x, bool training) override {
    return (*head_)((*pool_)((*block2_)((*block1_)(x, training), training)), training);
  }

 private:
  std::shared_ptr<ResnetIdentityBlock> block1_, block2_;
  std::shared_ptr<layers::GlobalAveragePooling2D> pool_;
  std::shared_ptr<layers::Dense> head_;
};
}  // namespace

TEST_CASE("the TensorFlow guide's residual identity block has its 18 variables", "[models][subclassing]") {
  ResnetIdentityBlock block(1, {1, 2, 3});
  const Tensor y = block(zeros({1, 2, 3, 3}));
  CHECK(y.shape() == Shape{1, 2, 3, 3});
  // The guide: len(block.variables) == 18 (3 convs x 2 + 3 batch norms x 4).
  CHECK(block.weights().size() == 18);
  // conv 1x1 3->1: 3+1; 1x1 1->2: 2+2; 1x1 2->3: 6+3  => 17 trainable conv parameters,
  // batch norm gamma/beta: 2*(1+2+3) = 12 trainable, moving mean/var: 12 non-trainable.
  std::int64_t trainable = 0, frozen = 0;
  for (Variable* v : block.trainable_weights()) trainable += v->shape().num_elements();
  for (Variable* v : block.non_trainable_weights()) frozen += v->shape().num_elements();
  CHECK(trainable == 29);
  CHECK(frozen == 12);
}

TEST_CASE("a subclassed residual network trains with fit", "[models][subclassing][training]") {
  random::set_seed(3);
  TinyResNet model;
  const Tensor x = random::normal({32, 6, 6, 3});
  const Tensor y = cast(argmax(reduce_mean(x, {1, 2}), -1), DType::int64);  // class = brightest channel
  model.compile({.optimizer = optimizers::Adam(0.01),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});
  const auto h = model.fit(x, y, {.batch_size = 8, .epochs = 8, .verbose = 0});
  CHECK(h.history.at("loss").back() < h.history.at("loss").front());
  std::ostringstream out;
  model.summary(out);
  CHECK_THAT(out.str(), Contains("resnet_identity_block"));
  // each block's batch norms have 2 + 2 + 3 channels, each with a moving mean and variance:
  // 2 blocks * 7 * 2 = 28 non-trainable parameters
  CHECK_THAT(out.str(), Contains("Non-trainable params: 28"));
}
