// Every built-in layer under mixed_float16 and mixed_bfloat16: the dtype of its output, the dtype
// its call() computes in (the inputs it receives, the weights it reads), half-precision results
// equal to the ops run in half precision, and a small CNN that trains.
//
// The expectations are Keras 3's (keras.io/guides/mixed_precision and keras/src/layers/layer.py):
// under a mixed policy a layer's variables are float32 and its compute dtype is float16
// (bfloat16); Layer.__call__ casts floating inputs to the compute dtype and the variables are
// read (autocast) in it, so Dense, Conv2D, LSTM, pooling and the shape layers compute in and
// return the compute dtype. BatchNormalization computes in float32 and hands back the compute
// dtype (keras/src/layers/normalization/batch_normalization.py casts float16/bfloat16 inputs to
// float32 and its output back). keel's LayerNormalization, Softmax and Dropout do the same for
// their numerics; their outputs keep Keras' dtype.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "policy_guard.hpp"

using namespace keel;
using keel_test::PolicyGuard;

namespace {

// A built-in layer that records what its call() sees: the dtype of its input and that of its
// first weight as read inside the call (the dtype its kernels compute in).
template <class L>
struct Probe : L {
  using L::L;
  using L::call;
  std::optional<DType> input, weight;
  Tensor call(const Tensor& x, bool training) override {
    input = x.dtype();
    const auto w = this->weights();
    if (!w.empty()) weight = w[0]->value().dtype();
    return L::call(x, training);
  }
};

Tensor image() { return random::normal({2, 6, 6, 3}); }
Tensor sequence() { return random::normal({2, 4, 3}); }
Tensor features() { return random::normal({2, 5}); }

struct Case {
  std::string name;
  std::function<Tensor()> run;
};

// Each built-in layer called once on float32 data, made under the current global policy.
std::vector<Case> every_layer() {
  return {
      {"Dense", [] { return layers::Dense(3)(features()); }},
      {"Dense on integer features", [] { return layers::Dense(3)(ones({2, 5}, DType::int32)); }},
      {"Conv1D", [] { return layers::Conv1D(2, 2)(sequence()); }},
      {"Conv2D", [] { return layers::Conv2D(2, {3, 3})(image()); }},
      {"Conv2D channels_first", [] { return layers::Conv2D(2, {3, 3}, {.data_format = "channels_first"})(image()); }},
      {"Conv2DTranspose", [] { return layers::Conv2DTranspose(2, {3, 3})(image()); }},
      {"DepthwiseConv2D", [] { return layers::DepthwiseConv2D({3, 3})(image()); }},
      {"MaxPooling2D", [] { return layers::MaxPooling2D({2, 2})(image()); }},
      {"AveragePooling2D", [] { return layers::AveragePooling2D({2, 2})(image()); }},
      {"GlobalAveragePooling2D", [] { return layers::GlobalAveragePooling2D()(image()); }},
      {"GlobalMaxPooling2D", [] { return layers::GlobalMaxPooling2D()(image()); }},
      {"BatchNormalization", [] { return layers::BatchNormalization()(image(), true); }},
      {"LayerNormalization", [] { return layers::LayerNormalization()(image()); }},
      {"Softmax", [] { return layers::Softmax()(features()); }},
      {"Activation", [] { return layers::Activation("softmax")(features()); }},
      {"ReLU", [] { return layers::ReLU()(features()); }},
      {"LeakyReLU", [] { return layers::LeakyReLU()(features()); }},
      {"Dropout", [] { return layers::Dropout(0.5)(features(), true); }},
      {"Flatten", [] { return layers::Flatten()(image()); }},
      {"Reshape", [] { return layers::Reshape({36, 3})(image()); }},
      {"Permute", [] { return layers::Permute({2, 1})(sequence()); }},
      {"Masking", [] { return layers::Masking()(sequence()); }},
      {"Add", [] { return layers::Add()({features(), features()}); }},
      {"Multiply", [] { return layers::Multiply()({features(), features()}); }},
      {"Concatenate", [] { return layers::Concatenate()({features(), features()}); }},
      {"Rescaling", [] { return layers::Rescaling(1.0 / 255)(ones({2, 4, 4, 1}, DType::uint8)); }},
      {"Embedding", [] { return layers::Embedding(5, 3)(constant(std::vector<std::int32_t>{1, 4}, {2})); }},
      {"SimpleRNN", [] { return layers::SimpleRNN(3)(sequence()); }},
      {"LSTM", [] { return layers::LSTM(3)(sequence()); }},
      {"LSTM return_sequences", [] { return layers::LSTM(3, {.return_sequences = true})(sequence()); }},
      {"LSTM with dropout, training",
       [] { return layers::LSTM(3, {.dropout = 0.5, .recurrent_dropout = 0.5, .seed = 1})(sequence(), true); }},
      {"GRU", [] { return layers::GRU(3)(sequence()); }},
      {"Bidirectional", [] { return layers::Bidirectional(layers::LSTM(3))(sequence()); }},
      {"TimeDistributed", [] { return layers::TimeDistributed(layers::Dense(2))(sequence()); }},
      {"MultiHeadAttention", [] { return layers::MultiHeadAttention(2, 4)({sequence(), sequence()}); }},
      {"MultiHeadAttention with dropout, training",
       [] { return layers::MultiHeadAttention(2, 4, {.dropout = 0.5})({sequence(), sequence()}, true); }},
      {"RandomFlip", [] { return layers::RandomFlip()(image(), true); }},
      {"RandomCrop", [] { return layers::RandomCrop(4, 4)(image(), true); }},
      {"RandomTranslation", [] { return layers::RandomTranslation(0.2, 0.2)(image(), true); }},
  };
}

}  // namespace

