// SpectralNormalization (Keras 3): power iteration on a 2x2 kernel by hand, the training-time
// assignment of kernel / sigma and u, inference leaving the kernel alone, gradients, config.
#include <catch2/catch.hpp>
#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

using namespace keel;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// A wrapped Dense(2, no bias) with kernel K = [[1, 1], [0, 1]] and u = [1, 0].
void set_up(layers::SpectralNormalization& sn) {
  sn(zeros({1, 2}));
  sn.kernel().assign(constant({1.f, 1.f, 0.f, 1.f}, Shape{2, 2}));
  sn.vector_u().assign(constant({1.f, 0.f}, Shape{1, 2}));
}

}  // namespace

TEST_CASE("SpectralNormalization: one power iteration on a 2x2 kernel", "[spectral_norm]") {
  layers::SpectralNormalization sn(layers::Dense(2, {.use_bias = false}));
  set_up(sn);
  CHECK(sn.vector_u().shape() == Shape{1, 2});
  CHECK_FALSE(sn.vector_u().trainable());
  // v = normalize(u K^T) = normalize([1, 0]) = [1, 0]; u = normalize(v K) = normalize([1, 1])
  // = [1, 1]/sqrt(2); sigma = v K u^T = [1, 1] . [1, 1]/sqrt(2) = sqrt(2).
  const double s = std::sqrt(2.0);
  const Tensor x = constant({1.f, 2.f}, Shape{1, 2});
  const auto y = values(sn(x, true));
  // x K / sigma = [1, 1 + 2] / sqrt(2).
  CHECK(y[0] == Approx(1 / s).epsilon(1e-5));
  CHECK(y[1] == Approx(3 / s).epsilon(1e-5));
  const auto k = values(sn.kernel().peek());
  CHECK(k[0] == Approx(1 / s).epsilon(1e-5));
  CHECK(k[1] == Approx(1 / s).epsilon(1e-5));
  CHECK(k[2] == 0.f);
  const auto u = values(sn.vector_u().peek());
  CHECK(u[0] == Approx(1 / s).epsilon(1e-5));
  CHECK(u[1] == Approx(1 / s).epsilon(1e-5));
  // Inference runs the (now normalised) kernel as it is.
  const auto again = values(sn(x, false));
  CHECK(again[1] == Approx(3 / s).epsilon(1e-5));
  CHECK(values(sn.kernel().peek())[0] == Approx(1 / s).epsilon(1e-5));
}

TEST_CASE("SpectralNormalization: two power iterations approach the largest singular value", "[spectral_norm]") {
  layers::SpectralNormalization sn(layers::Dense(2, {.use_bias = false}), {.power_iterations = 2});
  set_up(sn);
  // Second iteration from u = [1, 1]/sqrt(2): u K^T ~ [2, 1] -> v = [2, 1]/sqrt(5);
  // v K = [2, 3]/sqrt(5) -> u = [2, 3]/sqrt(13); sigma = 13 / sqrt(65) = sqrt(13/5) = 1.61245
  // (the exact largest singular value of K is the golden ratio 1.61803).
  auto [u, k] = sn.normalized_weights();
  const double sigma = std::sqrt(13.0 / 5.0);
  CHECK(values(k)[0] == Approx(1 / sigma).epsilon(1e-5));
  CHECK(values(u)[1] == Approx(3 / std::sqrt(13.0)).epsilon(1e-5));
  // normalized_weights assigns nothing.
  CHECK(values(sn.kernel().peek())[0] == 1.f);
}

TEST_CASE("SpectralNormalization: gradients reach the kernel as the wrapped layer's", "[spectral_norm]") {
  layers::SpectralNormalization sn(layers::Dense(2, {.use_bias = false}));
  set_up(sn);
  const Tensor x = constant({1.f, 2.f}, Shape{1, 2});
  GradientTape tape;
  const Tensor loss = reduce_sum(sn(x, true));
  // Keras assigns kernel / sigma before the call: d sum(x K') / dK' = x^T 1 = [[1, 1], [2, 2]].
  const auto g = values(tape.gradient(loss, sn.kernel()));
  CHECK(g == std::vector<float>{1.f, 1.f, 2.f, 2.f});
  CHECK(sn.trainable_weights().size() == 1);      // the kernel
  CHECK(sn.non_trainable_weights().size() == 1);  // vector_u
}

TEST_CASE("SpectralNormalization: an all-zero kernel stays", "[spectral_norm]") {
  layers::SpectralNormalization sn(layers::Dense(2, {.use_bias = false}));
  sn(zeros({1, 2}));
  sn.kernel().assign(zeros({2, 2}));
  const auto y = values(sn(ones({1, 2}), true));
  CHECK(y == std::vector<float>{0.f, 0.f});
  CHECK(values(sn.kernel().peek()) == std::vector<float>{0.f, 0.f, 0.f, 0.f});
}

TEST_CASE("SpectralNormalization: config round trip, Conv2D, errors", "[spectral_norm]") {
  layers::SpectralNormalization sn(layers::Dense(3), {.power_iterations = 2});
  const nlohmann::json c = sn.get_config();
  CHECK(c["power_iterations"] == 2);
  CHECK(c["layer"]["class_name"] == "Dense");
  CHECK(c["layer"]["config"]["units"] == 3);
  auto back = layers::from_config("SpectralNormalization", c);
  auto* sn2 = dynamic_cast<layers::SpectralNormalization*>(back.get());
  REQUIRE(sn2 != nullptr);
  CHECK(sn2->power_iterations() == 2);
  CHECK(sn2->layer()->class_name() == "Dense");
  CHECK((*back)(ones({2, 4})).shape() == Shape{2, 3});

  // A 4-D kernel is viewed as [kh * kw * in, out]: u is [1, filters].
  layers::SpectralNormalization conv(layers::Conv2D(5, 3));
  const Tensor y = conv(random::normal({1, 6, 6, 2}), true);
  CHECK(y.shape() == Shape{1, 4, 4, 5});
  CHECK(conv.vector_u().shape() == Shape{1, 5});

  CHECK_THROWS_AS(layers::SpectralNormalization(layers::Dense(2), {.power_iterations = 0}), ValueError);
  layers::SpectralNormalization no_kernel(layers::Dropout(0.5));
  CHECK_THROWS_AS(no_kernel(ones({1, 2})), ValueError);
}
