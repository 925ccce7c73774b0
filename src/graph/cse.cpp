// Common-subexpression elimination. Only kernels whose recorded type and operand views say all
// there is to know about the call take part: the elementwise families (unary with its alpha,
// binary, compare, logical, where, float tests) and matmul (its kind holds both transposes).
// Others capture arguments the plan cannot see (axes, strides, paddings), so two calls of them
// with equal operands may still differ. Random draws are never merged (each is fresh).
//
// A later call B repeats an earlier call A when both are such kernels of the same type, their
// inputs are the same views (or views of equal small constants), and their outputs are views
// of the same geometry covering intermediate memory that only A, respectively only B, writes;
// and no call between them writes memory A read. B is then dropped and every view of B's
// memory becomes the same view of A's.
#include "graph/cse.hpp"

#include <fmt/core.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace keel::graph::detail {

namespace {

bool pure_family(const Node& n) {
  static const std::set<std::string> families = {"unary", "binary", "compare", "logical", "logical_not",
                                                  "where", "float_test", "matmul"};
  return n.kind == NodeKind::kernel && n.operands.size() == n.num_inputs + 1 && n.operands.back() >= 0 &&
         families.count(n.type.family) > 0;
}

std::string geometry(const View& v) {
  std::string g = fmt::format("{}@{}:", static_cast<int>(v.dtype), v.offset);
  for (std::int64_t i = 0; i < v.shape.rank(); ++i) g += fmt::format("{}/{},", v.shape[i], v.strides[static_cast<std::size_t>(i)]);
  return g;
}

// An input operand: its slot and geometry, or for a small host constant its bytes (each scalar
// of `x * 2.0` is a constant of its own).
std::string input_key(const Plan& p, int view, bool never_written) {
  if (view < 0) return "-";
  const View& v = p.views[static_cast<std::size_t>(view)];
  const Slot& s = p.slots[static_cast<std::size_t>(v.slot)];
  if (s.kind == SlotKind::constant && never_written && s.held && s.device.is_cpu() && s.nbytes <= 256) {
    std::string bytes(s.nbytes, '\0');
    std::memcpy(bytes.data(), s.held->data(), s.nbytes);
    std::string hex;
    for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
    return "c" + hex + "|" + geometry(v);
  }
  return fmt::format("s{}|{}", v.slot, geometry(v));
}

}  // namespace

std::size_t eliminate_common_subexpressions(Plan& p) {
  // The top-level positions of the calls that write each slot (nested lists count as their node).
  std::vector<std::vector<std::size_t>> writes(p.slots.size());
  for (std::size_t i = 0; i < p.nodes.size(); ++i)
    for_each_operand(p.nodes[i], [&](int v, bool written) {
      const bool nested = p.nodes[i].kind == NodeKind::cond || p.nodes[i].kind == NodeKind::loop;
      if (written || nested) writes[static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot)].push_back(i);
    });
  auto written_between = [&](int slot, std::size_t a, std::size_t b) {
    for (std::size_t w : writes[static_cast<std::size_t>(slot)])
      if (w > a && w < b) return true;
    return false;
  };
  auto sole_intermediate = [&](const View& v) {
    const Slot& s = p.slots[static_cast<std::size_t>(v.slot)];
    return s.kind == SlotKind::intermediate && writes[static_cast<std::size_t>(v.slot)].size() == 1;
  };

  std::map<std::string, std::size_t> seen;  // key -> the position of the first call with it
  std::vector<bool> dropped(p.nodes.size(), false);
  std::vector<int> rename(p.slots.size(), -1);
  std::size_t count = 0;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    Node& n = p.nodes[i];
    // Views of merged slots now name the slot they merged into (only later nodes read them).
    for_each_operand(n, [&](int v, bool) {
      View& view = p.views[static_cast<std::size_t>(v)];
      if (rename[static_cast<std::size_t>(view.slot)] >= 0) view.slot = rename[static_cast<std::size_t>(view.slot)];
    });
    if (!pure_family(n)) continue;
    const View& out = p.views[static_cast<std::size_t>(n.operands.back())];
    if (!sole_intermediate(out)) continue;
    std::string key = fmt::format("{}#{}#{}#", n.type.family, n.type.kind, n.type.alpha);
    for (std::size_t j = 0; j < n.num_inputs; ++j) {
      const int v = n.operands[j];
      const bool never_written = v >= 0 && writes[static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot)].empty();
      key += input_key(p, v, never_written) + ";";
    }
    key += "->" + geometry(out) + fmt::format("/{}/{}", p.slots[static_cast<std::size_t>(out.slot)].nbytes,
                                              p.slots[static_cast<std::size_t>(out.slot)].device.to_string());
    const auto it = seen.find(key);
    if (it == seen.end()) {
      seen.emplace(std::move(key), i);
      continue;
    }
    const Node& first = p.nodes[it->second];
    // A differentiable plan's backward runs when a tape asks, after code outside the plan may
    // have written what the forward read: forward and backward calls are not merged.
    bool same_inputs = first.backward == n.backward;
    for (std::size_t j = 0; j < first.num_inputs && same_inputs; ++j)
      if (first.operands[j] >= 0)
        same_inputs = !written_between(p.views[static_cast<std::size_t>(first.operands[j])].slot, it->second, i);
    if (!same_inputs) {  // the inputs changed: this call is the one later repeats match
      it->second = i;
      continue;
    }
    rename[static_cast<std::size_t>(out.slot)] = p.views[static_cast<std::size_t>(first.operands.back())].slot;
    dropped[i] = true;
    ++count;
  }
  if (count == 0) return 0;
  // Views of the merged slots in the results and nested lists were renamed above where a node
  // touched them; the results' views too (a result is never a merged intermediate, but a view
  // over one may be listed before its writer was seen).
  for (View& v : p.views)
    if (rename[static_cast<std::size_t>(v.slot)] >= 0) v.slot = rename[static_cast<std::size_t>(v.slot)];
  std::vector<Node> kept;
  kept.reserve(p.nodes.size() - count);
  for (std::size_t i = 0; i < p.nodes.size(); ++i)
    if (!dropped[i]) kept.push_back(std::move(p.nodes[i]));
  p.nodes = std::move(kept);
  return count;
}

}  // namespace keel::graph::detail
