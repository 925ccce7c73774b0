// MultiHeadAttention: parameters, values against a plain-C++ reference, masks, dropout,
// gradients, the functional API and bad input.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
namespace L = keel::layers;

namespace {

void set_weights(L::Layer& layer, double scale = 0.4) {
  int k = 0;
  for (Variable* v : layer.trainable_weights()) {
    const auto n = static_cast<std::size_t>(v->shape().num_elements());
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i)
      values[i] = static_cast<float>(std::round(256 * scale * std::sin(0.61 * i + 0.9 * k + 0.3)) / 256);
    v->assign(constant(values, v->shape()));
    ++k;
  }
}

void copy_weights(L::Layer& from, L::Layer& to) {
  auto a = from.trainable_weights(), b = to.trainable_weights();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) b[i]->assign(a[i]->peek());
}

Tensor input_data(std::vector<std::int64_t> dims, double phase = 0, DType dtype = DType::float32) {
  const Shape shape(dims);
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * i + phase);
  return constant(v, shape, dtype);
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-5) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(b[i]).margin(tol));
  }
}

// Multi-head attention in doubles, from the layer's weights in Keras' layout. mask: bool
// [B, Tq, Tv] (empty: none). scores_out: [B, H, Tq, Tv] probabilities.
struct Dims {
  std::int64_t B, Tq, Tv, Dq, Dv, Dk, H, dk, dv, Do;
};
std::vector<double> reference(const Dims& d, const std::vector<double>& q, const std::vector<double>& v,
                              const std::vector<double>& k, const std::vector<Variable*>& w,
                              const std::vector<bool>& mask = {}, std::vector<double>* scores_out = nullptr) {
  REQUIRE(w.size() == 8);
  std::vector<std::vector<double>> W;
  for (Variable* x : w) W.push_back(x->peek().to_vector<double>());
  // P[b, t, h, j] = bias[h, j] + sum_f x[b, t, f] * kernel[f, h, j]
  const auto project = [&](const std::vector<double>& x, std::int64_t T, std::int64_t D, const std::vector<double>& K,
                           const std::vector<double>& bias, std::int64_t depth) {
    std::vector<double> p(static_cast<std::size_t>(d.B * T * d.H * depth));
    for (std::int64_t b = 0; b < d.B; ++b)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t h = 0; h < d.H; ++h)
          for (std::int64_t j = 0; j < depth; ++j) {
            double s = bias[static_cast<std::size_t>(h * depth + j)];
            for (std::int64_t f = 0; f < D; ++f)
              s += x[static_cast<std::size_t>((b * T + t) * D + f)] * K[static_cast<std::size_t>((f * d.H + h) * depth + j)];
            p[static_cast<std::size_t>(((b * T + t) * d.H + h) * depth + j)] = s;
          }
    return p;
  };
  const auto Q = project(q, d.Tq, d.Dq, W[0], W[1], d.dk);
  const auto K = project(k, d.Tv, d.Dk, W[2], W[3], d.dk);
  const auto V = project(v, d.Tv, d.Dv, W[4], W[5], d.dv);
  std::vector<double> out(static_cast<std::size_t>(d.B * d.Tq * d.Do));
  if (scores_out) scores_out->assign(static_cast<std::size_t>(d.B * d.H * d.Tq * d.Tv), 0.0);
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t i = 0; i < d.Tq; ++i) {
      std::vector<double> attended(static_cast<std::size_t>(d.H * d.dv), 0.0);
      for (std::int64_t h = 0; h < d.H; ++h) {
        std::vector<double> s(static_cast<std::size_t>(d.Tv));
        double top = -1e300;
        for (std::int64_t j = 0; j < d.Tv; ++j) {
          double dot = 0;
          for (std::int64_t c = 0; c < d.dk; ++c)
            dot += Q[static_cast<std::size_t>(((b * d.Tq + i) * d.H + h) * d.dk + c)] *
                   K[static_cast<std::size_t>(((b * d.Tv + j) * d.H + h) * d.dk + c)];
          dot /= std::sqrt(static_cast<double>(d.dk));
          if (!mask.empty() && !mask[static_cast<std::size_t>((b * d.Tq + i) * d.Tv + j)]) dot = -1e9;
          s[static_cast<std::size_t>(j)] = dot;
          top = std::max(top, dot);
        }
        double z = 0;
        for (double& x : s) z += (x = std::exp(x - top));
        for (std::int64_t j = 0; j < d.Tv; ++j) {
          const double p = s[static_cast<std::size_t>(j)] / z;
          if (scores_out) (*scores_out)[static_cast<std::size_t>(((b * d.H + h) * d.Tq + i) * d.Tv + j)] = p;
          for (std::int64_t c = 0; c < d.dv; ++c)
            attended[static_cast<std::size_t>(h * d.dv + c)] += p * V[static_cast<std::size_t>(((b * d.Tv + j) * d.H + h) * d.dv + c)];
        }
      }
      for (std::int64_t o = 0; o < d.Do; ++o) {
        double s = W[7][static_cast<std::size_t>(o)];
        for (std::int64_t hc = 0; hc < d.H * d.dv; ++hc)
          s += attended[static_cast<std::size_t>(hc)] * W[6][static_cast<std::size_t>(hc * d.Do + o)];
        out[static_cast<std::size_t>((b * d.Tq + i) * d.Do + o)] = s;
      }
    }
  return out;
}

}  // namespace

