// NCCL's collectives for keel::distribute (see cuda/nccl.hpp). Compiled with NCCL's header when
// CMake found it (KEEL_HAVE_NCCL, cmake/KeelDistributed.cmake); without it every entry point but
// built() says so.
#include "cuda/nccl.hpp"

#include <string>

#include "keel/core/error.hpp"

#if KEEL_HAVE_NCCL
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "cuda/runtime.cuh"
#endif

namespace keel::cuda::nccl {

#if !KEEL_HAVE_NCCL

namespace {
[[noreturn]] void no_nccl() {
  throw ValueError("distribute: keel was built without NCCL (configure with the CUDA toolkit's nccl.h and libnccl)");
}
}  // namespace

bool built() { return false; }
UniqueId unique_id() { no_nccl(); }
const char* version() { no_nccl(); }
std::shared_ptr<Comm> join(const UniqueId&, int, int, int, double) { no_nccl(); }
bool on_device(const void*, int) { return false; }

#else

namespace {

// The entry points keel calls, from libnccl opened on first use.
struct Api {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&ncclCommFinalize) finalize = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  std::string version;
};

const Api& api() {
  // libnccl.so.<major> is found the way a linked library would be (RUNPATH, LD_LIBRARY_PATH,
  // the loader cache); KEEL_NCCL_LIBRARY, the file CMake found, is the fallback.
  static const Api a = [] {
    const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
    void* lib = open_library("NCCL", {soname.c_str(), KEEL_NCCL_LIBRARY});
    Api r;
    const auto load = [&](auto& fn, const char* symbol) { load_symbol(fn, lib, "NCCL", soname.c_str(), symbol); };
    load(r.get_version, "ncclGetVersion");
    load(r.get_unique_id, "ncclGetUniqueId");
    load(r.init_rank_config, "ncclCommInitRankConfig");
    load(r.get_async_error, "ncclCommGetAsyncError");
    load(r.finalize, "ncclCommFinalize");
    load(r.destroy, "ncclCommDestroy");
    load(r.abort, "ncclCommAbort");
    load(r.error_string, "ncclGetErrorString");
    load(r.last_error, "ncclGetLastError");
    load(r.all_reduce, "ncclAllReduce");
    load(r.broadcast, "ncclBroadcast");
    int code = 0;
    r.get_version(&code);
    // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z from 2.9 on.
    r.version =
        std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
    if (code < 21400)  // ncclCommFinalize and non-blocking communicators: NCCL 2.14
      throw DeviceError("NCCL: " + soname + " is version " + r.version + "; keel needs 2.14 or later");
    return r;
  }();
  return a;
}

[[noreturn]] void fail(const char* what, ncclResult_t status, ncclComm_t comm) {
  std::string detail = api().error_string(status);
  if (comm) {
    const char* last = api().last_error(comm);
    if (last && *last) detail += std::string(": ") + last;
  }
  throw DeviceError(std::string("NCCL: ") + what + " failed: " + detail);
}

ncclDataType_t nccl_type(DType dt, const char* op) {
  switch (dt) {
    case DType::float32: return ncclFloat32;
    case DType::float64: return ncclFloat64;
    case DType::float16: return ncclFloat16;
    case DType::bfloat16: return ncclBfloat16;
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
    case DType::uint8:
    case DType::bool_: return ncclUint8;
  }
  throw DTypeError(std::string("NCCL ") + op + ": no NCCL type for " + std::string(name(dt)));
}

ncclRedOp_t nccl_op(Op op, DType dt) {
  // bools are bytes of 0 and 1: their sum (any) is their max, as the MPI transport has it.
  if (op == Op::sum) return dt == DType::bool_ ? ncclMax : ncclSum;
  return op == Op::max ? ncclMax : ncclMin;
}

using Clock = std::chrono::steady_clock;

// What a call waits for, worded only when a message needs it (not on every collective).
struct Collective {
  enum Kind { join, all_reduce, broadcast } kind;
  std::size_t amount;  // ranks to join, elements reduced or bytes broadcast
  DType dtype = DType::uint8;
  int root = 0;

  std::string text() const {
    switch (kind) {
      case join: return "joining the NCCL communicator of " + std::to_string(amount) + " ranks";
      case all_reduce: return "all_reduce of " + std::to_string(amount) + " " + std::string(name(dtype)) + " elements";
      case broadcast: return "broadcast of " + std::to_string(amount) + " bytes from rank " + std::to_string(root);
    }
    return "collective";
  }
};

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

class NcclComm;

class NcclPending final : public Pending {
 public:
  NcclPending(std::shared_ptr<NcclComm> comm, cudaEvent_t event, Collective what)
      : comm_(std::move(comm)), event_(event), what_(what) {}
  ~NcclPending() override;
  bool done() override;
  void wait() override;

 private:
  std::shared_ptr<NcclComm> comm_;
  cudaEvent_t event_;
  Collective what_;
  bool done_ = false;
};

class NcclComm final : public Comm, public std::enable_shared_from_this<NcclComm> {
 public:
  NcclComm(int ranks, int rank, int device, double timeout_s)
      : ranks_(ranks), rank_(rank), device_(device), timeout_s_(timeout_s) {}

  ~NcclComm() override {
    if (!comm_) return;
    // Finalize flushes what is in flight; a communicator that does not settle is aborted.
    const Api& a = api();
    if (!aborted_ && a.finalize(comm_) != ncclSuccess) aborted_ = true;
    if (!aborted_) {
      const Clock::time_point deadline = after(timeout_s_);
      ncclResult_t state = ncclInProgress;
      while (a.get_async_error(comm_, &state) == ncclSuccess && state == ncclInProgress && Clock::now() < deadline)
        std::this_thread::yield();
      aborted_ = state != ncclSuccess;
    }
    if (aborted_)
      a.abort(comm_);
    else
      a.destroy(comm_);
  }

