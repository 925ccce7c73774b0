// The graph users see: operations with TensorFlow's op names, and Graphviz output.
#include <array>
#include <cstring>
#include <map>

#include <fmt/core.h>

#include "graph/plan.hpp"

namespace keel::graph {

namespace detail {

namespace {

template <std::size_t N>
const char* pick(const std::array<const char*, N>& names, int kind) {
  return kind >= 0 && static_cast<std::size_t>(kind) < N ? names[static_cast<std::size_t>(kind)] : "Unknown";
}

}  // namespace

std::string op_type(const Node& n) {
  if (n.kind == NodeKind::host) return n.host_name;
  if (n.kind == NodeKind::cond) return "If";
  if (n.kind == NodeKind::loop) return "While";
  if (n.fused_from > 1) return "FusedElementwise";
  return kernel_op_name(n.type);
}

std::string kernel_op_name(const backend::KernelType& type) {
  const std::string f = type.family;
  const int k = type.kind;
  if (f == "unary")
    return pick(std::array{"Neg", "Abs", "Sign", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Sin", "Cos",
                           "Tanh", "Sigmoid", "Relu", "Relu6", "LeakyRelu", "Elu", "Gelu", "GeluTanh", "Softplus",
                           "Silu", "Erf", "Floor", "Ceil", "Round", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
                           "Asinh", "Acosh", "Atanh", "Expm1", "Log2", "Log10", "Reciprocal", "Erfc", "Selu",
                           "Softsign", "HardSigmoid", "HardSwish", "Mish"},
                k);
  if (f == "binary")
    return pick(std::array{"AddV2", "Sub", "Mul", "RealDiv", "Pow", "Maximum", "Minimum", "ReluGrad", "FloorMod", "FloorDiv",
                           "Atan2"},
                k);
  if (f == "compare") return pick(std::array{"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"}, k);
  if (f == "logical") return pick(std::array{"LogicalAnd", "LogicalOr", "LogicalXor"}, k);
  if (f == "logical_not") return "LogicalNot";
  if (f == "where") return "SelectV2";
  if (f == "float_test") return pick(std::array{"IsFinite", "IsNan", "IsInf"}, k);
  if (f == "reduce") return pick(std::array{"Sum", "Max", "Min", "Prod"}, k);
  if (f == "arg_reduce") return pick(std::array{"ArgMax", "ArgMin"}, k);
  if (f == "matmul") return "BatchMatMulV2";
  if (f == "conv")
    return pick(std::array{"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
                           "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"},
                k);
  if (f == "pool")
    return pick(std::array{"MaxPool", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad",
                           "MaxPoolGradReluGrad", "MaxPoolGradWithArgmax", "MaxPoolGradWithArgmaxReluGrad"},
                k);
  if (f == "pool_argmax") return "MaxPoolWithArgmax";
  // graph/fuse_patterns.cpp's max pool gradient with the bias gradient (TF's BiasAddGrad) after it
  if (f == "pool_arg_grad_bias")
    return pick(std::array{"MaxPoolGradWithArgmaxBiasAddGrad", "MaxPoolGradWithArgmaxReluGradBiasAddGrad"}, k);
  if (f == "gather") return "GatherV2";
  if (f == "segment_sum") return "UnsortedSegmentSum";
  if (f == "one_hot") return "OneHot";
  if (f == "fill") return "Fill";
  if (f == "copy") return "Identity";
  if (f == "transfer") return "Copy";
  if (f == "batch_norm_train") return "FusedBatchNormV3";
  if (f == "batch_norm_inference") return "FusedBatchNormInference";
  if (f == "batch_norm_backward") return "FusedBatchNormGradV3";
  if (f == "layer_norm") return "LayerNorm";
  if (f == "layer_norm_backward") return "LayerNormGrad";
  if (f == "moments") return "Moments";
  if (f == "group_norm") return "GroupNorm";
  if (f == "group_norm_backward") return "GroupNormGrad";
  if (f == "moments_backward") return "MomentsGrad";
  if (f == "resample_linear") return "ResizeBilinearAxis";
  if (f == "resample_linear_backward") return "ResizeBilinearAxisGrad";
  if (f == "lstm_cell") return "LSTMBlockCell";
  if (f == "lstm_cell_backward") return "LSTMBlockCellGrad";
  if (f == "lstm_sequence") return "BlockLSTM";
  if (f == "lstm_sequence_backward") return "BlockLSTMGrad";
  if (f == "gru_cell") return "GRUBlockCell";
  if (f == "gru_cell_backward") return "GRUBlockCellGrad";
  if (f == "gru_sequence") return "BlockGRU";
  if (f == "gru_sequence_backward") return "BlockGRUGrad";
  if (f == "recurrent_input_projection") return "MatMulBias";
  if (f == "recurrent_input_projection_backward") return "MatMulBiasGrad";
  if (f == "softmax") return pick(std::array{"Softmax", "LogSoftmax"}, k);
  if (f == "softmax_backward") return pick(std::array{"SoftmaxGrad", "LogSoftmaxGrad"}, k);
  if (f == "softmax_cross_entropy") return "SoftmaxCrossEntropyWithLogits";
  if (f == "sparse_softmax_cross_entropy") return "SparseSoftmaxCrossEntropyWithLogits";
  if (f == "softmax_cross_entropy_backward")
    return pick(std::array{"SoftmaxCrossEntropyWithLogitsGrad", "SparseSoftmaxCrossEntropyWithLogitsGrad"}, k);
  if (f == "sigmoid_cross_entropy") return "SigmoidCrossEntropyWithLogits";
  if (f == "optimizer_update")
    return pick(std::array{"ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam",
                           "ResourceApplyRMSProp", "ResourceApplyAdagrad", "ResourceApplyNadam",
                           "ResourceApplyAdaMax", "ResourceApplyAdadelta", "ResourceApplyLion"},
                k);
  if (f == "dropout") return "Dropout";
  if (f == "random") return pick(std::array{"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"}, k);
  if (f == "fused_elementwise") return "FusedElementwise";
  // bias_add with its activation: "BiasAdd", "BiasAddRelu", "BiasAddSigmoid", ...
  if (f == "bias_activation")
    return k < 0 ? std::string("BiasAdd") : fmt::format("BiasAdd{}", kernel_op_name({"unary", k}));
  // graph/fuse_patterns.cpp's Conv2D with its bias and activation: "Conv2DBiasAdd", "Conv2DBiasAddRelu", ...
  if (f == "conv_bias_activation")
    return k < 0 ? std::string("Conv2DBiasAdd") : fmt::format("Conv2DBiasAdd{}", kernel_op_name({"unary", k}));
  if (f == "scan") return pick(std::array{"Cumsum", "Cumprod"}, k);
  if (f == "sort") return "Sort";
  if (f == "top_k") return "TopKV2";
  if (f == "search_sorted") return pick(std::array{"LowerBound", "UpperBound"}, k);
  if (f == "bincount") return "Bincount";
  if (f == "gather_nd") return "GatherNd";
  if (f == "scatter_nd")
    return pick(std::array{"TensorScatterUpdate", "TensorScatterAdd", "TensorScatterMax", "TensorScatterMin"}, k);
  if (f == "reverse") return "ReverseV2";
  if (f == "inverse") return "MatrixInverse";
  if (f == "solve") return "MatrixSolve";
  if (f == "cholesky") return "Cholesky";
  if (f == "triangular_solve") return "MatrixTriangularSolve";
  if (f == "qr") return "Qr";
  if (f == "svd") return "Svd";
  if (f == "eigh") return "SelfAdjointEigV2";
  if (f == "determinant") return pick(std::array{"LogMatrixDeterminant", "MatrixDeterminant"}, k);
  return f;
}

}  // namespace detail

namespace {

using detail::NodeKind;
using detail::Plan;
using detail::SlotKind;

const Plan& checked(const std::shared_ptr<const Plan>& p) {
  if (!p) throw ValueError("graph::Graph: an empty graph (not from concrete_graph)");
  return *p;
}

std::vector<std::string> unique_names(const Plan& p) {
  std::vector<std::string> names;
  std::map<std::string, int> seen;
  for (const auto& n : p.nodes) {
    const std::string t = detail::op_type(n);
    const int k = seen[t]++;
    names.push_back(k == 0 ? t : fmt::format("{}_{}", t, k));
  }
  return names;
}

std::string scope_of(const Plan& p, int range) {
  std::string scope;
  for (; range >= 0; range = p.ranges[static_cast<std::size_t>(range)].parent)
    scope = p.ranges[static_cast<std::size_t>(range)].name + (scope.empty() ? "" : "/" + scope);
  return scope;
}

const char* slot_label(SlotKind k) {
  switch (k) {
    case SlotKind::input: return "Placeholder";
    case SlotKind::captured: return "Captured";
    case SlotKind::state: return "VarHandleOp";
    case SlotKind::constant: return "Const";
    default: return "";
  }
}

}  // namespace

std::vector<Operation> Graph::operations() const {
  const Plan& p = checked(plan_);
  const std::vector<std::string> names = unique_names(p);
  // The last writer of each slot so far, starting from the memory that enters from outside.
  std::vector<std::string> writer(p.slots.size());
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    const char* label = slot_label(p.slots[s].kind);
    if (*label)
      writer[s] = fmt::format("{}_{}", label, p.slots[s].kind == SlotKind::input ? static_cast<std::size_t>(p.slots[s].input) : s);
  }
  std::vector<Operation> ops;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& n = p.nodes[i];
    Operation op{detail::op_type(n), names[i], {}, {}, {}, scope_of(p, n.range)};
    for (std::size_t j = 0; j < n.operands.size(); ++j) {
      if (n.operands[j] < 0) continue;
      const auto& view = p.views[static_cast<std::size_t>(n.operands[j])];
      (j < n.num_inputs ? op.input_shapes : op.output_shapes).push_back(view.shape);
      const std::string& from = writer[static_cast<std::size_t>(view.slot)];
      if (j < n.num_inputs && !from.empty()) op.inputs.push_back(from);
    }
    for (std::size_t j = n.num_inputs; j < n.operands.size(); ++j)
      if (n.operands[j] >= 0) writer[static_cast<std::size_t>(p.views[static_cast<std::size_t>(n.operands[j])].slot)] = names[i];
    ops.push_back(std::move(op));
  }
  return ops;
}

