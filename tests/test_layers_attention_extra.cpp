// Attention and AdditiveAttention (keel/layers/attention.hpp): scores, masking and outputs against
// Keras' definitions recomputed in plain C++, causal masks, float64 gradients, errors and config
// round trips.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "layer_checks.hpp"

using namespace keel;
using keel_test::check_values;

namespace {
// Keras' attention, out[b, i] = sum_j softmax_j(score(b, i, j)) v[b, j], with masked (j > i when
// causal) scores left out, computed in plain C++.
template <class Score>
std::vector<double> reference(const Tensor& q, const Tensor& v, Score score, bool causal = false) {
  const auto& s = q.shape();
  const std::int64_t B = s[0], Tq = s[1], Tv = v.shape()[1], D = v.shape()[2];
  const auto vv = v.to_vector<double>();
  std::vector<double> out;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Tq; ++i) {
      std::vector<double> w(static_cast<std::size_t>(Tv));
      double total = 0;
      for (std::int64_t j = 0; j < Tv; ++j) {
        w[j] = (causal && j > i) ? 0.0 : std::exp(score(b, i, j));
        total += w[j];
      }
      for (std::int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (std::int64_t j = 0; j < Tv; ++j) acc += w[j] / total * vv[(b * Tv + j) * D + d];
        out.push_back(acc);
      }
    }
  return out;
}
}  // namespace

TEST_CASE("Attention (dot): softmax(q k^T) v, causal mask, value mask", "[layers][attention]") {
  const Tensor q = random::normal({2, 3, 4}, 0, 1, DType::float64);
  const Tensor v = random::normal({2, 5, 4}, 0, 1, DType::float64);
  const auto qv = q.to_vector<double>(), vv = v.to_vector<double>();
  const auto dot = [&](std::int64_t b, std::int64_t i, std::int64_t j) {
    double s = 0;
    for (int d = 0; d < 4; ++d) s += qv[(b * 3 + i) * 4 + d] * vv[(b * 5 + j) * 4 + d];
    return s;
  };
  layers::Attention att;
  check_values(att({q, v}), reference(q, v, dot), 1e-9);
  CHECK(att.trainable_weights().empty());  // use_scale = false: no weights
  check_values(att(q, v, {.use_causal_mask = true}), reference(q, v, dot, true), 1e-9);
  // a value mask hiding the last two steps = attention over the first three only
  const Tensor vm = constant(std::vector<bool>{true, true, true, false, false, true, true, true, false, false}, {2, 5});
  const Tensor v3 = slice(v, {0, 0, 0}, {2, 3, 4});
  const auto dot3 = [&](std::int64_t b, std::int64_t i, std::int64_t j) { return dot(b, i, j); };
  check_values(att(q, v, {.value_mask = vm}), reference(q, v3, dot3), 1e-9);
  // a query mask zeroes the masked query steps and rides on the output
  const Tensor qm = constant(std::vector<bool>{true, false, true, true, true, false}, {2, 3});
  const Tensor y = att(q, v, {.query_mask = qm});
  for (int d = 0; d < 4; ++d) CHECK(y.to_vector<double>()[4 + d] == 0.0);
  CHECK(layers::get_mask(y).defined());
  auto [out, scores] = att.call_with_scores(q, v);
  CHECK(scores.shape() == Shape{2, 3, 5});
  check_values(reduce_sum(scores, {-1}), std::vector<double>(6, 1.0), 1e-12);
}

TEST_CASE("Attention (concat, use_scale) and AdditiveAttention scores", "[layers][attention]") {
  const Tensor q = random::normal({1, 2, 3}, 0, 1, DType::float64);
  const Tensor v = random::normal({1, 4, 3}, 0, 1, DType::float64);
  const auto qv = q.to_vector<double>(), vv = v.to_vector<double>();
  // concat with the initial weights (scale 1, concat_score_weight 1): sum_d tanh(q_id + k_jd)
  const auto concat = [&](std::int64_t, std::int64_t i, std::int64_t j) {
    double s = 0;
    for (int d = 0; d < 3; ++d) s += std::tanh(qv[i * 3 + d] + vv[j * 3 + d]);
    return s;
  };
  layers::Attention att({.use_scale = true, .score_mode = "concat"});
  check_values(att({q, v}), reference(q, v, concat), 1e-9);
  CHECK(att.trainable_weights().size() == 2);
  // AdditiveAttention with scale set to (0.5, -1, 2): sum_d scale_d tanh(q_id + k_jd)
  layers::AdditiveAttention aa;
  aa({q, v});
  REQUIRE(aa.trainable_weights().size() == 1);
  aa.trainable_weights()[0]->assign(constant(std::vector<float>{0.5f, -1.f, 2.f}, {3}));
  const double sc[3] = {0.5, -1, 2};
  const auto additive = [&](std::int64_t, std::int64_t i, std::int64_t j) {
    double s = 0;
    for (int d = 0; d < 3; ++d) s += sc[d] * std::tanh(qv[i * 3 + d] + vv[j * 3 + d]);
    return s;
  };
  check_values(aa({q, v}), reference(q, v, additive), 1e-6);
  CHECK_THROWS_AS(layers::Attention({.score_mode = "general"}), ValueError);
  CHECK_THROWS_AS(att(q), ValueError);
  CHECK_THROWS_AS(att({q, random::normal({1, 4, 2}, 0, 1, DType::float64)}), ShapeError);
}

TEST_CASE("Attention and AdditiveAttention: gradients, dropout in training only, config round trip", "[layers][attention][gradcheck]") {
  const Tensor q = random::normal({2, 2, 3}, 0, 1, DType::float64);
  const Tensor v = random::normal({2, 3, 3}, 0, 1, DType::float64);
  const Tensor k = random::normal({2, 3, 3}, 0, 1, DType::float64);
  layers::Attention att({.use_scale = true});
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return att({in[0], in[1], in[2]}); }, {q, v, k});
  layers::Attention cat({.score_mode = "concat"});
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return cat(in[0], in[1], {.use_causal_mask = true}); }, {q, v});
  layers::AdditiveAttention aa;
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return aa({in[0], in[1]}); }, {q, v});

  layers::Attention drop({.dropout = 0.5, .seed = 3});
  const auto infer = drop({q, v}).to_vector<double>();
  CHECK(drop({q, v}).to_vector<double>() == infer);
  CHECK(drop({q, v}, true).to_vector<double>() != infer);

  const auto copy = layers::from_config("Attention", cat.get_config());
  CHECK(copy->get_config() == cat.get_config());
  check_values((*copy)({q, v}), cat({q, v}).to_vector<double>(), 1e-12);
  const auto copy2 = layers::from_config("AdditiveAttention", aa.get_config());
  (*copy2)({q, v});
  copy2->trainable_weights()[0]->assign(aa.trainable_weights()[0]->value());
  check_values((*copy2)({q, v}), aa({q, v}).to_vector<double>(), 1e-12);
}
