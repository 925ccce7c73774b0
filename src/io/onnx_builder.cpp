// GraphBuilder: nodes, initializers and layout Transposes of an ONNX graph (see onnx_builder.hpp).
#include "io/onnx_builder.hpp"

#include <fmt/core.h>

#include <cstring>

#include "keel/autograd/variable.hpp"
#include "onnx/onnx.pb.h"

namespace keel::io::onnx_detail {

namespace {
Attr make(Attr::Kind kind, const std::string& name) {
  Attr a;
  a.kind = kind;
  a.name = name;
  return a;
}
}  // namespace

Attr attr(const std::string& name, std::int64_t v) { Attr a = make(Attr::Kind::i, name); a.i = v; return a; }
Attr attr(const std::string& name, int v) { return attr(name, static_cast<std::int64_t>(v)); }
Attr attr(const std::string& name, float v) { Attr a = make(Attr::Kind::f, name); a.f = v; return a; }
Attr attr(const std::string& name, double v) { return attr(name, static_cast<float>(v)); }
Attr attr(const std::string& name, const char* v) { Attr a = make(Attr::Kind::s, name); a.s = v; return a; }
Attr attr(const std::string& name, const std::string& v) { return attr(name, v.c_str()); }
Attr attr(const std::string& name, std::vector<std::int64_t> v) {
  Attr a = make(Attr::Kind::ints, name);
  a.ints = std::move(v);
  return a;
}
Attr attr_floats(const std::string& name, std::vector<float> v) {
  Attr a = make(Attr::Kind::floats, name);
  a.floats = std::move(v);
  return a;
}
Attr attr_strings(const std::string& name, std::vector<std::string> v) {
  Attr a = make(Attr::Kind::strings, name);
  a.strings = std::move(v);
  return a;
}

std::string GraphBuilder::fresh(const std::string& base) { return fmt::format("{}__{}", base, counter_++); }

keel_onnx::NodeProto* GraphBuilder::add_node(const std::string& type, const std::vector<std::string>& inputs,
                                             const std::vector<std::string>& outputs,
                                             const std::vector<Attr>& attrs) {
  keel_onnx::NodeProto* n = graph_->add_node();
  n->set_op_type(type);
  n->set_name(fresh(type));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  for (const Attr& a : attrs) {
    keel_onnx::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
      case Attr::Kind::i: p->set_type(keel_onnx::AttributeProto::INT); p->set_i(a.i); break;
      case Attr::Kind::f: p->set_type(keel_onnx::AttributeProto::FLOAT); p->set_f(a.f); break;
      case Attr::Kind::s: p->set_type(keel_onnx::AttributeProto::STRING); p->set_s(a.s); break;
      case Attr::Kind::ints:
        p->set_type(keel_onnx::AttributeProto::INTS);
        for (auto v : a.ints) p->add_ints(v);
        break;
      case Attr::Kind::floats:
        p->set_type(keel_onnx::AttributeProto::FLOATS);
        for (auto v : a.floats) p->add_floats(v);
        break;
      case Attr::Kind::strings:
        p->set_type(keel_onnx::AttributeProto::STRINGS);
        for (const auto& v : a.strings) p->add_strings(v);
        break;
    }
  }
  return n;
}

std::string GraphBuilder::op(const std::string& type, const std::vector<std::string>& inputs, const std::string& base,
                             const std::vector<Attr>& attrs) {
  return op_n(type, inputs, base, 1, attrs)[0];
}

std::vector<std::string> GraphBuilder::op_n(const std::string& type, const std::vector<std::string>& inputs,
                                            const std::string& base, int outputs, const std::vector<Attr>& attrs) {
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) names.push_back(fresh(base + "/" + type));
  add_node(type, inputs, names, attrs);
  return names;
}

std::string GraphBuilder::int8s(const std::string& base, const std::vector<std::int8_t>& data,
                                const std::vector<std::int64_t>& dims) {
  keel_onnx::TensorProto* t = graph_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(keel_onnx::TensorProto::INT8);
  for (auto d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size()));
  return name;
}

std::string GraphBuilder::float16s(const std::string& base, const std::vector<std::uint16_t>& bits,
                                   const std::vector<std::int64_t>& dims) {
  keel_onnx::TensorProto* t = graph_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(keel_onnx::TensorProto::FLOAT16);
  for (auto d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(bits.data()), bits.size() * sizeof(std::uint16_t)));
  return name;
}

