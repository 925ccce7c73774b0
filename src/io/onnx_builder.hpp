#pragma once
// The pieces io::export_onnx's layer converters share: the ONNX graph being written (nodes,
// weight initializers, constants, unique names) and keel tensors as graph values that know their
// layout. keel is channels-last (NHWC); ONNX's Conv, ConvTranspose, *Pool and BatchNormalization
// are channels-first (NCHW). A value may be held in either layout: converters ask for the one they
// need (to_last / to_first), and a Transpose is inserted only where the layout changes, so that a
// run of convolutions, poolings, normalisations and element-wise ops stays channels-first.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"
#include "keel/layers/layer.hpp"

namespace keel_onnx {
class GraphProto;
class NodeProto;
}  // namespace keel_onnx

namespace keel::io::onnx_detail {

// The ONNX graph a layer converter reads and extends. `shape` is keel's (logical, channels-last)
// shape with the batch axis as -1; in Layout::first the ONNX tensor holds the channel axis
// (keel's last) at position 1: physical = logical permuted by [0, r-1, 1, ..., r-2].
enum class Layout { last, first };
struct Value {
  std::string name;
  std::vector<std::int64_t> shape;
  Layout layout = Layout::last;
  DType dtype = DType::float32;
  std::int64_t rank() const { return static_cast<std::int64_t>(shape.size()); }
};

// An attribute of a node: the value kinds keel writes.
struct Attr {
  enum class Kind { i, f, s, ints, floats, strings };
  Kind kind = Kind::i;
  std::string name;
  std::int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
};
Attr attr(const std::string& name, std::int64_t v);
Attr attr(const std::string& name, int v);
Attr attr(const std::string& name, float v);
Attr attr(const std::string& name, double v);
Attr attr(const std::string& name, const char* v);
Attr attr(const std::string& name, const std::string& v);
Attr attr(const std::string& name, std::vector<std::int64_t> v);
Attr attr_floats(const std::string& name, std::vector<float> v);
Attr attr_strings(const std::string& name, std::vector<std::string> v);

// ONNX's TensorProto element type of a keel dtype.
int onnx_elem_type(DType d);

class GraphBuilder {
 public:
  GraphBuilder(keel_onnx::GraphProto* graph, int opset) : graph_(graph), opset_(opset) {}
  int opset() const { return opset_; }

  // A name not used yet, made from `base`.
  std::string fresh(const std::string& base);
  // One node; returns its (first) output's name. `outputs` empty: one output named from `base`.
  std::string op(const std::string& type, const std::vector<std::string>& inputs, const std::string& base,
                 const std::vector<Attr>& attrs = {});
  std::vector<std::string> op_n(const std::string& type, const std::vector<std::string>& inputs,
                                const std::string& base, int outputs, const std::vector<Attr>& attrs = {});
  // Initializers: float32 data of `dims` (row-major), int64 data.
  std::string weight(const std::string& base, const std::vector<float>& data, const std::vector<std::int64_t>& dims);
  std::string ints(const std::string& base, const std::vector<std::int64_t>& data);  // 1-D int64
  // int8 (quantized weights) and float16 initializers (the latter as IEEE half bit patterns).
  std::string int8s(const std::string& base, const std::vector<std::int8_t>& data, const std::vector<std::int64_t>& dims);
  std::string float16s(const std::string& base, const std::vector<std::uint16_t>& bits,
                       const std::vector<std::int64_t>& dims);
  // While set, weight() offers each float initializer to it first: a non-empty name it returns
  // (the output of other nodes, say a DequantizeLinear of int8 data) stands for the initializer.
  using WeightHook = std::function<std::string(const std::string& base, const std::vector<float>& data,
                                               const std::vector<std::int64_t>& dims)>;
  WeightHook weight_hook;
  std::string scalar(const std::string& base, float v);                               // 0-D float32
  // Any keel dtype ONNX has (bfloat16 and float16 as bit patterns), `nbytes` of raw data.
  std::string raw(const std::string& base, DType dtype, const void* data, std::size_t nbytes,
                  const std::vector<std::int64_t>& dims);

