// export_onnx for what has no converter of its own (a custom Layer's call(), a Lambda, a
// subclassed model): the call is traced as keel::function traces it and each kernel call of the
// graph becomes ONNX nodes, over the values of onnx_traced.hpp. It is traced twice, at two batch
// sizes, so that the batch axis stays dynamic.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numbers>

#include "core/kernel_kinds.hpp"
#include "io/onnx_traced.hpp"
#include "keel/models/model.hpp"

namespace keel::io::onnx_detail {
namespace {

using namespace traced;

class TracedConverter : public TracedValues {
 public:
  using TracedValues::TracedValues;

  // One node of the graph (the same node in both traces) as ONNX nodes.
  void convert(const Node& na, const Node& nb) {
    if (na.kind == NodeKind::host) return;  // checks of index values: ONNX's ops have their own rules
    if (na.kind != NodeKind::kernel)
      fail(fmt::format("its traced graph has {} (random numbers or data-dependent control flow)",
                       na.kind == NodeKind::random ? "a random draw" : "keel::cond or keel::while_loop"));
    node_a_ = &na;
    node_b_ = &nb;
    const std::string family = na.type.family;
    base_ = fmt::format("{}/{}", layer_.name(), family);
    if (family == "unary") return unary(static_cast<kernel::UnaryOp>(na.type.kind), na.type.alpha);
    if (family == "binary") return binary(static_cast<kernel::BinaryOp>(na.type.kind));
    if (family == "compare") return compare(static_cast<kernel::CompareOp>(na.type.kind));
    if (family == "logical") {
      static const char* names[] = {"And", "Or", "Xor"};
      return put(0, g_.op(names[na.type.kind], {in(0, true).name, in(1, true).name}, base_));
    }
    if (family == "logical_not") return put(0, g_.op("Not", {in(0, true).name}, base_));
    if (family == "float_test") return float_test(static_cast<kernel::FloatTest>(na.type.kind));
    if (family == "where") return put(0, g_.op("Where", {in(0, true).name, in(1, true).name, in(2, true).name}, base_));
    if (family == "copy" || family == "transfer") return copy();
    if (family == "fill") return fill(na.type.alpha);
    if (family == "reduce") return reduce(static_cast<kernel::ReduceOp>(na.type.kind));
    if (family == "arg_reduce") return arg_reduce(static_cast<kernel::ArgReduceOp>(na.type.kind));
    if (family == "matmul") return matmul(na.type.kind & 1, na.type.kind & 2);
    if (family == "conv") return conv(static_cast<kernel::ConvKernel>(na.type.kind));
    if (family == "pool") return pool(static_cast<kernel::PoolKernel>(na.type.kind));
    if (family == "gather") return gather();
    if (family == "resample_linear") return resample_linear(na.type.kind);
    if (family == "batch_norm_inference") return batch_norm(na.type.alpha);
    if (family == "layer_norm") return layer_norm(na.type.alpha);
    if (family == "moments") return moments();
    if (family == "group_norm") return group_norm(na.type.kind, na.type.alpha);
    if (family == "softmax") {
      const TracedValue x = in(0);
      return put(0, g_.op(na.type.kind ? "LogSoftmax" : "Softmax", {x.name}, base_, {attr("axis", -1)}), x.shape);
    }
    fail(fmt::format("its traced graph has a '{}' kernel, which export_onnx cannot express in ONNX", family));
  }