TEST_CASE("under a mixed policy every built-in layer returns the compute dtype", "[layers][mixed]") {
  for (const auto& [policy, compute] : {std::pair{"mixed_float16", DType::float16},
                                        std::pair{"mixed_bfloat16", DType::bfloat16}}) {
    PolicyGuard guard(policy);
    random::set_seed(1);
    for (const Case& c : every_layer()) {
      INFO(policy << ": " << c.name);
      CHECK(c.run().dtype() == compute);
    }
  }
  // Every activation by name, in the compute dtype.
  for (const char* name : {"linear", "relu", "sigmoid", "tanh", "softmax", "log_softmax", "elu", "gelu", "silu",
                           "swish", "softplus", "leaky_relu", "exponential", "selu", "softsign", "hard_sigmoid",
                           "hard_silu", "mish"}) {
    PolicyGuard guard("mixed_float16");
    INFO(name);
    CHECK(layers::Activation(name)(features()).dtype() == DType::float16);
    CHECK(layers::Dense(2, {.activation = name})(features()).dtype() == DType::float16);
  }
  // Under float32 the same layers return float32.
  for (const Case& c : every_layer()) {
    INFO("float32: " << c.name);
    CHECK(c.run().dtype() == DType::float32);
  }
}

TEST_CASE("call() receives inputs in the compute dtype and reads the weights in it", "[layers][mixed]") {
  for (const auto& [policy, compute] : {std::pair{"mixed_float16", DType::float16},
                                        std::pair{"mixed_bfloat16", DType::bfloat16}}) {
    INFO(policy);
    PolicyGuard guard(policy);
    const auto check = [&](auto& layer, const auto& inputs, DType want, const char* what) {
      INFO(what);
      layer(inputs);
      REQUIRE(layer.input.has_value());
      CHECK(*layer.input == want);
      if (!layer.weights().empty()) {
        REQUIRE(layer.weight.has_value());
        CHECK(*layer.weight == want);
        for (Variable* v : layer.weights()) CHECK(v->dtype() == DType::float32);  // stored in float32
      }
    };
    Probe<layers::Dense> dense(3);
    check(dense, features(), compute, "Dense");
    Probe<layers::Conv2D> conv(2, {3, 3});
    check(conv, image(), compute, "Conv2D");
    Probe<layers::DepthwiseConv2D> depthwise({3, 3});
    check(depthwise, image(), compute, "DepthwiseConv2D");
    Probe<layers::MaxPooling2D> max_pool({2, 2});
    check(max_pool, image(), compute, "MaxPooling2D");
    Probe<layers::AveragePooling2D> avg_pool({2, 2});
    check(avg_pool, image(), compute, "AveragePooling2D");
    Probe<layers::LSTM> lstm(3);
    check(lstm, sequence(), compute, "LSTM");
    Probe<layers::GRU> gru(3);
    check(gru, sequence(), compute, "GRU");
    // Integer images reach the convolution as floats in the compute dtype.
    Probe<layers::Conv2D> conv_u8(2, {3, 3});
    check(conv_u8, ones({1, 5, 5, 1}, DType::uint8), compute, "Conv2D on uint8");
    // The float32 layers: BatchNormalization computes in float32 (Keras 3), and so do keel's
    // LayerNormalization and Softmax; their weights are read in float32.
    Probe<layers::BatchNormalization> bn;
    check(bn, cast(image(), compute), DType::float32, "BatchNormalization");
    Probe<layers::LayerNormalization> ln;
    check(ln, cast(image(), compute), DType::float32, "LayerNormalization");
    Probe<layers::Softmax> softmax;
    check(softmax, features(), DType::float32, "Softmax");
  }
}

