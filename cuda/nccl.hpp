#pragma once
// NCCL's collectives on device buffers, as keel::distribute's NCCL transport uses them
// (src/distribute/nccl_communicator.cpp). Plain C++17 with no CUDA or NCCL header: the calls are
// in cuda/nccl.cu, against libnccl opened on first use (dlopen), as cuBLAS is: the library is
// 200 MB, and linking it would load it into every process of a CUDA build.
//
// Every call runs on keel's stream of the communicator's device, so it is ordered after the
// kernels that wrote its buffers and before those that read them. The communicator is NCCL's
// non-blocking kind: no call waits for the other ranks without a deadline (a rank that died
// makes the others throw RuntimeError after timeout_s instead of hanging).
#include <array>
#include <cstddef>
#include <memory>

#include "keel/core/dtype.hpp"

namespace keel::cuda::nccl {

// ncclUniqueId's bytes: made by one rank, given to every other (over MPI) before they join.
using UniqueId = std::array<char, 128>;

// Whether keel was built with NCCL's header (the library itself is opened on first use).
bool built();
// A new id (ncclGetUniqueId). DeviceError when libnccl cannot be opened.
UniqueId unique_id();
// "2.28.9": the version of the libnccl opened. DeviceError when it cannot be opened.
const char* version();

enum class Op { sum, max, min };

// A collective enqueued on the device's stream; done() once the device has run it.
class Pending {
 public:
  virtual ~Pending() = default;
  virtual bool done() = 0;
  // Returns once done; RuntimeError after the communicator's timeout (the communicator is then
  // aborted: every later call throws).
  virtual void wait() = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int device() const = 0;
  // out = the elementwise combination of every rank's in (count elements of dtype; in == out
  // in place). bool is reduced as bytes: sum and max are "any", min "all". DTypeError for a
  // dtype NCCL has no type for. Returns with the collective enqueued, not done.
  virtual std::unique_ptr<Pending> all_reduce(const void* in, void* out, std::size_t count, DType dtype, Op op) = 0;
  // root's bytes into every rank's buf.
  virtual std::unique_ptr<Pending> broadcast(void* buf, std::size_t bytes, int root) = 0;
};

// Joins the communicator of `ranks` processes whose rank 0 made `id`, on `device` (one GPU per
// rank). RuntimeError naming this rank when the others do not join within timeout_s,
// DeviceError when libnccl or the device fail.
std::shared_ptr<Comm> join(const UniqueId& id, int ranks, int rank, int device, double timeout_s);

// Whether p points into memory of `device` (cudaPointerGetAttributes): the NCCL transport
// passes host buffers to MPI.
bool on_device(const void* p, int device);

}  // namespace keel::cuda::nccl
