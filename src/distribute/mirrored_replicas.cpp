// A MirroredStrategy over several devices: its replicas are threads of this process, one per
// device, that run each step together (mirrored_replicas.hpp). Replica 0 is the calling thread;
// the others wait on a condition variable for the next run. Their collectives go over shared
// memory (thread_communicator.cpp), and GPU buffers over NCCL where keel has it, its id handed
// over in shared memory.
#include "distribute/mirrored_replicas.hpp"

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::distribute::detail {

namespace {

thread_local const ReplicaContext* this_replica = nullptr;

// Sets this thread's replica context for a scope.
class ReplicaScope {
 public:
  explicit ReplicaScope(const ReplicaContext* ctx) : previous_(this_replica) { this_replica = ctx; }
  ~ReplicaScope() { this_replica = previous_; }
  ReplicaScope(const ReplicaScope&) = delete;
  ReplicaScope& operator=(const ReplicaScope&) = delete;

 private:
  const ReplicaContext* previous_;
};

}  // namespace

const ReplicaContext* replica_of(const Strategy& s) {
  return this_replica && this_replica->strategy == &s ? this_replica : nullptr;
}

ReplicaGroup::ReplicaGroup(const Strategy& owner, std::vector<Device> devices, double timeout_s)
    : owner_(owner), devices_(std::move(devices)), timeout_s_(timeout_s),
      world_(make_thread_world(static_cast<int>(devices_.size()), timeout_s)), comms_(world_.ranks),
      errors_(devices_.size()) {
  for (int r = 1; r < size(); ++r) threads_.emplace_back([this, r] { worker(r); });
}

ReplicaGroup::~ReplicaGroup() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ReplicaGroup::worker(int r) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_replica(r);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      --pending_;
    }
    cv_.notify_all();
  }
}

void ReplicaGroup::run_replica(int r) {
  try {
    // GPU replicas reduce device buffers with NCCL: each joins on its own thread, all at once.
    const auto i = static_cast<std::size_t>(r);
    if (!comms_ready_ && nccl_built() && devices_[i].is_cuda())
      comms_[i] = make_nccl_communicator(world_.ranks[i], devices_[i].index(), timeout_s_);
    const ReplicaContext ctx{&owner_, r, comms_[i]};
    const ReplicaScope in_replica(&ctx);
    const DeviceScope on_device(devices_[i]);
    (*task_)(r);
  } catch (...) {
    bool first = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      errors_[static_cast<std::size_t>(r)] = std::current_exception();
      if (first_failed_ < 0) {
        first_failed_ = r;
        first = true;
      }
    }
    // The other replicas may wait for this one in a collective: they stop there.
    if (first) abort_thread_world(*world_.group, fmt::format("replica {} failed", r));
  }
}

void ReplicaGroup::run(const std::function<void(int)>& fn) {
  const std::lock_guard<std::mutex> one_run(run_mutex_);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    pending_ = size() - 1;
    first_failed_ = -1;
    for (auto& e : errors_) e = nullptr;
    ++generation_;
  }
  cv_.notify_all();
  run_replica(0);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
  if (first_failed_ < 0) {
    comms_ready_ = true;
    return;
  }
  // Every replica has left its collectives: the group starts afresh at the next run (an NCCL
  // communicator that a failure left midway is made again).
  reset_thread_world(*world_.group);
  comms_ = world_.ranks;
  comms_ready_ = false;
  std::rethrow_exception(errors_[static_cast<std::size_t>(first_failed_)]);
}

ReplicaGroup* in_process_replicas() {
  Strategy& s = get_strategy();
  if (!s.replicas_in_process() || replica_of(s)) return nullptr;
  return &static_cast<MirroredStrategy&>(s).replicas();
}

}  // namespace keel::distribute::detail
