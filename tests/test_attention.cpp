// scaled_dot_product_attention and multi_head_attention: values against naive loops written
// here (softmax over keys, heads taken column-block by column-block), masking, float64
// finite-difference gradients with and without a mask, and argument errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

using Vec = std::vector<double>;

Tensor f64(const Vec& v, Shape s) { return constant(v, std::move(s), DType::float64); }

// scale * sin(1.3 i + salt): irrational-looking, reproducible values.
Tensor wavy64(Shape s, double salt, double scale = 1.0) {
  Vec v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.3 * double(i) + salt);
  return f64(v, std::move(s));
}

void check_close(const Tensor& t, const Vec& expected, double tol) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": got " << v[i] << ", expected " << expected[i]);
    CHECK(std::abs(v[i] - expected[i]) <= tol);
  }
}

// One attention problem: q [tq, d], k [tk, d], v [tk, dv] at the given offsets of flat arrays;
// allowed(i, j) says whether query i may see key j. A row with no allowed key averages all
// values (every score equally masked), as Keras does.
template <class Allowed>
void naive_attention(const double* q, const double* k, const double* v, std::int64_t tq,
                     std::int64_t tk, std::int64_t d, std::int64_t dv, Allowed allowed, double* out) {
  for (std::int64_t i = 0; i < tq; ++i) {
    Vec s(static_cast<std::size_t>(tk));
    bool any = false;
    for (std::int64_t j = 0; j < tk; ++j) any |= allowed(i, j);
    double mx = -1e300;
    for (std::int64_t j = 0; j < tk; ++j) {
      double dot = 0;
      for (std::int64_t e = 0; e < d; ++e) dot += q[i * d + e] * k[j * d + e];
      s[static_cast<std::size_t>(j)] = dot / std::sqrt(double(d));
      if (!any || allowed(i, j)) mx = std::max(mx, s[static_cast<std::size_t>(j)]);
    }
    double total = 0;
    for (std::int64_t j = 0; j < tk; ++j) {
      auto& w = s[static_cast<std::size_t>(j)];
      w = !any ? 1.0 : allowed(i, j) ? std::exp(w - mx) : 0.0;
      total += w;
    }
    for (std::int64_t e = 0; e < dv; ++e) {
      double acc = 0;
      for (std::int64_t j = 0; j < tk; ++j) acc += s[static_cast<std::size_t>(j)] / total * v[j * dv + e];
      out[i * dv + e] = acc;
    }
  }
}

// x [n, din] @ w [din, dout] + b (b may be empty), row-major.
Vec naive_dense(const Vec& x, const Vec& w, const Vec& b, std::int64_t n, std::int64_t din, std::int64_t dout) {
  Vec y(static_cast<std::size_t>(n * dout));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t o = 0; o < dout; ++o) {
      double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(o)];
      for (std::int64_t p = 0; p < din; ++p) acc += x[static_cast<std::size_t>(i * din + p)] * w[static_cast<std::size_t>(p * dout + o)];
      y[static_cast<std::size_t>(i * dout + o)] = acc;
    }
  return y;
}

Vec values(const Tensor& t) { return t.defined() ? t.to_vector<double>() : Vec{}; }

struct MhaCase {
  std::int64_t batch = 2, tq = 3, tv = 4, dq = 5, dv_in = 3, dk_in = 4, heads = 2, key_dim = 3,
               value_dim = 2, out_dim = 4;
  Tensor query, value, key;
  MultiHeadAttentionWeights w;
  MhaCase() {
    query = wavy64({batch, tq, dq}, 0.1);
    value = wavy64({batch, tv, dv_in}, 0.5);
    key = wavy64({batch, tv, dk_in}, 0.9);
    w.wq = wavy64({dq, heads * key_dim}, 1.3, 0.6);
    w.bq = wavy64({heads * key_dim}, 1.7, 0.2);
    w.wk = wavy64({dk_in, heads * key_dim}, 2.1, 0.6);
    w.bk = wavy64({heads * key_dim}, 2.5, 0.2);
    w.wv = wavy64({dv_in, heads * value_dim}, 2.9, 0.6);
    w.bv = wavy64({heads * value_dim}, 3.3, 0.2);
    w.wo = wavy64({heads * value_dim, out_dim}, 3.7, 0.6);
    w.bo = wavy64({out_dim}, 4.1, 0.2);
  }
};

