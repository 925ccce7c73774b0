#pragma once
// A MirroredStrategy's replicas over several devices, as threads of this process
// (mirrored_replicas.cpp). Internal to keel.
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "distribute/communicator.hpp"
#include "keel/distribute/strategy.hpp"

namespace keel::distribute::detail {

// The replica this thread runs, while it runs one: its strategy, index and communicator.
struct ReplicaContext {
  const Strategy* strategy = nullptr;
  int index = 0;
  std::shared_ptr<Communicator> comm;
};
// This thread's replica context when it runs one of `s`'s replicas, else null.
const ReplicaContext* replica_of(const Strategy& s);

class ReplicaGroup {
 public:
  ReplicaGroup(const Strategy& owner, std::vector<Device> devices, double timeout_s);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }
  // fn(r) for every replica r at once: r = 0 on the calling thread, the others on threads of
  // their own, each in its ReplicaContext and a DeviceScope of its device. Returns when every
  // replica is done. The first replica to throw makes the others' collectives throw (the group
  // is aborted), and its exception is rethrown here; the group is then ready for the next run.
  // One run at a time (a second caller waits).
  void run(const std::function<void(int)>& fn);

 private:
  void worker(int r);
  void run_replica(int r);  // the task, in r's context, its error recorded

  const Strategy& owner_;
  std::vector<Device> devices_;
  double timeout_s_;
  ThreadWorld world_;
  std::vector<std::shared_ptr<Communicator>> comms_;  // per replica: NCCL over world_ where it applies
  bool comms_ready_ = false;

  std::mutex run_mutex_;  // one run at a time
  std::mutex mutex_;
  std::condition_variable cv_;
  const std::function<void(int)>* task_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  int first_failed_ = -1;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

// The group of the MirroredStrategy in scope when its replicas are threads of this process and
// this thread runs none of them (fit's own thread), else null.
ReplicaGroup* in_process_replicas();

}  // namespace keel::distribute::detail