std::size_t Graph::num_nodes() const { return checked(plan_).nodes.size(); }
std::size_t Graph::planned_bytes() const { return checked(plan_).planned_bytes; }
std::size_t Graph::unplanned_bytes() const { return checked(plan_).unplanned_bytes; }
std::size_t Graph::traced_nodes() const { return checked(plan_).traced_nodes; }

// Nodes for the operations and for the memory that enters the graph from outside (arguments,
// captured variables, constants, state); an edge from the last writer of a slot (or its
// source) to each reader; results as sinks.
std::string Graph::to_dot() const {
  const Plan& p = checked(plan_);
  const std::vector<std::string> names = unique_names(p);
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n",
                                p.name.empty() ? "function" : p.name);
  std::vector<std::string> writer(p.slots.size());
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    const auto& slot = p.slots[s];
    const char* label = slot_label(slot.kind);
    if (!*label) continue;
    const std::string id = fmt::format("s{}", s);
    std::string text = slot.kind == SlotKind::input ? fmt::format("{} {}", label, slot.input) : label;
    out += fmt::format("  {} [label=\"{}\\n{} bytes\", shape=ellipse];\n", id, text, slot.nbytes);
    writer[s] = id;
  }
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& n = p.nodes[i];
    const std::string id = fmt::format("n{}", i);
    std::string shapes;
    for (std::size_t j = n.num_inputs; j < n.operands.size(); ++j)
      if (n.operands[j] >= 0) shapes += p.views[static_cast<std::size_t>(n.operands[j])].shape.to_string();
    out += fmt::format("  {} [label=\"{}\\n{}\"];\n", id, names[i], shapes);
    for (std::size_t j = 0; j < n.operands.size(); ++j) {
      if (n.operands[j] < 0) continue;
      const auto s = static_cast<std::size_t>(p.views[static_cast<std::size_t>(n.operands[j])].slot);
      if (j < n.num_inputs && !writer[s].empty()) out += fmt::format("  {} -> {};\n", writer[s], id);
    }
    for (std::size_t j = n.num_inputs; j < n.operands.size(); ++j)
      if (n.operands[j] >= 0) writer[static_cast<std::size_t>(p.views[static_cast<std::size_t>(n.operands[j])].slot)] = id;
  }
  for (std::size_t k = 0; k < p.outputs.size(); ++k) {
    const auto s = static_cast<std::size_t>(p.views[static_cast<std::size_t>(p.outputs[k])].slot);
    out += fmt::format("  r{} [label=\"Result {}\", shape=ellipse];\n", k, k);
    if (!writer[s].empty()) out += fmt::format("  {} -> r{};\n", writer[s], k);
  }
  return out + "}\n";
}

}  // namespace keel::graph