// Multi-head attention by loops: project, take head h's columns [h*d, (h+1)*d), attend per
// head, put head h's result in columns [h*dv, (h+1)*dv), project out. mask: [batch, tq, tv]
// flattened, or empty.
Vec naive_mha(const MhaCase& c, const Tensor& key, const std::vector<bool>& mask) {
  const std::int64_t b = c.batch, hd = c.heads * c.key_dim, hv = c.heads * c.value_dim;
  const std::int64_t dk_in = key.shape()[2];
  const Vec q = naive_dense(values(c.query), values(c.w.wq), values(c.w.bq), b * c.tq, c.dq, hd);
  const Vec k = naive_dense(values(key), values(c.w.wk), values(c.w.bk), b * c.tv, dk_in, hd);
  const Vec v = naive_dense(values(c.value), values(c.w.wv), values(c.w.bv), b * c.tv, c.dv_in, hv);
  Vec merged(static_cast<std::size_t>(b * c.tq * hv));
  for (std::int64_t n = 0; n < b; ++n)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      // Gather this head's columns into small contiguous blocks.
      Vec qh, kh, vh, oh(static_cast<std::size_t>(c.tq * c.value_dim));
      for (std::int64_t t = 0; t < c.tq; ++t)
        for (std::int64_t e = 0; e < c.key_dim; ++e) qh.push_back(q[static_cast<std::size_t>((n * c.tq + t) * hd + h * c.key_dim + e)]);
      for (std::int64_t t = 0; t < c.tv; ++t) {
        for (std::int64_t e = 0; e < c.key_dim; ++e) kh.push_back(k[static_cast<std::size_t>((n * c.tv + t) * hd + h * c.key_dim + e)]);
        for (std::int64_t e = 0; e < c.value_dim; ++e) vh.push_back(v[static_cast<std::size_t>((n * c.tv + t) * hv + h * c.value_dim + e)]);
      }
      naive_attention(qh.data(), kh.data(), vh.data(), c.tq, c.tv, c.key_dim, c.value_dim,
                      [&](std::int64_t i, std::int64_t j) {
                        return mask.empty() || mask[static_cast<std::size_t>((n * c.tq + i) * c.tv + j)];
                      },
                      oh.data());
      for (std::int64_t t = 0; t < c.tq; ++t)
        for (std::int64_t e = 0; e < c.value_dim; ++e)
          merged[static_cast<std::size_t>((n * c.tq + t) * hv + h * c.value_dim + e)] = oh[static_cast<std::size_t>(t * c.value_dim + e)];
    }
  return naive_dense(merged, values(c.w.wo), values(c.w.bo), b * c.tq, hv, c.out_dim);
}

// A causal-looking mask [batch, tq, tk] that differs between batches, every row keeping at
// least one key.
std::vector<bool> test_mask(std::int64_t b, std::int64_t tq, std::int64_t tk) {
  std::vector<bool> m;
  for (std::int64_t n = 0; n < b; ++n)
    for (std::int64_t i = 0; i < tq; ++i)
      for (std::int64_t j = 0; j < tk; ++j) m.push_back(j <= i + n);
  return m;
}

Tensor bool_tensor(const std::vector<bool>& m, Shape s) { return constant(m, std::move(s)); }

}  // namespace

// ---- scaled dot-product attention ----------------------------------------------------------------

TEST_CASE("scaled_dot_product_attention matches softmax(q k^T / sqrt(d)) v computed by loops") {
  const std::int64_t b = 2, tq = 3, tk = 4, d = 5, dv = 2;
  const Tensor q = wavy64({b, tq, d}, 0.2), k = wavy64({b, tk, d}, 0.6), v = wavy64({b, tk, dv}, 1.0);
  Vec expected(static_cast<std::size_t>(b * tq * dv));
  const Vec qv = values(q), kv = values(k), vv = values(v);
  for (std::int64_t n = 0; n < b; ++n)
    naive_attention(qv.data() + n * tq * d, kv.data() + n * tk * d, vv.data() + n * tk * dv, tq, tk, d, dv,
                    [](std::int64_t, std::int64_t) { return true; }, expected.data() + n * tq * dv);
  const Tensor y = scaled_dot_product_attention(q, k, v);
  CHECK(y.shape() == Shape{b, tq, dv});
  check_close(y, expected, 1e-14);
  // float32 agrees to float32 precision.
  check_close(scaled_dot_product_attention(q.astype(DType::float32), k.astype(DType::float32),
                                           v.astype(DType::float32)),
              expected, 1e-5);
}

