// MultiHeadAttention over attention_axes other than time: Keras' einsum formulation checked
// against a reference spelled out with keel::einsum in the test, masks as Keras broadcasts them.
#include <catch2/catch.hpp>
#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

using namespace keel;

namespace {

// Gives every weight random values (biases too, so that they count) and returns them in Keras'
// order: query k/b, key k/b, value k/b, output k/b.
std::vector<Tensor> randomise(layers::MultiHeadAttention& mha) {
  std::vector<Tensor> w;
  for (Variable* v : mha.weights()) {
    v->assign(random::normal(v->shape(), 0, 0.5));
    w.push_back(v->peek());
  }
  return w;
}

void check_close(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).margin(1e-5));
}

}  // namespace

TEST_CASE("MultiHeadAttention attends over axes (1, 2) of [B, H, W, C]", "[mha_axes]") {
  random::set_seed(5);
  const int heads = 2, key_dim = 3;
  layers::MultiHeadAttention mha(heads, key_dim, {.attention_axes = {1, 2}});
  const Tensor x = random::normal({2, 3, 2, 4});  // B=2, H=3, W=2, C=4
  mha({x, x});  // builds the weights
  const auto w = randomise(mha);
  auto [y, scores] = mha.call_with_scores(x, x);

  // Reference: project, score every pixel against every pixel, softmax over the 3*2 key pixels.
  const Tensor q = einsum("bhwc,cnd->bhwnd", {x, w[0]}) + w[1];
  const Tensor k = einsum("bhwc,cnd->bhwnd", {x, w[2]}) + w[3];
  const Tensor v = einsum("bhwc,cnd->bhwnd", {x, w[4]}) + w[5];
  const Tensor s = einsum("bhwnd,bxynd->bnhwxy", {q / std::sqrt(3.0), k});  // [B, N, H, W, H', W']
  const Tensor p = reshape(softmax(reshape(s, Shape{2, heads, 3, 2, 6}), -1), s.shape());
  const Tensor o = einsum("bnhwxy,bxynd->bhwnd", {p, v});
  const Tensor ref = einsum("bhwnd,ndo->bhwo", {o, w[6]}) + w[7];
  CHECK(y.shape() == Shape{2, 3, 2, 4});
  CHECK(scores.shape() == Shape{2, heads, 3, 2, 3, 2});
  check_close(y, ref);
  check_close(scores, p);

  // Keras' default (None) on a rank-4 input is the same axes (1, 2).
  layers::MultiHeadAttention dflt(heads, key_dim);
  dflt({x, x});
  const auto ws = dflt.weights();
  for (std::size_t i = 0; i < ws.size(); ++i) ws[i]->assign(w[i]);
  check_close(dflt({x, x}), ref);

  // An attention_mask [B, H, W, H', W'] gains the heads axis (Keras' _masked_softmax).
  const Tensor mask = greater(random::uniform({2, 3, 2, 3, 2}), constant(0.3));
  const Tensor sm = where(expand_dims(mask, 1), s, constant(-1e9));
  const Tensor pm = reshape(softmax(reshape(sm, Shape{2, heads, 3, 2, 6}), -1), s.shape());
  const Tensor om = einsum("bnhwxy,bxynd->bhwnd", {pm, v});
  check_close(mha({x, x, mask}), einsum("bhwnd,ndo->bhwo", {om, w[6]}) + w[7]);
}

TEST_CASE("MultiHeadAttention attends over axis 2 only, axis 1 batch-like", "[mha_axes]") {
  random::set_seed(9);
  layers::MultiHeadAttention mha(2, 2, {.attention_axes = {2}});
  const Tensor q_in = random::normal({1, 3, 4, 5});
  const Tensor v_in = random::normal({1, 3, 6, 5});  // attended axis may differ in length
  mha({q_in, v_in});
  const auto w = randomise(mha);
  auto [y, scores] = mha.call_with_scores(q_in, v_in);
  const Tensor q = einsum("btsc,cnd->btsnd", {q_in, w[0]}) + w[1];
  const Tensor k = einsum("btsc,cnd->btsnd", {v_in, w[2]}) + w[3];
  const Tensor v = einsum("btsc,cnd->btsnd", {v_in, w[4]}) + w[5];
  // Keras' product notation: batch axes (b, t, heads n), then the query's s, then the key's u.
  const Tensor p = softmax(einsum("btsnd,btund->btnsu", {q / std::sqrt(2.0), k}), -1);
  const Tensor ref = einsum("btsnd,ndo->btso", {einsum("btnsu,btund->btsnd", {p, v}), w[6]}) + w[7];
  CHECK(scores.shape() == Shape{1, 3, 2, 4, 6});
  check_close(y, ref);
  // Negative axes count from the input's rank: -2 on rank 4 is axis 2.
  layers::MultiHeadAttention neg(2, 2, {.attention_axes = {-2}});
  neg({q_in, v_in});
  const auto wn = neg.weights();
  for (std::size_t i = 0; i < wn.size(); ++i) wn[i]->assign(w[i]);
  check_close(neg({q_in, v_in}), ref);
}

TEST_CASE("MultiHeadAttention attention_axes: config round trip and errors", "[mha_axes]") {
  layers::MultiHeadAttention mha(2, 4, {.attention_axes = {1, 2}});
  const nlohmann::json c = mha.get_config();
  CHECK(c["attention_axes"] == nlohmann::json{1, 2});
  auto back = layers::from_config("MultiHeadAttention", c);
  CHECK(back->get_config()["attention_axes"] == nlohmann::json{1, 2});
  CHECK(layers::MultiHeadAttention(2, 4).get_config()["attention_axes"].is_null());

  const Tensor x = random::normal({1, 2, 2, 3});
  CHECK_THROWS_AS(layers::MultiHeadAttention(2, 2, {.attention_axes = {0}}), ValueError);
  layers::MultiHeadAttention feature_axis(2, 2, {.attention_axes = {3}});
  CHECK_THROWS_AS(feature_axis({x, x}), ValueError);
  layers::MultiHeadAttention twice(2, 2, {.attention_axes = {1, -3}});
  CHECK_THROWS_AS(twice({x, x}), ValueError);
  // Axis 1 is not attended: query and value must agree on it.
  layers::MultiHeadAttention ax2(2, 2, {.attention_axes = {2}});
  CHECK_THROWS_AS(ax2({x, random::normal({1, 3, 2, 3})}), ShapeError);
  // A mask that does not broadcast to the scores.
  layers::MultiHeadAttention m(2, 2, {.attention_axes = {1, 2}});
  CHECK_THROWS_AS(m({x, x, greater(random::uniform({1, 3, 3}), constant(0.5))}), ShapeError);
}