TEST_CASE("MultiHeadAttention has Keras' parameter count, weight names and shapes", "[layers][attention]") {
  const std::int64_t B = 2, Tq = 3, Tv = 6, Dq = 5, Dv = 7, H = 2, dk = 4;
  L::MultiHeadAttention mha(static_cast<int>(H), static_cast<int>(dk));
  const Tensor y = mha({input_data({B, Tq, Dq}), input_data({B, Tv, Dv})});
  CHECK(y.shape() == Shape{B, Tq, Dq});
  const std::int64_t qkv = (Dq * H * dk + H * dk) + (Dv * H * dk + H * dk) + (Dv * H * dk + H * dk);
  CHECK(mha.count_params() == qkv + H * dk * Dq + Dq);
  const auto w = mha.trainable_weights();
  REQUIRE(w.size() == 8);
  CHECK(w[0]->name() == mha.name() + "/query/kernel");
  CHECK(w[0]->shape() == Shape{Dq, H, dk});
  CHECK(w[1]->shape() == Shape{H, dk});
  CHECK(w[2]->name() == mha.name() + "/key/kernel");
  CHECK(w[4]->name() == mha.name() + "/value/kernel");
  CHECK(w[4]->shape() == Shape{Dv, H, dk});
  CHECK(w[6]->name() == mha.name() + "/attention_output/kernel");
  CHECK(w[6]->shape() == Shape{H, dk, Dq});
  CHECK(w[7]->shape() == Shape{Dq});

  // value_dim, a separate key and output_shape.
  const std::int64_t dv = 3, Dk = 2;
  L::MultiHeadAttention m2(static_cast<int>(H), static_cast<int>(dk), {.value_dim = 3, .output_shape = {6}});
  const Tensor y2 = m2({input_data({B, Tq, Dq}), input_data({B, Tv, Dv}), input_data({B, Tv, Dk})});
  CHECK(y2.shape() == Shape{B, Tq, 6});
  CHECK(m2.count_params() == (Dq * H * dk + H * dk) + (Dk * H * dk + H * dk) + (Dv * H * dv + H * dv) + (H * dv * 6 + 6));
  L::MultiHeadAttention m3(static_cast<int>(H), static_cast<int>(dk), {.output_shape = {2, 3}});
  CHECK(m3({input_data({B, Tq, Dq}), input_data({B, Tv, Dv})}).shape() == Shape{B, Tq, 2, 3});
  L::MultiHeadAttention no_bias(static_cast<int>(H), static_cast<int>(dk), {.use_bias = false});
  no_bias({input_data({B, Tq, Dq}), input_data({B, Tv, Dv})});
  CHECK(no_bias.count_params() == Dq * H * dk + 2 * Dv * H * dk + H * dk * Dq);
}