  // Opset-aware forms (Squeeze/Unsqueeze take their axes as an input from opset 13 on, which is
  // every opset export_onnx accepts; ReduceMean/ReduceMax take them as an attribute until 18).
  std::string squeeze(const std::string& x, const std::vector<std::int64_t>& axes, const std::string& base);
  std::string unsqueeze(const std::string& x, const std::vector<std::int64_t>& axes, const std::string& base);
  std::string reduce(const std::string& type, const std::string& x, const std::vector<std::int64_t>& axes,
                     bool keepdims, const std::string& base);
  std::string transpose(const std::string& x, const std::vector<std::int64_t>& perm, const std::string& base);

  // Layout changes (a Transpose each, counted; rank <= 2 values have one layout only).
  Value to_last(const Value& v);
  Value to_first(const Value& v);
  // The ONNX axis of keel's (logical) axis `axis` (negative counts from the end) in v's layout.
  std::int64_t physical_axis(const Value& v, std::int64_t axis) const;
  std::int64_t layout_transposes() const { return transposes_; }

 private:
  keel_onnx::NodeProto* add_node(const std::string& type, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs, const std::vector<Attr>& attrs);
  keel_onnx::GraphProto* graph_;
  int opset_;
  std::int64_t counter_ = 0;
  std::int64_t transposes_ = 0;
};

// ---- reading a layer -------------------------------------------------------------------------

// The layer's weight named `short_name` ("kernel", "query/bias"): float32 data and shape; null
// data when the layer has none and `required` is false (ValueError naming the layer otherwise).
struct WeightData {
  std::vector<float> data;
  std::vector<std::int64_t> shape;
  bool present = false;
};
WeightData layer_weight(layers::Layer& layer, const std::string& short_name, bool required = true);
// Row-major data of `shape` permuted: out[i_perm[0], ...] = in[i_0, ...] (numpy's transpose).
std::vector<float> permute(const std::vector<float>& data, const std::vector<std::int64_t>& shape,
                           const std::vector<std::int64_t>& perm);
// "<name> (<class>)" for messages.
std::string who(const layers::Layer& layer);
// Typed reads of a layer config; ValueError naming the layer and the key.
const nlohmann::json& cfg(const nlohmann::json& c, const char* key, const layers::Layer& layer);
std::vector<std::int64_t> cfg_ints(const nlohmann::json& c, const char* key, const layers::Layer& layer,
                                   std::size_t n);  // an int is repeated n times
std::string cfg_str(const nlohmann::json& c, const char* key, const layers::Layer& layer, const std::string& dflt);
// ValueError unless the config's data_format (if any) is channels_last.
void channels_last_only(const nlohmann::json& c, const layers::Layer& layer);
// The activation name of a config's "activation" entry (a string or a serialised object).
std::string activation_name(const nlohmann::json& c, const layers::Layer& layer);

// An element-wise activation of keel's named activations on x ("linear": x itself); ValueError
// naming `layer` for a name ONNX cannot express. Softmax-like ones act on keel's last axis.
Value apply_activation(GraphBuilder& g, const Value& x, const std::string& name, const layers::Layer& layer);

// ---- the converters, by family (onnx_core.cpp, onnx_conv.cpp, ...) ---------------------------
// Each returns true and sets `out` when it knows the layer's class.
bool convert_core(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
bool convert_conv(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
bool convert_norm(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
bool convert_recurrent(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
bool convert_attention(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
bool convert_spatial(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
bool convert_quantized(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out);
// Any layer (a nested model too): the converters above in turn; a layer none of them knows (a
// custom layer, a Lambda) is converted from its traced graph (TimeDistributed converts its inner
// layer with it).
Value convert_layer(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in);
// The layer's (or a subclassed model's) call traced as keel::function traces it, each kernel call
// of the graph converted to ONNX nodes (onnx_traced.cpp); ValueError naming the layer and the
// kernel ONNX cannot express.
std::vector<Value> convert_traced(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in);

// keel's output shape of the layer for the inputs (batch axis -1), from compute_output_shape;
// -1 also where an unknown (None) input size makes the output size unknown.
std::vector<std::int64_t> output_shape_of(layers::Layer& layer, const std::vector<Value>& in);
// The output shape with every unknown input size (the batch excepted) taken as `size` (> 0).
std::vector<std::int64_t> output_shape_at(layers::Layer& layer, const std::vector<Value>& in, std::int64_t size);

}  // namespace keel::io::onnx_detail
