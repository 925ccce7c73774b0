#pragma once
// The values of a traced graph as ONNX values, for export_onnx's traced-graph converter
// (onnx_traced.cpp): each buffer's current value, each strided view of it as the Reshape, Slice,
// Transpose and Expand that pick its elements, and the sizes that follow the batch. The graph is
// traced at two batch sizes; a size that differs between the two follows the batch, and the ONNX
// graph computes it from its input's shape.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/plan.hpp"
#include "io/onnx_builder.hpp"

namespace keel::io::onnx_detail::traced {

using graph::detail::Node;
using graph::detail::NodeKind;
using graph::detail::Plan;
using graph::detail::Slot;
using graph::detail::SlotKind;
using graph::detail::View;

// The two batch sizes traced; any two distinct sizes tell a batch-proportional size apart.
constexpr std::int64_t kTracedBatchA = 2, kTracedBatchB = 3;

// A size in both traces: fixed (a == b) or k * batch.
struct TracedDim {
  std::int64_t a = 0, b = 0;
  bool follows_batch() const { return a != b; }
  std::int64_t per_example() const { return b - a; }
  bool operator==(const TracedDim& o) const { return a == o.a && b == o.b; }
};
using TracedDims = std::vector<TracedDim>;

struct TracedValue {
  std::string name;
  TracedDims shape;
  DType dtype = DType::float32;
};

// How a view picks elements out of a contiguous buffer of n elements, in one trace: the buffer
// reshaped to `w`, sliced to [start, start + size) on each axis, its axes put back in the view's
// order (`order[j]`: the view axis of axis j of w; -1 for an inner axis of a strided step).
struct ViewPick {
  std::vector<std::int64_t> w, start, size;
  std::vector<int> order;
  bool plain = false;  // the view is the whole buffer, row-major: a Reshape at most
};

// What a kernel converter works with: the current node's operands as ONNX values, and its results.
class TracedValues {
 public:
  TracedValues(GraphBuilder& g, const layers::Layer& layer, const Plan& a, const Plan& b, std::string batch_source)
      : g_(g), layer_(layer), a_(a), b_(b), batch_source_(std::move(batch_source)), base_(layer.name()),
        slots_(a.slots.size()) {}

  // Argument k is v (channels-first when `first`: read channels-last only if something needs it).
  void bind_input(int k, const TracedValue& v, bool first);
  // A result of the call (view v): channels-first if the buffer holds it so and v is all of it.
  Value result(int v);
  // A traced size as ONNX sees it: -1 for one that follows the batch.
  static std::vector<std::int64_t> onnx_shape(const TracedDims& d) {
    std::vector<std::int64_t> s;
    for (const auto& x : d) s.push_back(x.follows_batch() ? -1 : x.a);
    return s;
  }

 protected:
  struct SlotState {
    std::optional<TracedValue> whole;
    // A window kernel's result as ONNX computes it, channels-first (NCHW); `whole` is made from
    // it (a Transpose) only when something reads the buffer channels-last.
    std::optional<std::string> first;
    TracedDims first_shape;  // keel's (NHWC) shape of it
    std::vector<std::pair<int, TracedValue>> pieces;  // (view, value) of writes covering a part
  };

  // ValueError naming the layer and why its traced graph has no ONNX form.
  [[noreturn]] void fail(const std::string& why) const;
  // A size in the two traces; one that changes must be proportional to the batch.
  TracedDim dim(std::int64_t a, std::int64_t b) const;
  TracedDims dims(const Shape& a, const Shape& b) const;

  // The batch size as a 1-D int64 tensor (the first axis of the input's shape), made once.
  const std::string& batch();

  // A shape as an int64 tensor: a constant, or computed from the batch size.
  std::string shape_tensor(const TracedDims& d, bool minus_one_allowed);

  // x reshaped or broadcast to `to` (x itself when it has that shape already).
  TracedValue reshape(const TracedValue& x, const TracedDims& to);
  TracedValue expand(const TracedValue& x, const TracedDims& to);

  // Whether view v is all of its buffer, row-major from its start, in both traces.
  bool whole_buffer(int v) const;
  // View v in each trace.
  const View& view_a(int v) const { return a_.views[static_cast<std::size_t>(v)]; }
  const View& view_b(int v) const { return b_.views[static_cast<std::size_t>(v)]; }

  // A buffer made before the call (a weight) or by the host (a constant): an initializer.
  TracedValue initializer(int slot, DType dtype);

  // The whole buffer's value, contiguous (its shape is that of the view that wrote it).
  TracedValue buffer(int slot, DType dtype);

  // Writes that each covered a part of the buffer (concat's pieces): one Concat along the axis
  // they tile.
  TracedValue assemble(int slot);

  // How v picks its elements out of a buffer of n elements; null when no reshape, slice (a step
  // included: an inner axis of that extent of which one element is taken), transpose and
  // broadcast does.
  static std::optional<ViewPick> pick(const View& v, std::int64_t n);

  // The value of a view: its buffer reshaped, sliced and transposed; broadcast (stride 0) axes
  // are size 1, and expanded to the view's size unless the consumer broadcasts itself.
  TracedValue read_view(int v, bool broadcast_ok);

  // The current node's input j, and its output j's view and shape.
  TracedValue in(std::size_t j, bool broadcast_ok = false);
  const View& out_view(std::size_t j) const { return view_a(node_a_->operands[node_a_->num_inputs + j]); }
  TracedDims out_shape(std::size_t j) const;

  // Output j of the node is `name`, of the output view's dtype, broadcast or reshaped to it.
  void put(std::size_t j, const std::string& name, std::optional<TracedDims> shape = std::nullopt);

  // x is what view v now holds: the whole buffer, or a piece of it (assembled when read).
  void write(int v, const TracedValue& x);

  // A scalar initializer of dtype.
  std::string constant(double value, DType dtype);

  // Input j as a channels-first value when the buffer holds one and the view is all of it as
  // written (a window kernel's or a unary op's result read by the next such kernel): no Transpose
  // either way. Null otherwise.
  std::optional<std::string> first_form(std::size_t j);

  // Output j is `y`, channels-first (keel's shape is the output view's); a write to part of a
  // buffer goes through the channels-last form.
  void put_first(std::size_t j, const std::string& y);

  // NHWC <-> NCHW around ONNX's channels-first windows (counted as the layer graph's are).
  TracedValue nchw(const TracedValue& x);
  std::string nhwc(const std::string& x) { return g_.to_last({x, {-1, -1, -1, -1}, Layout::first, DType::float32}).name; }

  GraphBuilder& g_;
  const layers::Layer& layer_;
  const Plan& a_;
  const Plan& b_;
  std::string batch_source_, batch_, base_;
  std::vector<SlotState> slots_;
  const Node* node_a_ = nullptr;  // the node being converted, in each trace
  const Node* node_b_ = nullptr;
};

}  // namespace keel::io::onnx_detail::traced