TEST_CASE("Conv2D and MaxPooling2D under mixed_float16 equal their ops run in float16", "[layers][mixed]") {
  random::set_seed(5);
  const Tensor x = random::normal({2, 5, 5, 3});
  PolicyGuard guard("mixed_float16");
  layers::Conv2D conv(4, {3, 3}, {.bias_initializer = "ones"});
  const Tensor y = conv(x);
  REQUIRE(y.dtype() == DType::float16);
  const DType h = DType::float16;
  // The kernel and bias read in float16, the input cast to it: nothing computed in float32.
  const Tensor want = conv2d(cast(x, h), cast(conv.kernel().peek(), h)) + cast(conv.bias().peek(), h);
  CHECK(cast(y, DType::float32).to_vector<float>() == cast(want, DType::float32).to_vector<float>());

  layers::MaxPooling2D pool({2, 2});
  const Tensor p = pool(y);
  REQUIRE(p.dtype() == h);
  CHECK(cast(p, DType::float32).to_vector<float>() ==
        cast(max_pool2d(y, {2, 2}, {2, 2}), DType::float32).to_vector<float>());

  // Gradients reach the float32 kernel through the float16 computation, in float32.
  GradientTape tape;
  const Tensor loss = reduce_sum(cast(pool(conv(x)), DType::float32));
  const auto grads = tape.gradient(loss, std::vector<Variable*>{&conv.kernel(), &conv.bias()});
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].dtype() == DType::float32);
  CHECK(grads[0].shape() == conv.kernel().shape());
}

TEST_CASE("a layer whose op refuses the compute dtype raises and is not rerun in float32", "[layers][mixed]") {
  struct Strict : layers::Layer {
    int calls = 0;
    using Layer::call;
    Tensor call(const Tensor& x, bool) override {
      ++calls;
      if (x.dtype() != DType::float32) throw DTypeError("strict: float32 only");
      return x;
    }
  };
  PolicyGuard guard("mixed_float16");
  Strict strict;
  CHECK_THROWS_AS(strict(ones({2, 2})), DTypeError);
  CHECK(strict.calls == 1);
  CHECK_THROWS_AS(strict(ones({2, 2})), DTypeError);  // every call: no float32 fallback remembered
  CHECK(strict.calls == 2);
}

TEST_CASE("a CNN trains under mixed_float16 and mixed_bfloat16", "[layers][mixed][model]") {
  // Label 1 when the left half of an 8x8 image is brighter than the right half.
  random::set_seed(11);
  const std::int64_t n = 64;
  const Tensor x = random::normal({n, 8, 8, 1});
  const auto v = x.to_vector<float>();
  std::vector<std::int32_t> labels;
  for (std::int64_t i = 0; i < n; ++i) {
    double left = 0, right = 0;
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) (c < 4 ? left : right) += v[static_cast<std::size_t>(i * 64 + r * 8 + c)];
    labels.push_back(left > right ? 1 : 0);
  }
  const Tensor y = constant(labels, Shape{n});
  for (const auto& [policy, compute] : {std::pair{"mixed_float16", DType::float16},
                                        std::pair{"mixed_bfloat16", DType::bfloat16}}) {
    INFO(policy);
    PolicyGuard guard(policy);
    random::set_seed(3);
    models::Sequential model{layers::InputLayer({8, 8, 1}),
                             layers::Conv2D(8, {3, 3}, {.padding = "same", .activation = "relu"}),
                             layers::MaxPooling2D({2, 2}),
                             layers::BatchNormalization(),
                             layers::Flatten(),
                             layers::Dense(2),
                             layers::Activation("softmax", {.dtype = "float32"})};
    model.compile({.optimizer = optimizers::Adam(0.01), .loss = "sparse_categorical_crossentropy",
                   .metrics = {"accuracy"}});
    const auto history = model.fit(x, y, {.batch_size = 16, .epochs = 12, .verbose = 0});
    const auto& loss = history.history.at("loss");
    REQUIRE(loss.size() == 12);
    CHECK(std::isfinite(loss.back()));
    CHECK(loss.back() < 0.7 * loss.front());
    for (Variable* w : model.weights()) CHECK(w->dtype() == DType::float32);
    CHECK(model.predict(x).dtype() == DType::float32);  // the float32 softmax at the end
    const auto list = model.layers();
    CHECK(list[0]->dtype_policy().compute_dtype() == compute);
  }
}