TEST_CASE("MultiHeadAttention values match a reference, fused and step-by-step", "[layers][attention]") {
  const Dims d{2, 3, 4, 5, 6, 3, 2, 4, 3, 5};
  const Tensor q = input_data({d.B, d.Tq, d.Dq}, 0.1), v = input_data({d.B, d.Tv, d.Dv}, 0.7), k = input_data({d.B, d.Tv, d.Dk}, 1.9);
  L::MultiHeadAttention mha(static_cast<int>(d.H), static_cast<int>(d.dk), {.value_dim = 3});
  mha({q, v, k});
  set_weights(mha);
  std::vector<double> ref_scores;
  const std::vector<double> ref =
      reference(d, values(q), values(v), values(k), mha.trainable_weights(), {}, &ref_scores);
  check_close(values(mha({q, v, k})), ref);                       // the fused op
  const auto [y, scores] = mha.call_with_scores(q, v, {.key = k});  // the spelled-out path
  check_close(values(y), ref);
  CHECK(scores.shape() == Shape{d.B, d.H, d.Tq, d.Tv});
  check_close(values(scores), ref_scores);
  check_close(values(mha.last_attention_scores()), ref_scores);
  // Self-attention with key = value.
  L::MultiHeadAttention self(2, 3);
  const Tensor x = input_data({2, 4, 5}, 0.2);
  self({x, x});
  set_weights(self);
  const Dims ds{2, 4, 4, 5, 5, 5, 2, 3, 3, 5};
  check_close(values(self({x, x})), reference(ds, values(x), values(x), values(x), self.trainable_weights()));
}

TEST_CASE("an attention mask hides value positions", "[layers][attention][mask]") {
  const Dims d{2, 3, 5, 4, 4, 4, 2, 3, 3, 4};
  const Tensor q = input_data({d.B, d.Tq, d.Dq}, 0.4), v = input_data({d.B, d.Tv, d.Dv}, 1.2);
  L::MultiHeadAttention mha(2, 3);
  mha({q, v});
  set_weights(mha);
  std::vector<bool> m(static_cast<std::size_t>(d.B * d.Tq * d.Tv));
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = (i * 7 + i / 5) % 3 != 0;
  const Tensor mask = constant(m, Shape{d.B, d.Tq, d.Tv});
  const std::vector<double> ref = reference(d, values(q), values(v), values(v), mha.trainable_weights(), m);
  check_close(values(mha({q, v, mask})), ref);                           // list form
  check_close(values(mha(q, v, {.attention_mask = mask})), ref);         // keyword form
  const auto [y, scores] = mha.call_with_scores(q, v, {.attention_mask = mask});
  check_close(values(y), ref);
  const std::vector<double> s = values(scores);
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t h = 0; h < d.H; ++h)
      for (std::int64_t i = 0; i < d.Tq; ++i)
        for (std::int64_t j = 0; j < d.Tv; ++j)
          if (!m[static_cast<std::size_t>((b * d.Tq + i) * d.Tv + j)])
            CHECK(s[static_cast<std::size_t>(((b * d.H + h) * d.Tq + i) * d.Tv + j)] == Approx(0).margin(1e-12));
}

TEST_CASE("a mask riding on the value equals truncating the value", "[layers][attention][mask]") {
  const Tensor q = input_data({1, 3, 4}, 0.3), v = input_data({1, 5, 4}, 0.8);
  L::MultiHeadAttention mha(2, 2);
  mha({q, v});
  set_weights(mha);
  const Tensor value_mask = constant<bool>({true, true, true, false, false}, Shape{1, 5});
  const Tensor truncated = slice(v, {0, 0, 0}, {1, 3, 4});
  const std::vector<double> expect = values(mha({q, truncated}));
  check_close(values(mha({q, L::with_mask(v, value_mask)})), expect);  // Embedding(mask_zero) style
  check_close(values(mha(q, v, {.value_mask = value_mask})), expect);
}

