// Signatures of loaded models (see signature.hpp).
#include "signature.hpp"

#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"

namespace keel::serve {

namespace {

using nlohmann::json;

DType dtype_from_name(const json& j) {
  if (!j.is_string()) return DType::float32;
  const std::string s = j.get<std::string>();
  for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64, DType::int32, DType::int64,
                  DType::uint8, DType::bool_})
    if (keel::name(d) == s) return d;
  return DType::float32;
}

std::vector<std::int64_t> dims_from_batch_shape(const json& shape) {
  std::vector<std::int64_t> dims;
  for (const auto& d : shape) dims.push_back(d.is_number_integer() ? d.get<std::int64_t>() : -1);
  if (!dims.empty()) dims[0] = -1;
  return dims;
}

// The InputLayer entries of a model config: a functional model's "input_layers" name them, a
// Sequential's first layer is one once the model is built.
std::vector<TensorInfo> inputs_of(models::Model& model) {
  const json config = model.get_config();
  std::vector<std::string> names = model.input_names();
  std::vector<TensorInfo> out;
  const json& layers = config.contains("layers") ? config["layers"] : json::array();
  if (names.empty() && !model.is_functional()) {
    // A Sequential has one input: named after its InputLayer (Keras' "input_layer"), if any.
    std::string name = "input";
    for (const auto& l : layers)
      if (l.value("class_name", "") == "InputLayer" && l.contains("config")) {
        name = l["config"].value("name", name);
        break;
      }
    names.push_back(name);
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    TensorInfo t{names[i], DType::float32, {}, true};
    for (const auto& l : layers) {
      if (l.value("class_name", "") != "InputLayer" || !l.contains("config")) continue;
      const json& c = l["config"];
      const bool match = c.value("name", "") == names[i] || (names.size() == 1 && !config.contains("input_layers"));
      if (!match) continue;
      for (const char* key : {"batch_shape", "batch_input_shape"})
        if (c.contains(key) && c[key].is_array()) {
          t.dims = dims_from_batch_shape(c[key]);
          t.unknown_rank = false;
        }
      t.dtype = dtype_from_name(c.contains("dtype") ? c["dtype"] : json());
      break;
    }
    if (t.unknown_rank && names.size() == 1 && model.built() && model.built_shape().rank() > 0) {
      t.dims = model.built_shape().dims();
      t.dims[0] = -1;
      t.unknown_rank = false;
    }
    out.push_back(std::move(t));
  }
  return out;
}

json tensor_info_json(const TensorInfo& t, const std::string& tensor_name) {
  json dims = json::array();
  for (auto d : t.dims) dims.push_back({{"size", std::to_string(d)}, {"name", ""}});
  return {{"dtype", tf_dtype_name(t.dtype)},
          {"tensor_shape", {{"dim", dims}, {"unknown_rank", t.unknown_rank}}},
          {"name", tensor_name}};
}

}  // namespace

const char* tf_dtype_name(DType d) {
  switch (d) {
    case DType::float16: return "DT_HALF";
    case DType::bfloat16: return "DT_BFLOAT16";
    case DType::float32: return "DT_FLOAT";
    case DType::float64: return "DT_DOUBLE";
    case DType::int32: return "DT_INT32";
    case DType::int64: return "DT_INT64";
    case DType::uint8: return "DT_UINT8";
    case DType::bool_: return "DT_BOOL";
  }
  return "DT_INVALID";
}

Signature signature_of(models::Model& model) {
  Signature s;
  s.inputs = inputs_of(model);
  const std::vector<std::string> out_names = model.output_names();
  bool known = !s.inputs.empty();
  for (const auto& t : s.inputs)
    for (std::size_t i = 1; i < t.dims.size(); ++i) known = known && t.dims[i] >= 0;
  for (const auto& t : s.inputs) known = known && !t.unknown_rank;
  std::vector<Tensor> outs;
  if (known) {
    std::vector<Tensor> x;
    for (const auto& t : s.inputs) {
      std::vector<std::int64_t> dims = t.dims;
      dims[0] = 1;
      x.push_back(zeros(Shape(dims), t.dtype));
    }
    outs = model.predict_on_batch(models::ModelData(x));
  }
  for (std::size_t i = 0; i < out_names.size(); ++i) {
    TensorInfo t{out_names[i], DType::float32, {}, true};
    if (i < outs.size()) {
      t.dtype = outs[i].dtype();
      t.dims = outs[i].shape().dims();
      if (!t.dims.empty()) t.dims[0] = -1;
      t.unknown_rank = false;
    }
    s.outputs.push_back(std::move(t));
  }
  return s;
}

nlohmann::json signature_def_json(const Signature& s) {
  json inputs = json::object(), outputs = json::object();
  for (const auto& t : s.inputs) inputs[t.name] = tensor_info_json(t, "serving_default_" + t.name + ":0");
  for (std::size_t i = 0; i < s.outputs.size(); ++i)
    outputs[s.outputs[i].name] = tensor_info_json(s.outputs[i], fmt::format("StatefulPartitionedCall:{}", i));
  return {{"inputs", inputs}, {"outputs", outputs}, {"method_name", "tensorflow/serving/predict"}};
}

}  // namespace keel::serve
