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

// tf.distribute.experimental.CommunicationOptions, flattened. communication: "auto" (MPI on the
// CPU), "mpi", or "nccl" (needs keel built with CUDA and NCCL: a ValueError otherwise).
// timeout_s: the longest a collective may wait for the other workers. bucket_bytes: gradients
// are fused into buckets of at most this size for the all-reduce (PyTorch DDP's 25 MB default).
struct MultiWorkerOptions {
  std::string communication = "auto";
  double timeout_s = 300;
  std::size_t bucket_bytes = std::size_t{25} << 20;
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

  int num_replicas_in_sync() const;
  int worker_index() const;
  int num_workers() const;
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
  // The communicator (internal to keel's sources).
  const std::shared_ptr<detail::Communicator>& communicator() const { return comm_; }
  // The device this process's replica runs on, when the strategy places it (else unset).
  const std::optional<Device>& replica_device() const { return device_; }

 protected:
  Strategy(std::shared_ptr<detail::Communicator> comm, MultiWorkerOptions options);
  std::optional<Device> device_;

 private:
  std::shared_ptr<detail::Communicator> comm_;
  MultiWorkerOptions options_;
};

// tf.distribute.MirroredStrategy: one process, one replica per local device. {} = every GPU, or
// the CPU where there is none. keel runs one replica per process, so more than one device is a
// ValueError (use MultiWorkerMirroredStrategy with one process per GPU), and a GPU that does not
// exist is a DeviceError.
class MirroredStrategy : public Strategy {
 public:
  explicit MirroredStrategy(std::vector<Device> devices = {});
  const std::vector<Device>& devices() const { return devices_; }

 private:
  std::vector<Device> devices_;
};

// tf.distribute.MultiWorkerMirroredStrategy: one process per worker, started by mpirun or srun
// (a program started alone is a cluster of one). MPI is initialised once per process
// (MPI_Init_thread) and finalised at exit.
class MultiWorkerMirroredStrategy : public Strategy {
 public:
  explicit MultiWorkerMirroredStrategy(MultiWorkerOptions options = {});
};

// The strategy in scope on any thread, or the default strategy (one replica, no communication).
Strategy& get_strategy();

}  // namespace keel::distribute
