// The data-parallel hooks of fit / evaluate (hooks.hpp): batch shards, the gradient all-reduce in
// buckets, the initial broadcast and the reduction of the logs.
#include <algorithm>
#include <fmt/core.h>

#include "autograd/tape_state.hpp"
#include "distribute/collective_kernels.hpp"
#include "distribute/gradient_buckets.hpp"
#include "distribute/hooks.hpp"
#include "distribute/mirrored_replicas.hpp"
#include "keel/distribute/strategy.hpp"
#include "keel/autograd/tape.hpp"

namespace keel::distribute::detail {

namespace {

thread_local double step_weight = -1;  // < 0: none set (1 / replicas)
thread_local bool reduced_flag = false;

}  // namespace

bool multi_replica() {
  const Strategy& s = get_strategy();
  if (s.num_replicas_in_sync() <= 1) return false;
  // In-process replicas run data-parallel on their own threads; on the program's thread the
  // model is one replica (fit hands its steps to the replicas itself).
  return !s.replicas_in_process() || replica_of(s);
}
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

namespace {

// This step's weight of this replica's gradients, read when the kernels run (each replay).
std::function<double()> replica_weight(int replicas) {
  return [replicas] {
    reduced_flag = true;
    return step_weight >= 0 ? step_weight : 1.0 / replicas;
  };
}

}  // namespace

void reduce_gradients(std::vector<Tensor>& grads) {
  Strategy& s = get_strategy();
  if (!multi_replica()) return;
  // Every gradient is final already: no progress() calls, so each bucket is reduced at once in
  // finish(), with the blocking algorithm.
  std::vector<GradientBuckets::Slot> slots;
  for (const Tensor& g : grads) slots.push_back(g.defined() ? GradientBuckets::Slot{g.shape(), g.dtype(), true}
                                                            : GradientBuckets::Slot{Shape(), DType::float32, false});
  GradientBuckets buckets(s.communicator(), std::move(slots), s.options().bucket_bytes, s.options().bucket_bytes,
                          replica_weight(s.num_replicas_in_sync()));
  for (std::size_t i = grads.size(); i-- > 0;) buckets.ready(i, grads[i]);
  std::vector<Tensor> reduced = buckets.finish();
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined()) grads[i] = reduced[i];
}

std::vector<Tensor> backward_and_reduce(GradientTape& tape, const Tensor& target, const std::vector<Variable*>& vars) {
  Strategy& s = get_strategy();
  if (!multi_replica()) return tape.gradient(target, vars);
  if (!s.options().overlap_backward) {
    std::vector<Tensor> grads = tape.gradient(target, vars);
    reduce_gradients(grads);
    return grads;
  }
  std::vector<GradientBuckets::Slot> slots;
  for (const Variable* v : vars) slots.push_back({v->shape(), v->dtype(), is_floating(v->dtype())});
  // PyTorch DDP's caps: the first bucket (the last layers' gradients, final first) small, so
  // that communication starts early; the others bucket_bytes.
  constexpr std::size_t kFirstBucketBytes = std::size_t{1} << 20;
  GradientBuckets buckets(s.communicator(), std::move(slots), std::min(kFirstBucketBytes, s.options().bucket_bytes),
                          s.options().bucket_bytes, replica_weight(s.num_replicas_in_sync()));
  keel::detail::GradientObserver observer{[&](std::size_t i, const Tensor& g) { buckets.ready(i, g); },
                                          [&] { buckets.progress(); }};
  std::vector<Tensor> grads;
  {
    keel::detail::GradientObserverScope watch(&observer);
    grads = tape.gradient(target, vars);
  }
  std::vector<Tensor> reduced = buckets.finish();
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined()) grads[i] = reduced[i];
  return grads;
}

Tensor same_on_every_replica(const Tensor& t) {
  Strategy& s = get_strategy();
  if (!multi_replica()) return t;
  check_same_everywhere(s.communicator(), t, "fit (the shuffled order)");
  return broadcast_tensor(s.communicator(), t, 0);
}

void broadcast_weights(const std::vector<Variable*>& weights) {
  Strategy& s = get_strategy();
  if (!multi_replica()) return;
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
  if (!multi_replica()) return logs;
  return reduce_logs_over(s, logs, rows);
}

// A ParameterServerStrategy's communicator is its workers' (parameter_server.cpp).
std::map<std::string, double> ps_reduce_logs(const std::map<std::string, double>& logs, double rows) {
  return reduce_logs_over(get_strategy(), logs, rows);
}

}  // namespace keel::distribute::detail