  void init(const UniqueId& id) {
    use_device(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclUniqueId nid;
    static_assert(sizeof(nid.internal) == std::tuple_size_v<UniqueId>);
    std::memcpy(nid.internal, id.data(), id.size());
    const ncclResult_t r = api().init_rank_config(&comm_, ranks_, nid, rank_, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail("ncclCommInitRankConfig", r, comm_);
    settle({Collective::join, static_cast<std::size_t>(ranks_)});
  }

  int device() const override { return device_; }

  std::unique_ptr<Pending> all_reduce(const void* in, void* out, std::size_t count, DType dtype, Op op) override {
    const ncclDataType_t type = nccl_type(dtype, "all_reduce");
    return enqueue({Collective::all_reduce, count, dtype}, [&](cudaStream_t s) {
      return api().all_reduce(in, out, count, type, nccl_op(op, dtype), comm_, s);
    });
  }

  std::unique_ptr<Pending> broadcast(void* buf, std::size_t bytes, int root) override {
    return enqueue({Collective::broadcast, bytes, DType::uint8, root}, [&](cudaStream_t s) {
      return api().broadcast(buf, buf, bytes, ncclUint8, root, comm_, s);
    });
  }

  // Waits until NCCL's state for this communicator is no longer "in progress" (the non-blocking
  // kind returns before connecting to its peers); RuntimeError after timeout_s.
  void settle(const Collective& what) {
    const Clock::time_point deadline = after(timeout_s_);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = api().get_async_error(comm_, &state);
      if (r != ncclSuccess) fail("ncclCommGetAsyncError", r, comm_);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        aborted_ = true;
        fail(what.text().c_str(), state, comm_);
      }
      if (Clock::now() >= deadline) timed_out(what);
      std::this_thread::yield();
    }
  }

  // The event's work is done, or RuntimeError after timeout_s.
  void wait_for(cudaEvent_t event, const Collective& what) {
    const Clock::time_point deadline = after(timeout_s_);
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaEventQuery(event);
      if (q == cudaSuccess) return;
      if (!comm_) throw RuntimeError(aborted_message());  // aborted: its work will not finish
      if (q != cudaErrorNotReady) check(q, "cudaEventQuery", device_);
      ncclResult_t state = ncclSuccess;
      if (api().get_async_error(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
        aborted_ = true;
        fail(what.text().c_str(), state, comm_);
      }
      if (Clock::now() >= deadline) timed_out(what);
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  template <class Call>
  std::unique_ptr<Pending> enqueue(const Collective& what, Call call) {
    if (aborted_) throw RuntimeError(aborted_message());
    const std::lock_guard<std::mutex> lock(mutex_);
    use_device(device_);
    const cudaStream_t s = stream(device_);
    const ncclResult_t r = call(s);
    if (r != ncclSuccess && r != ncclInProgress) fail(what.text().c_str(), r, comm_);
    if (r == ncclInProgress) settle(what);
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate", device_);
    check(cudaEventRecord(event, s), "cudaEventRecord", device_);
    return std::make_unique<NcclPending>(shared_from_this(), event, what);
  }

  [[noreturn]] void timed_out(const Collective& what) {
    // Abort, so that the kernels waiting for the missing rank end and later calls fail at once.
    aborted_ = true;
    api().abort(comm_);
    comm_ = nullptr;
    std::ostringstream seconds;
    seconds << timeout_s_;
    throw RuntimeError("distribute: rank " + std::to_string(rank_) + ": NCCL " + what.text() +
                       " did not complete within timeout_s = " + seconds.str() + " s; one of the " +
                       std::to_string(ranks_) + " ranks died or stopped answering (NCCL does not say which)");
  }

  std::string aborted_message() const {
    return "distribute: rank " + std::to_string(rank_) +
           ": the NCCL communicator was aborted by an earlier failure or timeout";
  }

  int ranks_, rank_, device_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::mutex mutex_;
};

NcclPending::~NcclPending() {
  if (!done_) {
    try {
      wait();
    } catch (...) {
      // A destructor must not throw: the communicator is aborted and says so on its next call.
    }
  }
  cudaEventDestroy(event_);
}

bool NcclPending::done() {
  if (done_) return true;
  const cudaError_t q = cudaEventQuery(event_);
  if (q == cudaErrorNotReady) return false;
  check(q, "cudaEventQuery", comm_->device());
  done_ = true;
  return true;
}

void NcclPending::wait() {
  if (done_) return;
  comm_->wait_for(event_, what_);
  done_ = true;
}

}  // namespace

bool built() { return true; }

UniqueId unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = api().get_unique_id(&id);
  if (r != ncclSuccess) fail("ncclGetUniqueId", r, nullptr);
  UniqueId out{};
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

const char* version() { return api().version.c_str(); }

std::shared_ptr<Comm> join(const UniqueId& id, int ranks, int rank, int device, double timeout_s) {
  auto comm = std::make_shared<NcclComm>(ranks, rank, device, timeout_s);
  comm->init(id);
  return comm;
}

bool on_device(const void* p, int device) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // host memory CUDA never saw: not an error to keep
    return false;
  }
  return attr.type == cudaMemoryTypeDevice && attr.device == device;
}

#endif

}  // namespace keel::cuda::nccl
