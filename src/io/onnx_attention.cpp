// ONNX forms of Attention and AdditiveAttention (single_head_attention below) and of
// MultiHeadAttention, composed of MatMul / Reshape / Transpose / Softmax as Keras
// computes it (keras/src/layers/attention/multi_head_attention.py):
//   Q = q Wq + bq  [N, Tq, H, dk],  K = k Wk + bk,  V = v Wv + bv
//   scores = softmax((Q / sqrt(dk)) K^T) over the value positions  [N, H, Tq, Tv]
//   out = (scores V) Wo + bo, Wo [H, dv, out...]
#include <fmt/core.h>

#include <cmath>

#include "io/onnx_builder.hpp"

namespace keel::io::onnx_detail {
namespace {

// {query, value[, key]} as [N, T, D] values in keel's layout; ValueError for masks (bool inputs)
// and other counts or ranks.
std::vector<Value> attention_inputs(GraphBuilder& g, const layers::Layer& layer, const std::vector<Value>& in0) {
  if (in0.size() != 2 && in0.size() != 3)
    throw ValueError(fmt::format("export_onnx: {}: expected {{query, value[, key]}}, got {} inputs", who(layer), in0.size()));
  std::vector<Value> in;
  for (const auto& v : in0) {
    if (v.dtype == DType::bool_)
      throw ValueError(fmt::format("export_onnx: {}: attention masks are not exported", who(layer)));
    in.push_back(g.to_last(v));
    if (in.back().rank() != 3)
      throw ValueError(fmt::format("export_onnx: {}: expected [batch, time, features] inputs", who(layer)));
  }
  return in;
}

// x [N, T, D] projected by kernel [D, H, d] (+ bias [H, d]) to [N, H, T, d] (perm_after applied
// to [N, T, H, d]).
std::string project(GraphBuilder& g, layers::Layer& layer, const Value& x, const std::string& which,
                    const std::vector<std::int64_t>& perm_after) {
  const std::string base = layer.name() + "/" + which;
  const WeightData k = layer_weight(layer, which + "/kernel");
  const WeightData b = layer_weight(layer, which + "/bias", false);
  const std::int64_t d = k.shape[0], heads = k.shape[1], dh = k.shape[2];
  std::string y = g.op("MatMul", {x.name, g.weight(base + "/kernel", k.data, {d, heads * dh})}, base);
  if (b.present) y = g.op("Add", {y, g.weight(base + "/bias", b.data, {heads * dh})}, base);
  y = g.op("Reshape", {y, g.ints(base + "/shape", {0, 0, heads, dh})}, base);
  return g.transpose(y, perm_after, base);
}

Value attention(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in0) {
  const std::vector<Value> in = attention_inputs(g, layer, in0);
  const nlohmann::json c = layer.get_config();
  const auto& axes = c.find("attention_axes");
  if (axes != c.end() && !axes->is_null() && !(axes->is_array() && (axes->empty() || (axes->size() == 1 && (*axes)[0] == 1))))
    throw ValueError(fmt::format("export_onnx: {}: attention_axes {} are not exported", who(layer), axes->dump()));
  const Value& q = in[0];
  const Value& v = in[1];
  const Value& k = in.size() == 3 ? in[2] : in[1];
  const std::string base = layer.name();
  const WeightData wq = layer_weight(layer, "query/kernel");
  const std::int64_t dk = wq.shape[2];
  const std::string qh = project(g, layer, q, "query", {0, 2, 1, 3});  // [N, H, Tq, dk]
  const std::string kh = project(g, layer, k, "key", {0, 2, 3, 1});    // [N, H, dk, Tv]
  const std::string vh = project(g, layer, v, "value", {0, 2, 1, 3});  // [N, H, Tv, dv]
  const std::string scaled = g.op("Mul", {qh, g.scalar(base + "/scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk))))}, base);
  const std::string scores = g.op("Softmax", {g.op("MatMul", {scaled, kh}, base)}, base, {attr("axis", -1)});
  std::string ctx = g.transpose(g.op("MatMul", {scores, vh}, base), {0, 2, 1, 3}, base);  // [N, Tq, H, dv]
  const WeightData wo = layer_weight(layer, "attention_output/kernel");
  const WeightData bo = layer_weight(layer, "attention_output/bias", false);
  const std::int64_t heads = wo.shape[0], dv = wo.shape[1];
  std::int64_t out_n = 1;
  std::vector<std::int64_t> out_dims;
  for (std::size_t i = 2; i < wo.shape.size(); ++i) {
    out_n *= wo.shape[i];
    out_dims.push_back(wo.shape[i]);
  }
  ctx = g.op("Reshape", {ctx, g.ints(base + "/merge_heads", {0, 0, heads * dv})}, base);
  std::string y = g.op("MatMul", {ctx, g.weight(base + "/attention_output/kernel", wo.data, {heads * dv, out_n})}, base);
  if (bo.present) y = g.op("Add", {y, g.weight(base + "/attention_output/bias", bo.data, {out_n})}, base);
  Value out = q;
  out.shape = {-1, q.shape[1]};
  for (auto d : out_dims) out.shape.push_back(d);
  if (out_dims.size() != 1) {
    std::vector<std::int64_t> target{0, 0};
    for (auto d : out_dims) target.push_back(d);
    y = g.op("Reshape", {y, g.ints(base + "/output_shape", target)}, base);
  }
  out.name = y;
  return out;
}

// Keras' Attention (Luong: dot scores, optionally scaled by a scalar; or concat scores
// concat_score_weight * sum_d tanh(scale (q_d + k_d))) and AdditiveAttention (Bahdanau:
// sum_d scale_d tanh(q_d + k_d)); then softmax over the value positions and the weighted values.
Value single_head_attention(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in0, bool additive) {
  const std::vector<Value> in = attention_inputs(g, layer, in0);
  const nlohmann::json c = layer.get_config();
  const std::string base = layer.name();
  const Value& q = in[0];
  const Value& v = in[1];
  const Value& k = in.size() == 3 ? in[2] : in[1];
  const WeightData scale = layer_weight(layer, "scale", false);
  const bool concat = !additive && cfg_str(c, "score_mode", layer, "dot") == "concat";
  std::string scores;
  if (additive || concat) {
    // [N, Tq, 1, D] + [N, 1, Tv, D]
    std::string sum = g.op("Add", {g.unsqueeze(q.name, {2}, base), g.unsqueeze(k.name, {1}, base)}, base);
    const std::vector<std::int64_t> scale_dims = additive ? std::vector<std::int64_t>{q.shape[2]} : std::vector<std::int64_t>{};
    const std::string sname = scale.present ? g.weight(base + "/scale", scale.data, scale_dims) : "";
    if (concat && scale.present) sum = g.op("Mul", {sum, sname}, base);
    std::string t = g.op("Tanh", {sum}, base);
    if (additive && scale.present) t = g.op("Mul", {t, sname}, base);
    scores = g.reduce("ReduceSum", t, {3}, false, base);
    if (concat) {
      const WeightData w = layer_weight(layer, "concat_score_weight");
      scores = g.op("Mul", {scores, g.weight(base + "/concat_score_weight", w.data, {})}, base);
    }
  } else {
    scores = g.op("MatMul", {q.name, g.transpose(k.name, {0, 2, 1}, base)}, base);
    if (scale.present) scores = g.op("Mul", {scores, g.weight(base + "/scale", scale.data, {})}, base);
  }
  const std::string probs = g.op("Softmax", {scores}, base, {attr("axis", -1)});
  Value out = q;
  out.shape = {-1, q.shape[1], v.shape[2]};
  out.name = g.op("MatMul", {probs, v.name}, base);
  return out;
}

}  // namespace

bool convert_attention(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  const std::string cls = layer.class_name();
  if (cls == "Attention" || cls == "AdditiveAttention") {
    out = single_head_attention(g, layer, in, cls == "AdditiveAttention");
    return true;
  }
  if (cls != "MultiHeadAttention") return false;
  out = attention(g, layer, in);
  return true;
}

}  // namespace keel::io::onnx_detail