TEST_CASE("use_causal_mask lets a query position see only earlier value positions", "[layers][attention][mask]") {
  const Tensor x = input_data({2, 4, 6}, 0.5);
  L::MultiHeadAttention mha(3, 2);
  mha({x, x});
  set_weights(mha);
  const auto [y, scores] = mha.call_with_scores(x, x, {.use_causal_mask = true});
  const std::vector<double> s = values(scores);
  for (std::int64_t bh = 0; bh < 2 * 3; ++bh)
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t j = i + 1; j < 4; ++j) CHECK(s[static_cast<std::size_t>((bh * 4 + i) * 4 + j)] == 0);
  // Position 2 of the output depends only on positions 0..2: it equals attending over the prefix.
  const Tensor prefix = slice(x, {0, 0, 0}, {2, 3, 6});
  const std::vector<double> yp = values(mha(prefix, prefix, {.use_causal_mask = true}));
  const std::vector<double> yv = values(y);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < 3; ++t)
      for (std::int64_t o = 0; o < 6; ++o)
        CHECK(yv[static_cast<std::size_t>((b * 4 + t) * 6 + o)] == Approx(yp[static_cast<std::size_t>((b * 3 + t) * 6 + o)]).margin(1e-5));
  // The same mask given explicitly as a bool input.
  std::vector<bool> tri;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) tri.push_back(j <= i);
  check_close(values(mha({x, x, constant(tri, Shape{2, 4, 4})})), yv);
}

TEST_CASE("the output carries the query's mask", "[layers][attention][mask]") {
  const Tensor q = input_data({2, 3, 4}), v = input_data({2, 5, 4}, 1.0);
  const Tensor qmask = constant<bool>({true, true, false, true, false, false}, Shape{2, 3});
  L::MultiHeadAttention mha(2, 2);
  const Tensor y = mha({L::with_mask(q, qmask), v});
  REQUIRE(L::get_mask(y).defined());
  CHECK(L::get_mask(y).to_vector<bool>() == qmask.to_vector<bool>());
  CHECK(!L::get_mask(mha({q, v})).defined());
}

TEST_CASE("MultiHeadAttention dropout acts on the probabilities in training only", "[layers][attention][dropout]") {
  const Tensor q = input_data({2, 4, 6}, 0.2), v = input_data({2, 5, 6}, 0.9);
  L::MultiHeadAttention drop(2, 3, {.dropout = 0.5, .seed = 5});
  L::MultiHeadAttention plain(2, 3);
  drop({q, v});
  plain({q, v});
  set_weights(drop);
  copy_weights(drop, plain);
  check_close(values(drop({q, v})), values(plain({q, v})), 1e-6);
  const auto [yt, st] = drop.call_with_scores(q, v, {.training = true});
  const auto [yp, sp] = plain.call_with_scores(q, v);
  check_close(values(st), values(sp), 1e-6);  // the scores are taken before dropout
  double diff = 0;
  const auto a = values(yt), b = values(yp);
  for (std::size_t i = 0; i < a.size(); ++i) diff += std::abs(a[i] - b[i]);
  CHECK(diff > 1e-3);
  // The seed makes training calls reproducible across layers.
  L::MultiHeadAttention again(2, 3, {.dropout = 0.5, .seed = 5});
  again({q, v});
  copy_weights(drop, again);
  L::MultiHeadAttention drop2(2, 3, {.dropout = 0.5, .seed = 5});
  drop2({q, v});
  copy_weights(drop, drop2);
  check_close(values(drop2({q, v}, true)), values(again({q, v}, true)), 0);
}

TEST_CASE("gradients reach every MultiHeadAttention weight", "[layers][attention][grad]") {
  const Tensor q = input_data({2, 3, 4}, 0.1), v = input_data({2, 5, 3}, 0.6), k = input_data({2, 5, 2}, 1.4);
  for (bool scores : {false, true}) {
    INFO("scores path " << scores);
    L::MultiHeadAttention mha(2, 3, {.value_dim = 2});
    mha({q, v, k});
    set_weights(mha);
    GradientTape tape;
    const Tensor y = scores ? mha.call_with_scores(q, v, {.key = k}).first : mha({q, v, k});
    const auto ws = mha.trainable_weights();
    const auto grads = tape.gradient(reduce_sum(square(y)), ws);
    for (std::size_t i = 0; i < ws.size(); ++i) {
      INFO("weight " << ws[i]->name());
      REQUIRE(grads[i].defined());
      CHECK(grads[i].shape() == ws[i]->shape());
      CHECK(reduce_sum(abs(grads[i])).item<double>() > 0);
    }
  }
}

