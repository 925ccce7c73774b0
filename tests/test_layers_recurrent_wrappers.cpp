// The recurrent wrappers: Bidirectional (forward and time-ordered backward outputs, masks) and
// TimeDistributed (the inner layer on every step, masks per step), against the reference loops
// of recurrent_fixtures.hpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "recurrent_fixtures.hpp"

using namespace keel;
namespace L = keel::layers;
using namespace keel_test;

namespace {

// A layer that is not recurrent, for the wrappers' argument checks and TimeDistributed:
// y = x . kernel on the last axis.
class Project : public L::Layer {
 public:
  explicit Project(int units) : units_(units) {}
  KEEL_LAYER_BOILERPLATE(Project)
  using L::Layer::build;
  using L::Layer::call;
  void build(const Shape& s) override { kernel_ = &add_weight("kernel", Shape{s[s.rank() - 1], units_}); }
  Tensor call(const Tensor& x, bool) override { return matmul(x, kernel_->value()); }
  Variable* kernel_ = nullptr;

 private:
  int units_;
};

}  // namespace

// ---- Bidirectional ------------------------------------------------------------------------------

TEST_CASE("Bidirectional merges the forward output with the time-ordered backward output",
          "[layers][recurrent][bidirectional]") {
  const std::int64_t B = 2, T = 4, F = 3, u = 3;
  const Tensor x = sequence({B, T, F}, 0.35);
  L::Bidirectional bi(std::make_shared<L::LSTM>(static_cast<int>(u), L::LSTMOptions{.return_sequences = true}));
  bi(x);
  set_weights(bi);
  const auto& fw = *bi.forward_layer();
  const auto& bw = *bi.backward_layer();
  CHECK(fw.name().rfind("forward_", 0) == 0);
  CHECK(bw.name().rfind("backward_", 0) == 0);
  CHECK(!fw.go_backwards());
  CHECK(bw.go_backwards());

  const auto fw_w = bi.forward_layer()->trainable_weights();
  const auto bw_w = bi.backward_layer()->trainable_weights();
  const RefRun rf = ref_lstm(values(x), B, T, F, u, values(fw_w[0]), values(fw_w[1]), values(fw_w[2]), kTanh, kSigmoid, false);
  const RefRun rb = ref_lstm(values(x), B, T, F, u, values(bw_w[0]), values(bw_w[1]), values(bw_w[2]), kTanh, kSigmoid, true);
  const std::vector<double> y = values(bi(x));
  REQUIRE(y.size() == static_cast<std::size_t>(B * T * 2 * u));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t j = 0; j < u; ++j) {
        INFO("b " << b << " t " << t << " j " << j);
        CHECK(y[static_cast<std::size_t>((b * T + t) * 2 * u + j)] ==
              Approx(rf.outputs[static_cast<std::size_t>(t)][static_cast<std::size_t>(b * u + j)]).margin(1e-5));
        // The backward layer saw step t as its (T-1-t)-th step.
        CHECK(y[static_cast<std::size_t>((b * T + t) * 2 * u + u + j)] ==
              Approx(rb.outputs[static_cast<std::size_t>(T - 1 - t)][static_cast<std::size_t>(b * u + j)]).margin(1e-5));
      }

  // sum / mul / ave from the same two directions.
  const Tensor yf = slice(bi(x), {0, 0, 0}, {B, T, u}), yb = slice(bi(x), {0, 0, u}, {B, T, u});
  for (const char* mode : {"sum", "mul", "ave"}) {
    INFO("merge_mode " << mode);
    L::Bidirectional m(L::LSTM(static_cast<int>(u), {.return_sequences = true}), {.merge_mode = mode});
    m(x);
    copy_weights(bi, m);
    const Tensor expect = std::string(mode) == "sum" ? yf + yb : std::string(mode) == "mul" ? yf * yb : (yf + yb) * 0.5;
    const Tensor got = m(x);
    CHECK(got.shape() == Shape{B, T, u});
    check_close(values(got), values(expect));
  }

  // Without return_sequences: the forward final output next to the backward final output.
  L::Bidirectional last(L::GRU(static_cast<int>(u)));
  CHECK(last(x).shape() == Shape{B, 2 * u});
}

TEST_CASE("Bidirectional with a mask zeroes masked steps and matches the unpadded sequence",
          "[layers][recurrent][bidirectional][mask]") {
  const Tensor x = sequence({2, 4, 3}, 0.45);
  const Tensor mask = constant<bool>({true, true, true, true, true, true, false, false}, Shape{2, 4});
  L::Bidirectional bi(L::LSTM(2, {.return_sequences = true}));
  bi(x);
  set_weights(bi);
  const Tensor y = bi(L::with_mask(x, mask));
  CHECK(L::get_mask(y).defined());
  const std::vector<double> yv = values(y);
  const std::vector<double> p = values(bi(slice(x, {1, 0, 0}, {1, 2, 3})));
  for (std::int64_t t = 0; t < 4; ++t)
    for (std::int64_t j = 0; j < 4; ++j) {
      const double v = yv[static_cast<std::size_t>((4 + t) * 4 + j)];
      if (t < 2)
        CHECK(v == Approx(p[static_cast<std::size_t>(t * 4 + j)]).margin(1e-6));
      else
        CHECK(v == 0);  // zero_output_for_mask, as Keras sets it for Bidirectional
    }
}

