// models::Input with -1 (None) dimensions: variable batch and sequence lengths, summary() printing
// None, RNNs / Conv1D / pooling / attention / Masking on any length, and the errors Keras gives
// when a layer needs a None dimension to be known.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include "layers/symbolic.hpp"  // the shape Keras shows for a symbolic tensor

#include <cmath>
#include <sstream>

using namespace keel;
namespace L = keel::layers;
using Catch::Matchers::Contains;

namespace {

std::string summary_of(models::Model& m) {
  std::ostringstream out;
  m.summary(out);
  return out.str();
}

// x[b, t, :] = (t, 0): the time index in the first feature, zero in the second.
Tensor ramp(std::int64_t batch, std::int64_t length) {
  std::vector<float> v;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < length; ++t) {
      v.push_back(static_cast<float>(t));
      v.push_back(0.f);
    }
  return constant(v, Shape{batch, length, 2});
}

}  // namespace

TEST_CASE("summary prints None for an Input's None dimensions and the shapes that follow from them",
          "[models][none_dims][summary]") {
  auto x = models::Input(Shape{-1, 3}, DType::float32, "tokens");
  auto h = L::Conv1D(4, 3)(x);                  // valid: length - 2, still None
  h = L::MaxPooling1D(2)(h);                    // length / 2, still None
  auto seq = L::LSTM(5, {.return_sequences = true})(h);
  auto last = L::LSTM(6)(seq);                  // the time axis is gone
  auto y = L::Dense(1)(last);
  models::Model model(x, y, "none_dims");
  const std::string s = summary_of(model);
  CHECK_THAT(s, Contains("tokens (InputLayer)"));
  CHECK_THAT(s, Contains("(None, None, 3)"));
  CHECK_THAT(s, Contains("(None, None, 4)"));
  CHECK_THAT(s, Contains("(None, None, 5)"));
  CHECK_THAT(s, Contains("(None, 6)"));
  CHECK_THAT(s, Contains("(None, 1)"));
}

TEST_CASE("a functional model with a None time axis predicts sequences of any length",
          "[models][none_dims]") {
  // Conv1D with a ones kernel of width 2 and no bias: out[t] = x[t,0] + x[t,1] + x[t+1,0] + x[t+1,1]
  // = t + (t + 1) = 2t + 1 on ramp(); the global max over t = 0..L-2 is 2(L-2) + 1 = 2L - 3.
  auto x = models::Input(Shape{-1, 2});
  auto c = L::Conv1D(1, 2, {.use_bias = false, .kernel_initializer = "ones"})(x);
  auto y = L::GlobalMaxPooling1D()(c);
  models::Model model(x, y);
  for (std::int64_t length : {5, 9, 40, 3}) {
    const Tensor p = model.predict(ramp(2, length));
    REQUIRE(p.shape() == Shape{2, 1});
    CHECK(p.to_vector<float>() == std::vector<float>(2, static_cast<float>(2 * length - 3)));
  }
}

TEST_CASE("fit trains a None-length LSTM model on one length and it predicts on another",
          "[models][none_dims][training]") {
  random::set_seed(3);
  auto x = models::Input(Shape{-1, 2});
  auto y = L::Dense(1)(L::LSTM(4)(x));
  models::Model model(x, y);
  model.compile({.optimizer = "adam", .loss = "mse"});
  const Tensor xs = random::normal({16, 7, 2});
  const Tensor ys = random::normal({16, 1});
  const auto history = model.fit(xs, ys, {.batch_size = 8, .epochs = 2, .verbose = 0});
  CHECK(history.history.at("loss").size() == 2);
  const Tensor longer = random::normal({3, 12, 2});
  const Tensor p = model.predict(longer);
  CHECK(p.shape() == Shape{3, 1});
  // The model is the two layers applied in turn, whatever the length.
  const auto layers = model.layers();
  const Tensor direct = (*layers[1])((*layers[0])(longer, false), false);
  CHECK(p.to_vector<float>() == direct.to_vector<float>());
}

TEST_CASE("Masking before an LSTM on a None time axis: padded steps change nothing", "[models][none_dims]") {
  random::set_seed(11);
  auto x = models::Input(Shape{-1, 3});
  auto y = L::LSTM(4)(L::Masking(0.0)(x));
  models::Model model(x, y);
  const Tensor seq = random::normal({1, 4, 3});
  // The same 4 steps followed by 3 all-zero (masked) steps: Keras' LSTM skips masked steps, so
  // its last output is that of step 4.
  const Tensor padded = concat({seq, zeros({1, 3, 3})}, 1);
  const auto a = model.predict(seq).to_vector<float>();
  const auto b = model.predict(padded).to_vector<float>();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).margin(1e-6));
}