TEST_CASE("float64 finite differences agree with the gradients of query, value and key",
          "[layers][attention][grad]") {
  const Tensor q = input_data({2, 3, 4}, 0.1, DType::float64), v = input_data({2, 4, 3}, 0.6, DType::float64),
               k = input_data({2, 4, 2}, 1.4, DType::float64);
  L::MultiHeadAttention mha(2, 3, {.value_dim = 2});
  mha({q, v, k});
  set_weights(mha);
  const Tensor mask = constant<bool>({true, true, false, true, true, false, true, true, true, true, true, false,
                                      false, true, true, true, true, true, false, true, true, true, true, true},
                                     Shape{2, 3, 4});
  check_gradients([&](const std::vector<Tensor>& in) { return mha({in[0], in[1], in[2]}); }, {q, v, k});
  check_gradients([&](const std::vector<Tensor>& in) { return mha({in[0], in[1], in[2], mask}); }, {q, v, k});
  check_gradients(
      [&](const std::vector<Tensor>& in) { return mha.call_with_scores(in[0], in[1], {.key = in[2]}).first; },
      {q, v, k});
  CHECK(mha({q, v, k}).dtype() == DType::float64);
}

TEST_CASE("MultiHeadAttention works in a functional model", "[layers][attention][model]") {
  const auto query = models::Input(Shape{3, 4});
  const auto value = models::Input(Shape{5, 6});
  const auto out = L::MultiHeadAttention(2, 2)({query, value});
  models::Model model({query, value}, {out});
  const Tensor y = model({input_data({2, 3, 4}), input_data({2, 5, 6})});
  CHECK(y.shape() == Shape{2, 3, 4});
  CHECK(model.count_params() == (4 * 4 + 4) + (6 * 4 + 4) + (6 * 4 + 4) + (4 * 4 + 4));
}

TEST_CASE("MultiHeadAttention get_config names the options as Keras does", "[layers][attention][config]") {
  L::MultiHeadAttention mha(4, 8, {.dropout = 0.1, .output_shape = {16}, .name = "self_attention"});
  const nlohmann::json c = mha.get_config();
  CHECK(c["name"] == "self_attention");
  CHECK(c["num_heads"] == 4);
  CHECK(c["key_dim"] == 8);
  CHECK(c["value_dim"] == 8);
  CHECK(c["dropout"] == 0.1);
  CHECK(c["use_bias"] == true);
  CHECK(c["output_shape"] == nlohmann::json::array({16}));
  CHECK(c["attention_axes"].is_null());
  CHECK(c["kernel_initializer"] == "glorot_uniform");
  CHECK(mha.class_name() == "MultiHeadAttention");
  CHECK(L::MultiHeadAttention(1, 1).name().rfind("multi_head_attention", 0) == 0);
}

TEST_CASE("MultiHeadAttention rejects bad arguments and shapes with clear errors", "[layers][attention][errors]") {
  CHECK_THROWS_AS(L::MultiHeadAttention(0, 4), ValueError);
  CHECK_THROWS_AS(L::MultiHeadAttention(2, 0), ValueError);
  CHECK_THROWS_AS(L::MultiHeadAttention(2, 4, {.dropout = 1.0}), ValueError);
  CHECK_THROWS_AS(L::MultiHeadAttention(2, 4, {.attention_axes = {0}}), ValueError);  // the batch axis cannot be attended over

  L::MultiHeadAttention mha(2, 4, {.name = "cross_attention"});
  CHECK_THROWS_AS(mha(input_data({2, 3, 4})), ValueError);  // one tensor: no value
  try {
    mha({input_data({2, 4}), input_data({2, 5, 4})});
    FAIL("expected a ShapeError");
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    CHECK(what.find("cross_attention") != std::string::npos);
    CHECK(what.find("[2,4]") != std::string::npos);
  }
  CHECK_THROWS_AS(mha({input_data({2, 3, 4}), input_data({2, 5, 4}), input_data({2, 6, 4})}), ShapeError);  // key length
  CHECK_THROWS_AS(mha({input_data({2, 3, 4}), input_data({3, 5, 4})}), ShapeError);                   // batch
  mha({input_data({2, 3, 4}), input_data({2, 5, 4})});
  CHECK_THROWS_AS(mha({input_data({2, 3, 5}), input_data({2, 5, 4})}), ShapeError);  // built for 4 query features
  CHECK_THROWS_AS(mha({input_data({2, 3, 4}), input_data({2, 5, 4}), constant<bool>({true}, Shape{1, 1, 1, 1, 1})}),
                  ShapeError);  // a mask of rank 5
}