std::string GraphBuilder::weight(const std::string& base, const std::vector<float>& data,
                                 const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  if (n != static_cast<std::int64_t>(data.size()))
    throw ValueError(fmt::format("export_onnx: initializer '{}' has {} values for {} elements", base, data.size(), n));
  if (weight_hook) {
    WeightHook hook = std::move(weight_hook);  // the hook's own initializers are plain ones
    weight_hook = nullptr;
    std::string replaced = hook(base, data, dims);
    weight_hook = std::move(hook);
    if (!replaced.empty()) return replaced;
  }
  keel_onnx::TensorProto* t = graph_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(keel_onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  // raw_data is little-endian float32, which is what x86-64 and aarch64 hold in memory.
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
  return name;
}

std::string GraphBuilder::ints(const std::string& base, const std::vector<std::int64_t>& data) {
  keel_onnx::TensorProto* t = graph_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(keel_onnx::TensorProto::INT64);
  t->add_dims(static_cast<std::int64_t>(data.size()));
  for (auto v : data) t->add_int64_data(v);
  return name;
}

std::string GraphBuilder::raw(const std::string& base, DType dtype, const void* data, std::size_t nbytes,
                              const std::vector<std::int64_t>& dims) {
  keel_onnx::TensorProto* t = graph_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(onnx_elem_type(dtype));
  for (auto d : dims) t->add_dims(d);
  t->set_raw_data(std::string(static_cast<const char*>(data), nbytes));  // little-endian, as held
  return name;
}

int onnx_elem_type(DType d) {
  switch (d) {
    case DType::float16: return keel_onnx::TensorProto::FLOAT16;
    case DType::bfloat16: return keel_onnx::TensorProto::BFLOAT16;
    case DType::float32: return keel_onnx::TensorProto::FLOAT;
    case DType::float64: return keel_onnx::TensorProto::DOUBLE;
    case DType::int32: return keel_onnx::TensorProto::INT32;
    case DType::int64: return keel_onnx::TensorProto::INT64;
    case DType::uint8: return keel_onnx::TensorProto::UINT8;
    case DType::bool_: return keel_onnx::TensorProto::BOOL;
  }
  return keel_onnx::TensorProto::UNDEFINED;
}

std::string GraphBuilder::scalar(const std::string& base, float v) { return weight(base, {v}, {}); }

std::string GraphBuilder::squeeze(const std::string& x, const std::vector<std::int64_t>& axes,
                                  const std::string& base) {
  return op("Squeeze", {x, ints(base + "/axes", axes)}, base);
}

std::string GraphBuilder::unsqueeze(const std::string& x, const std::vector<std::int64_t>& axes,
                                    const std::string& base) {
  return op("Unsqueeze", {x, ints(base + "/axes", axes)}, base);
}

std::string GraphBuilder::reduce(const std::string& type, const std::string& x,
                                 const std::vector<std::int64_t>& axes, bool keepdims, const std::string& base) {
  // ReduceSum's axes became an input in opset 13; the other reductions' in opset 18.
  if (type == "ReduceSum") return op(type, {x, ints(base + "/axes", axes)}, base, {attr("keepdims", keepdims ? 1 : 0)});
  return op(type, {x}, base, {attr("axes", axes), attr("keepdims", keepdims ? 1 : 0)});
}

std::string GraphBuilder::transpose(const std::string& x, const std::vector<std::int64_t>& perm,
                                    const std::string& base) {
  return op("Transpose", {x}, base, {attr("perm", perm)});
}

Value GraphBuilder::to_last(const Value& v) {
  if (v.layout == Layout::last || v.rank() <= 2) {
    Value out = v;
    out.layout = Layout::last;
    return out;
  }
  // physical [N, C, d1..dk] -> logical [N, d1..dk, C]: perm [0, 2, ..., r-1, 1].
  std::vector<std::int64_t> perm{0};
  for (std::int64_t i = 2; i < v.rank(); ++i) perm.push_back(i);
  perm.push_back(1);
  ++transposes_;
  Value out = v;
  out.name = transpose(v.name, perm, v.name + "/to_nhwc");
  out.layout = Layout::last;
  return out;
}

Value GraphBuilder::to_first(const Value& v) {
  if (v.layout == Layout::first || v.rank() <= 2) {
    Value out = v;
    if (v.rank() > 2) out.layout = Layout::first;
    return out;
  }
  // logical [N, d1..dk, C] -> physical [N, C, d1..dk]: perm [0, r-1, 1, ..., r-2].
  std::vector<std::int64_t> perm{0, v.rank() - 1};
  for (std::int64_t i = 1; i < v.rank() - 1; ++i) perm.push_back(i);
  ++transposes_;
  Value out = v;
  out.name = transpose(v.name, perm, v.name + "/to_nchw");
  out.layout = Layout::first;
  return out;
}

std::int64_t GraphBuilder::physical_axis(const Value& v, std::int64_t axis) const {
  const std::int64_t r = v.rank();
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r)
    throw ValueError(fmt::format("export_onnx: axis {} is out of range for a tensor of rank {}", axis, r));
  if (v.layout == Layout::last || r <= 2 || axis == 0) return axis;
  return axis == r - 1 ? 1 : axis + 1;
}

// ---- reading a layer -------------------------------------------------------------------------

std::string who(const layers::Layer& layer) { return fmt::format("layer '{}' ({})", layer.name(), layer.class_name()); }