 private:
  void unary(kernel::UnaryOp op, double alpha) {
    using U = kernel::UnaryOp;
    // Elementwise: a channels-first input stays channels-first.
    const std::optional<std::string> first = first_form(0);
    const TracedValue x = first ? TracedValue{*first, {}, DType::float32} : in(0);
    const std::string& X = x.name;
    const auto c = [&](double v) { return constant(v, x.dtype); };
    const auto f = [&](const char* type, std::vector<std::string> args, std::vector<Attr> attrs = {}) {
      return g_.op(type, args, base_, attrs);
    };
    std::string y;
    switch (op) {
      case U::neg: y = f("Neg", {X}); break;
      case U::abs: y = f("Abs", {X}); break;
      case U::sign: y = f("Sign", {X}); break;
      case U::square: y = f("Mul", {X, X}); break;
      case U::sqrt: y = f("Sqrt", {X}); break;
      case U::rsqrt: y = f("Reciprocal", {f("Sqrt", {X})}); break;
      case U::exp: y = f("Exp", {X}); break;
      case U::log: y = f("Log", {X}); break;
      case U::log1p: y = f("Log", {f("Add", {X, c(1)})}); break;
      case U::sin: y = f("Sin", {X}); break;
      case U::cos: y = f("Cos", {X}); break;
      case U::tanh: y = f("Tanh", {X}); break;
      case U::sigmoid: y = f("Sigmoid", {X}); break;
      case U::relu: y = f("Relu", {X}); break;
      case U::relu6: y = f("Clip", {X, c(0), c(6)}); break;
      case U::leaky_relu: y = f("LeakyRelu", {X}, {attr("alpha", alpha)}); break;
      case U::elu: y = f("Elu", {X}, {attr("alpha", alpha)}); break;
      case U::gelu:  // x * (1 + erf(x / sqrt 2)) / 2
        y = f("Mul", {f("Mul", {X, c(0.5)}), f("Add", {c(1), f("Erf", {f("Div", {X, c(std::numbers::sqrt2)})})})});
        break;
      case U::gelu_tanh: {  // x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2
        const std::string cube = f("Mul", {X, f("Mul", {X, X})});
        const std::string inner = f("Mul", {c(std::sqrt(2.0 / std::numbers::pi)), f("Add", {X, f("Mul", {c(0.044715), cube})})});
        y = f("Mul", {f("Mul", {X, c(0.5)}), f("Add", {c(1), f("Tanh", {inner})})});
        break;
      }
      case U::softplus: y = f("Softplus", {X}); break;
      case U::silu: y = f("Mul", {X, f("Sigmoid", {X})}); break;
      case U::erf: y = f("Erf", {X}); break;
      case U::floor: y = f("Floor", {X}); break;
      case U::ceil: y = f("Ceil", {X}); break;
      case U::round: y = f("Round", {X}); break;  // both round half to even
      case U::tan: y = f("Tan", {X}); break;
      case U::asin: y = f("Asin", {X}); break;
      case U::acos: y = f("Acos", {X}); break;
      case U::atan: y = f("Atan", {X}); break;
      case U::sinh: y = f("Sinh", {X}); break;
      case U::cosh: y = f("Cosh", {X}); break;
      case U::asinh: y = f("Asinh", {X}); break;
      case U::acosh: y = f("Acosh", {X}); break;
      case U::atanh: y = f("Atanh", {X}); break;
      case U::expm1: y = f("Sub", {f("Exp", {X}), c(1)}); break;
      case U::log2: y = f("Div", {f("Log", {X}), c(std::numbers::ln2)}); break;
      case U::log10: y = f("Div", {f("Log", {X}), c(std::numbers::ln10)}); break;
      case U::reciprocal: y = f("Reciprocal", {X}); break;
      case U::erfc: y = f("Sub", {c(1), f("Erf", {X})}); break;
      // Keras' selu constants (keras.activations.selu).
      case U::selu: y = f("Selu", {X}, {attr("alpha", 1.6732632423543772), attr("gamma", 1.0507009873554805)}); break;
      case U::softsign: y = f("Softsign", {X}); break;
      // Keras 3: relu6(x + 3) / 6, which is ONNX's HardSigmoid(alpha 1/6, beta 1/2).
      case U::hard_sigmoid: y = f("HardSigmoid", {X}, {attr("alpha", 1.0 / 6.0), attr("beta", 0.5)}); break;
      case U::hard_swish: y = f("Mul", {X, f("HardSigmoid", {X}, {attr("alpha", 1.0 / 6.0), attr("beta", 0.5)})}); break;
      case U::mish: y = f("Mul", {X, f("Tanh", {f("Softplus", {X})})}); break;
    }
    if (first) return put_first(0, y);
    put(0, y, x.shape);
  }

  void binary(kernel::BinaryOp op) {
    using B = kernel::BinaryOp;
    const TracedValue a = in(0, true), b = in(1, true);
    const char* type = nullptr;
    switch (op) {
      case B::add: type = "Add"; break;
      case B::sub: type = "Sub"; break;
      case B::mul: type = "Mul"; break;
      case B::div:
        // ONNX's integer Div truncates; keel's integer division floors.
        if (!is_floating(a.dtype)) fail("it divides integers");
        type = "Div";
        break;
      case B::pow: type = "Pow"; break;
      case B::maximum: type = "Max"; break;
      case B::minimum: type = "Min"; break;
      default: fail(fmt::format("its traced graph has binary op {}, which export_onnx cannot express", int(op)));
    }
    put(0, g_.op(type, {a.name, b.name}, base_));
  }

