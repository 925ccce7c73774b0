// JSON <-> tensor conversion of the predict API (see tensor_json.hpp).
#include "tensor_json.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

#include <fmt/core.h>

#include "keel/ops/creation.hpp"

namespace keel::serve {

namespace {

using nlohmann::json;

// The shape of a nested list, read along its first elements (checked for rectangularity when
// the values are read).
std::vector<std::int64_t> shape_of(const json& v, const std::string& what) {
  std::vector<std::int64_t> dims;
  const json* p = &v;
  while (p->is_array()) {
    if (static_cast<int>(dims.size()) >= kMaxJsonRank)
      throw ValueError(fmt::format("{}: nested deeper than {} lists", what, kMaxJsonRank));
    dims.push_back(static_cast<std::int64_t>(p->size()));
    if (p->empty()) break;
    p = &(*p)[0];
  }
  return dims;
}

template <class T>
void read_values(const json& v, const std::vector<std::int64_t>& dims, std::size_t axis, DType dtype,
                 const std::string& what, std::vector<T>& out) {
  if (axis < dims.size()) {
    if (!v.is_array() || static_cast<std::int64_t>(v.size()) != dims[axis])
      throw ValueError(fmt::format("{}: not a rectangular list: a list at depth {} has {} entries where the first had {}",
                                   what, axis, v.is_array() ? std::to_string(v.size()) : "no list but a value",
                                   dims[axis]));
    for (const auto& e : v) read_values(e, dims, axis + 1, dtype, what, out);
    return;
  }
  if (v.is_array())
    throw ValueError(fmt::format("{}: not a rectangular list: a list where the first entries hold values", what));
  if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number())
      throw ValueError(fmt::format("{}: expected a number for {}, got {}", what, tf_dtype_name(dtype), v.type_name()));
    out.push_back(v.get<double>());
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw ValueError(fmt::format("{}: expected true or false for DT_BOOL, got {}", what, v.type_name()));
    out.push_back(v.get<bool>());
  } else {
    std::int64_t x = 0;
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw ValueError(fmt::format("{}: {} is out of range for {}", what, u, tf_dtype_name(dtype)));
      x = static_cast<std::int64_t>(u);
    } else if (v.is_number_integer()) {
      x = v.get<std::int64_t>();
    } else {
      throw ValueError(fmt::format("{}: expected an integer for {}, got {}", what, tf_dtype_name(dtype),
                                   v.is_number() ? v.dump() : v.type_name()));
    }
    const std::int64_t lo = dtype == DType::int32 ? std::numeric_limits<std::int32_t>::min()
                            : dtype == DType::uint8 ? 0 : std::numeric_limits<std::int64_t>::min();
    const std::int64_t hi = dtype == DType::int32 ? std::numeric_limits<std::int32_t>::max()
                            : dtype == DType::uint8 ? 255 : std::numeric_limits<std::int64_t>::max();
    if (x < lo || x > hi) throw ValueError(fmt::format("{}: {} is out of range for {}", what, x, tf_dtype_name(dtype)));
    out.push_back(x);
  }
}

// fmt::format rather than format_to: clang does not link format_to against the GCC-built libfmt
// of Debian (a mangling difference in fmt 9's declaration), and these texts fit the string's
// small buffer.
void append_number(std::string& out, double v, DType dtype) {
  if (std::isnan(v)) out += "NaN";
  else if (std::isinf(v)) out += v > 0 ? "Infinity" : "-Infinity";
  else if (dtype == DType::float64) out += fmt::format("{}", v);
  else if (dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16)
    out += fmt::format("{}", static_cast<float>(v));  // shortest text of the float itself
  else if (dtype == DType::bool_) out += v != 0 ? "true" : "false";
  else out += fmt::format("{}", static_cast<std::int64_t>(v));
}

