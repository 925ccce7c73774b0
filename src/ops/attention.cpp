// Scaled dot-product attention and multi-head attention, composed from matmul, where, softmax,
// reshape and transpose: each piece records its own gradient, so these need no rule of their
// own (the products dominate the cost; there is little to fuse on the CPU).
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

namespace {

std::int64_t dim(const Tensor& t, std::int64_t axis_from_end) {
  return t.shape()[t.rank() - axis_from_end];
}

// Masked scores get this instead of -inf: exp() of it underflows to exactly 0 next to any
// unmasked score, yet a row that is masked everywhere still gives a finite (uniform) softmax
// rather than NaN, as Keras does.
constexpr double kMaskedScore = -1e9;

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask) {
  // Half-precision shim (until the kernel takes float16/bfloat16): float32 inside, rounded once.
  if (q.defined() && is_half(q.dtype()))
    return cast(scaled_dot_product_attention(cast(q, DType::float32), cast(k, DType::float32),
                                             cast(v, DType::float32), mask), q.dtype());
  const char* op = "scaled_dot_product_attention";
  detail::check_float(q, op, "query");
  detail::check_float(k, op, "key");
  detail::check_float(v, op, "value");
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    throw ShapeError(fmt::format("{}: query, key and value need rank >= 2 ([..., T, d]), got {}, {}, {}",
                                 op, q.shape().to_string(), k.shape().to_string(), v.shape().to_string()));
  if (dim(q, 1) != dim(k, 1))
    throw ShapeError(fmt::format("{}: query and key depths differ: query {} vs key {}", op,
                                 q.shape().to_string(), k.shape().to_string()));
  if (dim(k, 2) != dim(v, 2))
    throw ShapeError(fmt::format("{}: key and value lengths differ: key {} vs value {}", op,
                                 k.shape().to_string(), v.shape().to_string()));
  if (mask.defined() && mask.dtype() != DType::bool_)
    throw DTypeError(fmt::format("{}: mask must be bool (true = attend), got {} {}", op,
                                 name(mask.dtype()), mask.shape().to_string()));

  Tensor scores = matmul(q, k, false, true);  // [..., Tq, Tk]
  scores = div(scores, scalar_like(scores, std::sqrt(static_cast<double>(dim(q, 1)))));
  if (mask.defined()) {
    // The mask may broadcast to the scores, never the other way round.
    const Shape joint = broadcast_shapes(mask.shape(), scores.shape(), op);
    if (joint != scores.shape())
      throw ShapeError(fmt::format("{}: mask {} does not broadcast to the attention scores {} "
                                   "([..., Tq, Tk] for query {} and key {})",
                                   op, mask.shape().to_string(), scores.shape().to_string(),
                                   q.shape().to_string(), k.shape().to_string()));
    scores = where(mask, scores, scalar_like(scores, kMaskedScore));
  }
  return matmul(softmax(scores, -1), v);
}

