// Kernel patterns that a fused kernel of the backend runs in one pass, as TensorFlow's grappler
// remaps them. Each fused kernel gives the bits of the calls it replaces, except the last one's
// sum, which adds the same values in another order.
//
//   MaxPoolGrad(x, dy) -> g; ReluGrad(g, x) -> dz      (a Conv2D/Dense with relu, then a max pool:
//                                                       the seed CNN's backward, three times)
//   becomes MaxPoolGradReluGrad(x, dy) -> dz, which masks each image's gradient while it is in
//   cache instead of writing g and reading it back. The pool's input is the ReLU's output, so the
//   same view is both kernels' x.
//
//   Conv2D(x, k) -> y; Add(y, bias) -> t; [Relu|Sigmoid|Tanh|Exp](t) -> z
//                                                      (a Conv2D layer's forward: bias_add is an
//                                                      add and an activation under a trace)
//   becomes Conv2DBiasAdd<Act>(x, k, bias) -> z, which adds the bias and applies the activation
//   to each block of output rows right after its GEMM, while the block is in cache, instead of a
//   pass over y and t in memory. The activation joins only when t is read by nothing else.
//
//   MaxPool(x) -> y; ... MaxPoolGrad(x, dy) -> dx   (or MaxPoolGradReluGrad: the forward and
//                                                    backward of a traced training step)
//   becomes MaxPoolWithArgmax(x) -> y, arg; ... MaxPoolGradWithArgmax(arg, dy) -> dx, where arg
//   holds each window's chosen tap (and whether its max is > 0): the gradient scatters dy by it
//   instead of reading x again and finding every window's max a second time, and x is dead once
//   the forward has pooled it. The backward reads a quarter of the bytes (2x2 windows).
//
//   MaxPoolGradWithArgmax[ReluGrad](arg, dy) -> dx; Sum(dx, axes {0, 1, 2}) -> db
//                                                   (a Conv2D layer's bias gradient, when a max
//                                                   pool follows the layer)
//   becomes MaxPoolGradWithArgmax[ReluGrad]BiasAddGrad(arg, dy) -> dx, db: every window gives its
//   gradient to one pixel, so db is the sum of the windows' gradients, added as they are
//   scattered, instead of a pass that reads all of dx again (4x the values for 2x2 windows).
#include <algorithm>
#include <string_view>

#include "backend/backend.hpp"
#include "backend/fused.hpp"
#include "graph/fusion.hpp"
#include "keel/core/tensor_impl.hpp"

namespace keel::graph::detail {

namespace {

bool is_kernel(const Node& n, std::string_view family, int kind) {
  return n.kind == NodeKind::kernel && n.type.family == family && n.type.kind == kind;
}

bool same_view(const View& a, const View& b) {
  return a.slot == b.slot && a.offset == b.offset && a.shape == b.shape && a.strides == b.strides && a.dtype == b.dtype;
}

class PatternFuser {
 public:
  explicit PatternFuser(Plan& p) : p_(p), uses_(p.slots.size(), 0), result_(p.slots.size(), false) {
    for (const Node& n : p.nodes) for_each_operand(n, [&](int v, bool) { ++uses_[slot_of(v)]; });
    for (int v : p.outputs) result_[slot_of(v)] = true;
  }

  void run() {
    std::vector<Node> out;
    for (std::size_t i = 0; i < p_.nodes.size(); ++i) {
      if (i + 1 < p_.nodes.size() && pool_then_relu_grad(p_.nodes[i], p_.nodes[i + 1])) {
        out.push_back(fused_pool_relu_grad(p_.nodes[i], p_.nodes[i + 1]));
        ++i;
        continue;
      }
      if (const std::size_t taken = conv_bias_activation(i)) {
        out.push_back(fused_conv_bias_activation(i, taken));
        i += taken - 1;
        continue;
      }
      out.push_back(std::move(p_.nodes[i]));
    }
    p_.nodes = std::move(out);
    if (!p_.differentiable) {
      keep_pool_choices();
      sum_bias_in_pool_grads();
    }
  }

 private:
  const View& view(int v) const { return p_.views[static_cast<std::size_t>(v)]; }
  std::size_t slot_of(int v) const { return static_cast<std::size_t>(view(v).slot); }

