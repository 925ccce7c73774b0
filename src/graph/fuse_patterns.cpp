// Kernel patterns that a fused kernel of the backend runs in one pass, as TensorFlow's grappler
// remaps them. Each fused kernel gives the bits of the calls it replaces.
//
//   MaxPoolGrad(x, dy) -> g; ReluGrad(g, x) -> dz      (a Conv2D/Dense with relu, then a max pool:
//                                                       the seed CNN's backward, three times)
//   becomes MaxPoolGradReluGrad(x, dy) -> dz, which masks each image's gradient while it is in
//   cache instead of writing g and reading it back. The pool's input is the ReLU's output, so the
//   same view is both kernels' x.
#include <algorithm>
#include <string_view>

#include "backend/backend.hpp"
#include "graph/fusion.hpp"

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
      out.push_back(std::move(p_.nodes[i]));
    }
    p_.nodes = std::move(out);
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

  Plan& p_;
  std::vector<int> uses_;     // per slot: operands that name it
  std::vector<bool> result_;  // per slot: a result's
};

}  // namespace

void fuse_patterns(Plan& plan) { PatternFuser(plan).run(); }

}  // namespace keel::graph::detail