  void compare(kernel::CompareOp op) {
    using C = kernel::CompareOp;
    const std::string a = in(0, true).name, b = in(1, true).name;
    std::string y;
    switch (op) {
      case C::eq: y = g_.op("Equal", {a, b}, base_); break;
      case C::ne: y = g_.op("Not", {g_.op("Equal", {a, b}, base_)}, base_); break;
      case C::lt: y = g_.op("Less", {a, b}, base_); break;
      case C::le: y = g_.op("LessOrEqual", {a, b}, base_); break;
      case C::gt: y = g_.op("Greater", {a, b}, base_); break;
      case C::ge: y = g_.op("GreaterOrEqual", {a, b}, base_); break;
    }
    put(0, y);
  }

  void float_test(kernel::FloatTest test) {
    const std::string x = in(0).name;
    std::string y;
    switch (test) {
      case kernel::FloatTest::nan: y = g_.op("IsNaN", {x}, base_); break;
      case kernel::FloatTest::inf: y = g_.op("IsInf", {x}, base_); break;
      case kernel::FloatTest::finite:
        y = g_.op("Not", {g_.op("Or", {g_.op("IsNaN", {x}, base_), g_.op("IsInf", {x}, base_)}, base_)}, base_);
        break;
    }
    put(0, y);
  }

  void copy() {
    const TracedValue x = in(0);
    const DType to = out_view(0).dtype;
    put(0, x.dtype == to ? x.name : g_.op("Cast", {x.name}, base_, {attr("to", onnx_elem_type(to))}), x.shape);
  }

  void fill(double value) { put(0, constant(value, out_view(0).dtype), TracedDims{}); }