Tensor multi_head_attention(const Tensor& query, const Tensor& value, const Tensor& key_in,
                            const MultiHeadAttentionWeights& w, int num_heads, const Tensor& mask) {
  // Half-precision shim (until the kernel takes float16/bfloat16): float32 inside, rounded once.
  if (query.defined() && is_half(query.dtype())) {
    const auto f = [](const Tensor& t) { return t.defined() ? cast(t, DType::float32) : t; };
    const MultiHeadAttentionWeights w32{f(w.wq), f(w.bq), f(w.wk), f(w.bk), f(w.wv), f(w.bv), f(w.wo), f(w.bo)};
    return cast(multi_head_attention(f(query), f(value), f(key_in), w32, num_heads, mask), query.dtype());
  }
  const char* op = "multi_head_attention";
  const Tensor& key = key_in.defined() ? key_in : value;
  detail::check_float(query, op, "query");
  detail::check_float(value, op, "value");
  detail::check_float(key, op, "key");
  detail::check_float(w.wq, op, "wq");
  detail::check_float(w.wk, op, "wk");
  detail::check_float(w.wv, op, "wv");
  detail::check_float(w.wo, op, "wo");
  if (num_heads <= 0)
    throw ValueError(fmt::format("{}: num_heads must be positive, got {}", op, num_heads));
  if (query.rank() != 3 || value.rank() != 3 || key.rank() != 3)
    throw ShapeError(fmt::format("{}: query, value and key must be [batch, time, features], got {}, {}, {}",
                                 op, query.shape().to_string(), value.shape().to_string(),
                                 key.shape().to_string()));
  const std::int64_t batch = query.shape()[0], tq = query.shape()[1], tv = value.shape()[1];
  if (value.shape()[0] != batch || key.shape()[0] != batch)
    throw ShapeError(fmt::format("{}: batch sizes differ: query {}, value {}, key {}", op,
                                 query.shape().to_string(), value.shape().to_string(),
                                 key.shape().to_string()));
  if (key.shape()[1] != tv)
    throw ShapeError(fmt::format("{}: key and value lengths differ: key {} vs value {}", op,
                                 key.shape().to_string(), value.shape().to_string()));
  const std::int64_t h = num_heads;
  const auto check_weight = [&](const char* what, const Tensor& wt, const Tensor& input,
                                const char* input_name) {
    if (wt.rank() != 2 || wt.shape()[0] != input.shape()[2])
      throw ShapeError(fmt::format("{}: {} must be [{} features = {}, heads * depth], got {}", op,
                                   what, input_name, input.shape()[2], wt.shape().to_string()));
    if (wt.shape()[1] % h != 0)
      throw ShapeError(fmt::format("{}: {} {} has {} columns, not a multiple of num_heads = {}", op,
                                   what, wt.shape().to_string(), wt.shape()[1], h));
  };
  check_weight("wq", w.wq, query, "query");
  check_weight("wk", w.wk, key, "key");
  check_weight("wv", w.wv, value, "value");
  if (w.wq.shape()[1] != w.wk.shape()[1])
    throw ShapeError(fmt::format("{}: wq {} and wk {} must project to the same heads * key_dim", op,
                                 w.wq.shape().to_string(), w.wk.shape().to_string()));
  if (w.wo.rank() != 2 || w.wo.shape()[0] != w.wv.shape()[1])
    throw ShapeError(fmt::format("{}: wo must be [heads * value_dim = {}, output_dim], got {}", op,
                                 w.wv.shape()[1], w.wo.shape().to_string()));
  const auto check_bias = [&](const char* what, const Tensor& b, std::int64_t n) {
    if (!b.defined()) return;
    if (b.shape() != Shape{n})
      throw ShapeError(fmt::format("{}: {} must be [{}], got {}", op, what, n, b.shape().to_string()));
  };
  check_bias("bq", w.bq, w.wq.shape()[1]);
  check_bias("bk", w.bk, w.wk.shape()[1]);
  check_bias("bv", w.bv, w.wv.shape()[1]);
  check_bias("bo", w.bo, w.wo.shape()[1]);

  // [B, T, D] -> [B*T, D] @ W (+ b): one 2-D product (its weight gradient is then one product
  // too, instead of a batched one summed over B) -> [B, T, H, d] -> [B, H, T, d].
  const auto project = [&](const Tensor& x, const Tensor& wt, const Tensor& b) {
    const std::int64_t n = x.shape()[0], t = x.shape()[1];
    Tensor y = matmul(reshape(x, Shape{n * t, x.shape()[2]}), wt);
    if (b.defined()) y = add(y, b);
    return transpose(reshape(y, Shape{n, t, h, wt.shape()[1] / h}), {0, 2, 1, 3});
  };
  const Tensor qh = project(query, w.wq, w.bq);
  const Tensor kh = project(key, w.wk, w.bk);
  const Tensor vh = project(value, w.wv, w.bv);

  // Keras' attention_mask is [B, Tq, Tk]: give it the head axis. [Tq, Tk] and [B, H, Tq, Tk]
  // broadcast as they are.
  Tensor m = mask;
  if (m.defined()) {
    if (m.rank() == 3)
      m = expand_dims(m, 1);
    else if (m.rank() != 2 && m.rank() != 4)
      throw ShapeError(fmt::format("{}: mask must be [Tq, Tk], [batch, Tq, Tk] or [batch, heads, Tq, Tk] "
                                   "= [{}, {}, {}, {}], got {}",
                                   op, batch, h, tq, tv, m.shape().to_string()));
  }
  const Tensor attended = scaled_dot_product_attention(qh, kh, vh, m);  // [B, H, Tq, dv]
  const std::int64_t merged = w.wv.shape()[1];
  Tensor out = matmul(reshape(transpose(attended, {0, 2, 1, 3}), Shape{batch * tq, merged}), w.wo);
  if (w.bo.defined()) out = add(out, w.bo);
  return reshape(out, Shape{batch, tq, w.wo.shape()[1]});
}

}  // namespace keel
