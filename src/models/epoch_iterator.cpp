#include "models/epoch_iterator.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/core.h>

#include "backend/recorder.hpp"
#include "distribute/hooks.hpp"
#include "keel/core/device.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/shape.hpp"

namespace keel::models::detail {

namespace {

Tensor take_rows(const Tensor& t, const Tensor& idx) { return t.defined() ? gather(t, idx, 0) : t; }

std::vector<Tensor> rows_of(const std::vector<Tensor>& ts, std::int64_t b, std::int64_t e) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(rows(t, b, e));
  return out;
}
std::vector<Tensor> take_rows_of(const std::vector<Tensor>& ts, const Tensor& idx) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(take_rows(t, idx));
  return out;
}

// A seeded permutation of [0, n) from keel's generator (same seed, same order).
Tensor permutation(std::int64_t n) {
  const auto keys = random::uniform({n}, 0, 1, DType::float64).to_vector<double>();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
    return keys[static_cast<std::size_t>(a)] < keys[static_cast<std::size_t>(b)];
  });
  return constant(idx);
}

}  // namespace

void check_xy(const Tensor& x, const Tensor& y, const char* op) {
  if (!x.defined()) throw ValueError(fmt::format("{}: x is undefined", op));
  if (x.rank() == 0) throw ShapeError(fmt::format("{}: x needs a batch axis, got shape {}", op, x.shape().to_string()));
  if (y.defined() && (y.rank() == 0 || y.shape()[0] != x.shape()[0]))
    throw ShapeError(fmt::format("{}: x and y have different numbers of samples: {} and {}", op,
                                 x.shape().to_string(), y.shape().to_string()));
}

void check_xy(const std::vector<Tensor>& x, const std::vector<Tensor>& y, const char* op) {
  if (x.empty()) throw ValueError(fmt::format("{}: no inputs given", op));
  for (const Tensor& t : x) check_xy(x[0], t, op);
  for (const Tensor& t : y) check_xy(x[0], t, op);
}

Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  if (!t.defined()) return t;
  std::vector<std::int64_t> b(static_cast<std::size_t>(t.rank()), 0), s(t.shape().dims());
  b[0] = begin;
  s[0] = end - begin;
  return slice(t, b, s);
}

EpochIterator::EpochIterator(const std::vector<Tensor>& x, const std::vector<Tensor>& y, const Tensor& sample_weight,
                             std::int64_t batch_size, bool shuffle, std::int64_t steps) {
  const std::int64_t n = x.at(0).shape()[0];
  const std::int64_t batches = (n + batch_size - 1) / batch_size;
  steps_ = steps > 0 ? std::min(steps, batches) : batches;
  batches_ = data::Dataset<Batch>([x, y, sample_weight, batch_size, shuffle, n, count = steps_] {
    Tensor order;
    if (shuffle) {
      // Each epoch draws its order when it starts; the indices are made beside the data.
      DeviceScope beside_data(x[0].device());
      order = permutation(n);
      // Data-parallel: every replica shards the chief's order (the same global batches).
      order = distribute::detail::same_on_every_replica(order);
    }
    return data::Dataset<Batch>::Next([=, step = std::int64_t{0}]() mutable -> std::optional<Batch> {
      if (step >= count) return std::nullopt;
      const std::int64_t b = step * batch_size, e = std::min(n, b + batch_size);
      ++step;
      if (!shuffle) return Batch{rows_of(x, b, e), rows_of(y, b, e), rows(sample_weight, b, e)};
      const Tensor idx = rows(order, b, e);
      return Batch{take_rows_of(x, idx), take_rows_of(y, idx), take_rows(sample_weight, idx)};
    });
  });
}

EpochIterator::EpochIterator(const data::Dataset<std::pair<Tensor, Tensor>>& batches, std::int64_t steps,
                             const char* op)
    : batches_(batches.map([](const Tensor& x, const Tensor& y) { return Batch{{x}, {y}, Tensor()}; })),
      steps_(steps),
      op_(op) {}

EpochIterator::EpochIterator(const data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& batches,
                             std::int64_t steps, const char* op)
    : batches_(batches.map([](const std::pair<std::vector<Tensor>, std::vector<Tensor>>& e) {
        return Batch{e.first, e.second, Tensor()};
      })),
      steps_(steps),
      op_(op) {}

std::int64_t EpochIterator::run_epoch(const std::function<bool(std::int64_t, const Batch&)>& f) const {
  std::int64_t step = 0;
  // Each wait for the next batch is a "data wait" range for a profiler (the input pipeline's
  // share of a step).
  auto it = [&] {
    backend::ProfileRange wait("data", "data wait");
    return batches_.begin();
  }();
  const auto end = batches_.end();
  while (!(it == end)) {
    if (steps_ > 0 && step >= steps_) break;  // a Dataset longer than the steps asked for
    const Batch& batch = *it;
    if (op_) check_xy(batch.x, batch.y, op_);
    const bool more = f(step, batch);
    ++step;
    if (!more) break;
    backend::ProfileRange wait("data", "data wait");
    ++it;
  }
  return step;
}

}  // namespace keel::models::detail