  void reduce(kernel::ReduceOp op) {
    static const char* types[] = {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"};
    const TracedValue x = in(0);
    TracedDims kept;
    for (std::size_t i = 0; i < x.shape.size(); ++i)
      if (std::find(node_a_->ints.begin(), node_a_->ints.end(), static_cast<std::int64_t>(i)) == node_a_->ints.end())
        kept.push_back(x.shape[i]);
    if (node_a_->ints.empty()) return put(0, x.name, x.shape);  // no axis: a copy
    put(0, g_.reduce(types[static_cast<int>(op)], x.name, node_a_->ints, false, base_), kept);
  }

  void arg_reduce(kernel::ArgReduceOp op) {
    const TracedValue x = in(0);
    const std::int64_t axis = node_a_->ints.at(0);
    TracedDims kept = x.shape;
    kept.erase(kept.begin() + axis);
    put(0, g_.op(op == kernel::ArgReduceOp::argmax ? "ArgMax" : "ArgMin", {x.name}, base_,
                 {attr("axis", axis), attr("keepdims", 0), attr("select_last_index", 0)}),
        kept);
  }

  TracedValue swap_last(const TracedValue& x) {
    const std::size_t r = x.shape.size();
    std::vector<std::int64_t> perm;
    for (std::size_t i = 0; i < r; ++i) perm.push_back(static_cast<std::int64_t>(i));
    std::swap(perm[r - 1], perm[r - 2]);
    TracedDims s = x.shape;
    std::swap(s[r - 1], s[r - 2]);
    return {g_.transpose(x.name, perm, base_), s, x.dtype};
  }

  void matmul(bool transpose_a, bool transpose_b) {
    TracedValue a = in(0, true), b = in(1, true);
    if (a.shape.size() < 2 || b.shape.size() < 2) fail("a matmul operand has rank below 2");
    if (transpose_a) a = swap_last(a);
    if (transpose_b) b = swap_last(b);
    put(0, g_.op("MatMul", {a.name, b.name}, base_));
  }

  struct Window {
    std::vector<std::int64_t> kernel, strides, dilations, pads;
  };
  Window window() const {
    const auto& v = node_a_->ints;  // WindowGeom's fields: n h w c kh kw sh sw dh dw top left ho wo o
    if (v.size() != 15) fail("a window kernel without its geometry");
    const std::int64_t h = v[1], w = v[2], kh = v[4], kw = v[5], sh = v[6], sw = v[7], dh = v[8], dw = v[9];
    const std::int64_t top = v[10], left = v[11], ho = v[12], wo = v[13];
    const std::int64_t bottom = std::max<std::int64_t>(0, (ho - 1) * sh + (kh - 1) * dh + 1 - h - top);
    const std::int64_t right = std::max<std::int64_t>(0, (wo - 1) * sw + (kw - 1) * dw + 1 - w - left);
    return {{kh, kw}, {sh, sw}, {dh, dw}, {top, left, bottom, right}};
  }

  void conv(kernel::ConvKernel k) {
    using K = kernel::ConvKernel;
    if (k != K::conv2d_forward && k != K::depthwise_forward)
      fail("its traced graph has a convolution's gradient kernel");
    const std::optional<std::string> first = first_form(0);
    const TracedValue x = first ? TracedValue{*first, {}, DType::float32} : nchw(in(0));
    TracedValue f = in(1);  // [kh, kw, c, o] or depthwise [kh, kw, c, multiplier]
    const Window win = window();
    std::int64_t group = 1;
    if (k == K::depthwise_forward) {
      group = f.shape[2].a;
      f = reshape(f, {f.shape[0], f.shape[1], {1, 1}, {f.shape[2].a * f.shape[3].a, f.shape[2].a * f.shape[3].a}});
    }
    const std::string w = g_.transpose(f.name, {3, 2, 0, 1}, base_);  // OIHW
    const std::string y = g_.op("Conv", {x.name, w}, base_,
                                {attr("kernel_shape", win.kernel), attr("strides", win.strides),
                                 attr("dilations", win.dilations), attr("pads", win.pads), attr("group", group)});
    put_first(0, y);
  }

  void pool(kernel::PoolKernel k) {
    using P = kernel::PoolKernel;
    if (k != P::max_forward && k != P::avg_forward) fail("its traced graph has a pooling's gradient kernel");
    const std::optional<std::string> first = first_form(0);
    const TracedValue x = first ? TracedValue{*first, {}, DType::float32} : nchw(in(0));
    const Window win = window();
    std::vector<Attr> attrs{attr("kernel_shape", win.kernel), attr("strides", win.strides), attr("pads", win.pads)};
    // keel's average is over the window's pixels inside the image, as count_include_pad = 0.
    if (k == P::avg_forward) attrs.push_back(attr("count_include_pad", 0));
    put_first(0, g_.op(k == P::max_forward ? "MaxPool" : "AveragePool", {x.name}, base_, attrs));
  }

  void gather() {
    // out [outer, n, row] = params [outer, dim, row] at the n indices (row counted in bytes).
    const auto& ia = node_a_->ints;
    const auto& ib = node_b_->ints;
    const TracedValue params = in(0), indices = in(1);
    const std::int64_t row = ia.at(2) / static_cast<std::int64_t>(itemsize(params.dtype));
    const TracedValue p3 = reshape(params, {dim(ia.at(0), ib.at(0)), dim(ia.at(1), ib.at(1)), {row, row}});
    std::int64_t n_a = 1, n_b = 1;
    for (const auto& d : indices.shape) n_a *= d.a, n_b *= d.b;
    const TracedDim n = dim(n_a, n_b);
    const TracedValue flat = reshape(indices, {n});
    put(0, g_.op("Gather", {p3.name, flat.name}, base_, {attr("axis", 1)}), TracedDims{p3.shape[0], n, {row, row}});
  }

  // resize_bilinear's pass along `axis`: y = a + (b - a) * weight with a and b the rows of x at
  // the lower and upper indices (inputs 1 and 2), weight (input 3) along that axis.
  void resample_linear(int axis) {
    const TracedValue x = in(0), weight = in(3);
    const auto at = static_cast<std::size_t>(axis);
    TracedDims along(x.shape.size(), TracedDim{1, 1}), y_shape = x.shape;
    along[at] = y_shape[at] = weight.shape.at(0);
    const std::string w = reshape(weight, along).name;
    const auto rows = [&](std::size_t j) { return g_.op("Gather", {x.name, in(j).name}, base_, {attr("axis", axis)}); };
    const std::string a = rows(1), b = rows(2);
    put(0, g_.op("Add", {a, g_.op("Mul", {g_.op("Sub", {b, a}, base_), w}, base_)}, base_), y_shape);
  }

  // y = (x - mean) * gamma / sqrt(variance + epsilon) + beta over the last axis.
  void batch_norm(double epsilon) {
    const TracedValue x = in(0);
    const std::string mean = in(3).name, variance = in(4).name;
    std::string scale = reciprocal_sqrt(variance, epsilon, x.dtype);
    if (node_a_->operands[1] >= 0) scale = g_.op("Mul", {scale, in(1).name}, base_);
    std::string y = g_.op("Mul", {g_.op("Sub", {x.name, mean}, base_), scale}, base_);
    if (node_a_->operands[2] >= 0) y = g_.op("Add", {y, in(2).name}, base_);
    put(0, y, x.shape);
  }

  // Normalised over the trailing axes that the statistics do not have (mean has one value per row).
  // The mean and biased variance over the node's axes, kept as 1s (tf.nn.moments' keepdims form).
  void moments() {
    const TracedValue x = in(0);
    const std::vector<std::int64_t>& axes = node_a_->ints;
    const std::string mean = g_.reduce("ReduceMean", x.name, axes, true, base_);
    const std::string centred = g_.op("Sub", {x.name, mean}, base_);
    const std::string variance = g_.reduce("ReduceMean", g_.op("Mul", {centred, centred}, base_), axes, true, base_);
    TracedDims stats = x.shape;
    for (std::int64_t a : axes) stats[static_cast<std::size_t>(a)] = {1, 1};
    put(0, mean, stats);
    put(1, variance, stats);
  }

  // 1 / sqrt(variance + epsilon).
  std::string reciprocal_sqrt(const std::string& variance, double epsilon, DType dtype) {
    const std::string shifted = g_.op("Add", {variance, constant(epsilon, dtype)}, base_);
    return g_.op("Reciprocal", {g_.op("Sqrt", {shifted}, base_)}, base_);
  }

  // Keras' GroupNormalization over the last axis: x reshaped to [batch, pixels, groups, channels
  // / groups], the group moments over {1, 3}, back to x's shape, then gamma and beta.
  void group_norm(std::int64_t groups, double epsilon) {
    const TracedValue x = in(0);
    const std::size_t r = x.shape.size();
    std::vector<std::int64_t> back{0};  // 0: the batch axis as it is
    for (std::size_t i = 1; i < r; ++i) {
      if (x.shape[i].follows_batch()) fail("a group normalisation over an axis that grows with the batch");
      back.push_back(x.shape[i].a);
    }
    const std::int64_t channels = back.back();
    const std::string shape = g_.ints(base_ + "/grouped", {0, -1, groups, channels / groups});
    const std::string g = g_.op("Reshape", {x.name, shape}, base_);
    const std::string mean = g_.reduce("ReduceMean", g, {1, 3}, true, base_);
    const std::string centred = g_.op("Sub", {g, mean}, base_);
    const std::string variance = g_.reduce("ReduceMean", g_.op("Mul", {centred, centred}, base_), {1, 3}, true, base_);
    const std::string rstd = reciprocal_sqrt(variance, epsilon, x.dtype);
    const std::string normed = g_.op("Mul", {centred, rstd}, base_);
    std::string y = g_.op("Reshape", {normed, g_.ints(base_ + "/ungrouped", back)}, base_);
    if (node_a_->operands[1] >= 0) y = g_.op("Mul", {y, in(1, true).name}, base_);
    if (node_a_->operands[2] >= 0) y = g_.op("Add", {y, in(2, true).name}, base_);
    const std::string stats_shape = g_.ints(base_ + "/stats", {0, groups});
    put(0, y, x.shape);
    put(1, g_.op("Reshape", {mean, stats_shape}, base_), TracedDims{x.shape[0], {groups, groups}});
    put(2, g_.op("Reshape", {rstd, stats_shape}, base_), TracedDims{x.shape[0], {groups, groups}});
  }

  void layer_norm(double epsilon) {
    const TracedValue x = in(0);
    std::int64_t rows = 1;
    const View& mean_view = out_view(1);
    rows = mean_view.shape.num_elements();
    std::vector<std::int64_t> axes;
    std::int64_t lead = 1;
    std::size_t r = 0;
    while (r < x.shape.size() && lead < rows) lead *= x.shape[r++].a;
    if (lead != rows) fail("a layer normalisation over axes that are not trailing");
    for (std::size_t i = r; i < x.shape.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    const std::string mean = g_.reduce("ReduceMean", x.name, axes, true, base_);
    const std::string centred = g_.op("Sub", {x.name, mean}, base_);
    const std::string variance = g_.reduce("ReduceMean", g_.op("Mul", {centred, centred}, base_), axes, true, base_);
    const std::string rstd = reciprocal_sqrt(variance, epsilon, x.dtype);
    std::string y = g_.op("Mul", {centred, rstd}, base_);
    if (node_a_->operands[1] >= 0) y = g_.op("Mul", {y, in(1, true).name}, base_);
    if (node_a_->operands[2] >= 0) y = g_.op("Add", {y, in(2, true).name}, base_);
    TracedDims stats(x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(r));
    for (std::size_t i = r; i < x.shape.size(); ++i) stats.push_back({1, 1});
    put(0, y, x.shape);
    put(1, mean, stats);
    put(2, rstd, stats);
  }
};

}  // namespace

std::vector<Value> convert_traced(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in) {
  if (in.empty()) throw ValueError(fmt::format("export_onnx: {} got no inputs", who(layer)));
  std::vector<Value> ins;
  for (const Value& v : in) {
    // A channels-first image (after a Conv2D layer) stays so for the traced graph's windows.
    ins.push_back(v.layout == Layout::first && v.rank() == 4 && v.dtype == DType::float32 ? v : g.to_last(v));
    for (std::size_t i = 1; i < v.shape.size(); ++i)
      if (v.shape[i] < 0)
        throw ValueError(fmt::format("export_onnx: {} is exported from its traced graph, which needs every input size "
                                     "but the batch known (input shape [{}])",
                                     who(layer), fmt::join(v.shape, ", ")));
  }
  // The call, traced at two batch sizes without the graph's fusion (each kernel stays itself).
  Plan plans[2];
  for (int t = 0; t < 2; ++t) {
    std::vector<Tensor> args;
    for (const Value& v : ins) {
      std::vector<std::int64_t> s = v.shape;
      if (!s.empty()) s[0] = t == 0 ? kTracedBatchA : kTracedBatchB;
      args.push_back(zeros(Shape(s), v.dtype));
    }
    const graph::detail::TraceFn f = [&](const std::vector<Tensor>& xs) -> std::vector<Tensor> {
      return {xs.size() == 1 ? layer(xs[0], false) : layer(xs, false)};
    };
    try {
      graph::detail::trace(layer.name(), args, f, plans[t]);
    } catch (const graph::detail::UntraceableError& e) {
      throw ValueError(fmt::format("export_onnx: {} has no ONNX converter of its own and its call cannot be traced: {}",
                                   who(layer), e.what()));
    }
    graph::detail::finalise(plans[t], {.fuse_elementwise = false, .fuse_patterns = false, .plan_memory = false});
  }
  const Plan& a = plans[0];
  const Plan& b = plans[1];
  bool same = a.nodes.size() == b.nodes.size() && a.views.size() == b.views.size() && a.slots.size() == b.slots.size() &&
              a.outputs == b.outputs;
  for (std::size_t i = 0; same && i < a.nodes.size(); ++i)
    same = a.nodes[i].kind == b.nodes[i].kind && std::string(a.nodes[i].type.family) == b.nodes[i].type.family &&
           a.nodes[i].type.kind == b.nodes[i].type.kind && a.nodes[i].operands == b.nodes[i].operands;
  if (!same)
    throw ValueError(fmt::format("export_onnx: {}: its traced graph changes with the batch size, so it cannot be "
                                 "exported with a dynamic batch",
                                 who(layer)));
  TracedConverter c(g, layer, a, b, ins[0].name);
  for (std::size_t k = 0; k < ins.size(); ++k) {
    TracedDims shape;
    for (std::size_t i = 0; i < ins[k].shape.size(); ++i)
      shape.push_back(i == 0 ? TracedDim{kTracedBatchA, kTracedBatchB} : TracedDim{ins[k].shape[i], ins[k].shape[i]});
    c.bind_input(static_cast<int>(k), {ins[k].name, shape, ins[k].dtype}, ins[k].layout == Layout::first);
  }
  for (std::size_t i = 0; i < a.nodes.size(); ++i) c.convert(a.nodes[i], b.nodes[i]);
  std::vector<Value> outs;
  for (int v : a.outputs) outs.push_back(c.result(v));
  return outs;
}

}  // namespace keel::io::onnx_detail