  // MaxPoolGrad(x, dy) -> g then ReluGrad(g, x) -> dz, g used by nothing else.
  bool pool_then_relu_grad(const Node& pool, const Node& relu) const {
    using kernel::BinaryOp;
    using kernel::PoolKernel;
    if (!is_kernel(pool, "pool", int(PoolKernel::max_backward)) || !is_kernel(relu, "binary", int(BinaryOp::relu_grad)))
      return false;
    if (pool.num_inputs != 2 || pool.operands.size() != 3 || relu.num_inputs != 2 || relu.operands.size() != 3)
      return false;
    for (int v : {pool.operands[0], pool.operands[1], relu.operands[1], relu.operands[2]})
      if (v < 0 || !contiguous_view(view(v))) return false;
    const View &x = view(pool.operands[0]), &g = view(pool.operands[2]);
    const std::size_t gs = slot_of(pool.operands[2]);
    // g lives only between the two calls: written by one, read by the other.
    if (p_.slots[gs].kind != SlotKind::intermediate || result_[gs] || uses_[gs] != 2) return false;
    if (!same_view(view(relu.operands[0]), g) || !same_view(view(relu.operands[1]), x)) return false;
    const View& dz = view(relu.operands[2]);
    if (dz.shape != x.shape || dz.dtype != x.dtype) return false;
    // dz is written image by image while x and dy are still read: it must not be either.
    return dz.slot != x.slot && dz.slot != view(pool.operands[1]).slot;
  }

  Node fused_pool_relu_grad(Node& pool, Node& relu) const {
    Node fused = std::move(pool);
    fused.type.kind = int(kernel::PoolKernel::max_backward_relu);
    fused.operands[2] = relu.operands[2];
    fused.kernel = backend::pool_replay(kernel::PoolKernel::max_backward_relu, fused.ints);
    return fused;
  }

  // A value that lives only between two calls: written by one, read by the other.
  bool passed_on(int v) const {
    const std::size_t s = slot_of(v);
    return p_.slots[s].kind == SlotKind::intermediate && !result_[s] && uses_[s] == 2;
  }

  // How many nodes from i make Conv2D -> Add(bias) [-> activation]: 3, 2, or 0 for no match.
  std::size_t conv_bias_activation(std::size_t i) const {
    using kernel::BinaryOp;
    using kernel::UnaryOp;
    if (i + 1 >= p_.nodes.size()) return 0;
    const Node &conv = p_.nodes[i], &add = p_.nodes[i + 1];
    if (!is_kernel(conv, "conv", int(kernel::ConvKernel::conv2d_forward)) ||
        !is_kernel(add, "binary", int(BinaryOp::add)))
      return 0;
    if (conv.num_inputs != 2 || conv.operands.size() != 3 || add.num_inputs != 2 || add.operands.size() != 3) return 0;
    for (int v : {conv.operands[0], conv.operands[1], conv.operands[2], add.operands[1], add.operands[2]})
      if (v < 0 || !contiguous_view(view(v))) return 0;
    const View &y = view(conv.operands[2]), &bias = view(add.operands[1]), &t = view(add.operands[2]);
    if (y.dtype != DType::float32 && y.dtype != DType::float64) return 0;
    if (!backend::has_fused(backend::Fused::bias_activation, p_.slots[slot_of(conv.operands[2])].device)) return 0;
    if (!passed_on(conv.operands[2]) || !same_view(view(add.operands[0]), y)) return 0;
    // The bias: a row of y's last axis (leading axes of 1), y's dtype.
    const std::int64_t o = y.shape.dims().empty() ? 0 : y.shape.dims().back();
    if (bias.dtype != y.dtype || bias.shape.num_elements() != o || bias.shape.dims().empty() ||
        bias.shape.dims().back() != o)
      return 0;
    if (t.shape != y.shape || t.dtype != y.dtype) return 0;
    std::size_t taken = 2;
    if (i + 2 < p_.nodes.size()) {
      const Node& act = p_.nodes[i + 2];
      const bool fusable = act.kind == NodeKind::kernel && std::string_view(act.type.family) == "unary" &&
                           act.type.alpha == 0 && act.num_inputs == 1 && act.operands.size() == 2 &&
                           (act.type.kind == int(UnaryOp::relu) || act.type.kind == int(UnaryOp::sigmoid) ||
                            act.type.kind == int(UnaryOp::tanh) || act.type.kind == int(UnaryOp::exp));
      if (fusable && act.operands[1] >= 0 && contiguous_view(view(act.operands[1])) && passed_on(add.operands[2]) &&
          same_view(view(act.operands[0]), t) && view(act.operands[1]).shape == t.shape &&
          view(act.operands[1]).dtype == t.dtype)
        taken = 3;
    }
    // The result is written block by block while x, the kernel and the bias are still read.
    const std::size_t z = slot_of(p_.nodes[i + taken - 1].operands.back());
    for (int v : {conv.operands[0], conv.operands[1], add.operands[1]})
      if (slot_of(v) == z) return 0;
    return taken;
  }

