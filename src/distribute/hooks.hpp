#pragma once
// What fit / evaluate, the train step, the callbacks and Model::save ask of the strategy in
// scope (src/models/, src/callbacks/). Internal to keel. With one replica every hook is a no-op.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "keel/autograd/variable.hpp"
#include "keel/core/tensor.hpp"

namespace keel {
class GradientTape;
}

namespace keel::optimizers {
class Optimizer;
}

namespace keel::distribute::detail {

// Whether the strategy in scope has more than one replica (fit then runs data-parallel).
bool multi_replica();
// Whether this process may write files: the chief, or any process of a one-replica strategy.
bool is_chief();

// Part `index` [begin, end) of n rows split into `parts` as evenly as it goes, the first
// n % parts parts one row larger.
std::pair<std::int64_t, std::int64_t> even_split(std::int64_t n, std::int64_t parts, std::int64_t index);
// The rows [begin, end) of a global batch of n rows that this replica takes: the batch split as
// evenly as it goes, the first n % N replicas taking one row more (tf.distribute's rebatching).
std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t n);

// The weight of this replica's gradients in the steps run while it lives: local_rows /
// global_rows, so that the sum over replicas is the gradient of the mean loss over the global
// batch (1 / N when no scope is active, e.g. train_on_batch with a batch per worker).
class StepWeightScope {
 public:
  StepWeightScope(double local_rows, double global_rows);
  ~StepWeightScope();
  StepWeightScope(const StepWeightScope&) = delete;
  StepWeightScope& operator=(const StepWeightScope&) = delete;

 private:
  double previous_;
};

// The train step's hook (before optimizer.apply): each gradient becomes sum over replicas of
// weight_r * gradient_r, all-reduced in buckets of at most the strategy's bucket_bytes (one
// per dtype run). Recorded as kernels, so a traced step replays it. No-op with one replica.
void reduce_gradients(std::vector<Tensor>& grads);
// The train step's backward pass and gradient all-reduce: tape.gradient(target, vars), then
// under several replicas the gradients reduced as reduce_gradients does. With the strategy's
// overlap_backward (the default), each bucket's all-reduce starts as soon as the backward pass
// has finished its gradients and goes on while the rest of it runs (PyTorch DDP's overlap).
std::vector<Tensor> backward_and_reduce(GradientTape& tape, const Tensor& target, const std::vector<Variable*>& vars);
// Seconds this process has spent in collectives (all-reduce kernels, bucket fills, the waits
// for overlapped all-reduces): the communication time a step did not hide.
double collective_seconds();
// Set each time reduce_gradients' all-reduce runs (eagerly or replayed): fit checks that a
// step traced earlier (outside the strategy's scope) did not leave it out.
bool& gradients_reduced_flag();

// The chief's value of t on every replica (fit's shuffled order: every replica must shard the
// same global batches); t itself with one replica.
Tensor same_on_every_replica(const Tensor& t);

// Every weight set to the chief's values (fit, before the first step).
void broadcast_weights(const std::vector<Variable*>& weights);

// The logs of every replica combined: each value weighted by the rows the replica has seen
// (exact for the loss and the mean metrics, whose value is a mean over rows).
std::map<std::string, double> reduce_logs(const std::map<std::string, double>& logs, double rows);

// ---- the parameter-server mode (a ParameterServerStrategy in scope; parameter_server.cpp) ----

// Whether the strategy in scope is a ParameterServerStrategy, and whether this process is one
// of its servers.
bool parameter_server_mode();
bool is_parameter_server();
// This worker's share of n rows [begin, end) (split as evenly as it goes), and its number and
// the workers' for Dataset::shard.
std::pair<std::int64_t, std::int64_t> worker_rows(std::int64_t n);
std::int64_t worker_number();
std::int64_t worker_count();
// fit's start on every process of the job: checks that all hold the same trainable variables,
// then sets every weight to the chief's.
void ps_fit_begin(const std::vector<Variable*>& weights, const std::vector<Variable*>& trainable);
// On a server: applies the workers' gradients to the variables it holds with `optimizer` and
// answers each push with those variables, until every worker is done.
void ps_serve(const std::vector<Variable*>& trainable, optimizers::Optimizer& optimizer);
// A worker's train step, instead of the all-reduce and the optimizer: pushes the gradients to
// the servers and assigns the weights they answer with. A host step: a traced step replays it.
// `optimizer` is the worker's compiled one: a global_clipnorm over several servers is applied here.
void ps_push_pull(const std::vector<Tensor>& grads, const std::vector<Variable*>& vars,
                  const optimizers::Optimizer& optimizer);
// fit's end on every process: a worker says it is done; then every process takes the servers'
// trainable variables and the chief's non-trainable ones.
void ps_fit_end(const std::vector<Variable*>& trainable, const std::vector<Variable*>& non_trainable);
// A worker's epoch logs combined with the other workers' (weighted by the rows each trained or
// evaluated), at the end of each of fit's epochs: every worker logs, and its callbacks see, the
// same numbers, as a coordinator aggregating the workers' metrics would report.
std::map<std::string, double> ps_reduce_logs(const std::map<std::string, double>& logs, double rows);

}  // namespace keel::distribute::detail
