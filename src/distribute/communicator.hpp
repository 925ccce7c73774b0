#pragma once
// The collectives a strategy runs on: an interface over contiguous host buffers, with a
// one-process implementation here and MPI's in mpi_communicator.cpp (compiled when keel is built
// with KEEL_DISTRIBUTED). Internal to keel.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/core/device.hpp"
#include "keel/core/dtype.hpp"
#include "keel/distribute/strategy.hpp"

namespace keel::distribute::detail {

// Reductions the transport does itself (mean is sum, then a division by the strategy).
enum class Combine { sum, max, min };

// A collective started and not yet known to be complete. Its buffer must stay alive and
// untouched until wait() returns.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Moves the collective on (a transport progresses only while it is called); whether it is done.
  virtual bool test() = 0;
  // Returns once it is done; RuntimeError naming the ranks that do not answer after timeout_s.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // In place: buf holds count elements of dtype on every rank; afterwards the elementwise
  // combination over the ranks. float16/bfloat16 are combined in float32 (rounded once).
  virtual void all_reduce(void* buf, std::size_t count, DType dtype, Combine op) = 0;
  // all_reduce of `in` into `out` (count elements each, not overlapping; in is unchanged). Here:
  // a copy, then all_reduce in place; a transport may do better.
  virtual void all_reduce_into(const void* in, void* out, std::size_t count, DType dtype, Combine op);
  // all_reduce started without waiting for it (float32 / float64): the caller computes on and
  // calls test() now and then, and wait() before it reads buf. Every rank must start the same
  // collectives in the same order. Here: run at once (a transport without non-blocking ones).
  virtual std::unique_ptr<PendingCollective> start_all_reduce(void* buf, std::size_t count, DType dtype, Combine op);
  // root's bytes into every rank's buf.
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // "local", "mpi", "nccl": for messages.
  virtual std::string transport() const = 0;
  // Where the collectives on tensors (collective_kernels.cpp) put their buffers: the host, or
  // the GPU of a transport that reduces device memory (NCCL). Every collective also takes host
  // buffers.
  virtual Device buffer_device() const { return Device::cpu(); }

 protected:
  // all_reduce of float16 / bfloat16 values as float32 (widened, all-reduced, rounded once): for
  // a transport without a 16-bit float type.
  void all_reduce_widened(void* buf, std::size_t count, DType dtype, Combine op);
};

// A world of one: every collective is the identity.
class LocalCommunicator final : public Communicator {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  void all_reduce(void*, std::size_t, DType, Combine) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::string transport() const override { return "local"; }
};

// Replicas that are threads of one process (thread_communicator.cpp): rank r's communicator for
// the thread that runs replica r, over shared memory. A collective that waits longer than
// timeout_s throws RuntimeError naming the replicas that did not arrive; abort_thread_world makes
// every waiting and later collective throw RuntimeError(why) (a replica failed), until
// reset_thread_world, called once no replica is inside a collective.
class ThreadGroup;
struct ThreadWorld {
  std::shared_ptr<ThreadGroup> group;
  std::vector<std::shared_ptr<Communicator>> ranks;
};
ThreadWorld make_thread_world(int size, double timeout_s);
void abort_thread_world(ThreadGroup& group, const std::string& why);
void reset_thread_world(ThreadGroup& group);

// Point-to-point messages between the processes of a job (the parameter-server mode): sends
// never block (they complete while the mailbox is polled), receives wait up to a deadline.
struct Message {
  int source = -1, tag = -1;
  std::vector<char> bytes;
};

class Mailbox {
 public:
  virtual ~Mailbox() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // Queues bytes for dest and returns; delivery goes on while receive / flush poll.
  virtual void post(int dest, int tag, std::vector<char> bytes) = 0;
  // The next message from source (-1: any) with tag (-1: any), or nothing after timeout_s.
  virtual std::optional<Message> receive(int source, int tag, double timeout_s) = 0;
  // Waits until every posted message is delivered; RuntimeError naming the destination after
  // timeout_s.
  virtual void flush(double timeout_s) = 0;
};

// Whether keel was built with MPI.
bool mpi_built();
// The MPI world (MPI initialised on first use); throws where keel was built without MPI.
std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s);
// The first `members` ranks of the MPI world as one communicator (collective over the whole
// world: every rank calls it); null on the other ranks.
std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s, int members);
// The processes of the MPI world (MPI initialised on first use; 1 for a program started alone).
int mpi_world_size();
int mpi_world_rank();
// A mailbox over the MPI world.
std::shared_ptr<Mailbox> make_mpi_mailbox();
// The number of processes a launcher (mpirun, srun) says this job has, or 1 when none does.
int launcher_world_size();
// This process's place among the MPI world's processes on its machine, and how many there are.
struct LocalRank {
  int rank = 0, size = 1;
};
LocalRank mpi_local_rank();

// Whether keel was built with NCCL (and so with CUDA and MPI).
bool nccl_built();
// The version of the libnccl keel opens ("2.28.9"; opening it on the first call), or "" where keel
// has no NCCL. DeviceError when the library cannot be opened or is older than 2.14.
std::string nccl_version();
// A communicator that reduces float buffers in the memory of GPU `device` with NCCL, and passes
// host buffers and barriers to `host` (MPI), which also hands NCCL's id from rank 0 to the
// others. Collective over host's ranks. ValueError where keel has no NCCL.
std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host, int device,
                                                     double timeout_s);

}  // namespace keel::distribute::detail