TEST_CASE("scaled_dot_product_attention gives masked keys zero weight") {
  const std::int64_t b = 2, tq = 3, tk = 4, d = 3, dv = 4;
  const Tensor q = wavy64({b, tq, d}, 0.3, 2.0), k = wavy64({b, tk, d}, 0.7, 2.0);
  // v = identity per batch: the output rows are the attention weights themselves.
  const Tensor v = broadcast_to(eye(tk, DType::float64), Shape{b, tk, dv});
  const std::vector<bool> m = test_mask(b, tq, tk);
  const Tensor y = scaled_dot_product_attention(q, k, v, bool_tensor(m, Shape{b, tq, tk}));
  const Vec w = values(y);
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (!m[i]) CHECK(w[i] == 0.0);
    if (m[i]) CHECK(w[i] > 0.0);
  }
  // Each row's weights sum to one.
  for (std::int64_t r = 0; r < b * tq; ++r) {
    double s = 0;
    for (std::int64_t j = 0; j < tk; ++j) s += w[static_cast<std::size_t>(r * tk + j)];
    CHECK(std::abs(s - 1.0) < 1e-12);
  }
  // Against the loops, and with a mask [tq, tk] broadcast over the batch.
  Vec expected(static_cast<std::size_t>(b * tq * dv));
  const Vec qv = values(q), kv = values(k), vv = values(v.contiguous());
  for (std::int64_t n = 0; n < b; ++n)
    naive_attention(qv.data() + n * tq * d, kv.data() + n * tk * d, vv.data() + n * tk * dv, tq, tk, d, dv,
                    [&](std::int64_t i, std::int64_t j) { return m[static_cast<std::size_t>(i * tk + j)]; },
                    expected.data() + n * tq * dv);
  const std::vector<bool> m0(m.begin(), m.begin() + tq * tk);
  check_close(scaled_dot_product_attention(q, k, v, bool_tensor(m0, Shape{tq, tk})), expected, 1e-14);
}

TEST_CASE("scaled_dot_product_attention averages all values for a row with every key masked") {
  const Tensor q = wavy64({1, 2, 2}, 0.1), k = wavy64({1, 3, 2}, 0.4), v = wavy64({1, 3, 2}, 0.8);
  const Tensor mask = bool_tensor({false, false, false, true, false, true}, Shape{1, 2, 3});
  const Vec y = values(scaled_dot_product_attention(q, k, v, mask));
  const Vec vv = values(v);
  for (double x : y) CHECK(std::isfinite(x));
  CHECK(std::abs(y[0] - (vv[0] + vv[2] + vv[4]) / 3) < 1e-12);
  CHECK(std::abs(y[1] - (vv[1] + vv[3] + vv[5]) / 3) < 1e-12);
}

TEST_CASE("scaled_dot_product_attention gradients match finite differences") {
  const Tensor q = wavy64({2, 3, 4}, 0.2), k = wavy64({2, 5, 4}, 0.6), v = wavy64({2, 5, 3}, 1.0);
  SECTION("no mask") {
    check_gradients([](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); },
                    {q, k, v});
  }
  SECTION("with a mask") {
    const Tensor mask = bool_tensor(test_mask(2, 3, 5), Shape{2, 3, 5});
    check_gradients(
        [mask](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], mask); },
        {q, k, v});
  }
  SECTION("four-dimensional heads with a broadcast batch of keys") {
    const Tensor q4 = wavy64({2, 2, 3, 2}, 0.3), k4 = wavy64({2, 1, 4, 2}, 0.9), v4 = wavy64({2, 1, 4, 2}, 1.4);
    check_gradients([](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); },
                    {q4, k4, v4});
  }
}

TEST_CASE("scaled_dot_product_attention rejects mismatched shapes and non-bool masks") {
  const Tensor q = wavy64({2, 3, 4}, 0), k = wavy64({2, 5, 4}, 1), v = wavy64({2, 5, 3}, 2);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, wavy64({2, 5, 3}, 0), v), ShapeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, wavy64({2, 5, 3}, 0), v),
                    Contains("scaled_dot_product_attention") && Contains("[2,3,4]") && Contains("[2,5,3]"));
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, wavy64({2, 6, 3}, 0)), ShapeError);
  CHECK_THROWS_AS(scaled_dot_product_attention(wavy64({4}, 0), k, v), ShapeError);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, ones({2, 3, 5}, DType::float64)), DTypeError);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, bool_tensor(std::vector<bool>(8, true), Shape{2, 4})),
                  ShapeError);
  // A mask that would enlarge the result is refused, not broadcast.
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, bool_tensor(std::vector<bool>(45, true), Shape{3, 1, 3, 5})),
                  ShapeError);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v.astype(DType::float32)), DTypeError);
}

