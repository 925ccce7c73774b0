// Elementwise fusion: runs of consecutive unary and binary kernel calls over one output shape
// (bias adds, activations, scale-and-shift, loss and optimizer arithmetic) become one fused node
// running a kernel::ElementwiseProgram. A value used only inside the run lives in a register
// tile and never reaches memory; the others are written as before. Each step runs the same
// SIMD kernel on the same elements as the unfused call, so results are bit for bit the same.
#include "graph/fusion.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "backend/fused.hpp"
#include "backend/recorder.hpp"

namespace keel::graph::detail {

namespace {

using kernel::ElementwiseProgram;
using kernel::ProgramInput;
using kernel::ProgramRef;
using kernel::ProgramStep;

// Whether `small` broadcasts along leading axes only onto `big` (a bias [C] or [1, C] onto
// [N, C]): its shape without leading ones is a suffix of big's.
bool row_of(const Shape& small, const Shape& big) {
  std::vector<std::int64_t> s(small.dims().begin(), small.dims().end());
  while (!s.empty() && s.front() == 1) s.erase(s.begin());
  const auto& b = big.dims();
  if (s.size() > b.size()) return false;
  return std::equal(s.begin(), s.end(), b.end() - static_cast<std::ptrdiff_t>(s.size()));
}

bool is_elementwise(const Node& n) {
  if (n.kind != NodeKind::kernel) return false;
  const std::string f = n.type.family;
  return f == "unary" || f == "binary";
}

class Fuser {
 public:
  explicit Fuser(Plan& p) : p_(p) {
    refs_.resize(p.slots.size());
    for (std::size_t i = 0; i < p.nodes.size(); ++i)
      for_each_operand(p.nodes[i], [&](int v, bool) { refs_[static_cast<std::size_t>(view(v).slot)].push_back(static_cast<int>(i)); });
    for (int v : p.outputs) result_slots_.push_back(view(v).slot);
  }

  void run() {
    std::vector<Node> out;
    std::size_t i = 0;
    while (i < p_.nodes.size()) {
      const std::size_t end = group_end(i);
      if (end - i >= 2) {
        out.push_back(fuse(i, end));
      } else {
        out.push_back(std::move(p_.nodes[i]));
      }
      i = std::max(end, i + 1);
    }
    p_.nodes = std::move(out);
  }

 private:
  const View& view(int v) const { return p_.views[static_cast<std::size_t>(v)]; }
  const Slot& slot(int s) const { return p_.slots[static_cast<std::size_t>(s)]; }

  // The first node after `begin` that cannot join the run starting there.
  std::size_t group_end(std::size_t begin) {
    if (!starts_group(p_.nodes[begin])) return begin + 1;
    const View& o = view(p_.nodes[begin].operands.back());
    shape_ = o.shape;
    dtype_ = o.dtype;
    n_ = o.shape.num_elements();
    device_ = slot(o.slot).device;
    row_ = 0;
    produced_.clear();
    inputs_.clear();
    std::size_t end = begin;
    while (end < p_.nodes.size() && end - begin < kMaxSteps && joins(p_.nodes[end])) {
      produced_[view(p_.nodes[end].operands.back()).slot] = view(p_.nodes[end].operands.back()).offset;
      ++end;
    }
    return end;
  }

  bool starts_group(const Node& n) const {
    if (!is_elementwise(n)) return false;
    const View& o = view(n.operands.back());
    if (!(o.dtype == DType::float32 || o.dtype == DType::float64) || !contiguous_view(o)) return false;
    if (!backend::has_elementwise_program(slot(o.slot).device)) return false;
    return o.shape.num_elements() > 0;
  }

  // How input view `v` would be read inside the current run (or false: it cannot be).
  bool classify(int v, ProgramInput& kind, bool& produced) {
    const View& in = view(v);
    if (in.dtype != dtype_ || !(slot(in.slot).device == device_)) return false;
    auto it = produced_.find(in.slot);
    produced = it != produced_.end();
    if (produced) return it->second == in.offset && contiguous_view(in) && in.shape.num_elements() == n_;
    const std::int64_t m = in.shape.num_elements();
    if (m == 1) {
      kind = ProgramInput::scalar;
      return true;
    }
    if (!contiguous_view(in)) return false;
    if (m == n_ && in.shape == shape_) {
      kind = ProgramInput::full;
      return true;
    }
    if (m < n_ && row_of(in.shape, shape_) && m <= kMaxRow && (row_ == 0 || row_ == m)) {
      kind = ProgramInput::row;
      return true;
    }
    return false;
  }

  bool joins(const Node& n) {
    if (!starts_group(n)) return false;
    const View& o = view(n.operands.back());
    if (o.dtype != dtype_ || o.shape != shape_ || o.offset != 0 || produced_.count(o.slot)) return false;
    // A run must not write memory it reads from outside (a later step would see new values).
    if (inputs_.count(o.slot)) return false;
    for (std::size_t j = 0; j < n.num_inputs; ++j) {
      ProgramInput kind{};
      bool produced = false;
      if (n.operands[j] < 0 || !classify(n.operands[j], kind, produced)) return false;
      if (!produced && kind == ProgramInput::row) row_ = view(n.operands[j]).shape.num_elements();
    }
    for (std::size_t j = 0; j < n.num_inputs; ++j)
      if (!produced_.count(view(n.operands[j]).slot)) inputs_.insert(view(n.operands[j]).slot);
    return true;
  }

