// The data-parallel hooks of fit / evaluate (hooks.hpp): batch shards, the gradient all-reduce in
// buckets, the initial broadcast and the reduction of the logs.
#include <algorithm>
#include <fmt/core.h>

#include "distribute/collective_kernels.hpp"
#include "distribute/hooks.hpp"
#include "keel/distribute/strategy.hpp"
#include "keel/ops/shape.hpp"

namespace keel::distribute::detail {

namespace {

thread_local double step_weight = -1;  // < 0: none set (1 / replicas)
thread_local bool reduced_flag = false;

}  // namespace

bool multi_replica() { return get_strategy().num_replicas_in_sync() > 1; }
bool is_chief() { return get_strategy().is_chief(); }

std::pair<std::int64_t, std::int64_t> even_split(std::int64_t n, std::int64_t parts, std::int64_t index) {
  const std::int64_t base = n / parts, extra = n % parts;
  const std::int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t n) {
  const Strategy& s = get_strategy();
  return even_split(n, s.num_replicas_in_sync(), s.worker_index());
}

StepWeightScope::StepWeightScope(double local_rows, double global_rows) : previous_(step_weight) {
  if (!(global_rows > 0)) throw ValueError(fmt::format("distribute: a step over {} rows", global_rows));
  step_weight = local_rows / global_rows;
}
StepWeightScope::~StepWeightScope() { step_weight = previous_; }

bool& gradients_reduced_flag() { return reduced_flag; }

void reduce_gradients(std::vector<Tensor>& grads) {
  Strategy& s = get_strategy();
  if (s.num_replicas_in_sync() <= 1) return;
  const auto& comm = s.communicator();
  const int replicas = s.num_replicas_in_sync();
  // Read when the kernel runs (each replay): this step's weight.
  const auto weight = [replicas] {
    reduced_flag = true;
    return step_weight >= 0 ? step_weight : 1.0 / replicas;
  };
  const std::size_t limit = s.options().bucket_bytes;
  // Buckets: runs of consecutive gradients of one dtype, at most `limit` bytes each (a larger
  // gradient alone in its own), flattened and concatenated (PyTorch DDP's gradient buckets).
  std::size_t i = 0;
  while (i < grads.size()) {
    if (!grads[i].defined()) {
      ++i;
      continue;
    }
    const DType dt = grads[i].dtype();
    std::vector<std::size_t> members{i};
    std::size_t bytes = static_cast<std::size_t>(grads[i].size()) * itemsize(dt);
    std::size_t j = i + 1;
    for (; j < grads.size() && grads[j].defined() && grads[j].dtype() == dt; ++j) {
      const std::size_t b = static_cast<std::size_t>(grads[j].size()) * itemsize(dt);
      if (bytes + b > limit) break;
      bytes += b;
      members.push_back(j);
    }
    std::vector<Tensor> flat;
    for (std::size_t m : members) flat.push_back(reshape(grads[m], Shape({grads[m].size()})));
    // float32 / float64: one weighted copy into the bucket, reduced in place; other dtypes
    // (half gradients) through concat and the general all-reduce.
    const Tensor reduced = dt == DType::float32 || dt == DType::float64
                               ? weighted_all_reduce_sum(comm, flat, weight)
                               : all_reduce_tensor(comm, flat.size() == 1 ? flat[0] : concat(flat, 0), ReduceOp::sum, weight);
    std::int64_t offset = 0;
    for (std::size_t m : members) {
      const std::int64_t n = grads[m].size();
      const Shape shape = grads[m].shape();
      grads[m] = reshape(members.size() == 1 ? reduced : slice(reduced, {offset}, {n}), shape);
      offset += n;
    }
    i = j;
  }
}

Tensor same_on_every_replica(const Tensor& t) {
  Strategy& s = get_strategy();
  if (s.num_replicas_in_sync() <= 1) return t;
  check_same_everywhere(s.communicator(), t, "fit (the shuffled order)");
  return broadcast_tensor(s.communicator(), t, 0);
}

void broadcast_weights(const std::vector<Variable*>& weights) {
  Strategy& s = get_strategy();
  if (s.num_replicas_in_sync() <= 1) return;
  for (Variable* v : weights) {
    if (!v || !v->defined()) continue;
    check_same_everywhere(s.communicator(), v->peek(), fmt::format("fit: the weight '{}'", v->name()).c_str());
    const Tensor chief = broadcast_tensor(s.communicator(), v->peek(), 0);
    v->assign(chief.device() == v->device() ? chief : chief.to(v->device()));
  }
}

namespace {

// The logs combined over the strategy's communicator, whatever its replica count.
std::map<std::string, double> reduce_logs_over(Strategy& s, const std::map<std::string, double>& logs, double rows) {
  if (s.communicator()->size() <= 1 || logs.empty()) return logs;
  // {count, -count} first: every replica must log the same keys (the same compiled model).
  const double n = static_cast<double>(logs.size());
  std::vector<double> buf{n, -n, rows};
  for (const auto& [k, v] : logs) buf.push_back(v * rows);
  double check[2] = {n, -n};
  s.communicator()->all_reduce(check, 2, DType::float64, Combine::max);
  if (check[0] != -check[1])
    throw ValueError(fmt::format("distribute: rank {} logs {} values and another worker a different number",
                                 s.worker_index(), logs.size()));
  std::vector<double> sums(buf.begin() + 2, buf.end());
  s.communicator()->all_reduce(sums.data(), sums.size(), DType::float64, Combine::sum);
  std::map<std::string, double> out;
  std::size_t k = 1;
  for (const auto& [key, v] : logs) {
    out[key] = sums[0] > 0 ? sums[k] / sums[0] : v;
    ++k;
  }
  return out;
}

}  // namespace

std::map<std::string, double> reduce_logs(const std::map<std::string, double>& logs, double rows) {
  Strategy& s = get_strategy();
  if (s.num_replicas_in_sync() <= 1) return logs;
  return reduce_logs_over(s, logs, rows);
}

// A ParameterServerStrategy's communicator is its workers' (parameter_server.cpp).
std::map<std::string, double> ps_reduce_logs(const std::map<std::string, double>& logs, double rows) {
  return reduce_logs_over(get_strategy(), logs, rows);
}

}  // namespace keel::distribute::detail