// ---- multi-head attention ------------------------------------------------------------------------

TEST_CASE("multi_head_attention matches per-head loops, with and without a mask") {
  const MhaCase c;
  check_close(multi_head_attention(c.query, c.value, c.key, c.w, static_cast<int>(c.heads)),
              naive_mha(c, c.key, {}), 1e-13);
  const std::vector<bool> m = test_mask(c.batch, c.tq, c.tv);
  const Tensor mask = bool_tensor(m, Shape{c.batch, c.tq, c.tv});
  const Tensor y = multi_head_attention(c.query, c.value, c.key, c.w, static_cast<int>(c.heads), mask);
  CHECK(y.shape() == Shape{c.batch, c.tq, c.out_dim});
  check_close(y, naive_mha(c, c.key, m), 1e-13);
}

TEST_CASE("multi_head_attention uses value as key when key is undefined and works without biases") {
  MhaCase c;
  c.w.wk = wavy64({c.dv_in, c.heads * c.key_dim}, 2.1, 0.6);
  check_close(multi_head_attention(c.query, c.value, Tensor(), c.w, static_cast<int>(c.heads)),
              naive_mha(c, c.value, {}), 1e-13);
  c.w.bq = c.w.bk = c.w.bv = c.w.bo = Tensor();
  check_close(multi_head_attention(c.query, c.value, c.value, c.w, static_cast<int>(c.heads)),
              naive_mha(c, c.value, {}), 1e-13);
}

TEST_CASE("multi_head_attention gradients match finite differences for inputs and weights") {
  const MhaCase c;
  const int heads = static_cast<int>(c.heads);
  const std::vector<Tensor> inputs{c.query, c.value, c.key, c.w.wq, c.w.bq, c.w.wk,
                                   c.w.bk, c.w.wv, c.w.bv, c.w.wo, c.w.bo};
  const auto run = [heads](const std::vector<Tensor>& in, const Tensor& mask) {
    const MultiHeadAttentionWeights w{in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10]};
    return multi_head_attention(in[0], in[1], in[2], w, heads, mask);
  };
  SECTION("no mask") {
    check_gradients([run](const std::vector<Tensor>& in) { return run(in, Tensor()); }, inputs);
  }
  SECTION("with a mask [batch, Tq, Tk]") {
    const Tensor mask = bool_tensor(test_mask(c.batch, c.tq, c.tv), Shape{c.batch, c.tq, c.tv});
    check_gradients([run, mask](const std::vector<Tensor>& in) { return run(in, mask); }, inputs);
  }
}

TEST_CASE("multi_head_attention rejects inconsistent shapes with ShapeErrors") {
  const MhaCase c;
  const int heads = static_cast<int>(c.heads);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, c.w, 0), ValueError);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, c.w, 4), ShapeError);  // 6 columns, 4 heads
  CHECK_THROWS_WITH(multi_head_attention(c.query, c.value, c.key, c.w, 4),
                    Contains("multi_head_attention") && Contains("num_heads"));
  CHECK_THROWS_AS(multi_head_attention(reshape(c.query, Shape{6, 5}), c.value, c.key, c.w, heads), ShapeError);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, wavy64({c.batch, c.tv + 1, c.dk_in}, 0), c.w, heads),
                  ShapeError);
  CHECK_THROWS_AS(multi_head_attention(c.query, wavy64({3, c.tv, c.dv_in}, 0), wavy64({3, c.tv, c.dk_in}, 0), c.w, heads),
                  ShapeError);
  MultiHeadAttentionWeights bad = c.w;
  bad.wq = wavy64({c.dq + 1, c.heads * c.key_dim}, 0);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, bad, heads), ShapeError);
  CHECK_THROWS_WITH(multi_head_attention(c.query, c.value, c.key, bad, heads), Contains("wq") && Contains("[6,6]"));
  bad = c.w;
  bad.wk = wavy64({c.dk_in, c.heads * (c.key_dim + 1)}, 0);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, bad, heads), ShapeError);
  bad = c.w;
  bad.wo = wavy64({c.heads * c.value_dim + 1, c.out_dim}, 0);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, bad, heads), ShapeError);
  bad = c.w;
  bad.bv = wavy64({3}, 0);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, bad, heads), ShapeError);
  CHECK_THROWS_AS(multi_head_attention(c.query, c.value, c.key, c.w, heads,
                                       bool_tensor(std::vector<bool>(c.tq * c.tv, true), Shape{c.tq * c.tv})),
                  ShapeError);
}