// Values [begin, begin + prod(dims[axis:])) of a row-major buffer as nested lists.
void append_nested(std::string& out, const std::vector<double>& v, const std::vector<std::int64_t>& dims,
                   std::size_t axis, std::size_t& pos, DType dtype) {
  if (axis == dims.size()) {
    append_number(out, v[pos++], dtype);
    return;
  }
  out += '[';
  for (std::int64_t i = 0; i < dims[axis]; ++i) {
    if (i) out += ',';
    append_nested(out, v, dims, axis + 1, pos, dtype);
  }
  out += ']';
}

std::string json_string(const std::string& s) { return json(s).dump(); }

// Row format: the instances as one tensor per input (each instance a row of every input).
std::vector<Tensor> rows_to_inputs(const json& instances, const Signature& sig) {
  if (!instances.is_array()) throw ValueError("'instances' must be a list of instances (row format)");
  if (instances.empty()) throw ValueError("'instances' is empty: no instances to predict");
  const bool named = instances[0].is_object();
  if (!named && sig.inputs.size() != 1)
    throw ValueError(fmt::format("the model has {} inputs: each instance must be an object naming every input",
                                 sig.inputs.size()));
  std::vector<Tensor> out;
  if (!named) {
    out.push_back(json_to_tensor(instances, sig.inputs[0].dtype, "instances"));
    if (out[0].rank() == 0) throw ValueError("'instances' must be a list");
    return out;
  }
  for (std::size_t r = 0; r < instances.size(); ++r) {
    if (!instances[r].is_object())
      throw ValueError(fmt::format("instances[{}]: expected an object of named inputs like instances[0]", r));
    for (auto it = instances[r].begin(); it != instances[r].end(); ++it) {
      bool known = false;
      for (const auto& t : sig.inputs) known = known || t.name == it.key();
      if (!known) throw ValueError(fmt::format("instances[{}]: '{}' is not an input of the model", r, it.key()));
    }
  }
  for (const auto& t : sig.inputs) {
    json column = json::array();
    for (std::size_t r = 0; r < instances.size(); ++r) {
      if (!instances[r].contains(t.name)) throw ValueError(fmt::format("instances[{}]: missing input '{}'", r, t.name));
      column.push_back(instances[r][t.name]);
    }
    out.push_back(json_to_tensor(column, t.dtype, fmt::format("instances[*]['{}']", t.name)));
  }
  return out;
}

std::vector<Tensor> columns_to_inputs(const json& inputs, const Signature& sig) {
  std::vector<Tensor> out;
  const bool named = inputs.is_object();
  if (!named) {
    if (sig.inputs.size() != 1)
      throw ValueError(fmt::format("the model has {} inputs: 'inputs' must be an object naming every input",
                                   sig.inputs.size()));
    out.push_back(json_to_tensor(inputs, sig.inputs[0].dtype, "inputs"));
    return out;
  }
  for (auto it = inputs.begin(); it != inputs.end(); ++it) {
    bool known = false;
    for (const auto& t : sig.inputs) known = known || t.name == it.key();
    if (!known) throw ValueError(fmt::format("inputs: '{}' is not an input of the model", it.key()));
  }
  for (const auto& t : sig.inputs) {
    if (!inputs.contains(t.name)) throw ValueError(fmt::format("inputs: missing input '{}'", t.name));
    out.push_back(json_to_tensor(inputs[t.name], t.dtype, fmt::format("inputs['{}']", t.name)));
  }
  return out;
}

}  // namespace

Tensor json_to_tensor(const json& value, DType dtype, const std::string& what) {
  const std::vector<std::int64_t> dims = shape_of(value, what);
  // No reserve() from dims: they are read along the first entries only, so before the
  // rectangularity check their product can be far larger than the values the body holds.
  switch (dtype) {
    case DType::float16: case DType::bfloat16: case DType::float32: case DType::float64: {
      std::vector<double> v;
      read_values(value, dims, 0, dtype, what, v);
      return constant(v, Shape(dims), dtype);
    }
    case DType::bool_: {
      std::vector<bool> v;
      read_values(value, dims, 0, dtype, what, v);
      return constant(v, Shape(dims), dtype);
    }
    default: {
      std::vector<std::int64_t> v;
      read_values(value, dims, 0, dtype, what, v);
      return constant(v, Shape(dims), dtype);
    }
  }
}

