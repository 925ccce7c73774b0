#pragma once
// Data-parallel training strategies (tf.distribute).
//
//   distribute::MultiWorkerMirroredStrategy strategy;        // one process per worker (mpirun)
//   auto scope = strategy.scope();                           // fit() below runs data-parallel
//   model.compile(...);
//   model.fit(x, y, {.batch_size = 64});                     // 64 = the GLOBAL batch, as in TF
//
// Under a strategy with more than one replica, fit and evaluate split every global batch into
// one shard per replica, all-reduce the gradients (the mean over the global batch, each
// replica's gradient weighted by its shard's share of rows) before one optimizer step on every
// replica, broadcast the initial weights from the chief (worker 0) and reduce the logs. Only the
// chief writes files (ModelCheckpoint, BackupAndRestore, TensorBoard, CSVLogger, Model::save).
//
// ParameterServerStrategy trains asynchronously instead (see below).
//
// The collectives run over MPI (keel built with KEEL_DISTRIBUTED); no MPI header is included
// here. A collective that does not complete within the strategy's timeout (a worker died) throws
// RuntimeError naming the ranks that did not answer, instead of hanging.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/core/device.hpp"
#include "keel/core/tensor.hpp"

namespace keel::distribute {

// tf.distribute.ReduceOp (SUM, MEAN) and the max / min of MPI: mean = sum / num_replicas.
enum class ReduceOp { sum, mean, max, min };

// tf.distribute.experimental.CommunicationOptions, flattened. communication: "auto" (NCCL when
// every worker can use it: keel built with NCCL, the default device a GPU and a GPU per process
// on each machine; else MPI), "mpi", or "nccl" (needs keel built with CUDA, NCCL and MPI and a
// GPU per process: a ValueError otherwise). Over NCCL each process's replica runs on the GPU of
// its place among its machine's processes, and the gradients are reduced in GPU memory.
// timeout_s: the longest a collective may wait for the other workers. bucket_bytes: gradients
// are fused into buckets of at most this size for the all-reduce (PyTorch DDP's 25 MB default).
struct MultiWorkerOptions {
  std::string communication = "auto";
  double timeout_s = 300;
  std::size_t bucket_bytes = std::size_t{25} << 20;
  // Start each bucket's all-reduce while the backward pass still runs (as PyTorch DDP does);
  // false: one all-reduce pass after it (the measurement baseline of bench_distributed).
  bool overlap_backward = true;
};

namespace detail {
class Communicator;  // src/distribute/communicator.hpp
}

class Strategy;

// What Strategy::scope() returns: while it lives, get_strategy() is that strategy (scopes nest;
// the previous one comes back when it ends), and a strategy placed on a device (MirroredStrategy
// on a GPU) makes that device the default on this thread.
class StrategyScope {
 public:
  explicit StrategyScope(Strategy* s);
  ~StrategyScope();
  StrategyScope(const StrategyScope&) = delete;
  StrategyScope& operator=(const StrategyScope&) = delete;

 private:
  Strategy* previous_;
  std::optional<DeviceScope> device_;
};

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // Virtual for ParameterServerStrategy, whose workers step asynchronously (one replica in
  // sync) and whose servers are no workers (worker_index() = -1).
  virtual int num_replicas_in_sync() const;
  virtual int worker_index() const;
  virtual int num_workers() const;
  bool is_chief() const { return worker_index() == 0; }  // chief = worker 0
  [[nodiscard]] StrategyScope scope() { return StrategyScope(this); }

  // The value reduced across all replicas, returned on every worker (tf's strategy.reduce).
  Tensor reduce(ReduceOp op, const Tensor& per_replica_value);
  // The same in a replica's context (tf's ReplicaContext.all_reduce): any dtype keel has; a
  // mean of an integer tensor is the integer sum divided (truncated) by the replicas.
  Tensor all_reduce(const Tensor& value, ReduceOp op = ReduceOp::sum);
  // root's value on every worker (same shape and dtype everywhere: checked).
  Tensor broadcast(const Tensor& value, int root = 0);
  void barrier();

  // The options the collectives run with (timeout, bucket size).
  const MultiWorkerOptions& options() const { return options_; }
  // The communicator (internal to keel's sources): on a thread that runs one of a
  // MirroredStrategy's replicas, that replica's.
  const std::shared_ptr<detail::Communicator>& communicator() const;
  // Whether the replicas are threads of this process (a MirroredStrategy over several devices):
  // fit runs each step on all of them; elsewhere (evaluate, predict, calls on the program's own
  // thread) the model runs as one replica, and all_reduce / reduce / broadcast / barrier treat
  // their argument as the same value on every replica (tf.distribute's cross-replica context).
  virtual bool replicas_in_process() const { return false; }
  // The device this process's replica runs on, when the strategy places it (else unset).
  const std::optional<Device>& replica_device() const { return device_; }

 protected:
  Strategy(std::shared_ptr<detail::Communicator> comm, MultiWorkerOptions options);
  std::optional<Device> device_;

 private:
  std::shared_ptr<detail::Communicator> comm_;
  MultiWorkerOptions options_;
};