WeightData layer_weight(layers::Layer& layer, const std::string& short_name, bool required) {
  const std::string suffix = "/" + short_name;
  for (Variable* v : layer.weights()) {
    const std::string& n = v->name();
    if (n == short_name || (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)) {
      WeightData w;
      const Tensor t = v->peek();
      w.data = t.to_vector<float>();
      for (std::int64_t i = 0; i < t.rank(); ++i) w.shape.push_back(t.shape()[i]);
      w.present = true;
      return w;
    }
  }
  if (required) throw ValueError(fmt::format("export_onnx: {} has no weight '{}' (is it built?)", who(layer), short_name));
  return {};
}

std::vector<float> permute(const std::vector<float>& data, const std::vector<std::int64_t>& shape,
                           const std::vector<std::int64_t>& perm) {
  const std::size_t r = shape.size();
  std::vector<std::int64_t> in_strides(r, 1), out_shape(r), out_strides(r, 1);
  for (std::size_t i = r; i-- > 1;) in_strides[i - 1] = in_strides[i] * shape[i];
  for (std::size_t i = 0; i < r; ++i) out_shape[i] = shape[static_cast<std::size_t>(perm[i])];
  for (std::size_t i = r; i-- > 1;) out_strides[i - 1] = out_strides[i] * out_shape[i];
  std::vector<float> out(data.size());
  std::vector<std::int64_t> idx(r, 0);  // index into the output
  for (std::size_t flat = 0; flat < data.size(); ++flat) {
    std::int64_t src = 0;
    for (std::size_t i = 0; i < r; ++i) src += idx[i] * in_strides[static_cast<std::size_t>(perm[i])];
    out[flat] = data[static_cast<std::size_t>(src)];
    for (std::size_t i = r; i-- > 0;) {
      if (++idx[i] < out_shape[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

void channels_last_only(const nlohmann::json& c, const layers::Layer& layer) {
  if (cfg_str(c, "data_format", layer, "channels_last") != "channels_last")
    throw ValueError(fmt::format("export_onnx: {}: data_format channels_first is not exported", who(layer)));
}

const nlohmann::json& cfg(const nlohmann::json& c, const char* key, const layers::Layer& layer) {
  auto it = c.find(key);
  if (it == c.end()) throw ValueError(fmt::format("export_onnx: {}: its config has no '{}'", who(layer), key));
  return *it;
}

std::vector<std::int64_t> cfg_ints(const nlohmann::json& c, const char* key, const layers::Layer& layer,
                                   std::size_t n) {
  const nlohmann::json& v = cfg(c, key, layer);
  std::vector<std::int64_t> out;
  if (v.is_number_integer()) out.assign(n, v.get<std::int64_t>());
  else if (v.is_array())
    for (const auto& e : v) {
      if (!e.is_number_integer())
        throw ValueError(fmt::format("export_onnx: {}: '{}' must hold integers, got {}", who(layer), key, v.dump()));
      out.push_back(e.get<std::int64_t>());
    }
  if (out.size() != n)
    throw ValueError(fmt::format("export_onnx: {}: '{}' must hold {} integers, got {}", who(layer), key, n, v.dump()));
  return out;
}

std::string cfg_str(const nlohmann::json& c, const char* key, const layers::Layer& layer, const std::string& dflt) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return dflt;
  if (!it->is_string()) throw ValueError(fmt::format("export_onnx: {}: '{}' must be a string", who(layer), key));
  return it->get<std::string>();
}

std::string activation_name(const nlohmann::json& c, const layers::Layer& layer) {
  auto it = c.find("activation");
  if (it == c.end() || it->is_null()) return "linear";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("config") && (*it)["config"].is_object() && (*it)["config"].contains("name") &&
      (*it)["config"]["name"].is_string())
    return (*it)["config"]["name"].get<std::string>();
  if (it->is_object() && it->contains("class_name") && (*it)["class_name"].is_string())
    return (*it)["class_name"].get<std::string>();
  throw ValueError(fmt::format("export_onnx: {}: cannot read its activation {}", who(layer), it->dump()));
}

std::vector<std::int64_t> output_shape_at(layers::Layer& layer, const std::vector<Value>& in, std::int64_t size) {
  if (in.size() != 1) throw ValueError(fmt::format("export_onnx: {}: expected one input, got {}", who(layer), in.size()));
  std::vector<std::int64_t> dims = in[0].shape;
  dims[0] = 1;  // compute_output_shape wants a concrete batch
  for (std::size_t i = 1; i < dims.size(); ++i)
    if (size > 0 && dims[i] < 0) dims[i] = size;
  std::vector<std::int64_t> r = layer.compute_output_shape(Shape(dims)).dims();
  if (!r.empty()) r[0] = -1;
  return r;
}

// An unknown (None) size stays -1: compute_output_shape probes it at two sizes, as a functional
// model's None dimensions are, and an output size that differs between them is unknown too.
std::vector<std::int64_t> output_shape_of(layers::Layer& layer, const std::vector<Value>& in) {
  return output_shape_at(layer, in, -1);
}

}  // namespace keel::io::onnx_detail
