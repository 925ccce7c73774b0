// ONNX forms of SimpleRNN, LSTM, GRU and Bidirectional: ONNX's RNN / LSTM / GRU ops (onnx/docs/Operators.md),
// which take time-major input X [T, N, F] and weights W [dirs, gates * H, F], R [dirs, gates * H, H],
// B [dirs, 2 * gates * H] (input bias, then recurrent bias).
#include <fmt/core.h>

#include <limits>

#include "io/onnx_builder.hpp"
#include "keel/layers/recurrent.hpp"

namespace keel::io::onnx_detail {
namespace {

// ONNX's names of the activations its recurrent ops accept.
std::string onnx_activation(const std::string& name, const layers::Layer& layer) {
  if (name == "tanh") return "Tanh";
  if (name == "sigmoid") return "Sigmoid";
  if (name == "relu") return "Relu";
  if (name == "softsign") return "Softsign";
  if (name == "softplus") return "Softplus";
  throw ValueError(fmt::format("export_onnx: {}: the recurrent activation '{}' is not exported", who(layer), name));
}

// Rows of a [gates * H, cols] matrix reordered by gate: out gate i = in gate order[i].
std::vector<float> reorder_gates(const std::vector<float>& m, std::int64_t h, std::int64_t cols,
                                 const std::vector<int>& order) {
  std::vector<float> out(m.size());
  const std::size_t block = static_cast<std::size_t>(h * cols);
  for (std::size_t i = 0; i < order.size(); ++i)
    std::copy(m.begin() + static_cast<std::ptrdiff_t>(order[i] * block),
              m.begin() + static_cast<std::ptrdiff_t>((order[i] + 1) * block), out.begin() + static_cast<std::ptrdiff_t>(i * block));
  return out;
}

Value recurrent(GraphBuilder& g, layers::Layer& layer, const Value& x0, const std::string& cls) {
  const nlohmann::json c = layer.get_config();
  const std::string base = layer.name();
  if (c.value("stateful", false))
    throw ValueError(fmt::format("export_onnx: {}: a stateful layer is not exported", who(layer)));
  if (c.value("return_state", false))
    throw ValueError(fmt::format("export_onnx: {}: return_state is not exported", who(layer)));
  const Value x = g.to_last(x0);
  if (x.rank() != 3)
    throw ValueError(fmt::format("export_onnx: {}: expected a [batch, time, features] input, got rank {}", who(layer), x.rank()));
  const std::int64_t h = cfg(c, "units", layer).get<std::int64_t>(), f = x.shape[2];
  const int gates = cls == "LSTM" ? 4 : cls == "GRU" ? 3 : 1;
  // Keras' kernel [F, gates * H] (columns per gate) -> W [gates * H, F]; recurrent likewise.
  const WeightData k = layer_weight(layer, "kernel"), rk = layer_weight(layer, "recurrent_kernel");
  std::vector<float> w = permute(k.data, k.shape, {1, 0}), r = permute(rk.data, rk.shape, {1, 0});
  const WeightData b = layer_weight(layer, "bias", false);
  std::vector<float> bias(static_cast<std::size_t>(2 * gates * h), 0.f);
  std::vector<Attr> attrs{attr("hidden_size", h)};
  const std::string act = onnx_activation(activation_name(c, layer), layer);
  if (cls == "LSTM") {
    // Keras' gates i, f, c, o -> ONNX's i, o, f, c.
    const std::vector<int> order{0, 3, 1, 2};
    w = reorder_gates(w, h, f, order);
    r = reorder_gates(r, h, h, order);
    if (b.present) {
      const auto bb = reorder_gates(b.data, h, 1, order);
      std::copy(bb.begin(), bb.end(), bias.begin());
    }
    const std::string rec = onnx_activation(cfg_str(c, "recurrent_activation", layer, "sigmoid"), layer);
    attrs.push_back(attr_strings("activations", {rec, act, act}));
  } else if (cls == "GRU") {
    // Keras' gates z, r, h are ONNX's z, r, h. reset_after (Keras 3's default) applies the reset
    // gate after the recurrent matmul: ONNX's linear_before_reset = 1, with bias [2, 3H] being
    // the input and the recurrent bias.
    const bool reset_after = c.value("reset_after", true);
    if (b.present) std::copy(b.data.begin(), b.data.end(), bias.begin());  // [3H] or [2, 3H]
    attrs.push_back(attr("linear_before_reset", reset_after ? 1 : 0));
    const std::string rec = onnx_activation(cfg_str(c, "recurrent_activation", layer, "sigmoid"), layer);
    attrs.push_back(attr_strings("activations", {rec, act}));
  } else {
    if (b.present) std::copy(b.data.begin(), b.data.end(), bias.begin());
    attrs.push_back(attr_strings("activations", {act}));
  }
  const std::string type = cls == "SimpleRNN" ? "RNN" : cls;
  // [N, T, F] -> [T, N, F]; go_backwards feeds the sequence reversed (Keras returns the outputs in
  // processing order, so a forward run on the reversed input matches it exactly).
  std::string xt = g.transpose(x.name, {1, 0, 2}, base + "/time_major");
  if (c.value("go_backwards", false))
    xt = g.op("Slice", {xt, g.ints(base + "/starts", {-1}), g.ints(base + "/ends", {std::numeric_limits<std::int64_t>::min()}),
                        g.ints(base + "/axes", {0}), g.ints(base + "/steps", {-1})}, base);
  const std::int64_t gh = gates * h;
  const std::vector<std::string> outs = g.op_n(
      type,
      {xt, g.weight(base + "/W", w, {1, gh, f}), g.weight(base + "/R", r, {1, gh, h}), g.weight(base + "/B", bias, {1, 2 * gh})},
      base, 2, attrs);
  Value out = x;
  if (c.value("return_sequences", false)) {
    // Y [T, 1, N, H] -> [T, N, H] -> [N, T, H]
    out.name = g.transpose(g.squeeze(outs[0], {1}, base), {1, 0, 2}, base);
    out.shape = {-1, x.shape[1], h};
  } else {
    out.name = g.squeeze(outs[1], {0}, base);  // Y_h [1, N, H]
    out.shape = {-1, h};
  }
  return out;
}

// Keras' Bidirectional: its forward layer, and its backward layer (go_backwards, so its outputs
// come in reversed time order, put back into forward order when it returns sequences), merged.
Value bidirectional(GraphBuilder& g, layers::Bidirectional& layer, const Value& x) {
  const nlohmann::json c = layer.get_config();
  const std::string mode = cfg_str(c, "merge_mode", layer, "concat");
  const std::string base = layer.name();
  const auto& fwd = layer.forward_layer();
  const auto& bwd = layer.backward_layer();
  const Value f = recurrent(g, *fwd, x, fwd->class_name());
  Value b = recurrent(g, *bwd, x, bwd->class_name());
  if (b.rank() == 3)
    b.name = g.op("Slice", {b.name, g.ints(base + "/starts", {-1}), g.ints(base + "/ends", {std::numeric_limits<std::int64_t>::min()}),
                            g.ints(base + "/axes", {1}), g.ints(base + "/steps", {-1})}, base);
  Value out = f;
  if (mode == "concat") {
    out.shape.back() = f.shape.back() + b.shape.back();
    out.name = g.op("Concat", {f.name, b.name}, base, {attr("axis", f.rank() - 1)});
  } else if (mode == "sum") {
    out.name = g.op("Add", {f.name, b.name}, base);
  } else if (mode == "mul") {
    out.name = g.op("Mul", {f.name, b.name}, base);
  } else if (mode == "ave") {
    out.name = g.op("Mul", {g.op("Add", {f.name, b.name}, base), g.scalar(base + "/half", 0.5f)}, base);
  } else {
    throw ValueError(fmt::format("export_onnx: {}: merge_mode '{}' is not exported", who(layer), mode));
  }
  return out;
}

}  // namespace

bool convert_recurrent(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  const std::string cls = layer.class_name();
  if (cls != "LSTM" && cls != "GRU" && cls != "SimpleRNN" && cls != "Bidirectional") return false;
  if (in.size() != 1)
    throw ValueError(fmt::format("export_onnx: {}: initial states as inputs are not exported (got {} inputs)", who(layer),
                                 in.size()));
  if (cls == "Bidirectional") {
    auto* bi = dynamic_cast<layers::Bidirectional*>(&layer);
    if (!bi) throw ValueError(fmt::format("export_onnx: {} is not keel's Bidirectional", who(layer)));
    out = bidirectional(g, *bi, in[0]);
  } else {
    out = recurrent(g, layer, in[0], cls);
  }
  return true;
}

}  // namespace keel::io::onnx_detail