namespace detail {
class ReplicaGroup;  // src/distribute/mirrored_replicas.cpp
}

// tf.distribute.MirroredStrategy: one process, one replica per local device. {} = every GPU, or
// the CPU where there is none. Several devices: distinct GPUs, or the CPU named k times for k
// replicas on the CPU (as TensorFlow's logical CPU devices). A GPU that does not exist is a
// DeviceError; a list mixing the CPU and GPUs, or naming a GPU twice, a ValueError.
//
// Over several devices each replica is a thread of this process with a copy of the model on its
// device (fit rebuilds the model with clone_model for the other replicas: a Sequential or
// functional model of registered layers). Every step of fit copies the weights of the model fit
// was called on (replica 0's) to the others, splits the global batch between the replicas, each
// computes its gradients, and the gradients are all-reduced (NCCL on GPU buffers where keel has
// it, else through host memory) before replica 0's optimizer applies them (PyTorch's
// DataParallel: callbacks and learning-rate changes act on that one model and optimizer). The
// logs are reduced over the replicas. evaluate and predict run on replica 0 alone.
class MirroredStrategy : public Strategy {
 public:
  explicit MirroredStrategy(std::vector<Device> devices = {});
  ~MirroredStrategy() override;
  const std::vector<Device>& devices() const { return devices_; }
  int num_replicas_in_sync() const override { return static_cast<int>(devices_.size()); }
  int worker_index() const override;  // 0 (one worker), but the replica's index on its thread
  int num_workers() const override { return 1; }
  bool replicas_in_process() const override { return devices_.size() > 1; }
  detail::ReplicaGroup& replicas() const { return *replicas_; }  // internal to keel

 private:
  std::vector<Device> devices_;
  std::unique_ptr<detail::ReplicaGroup> replicas_;
};

// tf.distribute.MultiWorkerMirroredStrategy: one process per worker, started by mpirun or srun
// (a program started alone is a cluster of one). MPI is initialised once per process
// (MPI_Init_thread) and finalised at exit.
class MultiWorkerMirroredStrategy : public Strategy {
 public:
  explicit MultiWorkerMirroredStrategy(MultiWorkerOptions options = {});
};

// tf.distribute.experimental.ParameterServerStrategy's cluster, flattened. num_ps: how many of
// the job's processes (the last num_ps ranks) hold the variables. max_staleness: the most steps
// a worker may run ahead of the slowest worker still training (stale synchronous parallel; 0
// keeps the workers in step). timeout_s: the longest any worker or server waits for another.
struct ParameterServerOptions {
  int num_ps = 1;
  int max_staleness = 4;
  double timeout_s = 300;
};

// What the last fit measured (ParameterServerStrategy::stats()). On a server: the updates it
// applied, how stale their gradients were (updates applied by others between the worker's pull
// and its push) and the largest lead of a worker over the slowest one when it was answered.
// With W workers and max_staleness s a gradient is at most (W - 1)(2 s + 1) updates stale.
// On a worker: its steps and the seconds it waited for the servers' answers.
struct ParameterServerStats {
  std::int64_t updates = 0;
  std::int64_t max_staleness = 0;
  double mean_staleness = 0;
  std::int64_t max_clock_lead = 0;
  std::int64_t steps = 0;
  double wait_s = 0;
};

namespace detail {
class ParameterServerState;  // src/distribute/parameter_server.cpp
}

// tf.distribute.experimental.ParameterServerStrategy: asynchronous data parallelism. Every
// process of the job (mpirun -np W+P) runs the same program; the last num_ps ranks are parameter
// servers, the others workers (worker 0 is the chief). The trainable variables are placed on
// the servers round-robin; each server runs the compiled optimizer on its variables.
//
// Under its scope fit() on a worker trains on that worker's share of the rows (batch_size is
// per worker: every step is one update), pushing each step's gradients to the servers and
// pulling the weights they answer with, without waiting for the other workers, except that a
// worker max_staleness steps ahead of the slowest waits for it. On a server fit() applies the
// gradients as they arrive until every worker is done, and returns an empty History. When fit
// ends every process holds the servers' final weights (and the chief's non-trainable ones).
// History and evaluate are each worker's own (no reduction: the workers are not in step).
class ParameterServerStrategy : public Strategy {
 public:
  explicit ParameterServerStrategy(ParameterServerOptions options = {});
  ~ParameterServerStrategy() override;

  int num_replicas_in_sync() const override { return 1; }
  int worker_index() const override;  // -1 on a parameter server
  int num_workers() const override;
  bool is_parameter_server() const;
  int num_ps() const { return ps_options_.num_ps; }
  const ParameterServerOptions& ps_options() const { return ps_options_; }
  ParameterServerStats stats() const;
  detail::ParameterServerState& state() { return *state_; }  // internal to keel

 private:
  ParameterServerStrategy(ParameterServerOptions options, std::shared_ptr<detail::ParameterServerState> state);
  ParameterServerOptions ps_options_;
  std::shared_ptr<detail::ParameterServerState> state_;
};

// The strategy in scope on any thread, or the default strategy (one replica, no communication).
Strategy& get_strategy();

}  // namespace keel::distribute
