// io::export_onnx: walks a Sequential or functional model's layer graph (read back from its
// Keras config: the layers' inbound nodes), converts each layer call with the converters of
// onnx_*.cpp, and writes the ModelProto atomically. Built-in layers map to ONNX's own ops (an
// LSTM layer to ONNX's LSTM, not to the kernels of its steps); a layer without a converter and a
// subclassed model are exported from their traced graphs (onnx_traced.cpp).
#include "keel/io/onnx.hpp"

#include <fmt/core.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "io/onnx_builder.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/models/model.hpp"
#include "onnx/onnx.pb.h"

namespace keel::io {
namespace {

using onnx_detail::GraphBuilder;
using onnx_detail::Value;
using nlohmann::json;

// The outputs of `model` (a Sequential or functional model, maybe nested in another) applied to `in`.
std::vector<Value> walk(GraphBuilder& g, models::Model& model, const std::vector<Value>& in) {
  if (model.class_name() == "Sequential") {
    if (in.size() != 1)
      throw ValueError(fmt::format("export_onnx: Sequential '{}' got {} inputs", model.name(), in.size()));
    Value x = in[0];
    for (const auto& l : model.layers()) x = onnx_detail::convert_layer(g, *l, {x});
    return {x};
  }
  // A subclassed model has no layer graph: its call is exported from its traced graph.
  if (!model.is_functional()) return onnx_detail::convert_traced(g, model, in);
  const json c = model.get_config();
  const auto key = [](const json& hist) { return fmt::format("{}#{}", hist.at(0).get<std::string>(), hist.at(1).get<int>()); };
  std::map<std::string, Value> made;
  const json& inputs = c.at("input_layers");
  if (inputs.size() != in.size())
    throw ValueError(fmt::format("export_onnx: model '{}' has {} inputs, got {}", model.name(), inputs.size(), in.size()));
  for (std::size_t i = 0; i < in.size(); ++i) made[key(inputs[i])] = in[i];
  // The layer calls in any order their inputs allow (a shared layer's later calls may need
  // layers listed after it).
  struct Call {
    std::shared_ptr<layers::Layer> layer;
    int index;
    std::vector<std::string> inputs;
  };
  std::vector<Call> pending;
  for (const json& entry : c.at("layers")) {
    if (entry.at("class_name") == "InputLayer") continue;
    const std::string name = entry.at("name").get<std::string>();
    int index = 0;
    for (const json& node : entry.at("inbound_nodes")) {
      Call call{model.get_layer(name), index++, {}};
      // Every tensor reference in the arguments, in order ({"class_name": "__keras_tensor__"}).
      const std::function<void(const json&)> collect = [&](const json& j) {
        if (j.is_object() && j.value("class_name", "") == "__keras_tensor__") {
          call.inputs.push_back(key(j.at("config").at("keras_history")));
        } else if (j.is_array()) {
          for (const json& e : j) collect(e);
        }
      };
      collect(node.at("args"));
      pending.push_back(std::move(call));
    }
  }
  while (!pending.empty()) {
    bool progress = false;
    for (auto it = pending.begin(); it != pending.end();) {
      bool ready = true;
      for (const auto& k : it->inputs) ready = ready && made.count(k);
      if (!ready) {
        ++it;
        continue;
      }
      std::vector<Value> args;
      for (const auto& k : it->inputs) args.push_back(made.at(k));
      made[fmt::format("{}#{}", it->layer->name(), it->index)] = onnx_detail::convert_layer(g, *it->layer, args);
      it = pending.erase(it);
      progress = true;
    }
    if (!progress) throw ValueError(fmt::format("export_onnx: model '{}': its graph has a cycle or a missing input", model.name()));
  }
  std::vector<Value> outs;
  for (const json& o : c.at("output_layers")) outs.push_back(made.at(key(o)));
  return outs;
}


int onnx_type(DType d, const std::string& what) {
  switch (d) {
    case DType::float32: return keel_onnx::TensorProto::FLOAT;
    case DType::int32: return keel_onnx::TensorProto::INT32;
    case DType::int64: return keel_onnx::TensorProto::INT64;
    default:
      throw ValueError(fmt::format("export_onnx: {} has dtype {} (float32, int32 and int64 are exported)", what, keel::name(d)));
  }
}

// A graph input's or output's type. Unknown sizes: the batch is "batch" (or 1 without
// dynamic_batch: one example); another unknown input size is "<name>_dim<i>"; an unknown output
// size other than the batch is left without a value or name (ONNX's unknown dimension).
void set_type(keel_onnx::ValueInfoProto* v, const std::string& name, DType dtype, const std::vector<std::int64_t>& shape,
              bool dynamic_batch, bool is_input) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx_type(dtype, "'" + name + "'"));
  auto* s = t->mutable_shape();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    auto* d = s->add_dim();
    if (i == 0 && dynamic_batch) d->set_dim_param("batch");
    else if (i == 0) d->set_dim_value(1);
    else if (shape[i] >= 0) d->set_dim_value(shape[i]);
    else if (is_input) d->set_dim_param(fmt::format("{}_dim{}", name, i));
  }
}

}  // namespace