  Node fused_conv_bias_activation(std::size_t i, std::size_t taken) {
    Node fused = std::move(p_.nodes[i]);
    const Node& add = p_.nodes[i + 1];
    const bool linear = taken == 2;
    const auto op = linear ? kernel::UnaryOp::relu : static_cast<kernel::UnaryOp>(p_.nodes[i + 2].type.kind);
    fused.type.family = "conv_bias_activation";
    fused.type.kind = linear ? -1 : static_cast<int>(op);
    fused.operands = {fused.operands[0], fused.operands[1], add.operands[1], p_.nodes[i + taken - 1].operands.back()};
    fused.num_inputs = 3;
    fused.kernel = backend::conv2d_bias_activation_replay(fused.ints, linear, op);
    return fused;
  }

  // Every max pool gradient whose forward ran earlier in the graph on the same x (not written in
  // between) takes that forward's choices. A differentiable plan's forward and backward bind their
  // memory per call (Binding), so only whole plans (a traced training step) do this.
  void keep_pool_choices() {
    using kernel::PoolKernel;
    for (std::size_t b = 0; b < p_.nodes.size(); ++b) {
      Node& back = p_.nodes[b];
      const bool relu = is_kernel(back, "pool", int(PoolKernel::max_backward_relu));
      if (!relu && !is_kernel(back, "pool", int(PoolKernel::max_backward))) continue;
      if (back.num_inputs != 2 || back.operands.size() != 3) continue;
      const int x = back.operands[0];
      if (x < 0 || (view(x).dtype != DType::float32 && view(x).dtype != DType::float64)) continue;
      if (!backend::max_pool_keeps_choices(backend::window_geometry(back.ints), relu, p_.slots[slot_of(x)].device))
        continue;
      const std::ptrdiff_t f = forward_of(b);
      if (f < 0) continue;
      back.operands[0] = keep_choices(p_.nodes[static_cast<std::size_t>(f)]);
      back.type.kind = int(relu ? PoolKernel::max_backward_arg_relu : PoolKernel::max_backward_arg);
      back.kernel = backend::pool_replay(static_cast<PoolKernel>(back.type.kind), back.ints);
    }
  }

  // Every Sum of a kept-choice max pool gradient dx over all axes but the channels (a bias's
  // gradient, BiasAddGrad) is taken by the gradient's kernel while it scatters: it adds each
  // window's gradient, a quarter of dx's values for 2x2 windows, instead of reading dx again.
  void sum_bias_in_pool_grads() {
    using kernel::PoolKernel;
    std::vector<bool> gone(p_.nodes.size(), false);
    for (std::size_t b = 0; b < p_.nodes.size(); ++b) {
      Node& back = p_.nodes[b];
      const bool relu = is_kernel(back, "pool", int(PoolKernel::max_backward_arg_relu));
      if ((!relu && !is_kernel(back, "pool", int(PoolKernel::max_backward_arg))) || back.operands.size() != 3) continue;
      const std::ptrdiff_t s = bias_sum_of(b);
      if (s < 0) continue;
      back.type.family = "pool_arg_grad_bias";
      back.type.kind = relu ? 1 : 0;
      back.operands.push_back(p_.nodes[static_cast<std::size_t>(s)].operands[1]);
      back.kernel = backend::max_pool_grad_with_argmax_bias_replay(back.ints, relu);
      gone[static_cast<std::size_t>(s)] = true;
    }
    std::vector<Node> kept;
    for (std::size_t i = 0; i < p_.nodes.size(); ++i)
      if (!gone[i]) kept.push_back(std::move(p_.nodes[i]));
    p_.nodes = std::move(kept);
  }

