// Strategy and its collectives on tensors, the scopes, MirroredStrategy and
// MultiWorkerMirroredStrategy. The transports are in communicator.hpp / mpi_communicator.cpp.
#include "keel/distribute/strategy.hpp"

#include <atomic>
#include <cmath>
#include <cstring>

#include <fmt/core.h>

#include "backend/recorder.hpp"
#include "distribute/collective_kernels.hpp"
#include "distribute/communicator.hpp"
#include "distribute/mirrored_replicas.hpp"
#include "keel/ops/creation.hpp"

namespace keel::distribute {

namespace {

std::atomic<Strategy*> current_strategy{nullptr};

class DefaultStrategy final : public Strategy {
 public:
  DefaultStrategy() : Strategy(std::make_shared<detail::LocalCommunicator>(), MultiWorkerOptions{}) {}
};

void check_options(const MultiWorkerOptions& o, const char* who) {
  if (!(o.timeout_s > 0) || !std::isfinite(o.timeout_s))
    throw ValueError(fmt::format("{}: timeout_s must be a positive number of seconds, got {}", who, o.timeout_s));
  if (o.bucket_bytes == 0) throw ValueError(fmt::format("{}: bucket_bytes must be positive", who));
}

// NCCL over the MPI world, each process on the GPU of its place among this machine's processes:
// when asked for ("nccl"), or ("auto") when every worker can (keel has NCCL, the default device
// is a GPU, and its machine has a GPU per process), as TensorFlow picks NCCL for GPU workers.
std::shared_ptr<detail::Communicator> nccl_over(const std::shared_ptr<detail::Communicator>& host,
                                                const MultiWorkerOptions& o) {
  const detail::LocalRank local = detail::mpi_local_rank();
  const int gpus = cuda_device_count();
  if (o.communication == "auto") {
    // Every worker must take the same transport: the choice is all of theirs.
    std::int64_t able = default_device().is_cuda() && gpus >= local.size ? 1 : 0;
    host->all_reduce(&able, 1, DType::int64, detail::Combine::min);
    if (!able) return host;
  } else if (gpus < local.size) {
    throw ValueError(fmt::format("MultiWorkerMirroredStrategy: communication \"nccl\" needs a GPU per process; "
                                 "this machine runs {} worker process(es) and has {} GPU(s)",
                                 local.size, gpus));
  }
  return detail::make_nccl_communicator(host, local.rank, o.timeout_s);
}

std::shared_ptr<detail::Communicator> multi_worker_communicator(const MultiWorkerOptions& o) {
  check_options(o, "MultiWorkerMirroredStrategy");
  if (o.communication != "auto" && o.communication != "mpi" && o.communication != "nccl")
    throw ValueError(fmt::format("MultiWorkerMirroredStrategy: communication must be \"auto\", \"mpi\" or \"nccl\", "
                                 "got \"{}\"",
                                 o.communication));
  if (o.communication == "nccl" && !detail::nccl_built())
    throw ValueError("MultiWorkerMirroredStrategy: communication \"nccl\" needs keel built with CUDA, NCCL and MPI, "
                     "and a GPU per process; this build has no NCCL: use \"auto\" or \"mpi\"");
  if (detail::mpi_built()) {
    auto host = detail::make_mpi_communicator(o.timeout_s);
    if (o.communication == "mpi" || !detail::nccl_built()) return host;
    return nccl_over(host, o);
  }
  // Without MPI a process started alone is a cluster of one; one started by a launcher with
  // others would train alone without knowing it.
  if (o.communication == "mpi" || detail::launcher_world_size() > 1) return detail::make_mpi_communicator(o.timeout_s);
  return std::make_shared<detail::LocalCommunicator>();
}

}  // namespace

StrategyScope::StrategyScope(Strategy* s) : previous_(current_strategy.exchange(s)) {
  if (s && s->replica_device()) device_.emplace(*s->replica_device());
}
StrategyScope::~StrategyScope() { current_strategy.store(previous_); }

Strategy::Strategy(std::shared_ptr<detail::Communicator> comm, MultiWorkerOptions options)
    : comm_(std::move(comm)), options_(std::move(options)) {}

Strategy::~Strategy() {
  // A strategy destroyed while in scope must not stay reachable.
  Strategy* self = this;
  current_strategy.compare_exchange_strong(self, nullptr);
}

const std::shared_ptr<detail::Communicator>& Strategy::communicator() const {
  const detail::ReplicaContext* r = detail::replica_of(*this);
  return r ? r->comm : comm_;
}

int Strategy::num_replicas_in_sync() const { return comm_->size(); }
int Strategy::worker_index() const { return comm_->rank(); }
int Strategy::num_workers() const { return comm_->size(); }

Tensor Strategy::reduce(ReduceOp op, const Tensor& per_replica_value) { return all_reduce(per_replica_value, op); }

namespace {
// Outside the threads of in-process replicas (tf.distribute's cross-replica context), a value
// is the same on every replica: tf.distribute reduces it to itself, but refuses a sum over
// several replicas ("a non-DistributedValues value cannot be reduced with SUM").
bool cross_replica(const Strategy& s) {
  return s.replicas_in_process() && !detail::replica_of(s);
}
}  // namespace

Tensor Strategy::all_reduce(const Tensor& value, ReduceOp op) {
  if (!value.defined()) throw ValueError("Strategy.all_reduce: the tensor is undefined");
  if (cross_replica(*this)) {
    if (op == ReduceOp::sum)
      throw ValueError(fmt::format("Strategy.all_reduce: outside its replicas a value is the same on all {} of them; "
                                   "a sum of it is not defined (mean, max and min give the value itself)",
                                   num_replicas_in_sync()));
    return value;
  }
  const auto& comm = communicator();
  detail::check_same_everywhere(comm, value, "Strategy.all_reduce");
  return detail::all_reduce_tensor(comm, value, op);
}

Tensor Strategy::broadcast(const Tensor& value, int root) {
  if (!value.defined()) throw ValueError("Strategy.broadcast: the tensor is undefined");
  const auto& comm = communicator();
  const int replicas = cross_replica(*this) ? num_replicas_in_sync() : comm->size();
  if (root < 0 || root >= replicas)
    throw ValueError(fmt::format("Strategy.broadcast: root {} is not a replica (there are {})", root, replicas));
  if (cross_replica(*this)) return value;
  detail::check_same_everywhere(comm, value, "Strategy.broadcast");
  return detail::broadcast_tensor(comm, value, root);
}

void Strategy::barrier() {
  if (!cross_replica(*this)) communicator()->barrier();
}

MirroredStrategy::MirroredStrategy(std::vector<Device> devices)
    : Strategy(std::make_shared<detail::LocalCommunicator>(), MultiWorkerOptions{}) {
  const int gpus = cuda_device_count();
  if (devices.empty()) {
    for (int g = 0; g < gpus; ++g) devices.push_back(Device::cuda(g));
    if (devices.empty()) devices.push_back(Device::cpu());
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const Device d = devices[i];
    if (d.is_cuda() && (d.index() < 0 || d.index() >= gpus))
      throw DeviceError(fmt::format("MirroredStrategy: device {} does not exist (this machine has {} GPU(s))",
                                    d.to_string(), gpus));
    if (d.is_cuda() != devices[0].is_cuda())
      throw ValueError(fmt::format("MirroredStrategy: the devices mix the CPU and GPUs ({} and {}); give GPUs only, "
                                   "or the CPU once per replica",
                                   devices[0].to_string(), d.to_string()));
    for (std::size_t j = 0; j < i; ++j)
      if (d.is_cuda() && devices[j] == d)
        throw ValueError(fmt::format("MirroredStrategy: {} is named twice; give each GPU once", d.to_string()));
  }
  devices_ = devices;
  device_ = devices[0];
  if (devices_.size() > 1)
    replicas_ = std::make_unique<detail::ReplicaGroup>(*this, devices_, options().timeout_s);
}

MirroredStrategy::~MirroredStrategy() = default;

int MirroredStrategy::worker_index() const {
  const detail::ReplicaContext* r = detail::replica_of(*this);
  return r ? r->index : 0;
}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(MultiWorkerOptions options)
    : Strategy(multi_worker_communicator(options), options) {
  // Over NCCL the replica runs on the communicator's GPU (the scope makes it the default device).
  if (const Device d = communicator()->buffer_device(); d.is_cuda()) device_ = d;
}

Strategy& get_strategy() {
  if (Strategy* s = current_strategy.load()) return *s;
  static DefaultStrategy fallback;
  return fallback;
}

}  // namespace keel::distribute