Value onnx_detail::convert_layer(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in) {
  if (auto* sub = dynamic_cast<models::Model*>(&layer)) {
    const auto outs = walk(g, *sub, in);
    if (outs.size() != 1)
      throw ValueError(fmt::format("export_onnx: nested model '{}' has {} outputs (one is supported)", sub->name(), outs.size()));
    return outs[0];
  }
  if (layer.class_name() == "InputLayer") return in.at(0);
  Value out;
  if (onnx_detail::convert_core(g, layer, in, out) || onnx_detail::convert_conv(g, layer, in, out) ||
      onnx_detail::convert_norm(g, layer, in, out) || onnx_detail::convert_recurrent(g, layer, in, out) ||
      onnx_detail::convert_attention(g, layer, in, out) || onnx_detail::convert_spatial(g, layer, in, out) ||
      onnx_detail::convert_quantized(g, layer, in, out))
    return out;
  // A layer no converter knows (a custom layer, a Lambda): from its traced graph.
  return onnx_detail::convert_traced(g, layer, in).at(0);
}

OnnxExportReport export_onnx_report(models::Model& model, const std::string& path, OnnxExportOptions options) {
  if (options.opset < 13 || options.opset > 17)
    throw ValueError(fmt::format("export_onnx: opset {} is not supported (13..17)", options.opset));
  if (!model.built())
    throw ValueError(fmt::format("export_onnx: model '{}' is not built: call it (or build it) first", model.name()));
  // The inputs: the InputLayers of a functional model, the built shape of a Sequential.
  std::vector<Value> inputs;
  std::vector<std::string> names = model.input_names();
  if (model.is_functional()) {
    const json c = model.get_config();
    for (const json& ref : c.at("input_layers")) {
      const std::string n = ref.at(0).get<std::string>();
      for (const json& entry : c.at("layers"))
        if (entry.value("name", "") == n) {
          Value v;
          const json& cfgj = entry.at("config");
          for (const json& d : cfgj.at("batch_shape")) v.shape.push_back(d.is_null() ? -1 : d.get<std::int64_t>());
          const std::string dt = cfgj.value("dtype", "float32");
          v.dtype = dt == "int32" ? DType::int32 : dt == "int64" ? DType::int64 : dt == "float32" ? DType::float32 : DType::float64;
          inputs.push_back(v);
        }
    }
  } else {
    Value v;
    const Shape& s = model.built_shape();
    for (std::int64_t i = 0; i < s.rank(); ++i) v.shape.push_back(i == 0 ? -1 : s[i]);
    inputs.push_back(v);
  }
  if (!options.input_names.empty()) {
    if (options.input_names.size() != inputs.size())
      throw ValueError(fmt::format("export_onnx: {} input names for a model with {} inputs", options.input_names.size(), inputs.size()));
    names = options.input_names;
  }
  std::vector<std::string> out_names = model.output_names();
  if (!options.output_names.empty()) {
    if (options.output_names.size() != out_names.size())
      throw ValueError(fmt::format("export_onnx: {} output names for a model with {} outputs", options.output_names.size(), out_names.size()));
    out_names = options.output_names;
  }
  if (names.empty())  // a Sequential built on data has no named input: keel's default name
    for (std::size_t i = 0; i < inputs.size(); ++i) names.push_back(i == 0 ? "input" : fmt::format("input_{}", i));
  if (names.size() != inputs.size())
    throw ValueError(fmt::format("export_onnx: model '{}' names {} inputs but has {}", model.name(), names.size(), inputs.size()));
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = 0; j < names.size() + out_names.size(); ++j) {
      const std::string& other = j < names.size() ? names[j] : out_names[j - names.size()];
      if ((j != i && other == names[i]) || names[i].empty())
        throw ValueError(fmt::format("export_onnx: the input name '{}' is empty or used twice", names[i]));
    }

  keel_onnx::ModelProto proto;
  proto.set_ir_version(8);  // ONNX 1.12's IR, which carries opsets up to 17
  proto.set_producer_name("keel");
  proto.set_producer_version("1");
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  keel_onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(model.name());
  GraphBuilder g(graph, options.opset);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    set_type(graph->add_input(), names[i], inputs[i].dtype, inputs[i].shape, options.dynamic_batch, true);
    inputs[i].name = names[i];
  }
  const std::vector<Value> outs = walk(g, model, inputs);
  if (outs.size() != out_names.size())
    throw ValueError(fmt::format("export_onnx: model '{}' made {} outputs for {} names", model.name(), outs.size(), out_names.size()));
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const Value v = g.to_last(outs[i]);
    g.op("Identity", {v.name}, "output");
    graph->mutable_node(graph->node_size() - 1)->set_output(0, out_names[i]);
    set_type(graph->add_output(), out_names[i], v.dtype, v.shape, options.dynamic_batch, false);
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    throw IOError(fmt::format("export_onnx: could not serialise the model for '{}' (over 2 GiB?)", path));
  atomic_write(path, bytes);
  OnnxExportReport report;
  report.nodes = graph->node_size();
  report.initializers = graph->initializer_size();
  report.layout_transposes = g.layout_transposes();
  return report;
}

void export_onnx(models::Model& model, const std::string& path, OnnxExportOptions options) {
  export_onnx_report(model, path, std::move(options));
}

}  // namespace keel::io