TEST_CASE("Bidirectional rejects bad arguments", "[layers][recurrent][bidirectional][errors]") {
  CHECK_THROWS_AS(L::Bidirectional(L::LSTM(2), {.merge_mode = "max"}), ValueError);
  CHECK_THROWS_AS(L::Bidirectional(std::make_shared<Project>(2)), ValueError);
  CHECK_THROWS_AS(L::Bidirectional(L::LSTM(2), {.backward_layer = std::make_shared<L::LSTM>(2)}),
                  ValueError);  // both forwards
  CHECK_THROWS_AS(L::Bidirectional(L::LSTM(2), {.backward_layer = std::make_shared<L::LSTM>(
                                                     2, L::LSTMOptions{.return_sequences = true, .go_backwards = true})}),
                  ValueError);  // return_sequences differ
  L::Bidirectional custom(L::LSTM(2), {.backward_layer = std::make_shared<L::GRU>(2, L::GRUOptions{.go_backwards = true})});
  CHECK(custom(sequence({1, 3, 2})).shape() == Shape{1, 4});
  CHECK_THROWS_AS(custom(sequence({1, 2})), ShapeError);
}

// ---- TimeDistributed ------------------------------------------------------------------------------

TEST_CASE("TimeDistributed applies the inner layer to every time step", "[layers][recurrent][time_distributed]") {
  const Tensor x = sequence({2, 3, 4}, 0.15);
  auto inner = std::make_shared<Project>(5);
  L::TimeDistributed td(inner);
  const Tensor y = td(x);
  CHECK(y.shape() == Shape{2, 3, 5});
  CHECK(td.count_params() == 4 * 5);
  CHECK(td.trainable_weights().size() == 1);
  for (std::int64_t t = 0; t < 3; ++t) {
    const Tensor xt = reshape(slice(x, {0, t, 0}, {2, 1, 4}), Shape{2, 4});
    const Tensor yt = reshape(slice(y, {0, t, 0}, {2, 1, 5}), Shape{2, 5});
    check_close(values(yt), values(matmul(xt, inner->kernel_->peek())));
  }
  // Images per time step: [batch, time, h, w, c] stay 5-D.
  L::TimeDistributed td2(std::make_shared<Project>(2));
  CHECK(td2(sequence({2, 3, 4, 4, 3})).shape() == Shape{2, 3, 4, 4, 2});
  // A mask rides through.
  const Tensor mask = constant<bool>({true, true, false, true, false, false}, Shape{2, 3});
  CHECK(L::get_mask(td(L::with_mask(x, mask))).defined());
  CHECK_THROWS_AS(L::TimeDistributed(std::make_shared<Project>(2))(sequence({2, 3})), ShapeError);
  check_gradient_flow(td, x);
}

TEST_CASE("TimeDistributed hands each step's mask to the wrapped layer", "[layers][masking]") {
  // inputs [batch 1, time 3, features 1] = 1, 2, 100 with the last step masked: the inner
  // BatchNormalization sees [3, 1] with the mask [3] and takes its statistics over 1 and 2 only
  // (mean 1.5, variance 0.25; see the BatchNormalization mask test), so its moving mean becomes
  // 0.01 * 1.5 = 0.015 rather than 0.01 * 103 / 3.
  auto bn = std::make_shared<layers::BatchNormalization>();
  layers::TimeDistributed td{layers::LayerRef(bn)};
  const Tensor x = layers::with_mask(constant({1.f, 2.f, 100.f}, {1, 3, 1}), constant({true, true, false}, {1, 3}));
  const Tensor y = td(x, true);
  CHECK(bn->moving_mean().value().item<double>() == Approx(0.015).margin(1e-7));
  CHECK(y.to_vector<double>()[0] == Approx(-0.5 / std::sqrt(0.251)).epsilon(1e-4));
  REQUIRE(layers::get_mask(y).defined());
  CHECK(layers::get_mask(y).shape() == Shape{1, 3});
  // a mask that does not start with (batch, time) is a ValueError, as in current Keras
  const Tensor bad = layers::with_mask(constant({1.f, 2.f, 100.f}, {1, 3, 1}), constant({true, true}, {1, 2}));
  CHECK_THROWS_AS(td(bad, true), ValueError);
}
