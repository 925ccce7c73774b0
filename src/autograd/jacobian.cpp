// GradientTape::jacobian and batch_jacobian: one backward pass per target element (per element
// of a batch row for batch_jacobian), each seeded with a one-hot upstream gradient. TensorFlow
// vectorises the same loop with pfor; here the passes run one after another, and because
// gradient() lets outer tapes record its work, a jacobian can itself be differentiated.
#include <limits>

#include <fmt/core.h>

#include "autograd/tape_state.hpp"
#include "core/tensor_util.hpp"
#include "keel/autograd/tape.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

namespace {

// Keeps a tape usable across the loop's gradient() calls; a non-persistent tape is then spent
// once, as after a single gradient() call.
class KeepTape {
 public:
  explicit KeepTape(detail::TapeState& st) : st_(st), persistent_(st.persistent) { st_.persistent = true; }
  ~KeepTape() {
    st_.persistent = persistent_;
    if (!persistent_) {
      st_.used = true;
      st_.nodes.clear();
      st_.nodes.shrink_to_fit();
    }
  }
  KeepTape(const KeepTape&) = delete;
  KeepTape& operator=(const KeepTape&) = delete;

 private:
  detail::TapeState& st_;
  bool persistent_;
};

// The upstream gradient with a 1 at flat position i of a [rows, n] layout and 0 elsewhere,
// reshaped to `shape` (rows = 1 for jacobian, the batch for batch_jacobian).
Tensor one_hot_seed(std::int64_t i, std::int64_t rows, std::int64_t n, const Tensor& target) {
  const Tensor hot = one_hot(constant(std::vector<std::int64_t>{i}), static_cast<int>(n), 1, 0, target.dtype());
  return reshape(broadcast_to(hot, {rows, n}), target.shape());
}

Shape joined(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  std::vector<std::int64_t> d = a;
  d.insert(d.end(), b.begin(), b.end());
  return Shape(d);
}

}  // namespace

Tensor GradientTape::jacobian(const Tensor& target, const Tensor& source, UnconnectedGradients u) {
  detail::check_defined(target, "GradientTape.jacobian (target)");
  detail::check_defined(source, "GradientTape.jacobian (source)");
  if (state_->used)
    throw ValueError("GradientTape.jacobian: this non-persistent GradientTape was already used for gradients");
  const std::int64_t n = target.size();
  if (n > std::numeric_limits<int>::max())
    throw ValueError(fmt::format("GradientTape.jacobian: the target {} has too many elements", target.shape().to_string()));
  const Shape out_shape = joined(target.shape().dims(), source.shape().dims());
  KeepTape keep(*state_);
  std::vector<Tensor> rows;
  rows.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    Tensor g = gradient(target, std::vector<Tensor>{source}, one_hot_seed(i, 1, n, target), u)[0];
    if (!g.defined()) return Tensor();  // unconnected (UnconnectedGradients::none)
    rows.push_back(g);
  }
  if (rows.empty()) return zeros(out_shape, source.dtype());
  return reshape(stack(rows, 0), out_shape);
}

Tensor GradientTape::jacobian(const Tensor& target, const Variable& source, UnconnectedGradients u) {
  return jacobian(target, source.peek(), u);
}

Tensor GradientTape::batch_jacobian(const Tensor& target, const Tensor& source, UnconnectedGradients u) {
  detail::check_defined(target, "GradientTape.batch_jacobian (target)");
  detail::check_defined(source, "GradientTape.batch_jacobian (source)");
  if (target.rank() < 1 || source.rank() < 1 || target.shape()[0] != source.shape()[0])
    throw ShapeError(fmt::format("GradientTape.batch_jacobian: target {} and source {} need the same first (batch) "
                                 "dimension", target.shape().to_string(), source.shape().to_string()));
  if (state_->used)
    throw ValueError("GradientTape.batch_jacobian: this non-persistent GradientTape was already used for gradients");
  const std::int64_t b = target.shape()[0];
  const std::vector<std::int64_t> y(target.shape().dims().begin() + 1, target.shape().dims().end());
  const std::vector<std::int64_t> x(source.shape().dims().begin() + 1, source.shape().dims().end());
  const std::int64_t m = Shape(y).num_elements();
  if (m > std::numeric_limits<int>::max())
    throw ValueError(fmt::format("GradientTape.batch_jacobian: the target {} has too many elements per row",
                                 target.shape().to_string()));
  const Shape out_shape = joined(joined({b}, y).dims(), x);
  KeepTape keep(*state_);
  std::vector<Tensor> cols;
  cols.reserve(static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < m; ++j) {
    Tensor g = gradient(target, std::vector<Tensor>{source}, one_hot_seed(j, b, m, target), u)[0];
    if (!g.defined()) return Tensor();
    cols.push_back(reshape(g, joined({b}, {Shape(x).num_elements()})));
  }
  if (cols.empty() || b == 0) return zeros(out_shape, source.dtype());
  return reshape(stack(cols, 1), out_shape);
}

}  // namespace keel