TEST_CASE("self-attention and pooling on a None time axis keep the length", "[models][none_dims]") {
  auto x = models::Input(Shape{-1, 8});
  auto a = L::MultiHeadAttention(2, 4)(x, x);
  auto pooled = L::AveragePooling1D(2)(a);
  models::Model model(std::vector<Tensor>{x}, std::vector<Tensor>{a, pooled});
  const std::string s = summary_of(model);
  CHECK_THAT(s, Contains("(None, None, 8)"));
  for (std::int64_t length : {4, 10}) {
    const auto out = model.call_all({random::normal({2, length, 8})}, false);
    CHECK(out[0].shape() == Shape{2, length, 8});
    CHECK(out[1].shape() == Shape{2, length / 2, 8});
  }
}

TEST_CASE("a layer that needs a None dimension to be known fails when the model is made",
          "[models][none_dims][errors]") {
  // Keras: "The last dimension of the inputs to a Dense layer should be defined. Found None."
  auto x = models::Input(Shape{-1});
  CHECK_THROWS_AS(L::Dense(3)(x), ValueError);
  CHECK_THROWS_WITH(L::Dense(3, {.name = "head"})(models::Input(Shape{-1})), Contains("head (Dense)") && Contains("(None, None)"));
  // Flatten of a None axis is None; a Dense after it cannot be built either.
  auto seq = models::Input(Shape{-1, 4});
  auto flat = L::Flatten()(seq);
  CHECK(layers::detail::static_shape(flat) == Shape{-1, -1});
  CHECK_THROWS_AS(L::Dense(2)(flat), ValueError);
  CHECK_THROWS_AS(models::Input(Shape{-2, 4}), ValueError);
}

TEST_CASE("a None-length model still checks its known dimensions", "[models][none_dims][errors]") {
  auto x = models::Input(Shape{-1, 3});
  models::Model model(x, L::LSTM(2)(x));
  CHECK_THROWS_AS(model.predict(random::normal({2, 5, 4})), ShapeError);
  CHECK_THROWS_AS(model.predict(random::normal({2, 5})), ShapeError);
}

TEST_CASE("get_config writes None dimensions as null and from_config rebuilds them", "[models][none_dims][config]") {
  auto x = models::Input(Shape{-1, 3}, DType::float32, "series");
  auto y = L::Dense(2)(L::LSTM(4, {.return_sequences = true})(x));
  models::Model model(x, y);
  const nlohmann::json config = model.get_config();
  const auto& input_config = config.at("layers").at(0).at("config");
  CHECK(input_config.at("batch_shape") == nlohmann::json::parse("[null, null, 3]"));
  auto rebuilt = std::dynamic_pointer_cast<models::Model>(layers::from_config("Functional", config));
  REQUIRE(rebuilt);
  rebuilt->set_weights(model.get_weights());
  const std::string s = summary_of(*rebuilt);
  CHECK_THAT(s, Contains("(None, None, 3)"));
  CHECK_THAT(s, Contains("(None, None, 2)"));
  const Tensor in = random::normal({1, 9, 3});
  CHECK(rebuilt->predict(in).to_vector<float>() == model.predict(in).to_vector<float>());
}

TEST_CASE("a Sequential with a None-length InputLayer traces both sizes and saves None", "[models][none_dims]") {
  models::Sequential model;
  model.add(L::InputLayer({-1, 2}));
  model.add(L::Conv1D(3, 2, {.padding = "same"}));
  model.add(L::GlobalAveragePooling1D());
  model.add(L::Dense(1));
  const std::string s = summary_of(model);
  CHECK_THAT(s, Contains("(None, None, 3)"));
  CHECK_THAT(s, Contains("(None, 3)"));
  CHECK(model.get_config().at("build_input_shape") == nlohmann::json::parse("[null, null, 2]"));
  CHECK(model.predict(ramp(2, 6)).shape() == Shape{2, 1});
  CHECK(model.predict(ramp(1, 11)).shape() == Shape{1, 1});
  models::Sequential bad;
  bad.add(L::InputLayer({-1, 2}));
  CHECK_NOTHROW(bad.add(L::Flatten()));             // (None, None): fine on its own
  CHECK_THROWS_AS(bad.add(L::Dense(1)), ValueError);  // but a Dense needs its features known
}

TEST_CASE("compute_output_shape keeps -1 for dimensions that follow a None one", "[models][none_dims]") {
  L::LSTM lstm(5, {.return_sequences = true});
  CHECK(lstm.compute_output_shape(Shape{-1, -1, 3}) == Shape{-1, -1, 5});
  L::LSTM last(5);
  CHECK(last.compute_output_shape(Shape{8, -1, 3}) == Shape{8, 5});
}