void check_against(const Tensor& t, const TensorInfo& info, const std::string& what) {
  if (info.unknown_rank) return;
  const auto& d = t.shape().dims();
  bool ok = d.size() == info.dims.size();
  for (std::size_t i = 0; ok && i < d.size(); ++i) ok = info.dims[i] < 0 || info.dims[i] == d[i];
  if (!ok)
    throw ValueError(fmt::format("{}: the input '{}' expects shape {} (-1: any size), got {}", what, info.name,
                                 Shape(info.dims).to_string(), t.shape().to_string()));
}

PredictRequest parse_predict_request(const json& body, const Signature& sig) {
  if (!body.is_object()) throw ValueError("the request body must be a JSON object with 'instances' or 'inputs'");
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "instances" && it.key() != "inputs" && it.key() != "signature_name")
      throw ValueError(fmt::format("unknown key '{}' in the request (expected 'instances' or 'inputs', and "
                                   "optionally 'signature_name')", it.key()));
  if (body.contains("signature_name")) {
    const json& s = body["signature_name"];
    if (!s.is_string() || (s.get<std::string>() != "serving_default" && !s.get<std::string>().empty()))
      throw ValueError(fmt::format("Serving signature name: {} not found in signature def", s.dump()));
  }
  const bool rows = body.contains("instances"), cols = body.contains("inputs");
  if (rows && cols) throw ValueError("a request can have either 'instances' or 'inputs', not both");
  if (!rows && !cols) throw ValueError("missing 'instances' (row format) or 'inputs' (columnar format)");
  PredictRequest r;
  r.columnar = cols;
  r.inputs = cols ? columns_to_inputs(body["inputs"], sig) : rows_to_inputs(body["instances"], sig);
  for (std::size_t i = 0; i < r.inputs.size(); ++i) check_against(r.inputs[i], sig.inputs[i], cols ? "inputs" : "instances");
  if (!cols || r.inputs.size() > 1) {
    const std::int64_t b = r.inputs[0].rank() ? r.inputs[0].shape()[0] : -1;
    for (const auto& t : r.inputs)
      if (t.rank() == 0 || t.shape()[0] != b)
        throw ValueError(fmt::format("the inputs differ in their batch (first) dimension: {} and {}",
                                     r.inputs[0].shape().to_string(), t.shape().to_string()));
  }
  return r;
}

void append_tensor_json(std::string& out, const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  std::size_t pos = 0;
  append_nested(out, v, t.shape().dims(), 0, pos, t.dtype());
}

std::string predict_response_json(const std::vector<Tensor>& outputs, const Signature& sig, bool columnar) {
  const auto name_of = [&](std::size_t i) { return i < sig.outputs.size() ? sig.outputs[i].name : fmt::format("output_{}", i); };
  std::string out = columnar ? "{\"outputs\":" : "{\"predictions\":";
  if (outputs.size() == 1) {
    append_tensor_json(out, outputs[0]);
  } else if (columnar) {
    out += '{';
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (i) out += ',';
      out += json_string(name_of(i)) + ':';
      append_tensor_json(out, outputs[i]);
    }
    out += '}';
  } else {
    // Several outputs in row format: one object per row ({name: that output's row}).
    const std::int64_t rows = outputs[0].rank() ? outputs[0].shape()[0] : 0;
    for (const auto& o : outputs)
      if (o.rank() == 0 || o.shape()[0] != rows)
        throw ValueError("the outputs differ in their batch dimension: use the columnar format ('inputs')");
    out += '[';
    for (std::int64_t r = 0; r < rows; ++r) {
      if (r) out += ',';
      out += '{';
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        if (i) out += ',';
        out += json_string(name_of(i)) + ':';
        append_tensor_json(out, outputs[i][r]);
      }
      out += '}';
    }
    out += ']';
  }
  out += '}';
  return out;
}

}  // namespace keel::serve