  // The first Sum after node back of its result dx (NHWC) over axes {0, 1, 2} into C contiguous
  // values, with dx unwritten and the sum untouched in between (so that back can write it); -1
  // when none.
  std::ptrdiff_t bias_sum_of(std::size_t back) const {
    const View& dx = view(p_.nodes[back].operands[2]);
    if (dx.shape.rank() != 4 || !contiguous_view(dx)) return -1;
    const std::size_t dxs = slot_of(p_.nodes[back].operands[2]);
    for (std::size_t i = back + 1; i < p_.nodes.size(); ++i) {
      const Node& n = p_.nodes[i];
      if (is_kernel(n, "reduce", int(kernel::ReduceOp::sum)) && n.num_inputs == 1 && n.operands.size() == 2 &&
          n.operands[0] >= 0 && n.operands[1] >= 0 && same_view(view(n.operands[0]), dx) && spatial_axes(n.ints) &&
          bias_sum_fits(back, i))
        return static_cast<std::ptrdiff_t>(i);
      bool writes_dx = false;
      for_each_operand(n, [&](int v, bool written) { writes_dx = writes_dx || (written && slot_of(v) == dxs); });
      if (writes_dx) return -1;
    }
    return -1;
  }

  static bool spatial_axes(const std::vector<std::int64_t>& axes) {
    return axes == std::vector<std::int64_t>{0, 1, 2};
  }

  // Whether back can write Sum node sum's result: C contiguous values of dx's dtype, in a slot no
  // node between the two names and none of back's operands shares.
  bool bias_sum_fits(std::size_t back, std::size_t sum) const {
    const Node& b = p_.nodes[back];
    const View &dx = view(b.operands[2]), &out = view(p_.nodes[sum].operands[1]);
    if (out.dtype != dx.dtype || !contiguous_view(out) || out.shape.num_elements() != dx.shape.dims().back())
      return false;
    const std::size_t os = slot_of(p_.nodes[sum].operands[1]);
    for (int v : b.operands)
      if (slot_of(v) == os) return false;
    for (std::size_t i = back + 1; i < sum; ++i) {
      bool touches = false;
      for_each_operand(p_.nodes[i], [&](int v, bool) { touches = touches || slot_of(v) == os; });
      if (touches) return false;
    }
    return true;
  }

  // The max pool forward of back's x and geometry, the last before back with x unwritten since
  // (a tape refuses a gradient whose saved input changed, so this is a guard); -1 when none.
  std::ptrdiff_t forward_of(std::size_t back) const {
    const Node& b = p_.nodes[back];
    const std::size_t xs = slot_of(b.operands[0]);
    for (std::size_t i = back; i-- > 0;) {
      const Node& n = p_.nodes[i];
      const bool forward = (is_kernel(n, "pool", int(kernel::PoolKernel::max_forward)) && n.num_inputs == 2 &&
                            n.operands.size() == 3) ||
                           (n.kind == NodeKind::kernel && std::string_view(n.type.family) == "pool_argmax");
      if (forward && n.operands[0] >= 0 && same_view(view(n.operands[0]), view(b.operands[0])) && n.ints == b.ints)
        return static_cast<std::ptrdiff_t>(i);
      bool writes_x = false;
      for_each_operand(n, [&](int v, bool written) { writes_x = writes_x || (written && slot_of(v) == xs); });
      if (writes_x) return -1;
    }
    return -1;
  }

  // Turns max pool forward n into MaxPoolWithArgmax, its choices in a new intermediate like y;
  // returns their view (that of a forward turned already, for a second gradient of it).
  int keep_choices(Node& n) {
    if (n.type.family == std::string_view("pool_argmax")) return n.operands[2];
    const View y = view(n.operands[2]);
    Slot s;
    s.kind = SlotKind::intermediate;
    s.nbytes = static_cast<std::size_t>(y.shape.num_elements()) * itemsize(y.dtype);
    s.device = p_.slots[slot_of(n.operands[2])].device;
    s.written = true;
    p_.slots.push_back(s);
    View arg;
    arg.slot = static_cast<int>(p_.slots.size()) - 1;
    arg.shape = y.shape;
    arg.dtype = y.dtype;
    arg.strides = contiguous_strides(y.shape);
    p_.views.push_back(arg);
    const int arg_view = static_cast<int>(p_.views.size()) - 1;
    n.type.family = "pool_argmax";
    n.type.kind = 0;
    n.operands = {n.operands[0], n.operands[2], arg_view};
    n.num_inputs = 1;
    n.kernel = backend::max_pool_with_argmax_replay(n.ints);
    return arg_view;
  }

  Plan& p_;
  std::vector<int> uses_;     // per slot: operands that name it
  std::vector<bool> result_;  // per slot: a result's
};

}  // namespace

void fuse_patterns(Plan& plan) { PatternFuser(plan).run(); }

}  // namespace keel::graph::detail