  // Whether the value in `s` is needed outside nodes [begin, end): it must then be written.
  bool escapes(int s, std::size_t begin, std::size_t end) const {
    if (slot(s).kind != SlotKind::intermediate) return true;
    if (std::find(result_slots_.begin(), result_slots_.end(), s) != result_slots_.end()) return true;
    for (int i : refs_[static_cast<std::size_t>(s)])
      if (static_cast<std::size_t>(i) < begin || static_cast<std::size_t>(i) >= end) return true;
    return false;
  }

  Node fuse(std::size_t begin, std::size_t end) {
    ElementwiseProgram prog;
    std::vector<int> in_views, out_views;
    // (slot, offset, elements) -> program input: views of one slot at other offsets (rows
    // sliced from one argument) are other inputs.
    std::map<std::tuple<int, std::int64_t, std::int64_t>, int> input_of;
    std::map<int, ProgramRef> value_of;  // slot -> where its value is inside the run
    std::map<int, std::size_t> last_use;  // slot -> last step reading it
    for (std::size_t i = begin; i < end; ++i)
      for (std::size_t j = 0; j < p_.nodes[i].num_inputs; ++j) last_use[view(p_.nodes[i].operands[j]).slot] = i;
    std::vector<int> free_regs;
    const View& first_out = view(p_.nodes[begin].operands.back());
    for (std::size_t i = begin; i < end; ++i) {
      const Node& n = p_.nodes[i];
      ProgramStep step;
      const std::string family = n.type.family;
      step.binary = family == "binary";
      if (step.binary) {
        step.binary_op = static_cast<kernel::BinaryOp>(n.type.kind);
      } else {
        step.unary_op = static_cast<kernel::UnaryOp>(n.type.kind);
        step.alpha = n.type.alpha;
      }
      ProgramRef refs[2];
      for (std::size_t j = 0; j < n.num_inputs; ++j) {
        const int v = n.operands[j];
        const int s = view(v).slot;
        if (auto it = value_of.find(s); it != value_of.end()) {
          refs[j] = it->second;
          continue;
        }
        const std::int64_t m = view(v).shape.num_elements();
        const auto key = std::tuple{s, view(v).offset, m};
        auto it = input_of.find(key);
        if (it == input_of.end()) {
          // joins() checked it: one element, all of them, or a row.
          const ProgramInput kind = m == 1 ? ProgramInput::scalar : m == n_of(begin) ? ProgramInput::full : ProgramInput::row;
          prog.inputs.push_back(kind);
          if (kind == ProgramInput::row) prog.row_length = view(v).shape.num_elements();
          in_views.push_back(v);
          it = input_of.emplace(key, static_cast<int>(prog.inputs.size()) - 1).first;
        }
        refs[j] = {ProgramRef::input, it->second};
      }
      step.a = refs[0];
      step.b = refs[1];
      // Registers read for the last time by this step can hold its result.
      for (std::size_t j = 0; j < n.num_inputs; ++j) {
        const int s = view(n.operands[j]).slot;
        auto it = value_of.find(s);
        if (it != value_of.end() && it->second.kind == ProgramRef::reg && last_use[s] == i &&
            std::find(free_regs.begin(), free_regs.end(), it->second.index) == free_regs.end())
          free_regs.push_back(it->second.index);
      }
      const int out_slot = view(n.operands.back()).slot;
      if (escapes(out_slot, begin, end)) {
        step.out = {ProgramRef::output, prog.num_outputs++};
        out_views.push_back(n.operands.back());
      } else if (!free_regs.empty()) {
        step.out = {ProgramRef::reg, free_regs.back()};
        free_regs.pop_back();
      } else {
        step.out = {ProgramRef::reg, prog.num_registers++};
      }
      value_of[out_slot] = step.out;
      prog.steps.push_back(step);
    }
    Node fused;
    fused.kind = NodeKind::kernel;
    fused.type = {"fused_elementwise", 0};
    fused.fused_from = static_cast<int>(end - begin);
    fused.range = p_.nodes[begin].range;  // a profile shows the run inside its first call's range
    fused.backward = p_.nodes[begin].backward;
    fused.operands = in_views;
    fused.num_inputs = in_views.size();
    fused.operands.insert(fused.operands.end(), out_views.begin(), out_views.end());
    const std::int64_t n = first_out.shape.num_elements();
    fused.kernel = [prog = std::move(prog), n](const Tensor* t) {
      backend::ProfileRange range("kernel", "FusedElementwise");  // what a profiler sees of it
      backend::elementwise_program(prog, n, t, t + prog.inputs.size());
    };
    return fused;
  }

  std::int64_t n_of(std::size_t node) const { return view(p_.nodes[node].operands.back()).shape.num_elements(); }

  static constexpr std::size_t kMaxSteps = 64;
  static constexpr std::int64_t kMaxRow = 1 << 14;

  Plan& p_;
  std::vector<std::vector<int>> refs_;
  std::vector<int> result_slots_;
  Shape shape_;
  DType dtype_ = DType::float32;
  Device device_;
  std::int64_t n_ = 0, row_ = 0;
  std::map<int, std::int64_t> produced_;  // slot -> offset of values made by the run so far
  std::set<int> inputs_;
};

}  // namespace

void fuse_elementwise(Plan& plan) { Fuser(plan).run(); }

}  // namespace keel::graph::detail
