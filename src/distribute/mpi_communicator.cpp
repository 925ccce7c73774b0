// The MPI transport of keel::distribute. Compiled only when keel is built with MPI (KEEL_HAVE_MPI,
// cmake/KeelDistributed.cmake); without it, make_mpi_communicator says so.
//
// Every collective is non-blocking (MPI_Iallreduce / MPI_Ibcast / MPI_Ibarrier) and polled with
// MPI_Test against a deadline, on a duplicate of MPI_COMM_WORLD whose error handler is
// MPI_ERRORS_RETURN: a dead or stuck worker makes the others throw RuntimeError after timeout_s
// instead of hanging (MPI's blocking collectives would wait forever). While it waits, each rank
// answers "where are you?" probes on a second duplicate, so that a rank that times out can name
// the ranks that did not answer.
#include "distribute/communicator.hpp"

#include <cstdlib>
#include <string>

#include <fmt/core.h>

#include "keel/core/error.hpp"

#if KEEL_HAVE_MPI
// MPI's C interface only: without these, Open MPI's and MPICH's mpi.h pull in their deprecated
// C++ bindings, which need a library keel does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace keel::distribute::detail {

int launcher_world_size() {
  // Open MPI's mpirun, MPICH / Intel MPI (PMI), and Slurm's srun.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 1) return n;
    }
  }
  return 1;
}

#if !KEEL_HAVE_MPI

bool mpi_built() { return false; }

std::shared_ptr<Communicator> make_mpi_communicator(double) {
  throw ValueError("MultiWorkerMirroredStrategy: keel was built without MPI (configure with -DKEEL_DISTRIBUTED=ON and "
                   "an MPI installation such as libopenmpi-dev)");
}

#else

bool mpi_built() { return true; }

namespace {

constexpr int kProbeTag = 7001, kAnswerTag = 7002;

// MPI_Init_thread once per process; MPI_Finalize at exit (unless the program initialised MPI
// itself, then it finalises it).
struct MpiRuntime {
  bool owned = false;
  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // keel calls MPI from one thread at a time (the one running fit).
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw RuntimeError("MultiWorkerMirroredStrategy: MPI_Init_thread failed");
      owned = true;
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
  }
};

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    case DType::uint8: return MPI_UINT8_T;
    case DType::bool_: return MPI_C_BOOL;
    case DType::float16:
    case DType::bfloat16: break;  // reduced as float32
  }
  return MPI_FLOAT;
}

MPI_Op mpi_op(Combine op, DType dt) {
  if (dt == DType::bool_) return op == Combine::min ? MPI_LAND : MPI_LOR;  // sum / max of bools: any
  switch (op) {
    case Combine::sum: return MPI_SUM;
    case Combine::max: return MPI_MAX;
    case Combine::min: return MPI_MIN;
  }
  return MPI_SUM;
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(double timeout_s) : timeout_s_(timeout_s) {
    static MpiRuntime runtime;  // thread-safe, once
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &probe_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(probe_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // A communicator with a collective left pending (a timeout) is not freed: freeing it would
    // wait for the dead peer.
    if (!finalized && !broken_) {
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&probe_);
    }
  }

  int size() const override { return size_; }
  int rank() const override { return rank_; }
  std::string transport() const override { return "mpi"; }

  void all_reduce(void* buf, std::size_t count, DType dtype, Combine op) override {
    if (count == 0 || size_ == 1) return;
    if (is_half(dtype)) {  // no 16-bit float MPI type: combine in float32, round once
      std::vector<float> wide(count);
      auto* h = static_cast<std::uint16_t*>(buf);
      for (std::size_t i = 0; i < count; ++i)
        wide[i] = dtype == DType::float16 ? half_to_float(float16_t{h[i]}) : bfloat16_to_float(bfloat16_t{h[i]});
      all_reduce(wide.data(), count, DType::float32, op);
      for (std::size_t i = 0; i < count; ++i)
        h[i] = dtype == DType::float16 ? float_to_half(wide[i]).bits : float_to_bfloat16(wide[i]).bits;
      return;
    }
    // MPI counts are int: large buffers go in chunks.
    constexpr std::size_t kChunk = std::size_t{1} << 30;
    auto* bytes = static_cast<char*>(buf);
    const std::size_t item = itemsize(dtype);
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      MPI_Request req;
      start(MPI_Iallreduce(MPI_IN_PLACE, bytes + done * item, static_cast<int>(n), mpi_type(dtype),
                           mpi_op(op, dtype), comm_, &req),
            "all_reduce");
      wait(req, fmt::format("all_reduce of {} {} elements", count, name(dtype)));
    }
  }

  void broadcast(void* buf, std::size_t bytes, int root) override {
    if (root < 0 || root >= size_)
      throw ValueError(fmt::format("broadcast: root {} is not a worker (there are {})", root, size_));
    if (bytes == 0 || size_ == 1) return;
    constexpr std::size_t kChunk = std::size_t{1} << 30;
    for (std::size_t done = 0; done < bytes; done += kChunk) {
      const std::size_t n = std::min(kChunk, bytes - done);
      MPI_Request req;
      start(MPI_Ibcast(static_cast<char*>(buf) + done, static_cast<int>(n), MPI_BYTE, root, comm_, &req), "broadcast");
      wait(req, fmt::format("broadcast of {} bytes from rank {}", bytes, root));
    }
  }

  void barrier() override {
    if (size_ == 1) return;
    MPI_Request req;
    start(MPI_Ibarrier(comm_, &req), "barrier");
    wait(req, "barrier");
  }

 private:
  void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw RuntimeError(fmt::format("distribute: {} failed: {}", what, mpi_error(rc)));
  }
  void start(int rc, const char* what) {
    if (broken_)
      throw RuntimeError(fmt::format("distribute: rank {}: {} after an earlier collective failed ({})", rank_, what,
                                     broken_reason_));
    if (rc != MPI_SUCCESS) {
      broken_ = true;
      broken_reason_ = mpi_error(rc);
      throw RuntimeError(fmt::format("distribute: rank {}: {} failed: {}", rank_, what, broken_reason_));
    }
    ++sequence_;
  }

  // Answers the probes other ranks sent while they wait (with this rank's collective number).
  void answer_probes() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kProbeTag, probe_, &flag, &st) != MPI_SUCCESS || !flag) return;
      long long question = 0;
      MPI_Recv(&question, 1, MPI_LONG_LONG, st.MPI_SOURCE, kProbeTag, probe_, MPI_STATUS_IGNORE);
      answer_value_ = sequence_;  // a member: the send may read it after this returns
      MPI_Request r;
      if (MPI_Isend(&answer_value_, 1, MPI_LONG_LONG, st.MPI_SOURCE, kAnswerTag, probe_, &r) == MPI_SUCCESS)
        MPI_Request_free(&r);
    }
  }

  // Polls req until it completes or the deadline passes; then names the ranks that do not
  // answer a probe within a short grace period.
  void wait(MPI_Request& req, const std::string& what) {
    using clock = std::chrono::steady_clock;
    const auto begin = clock::now();
    const auto deadline = begin + std::chrono::duration<double>(timeout_s_);
    for (long spins = 0;; ++spins) {
      int done = 0;
      const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        broken_ = true;
        broken_reason_ = mpi_error(rc);
        throw RuntimeError(fmt::format("distribute: rank {}: {} failed: {}", rank_, what, broken_reason_));
      }
      if (done) return;
      if ((spins & 63) == 0) {
        answer_probes();
        if (clock::now() > deadline) break;
      }
      // Spin for the first milliseconds (latency), then yield the core (other ranks may share it).
      if (clock::now() - begin > std::chrono::milliseconds(2)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    broken_ = true;
    const std::string missing = unanswered_ranks();
    broken_reason_ = fmt::format("{} timed out", what);
    throw RuntimeError(fmt::format(
        "distribute: rank {}: {} did not complete within timeout_s = {} s; rank(s) {} did not answer (dead or stuck)",
        rank_, what, timeout_s_, missing.empty() ? std::string("?") : missing));
  }

  std::string unanswered_ranks() {
    using clock = std::chrono::steady_clock;
    probe_value_ = sequence_;
    std::vector<long long> answers(static_cast<std::size_t>(size_), -1);
    std::vector<MPI_Request> recvs(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    std::vector<MPI_Request> sends(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Isend(&probe_value_, 1, MPI_LONG_LONG, r, kProbeTag, probe_, &sends[static_cast<std::size_t>(r)]);
      MPI_Irecv(&answers[static_cast<std::size_t>(r)], 1, MPI_LONG_LONG, r, kAnswerTag, probe_,
                &recvs[static_cast<std::size_t>(r)]);
    }
    // Live ranks answer from their own wait loop (or this one) within milliseconds.
    const auto grace = clock::now() + std::chrono::duration<double>(std::min(2.0, std::max(0.5, timeout_s_ / 4)));
    std::vector<bool> answered(static_cast<std::size_t>(size_), false);
    answered[static_cast<std::size_t>(rank_)] = true;
    while (clock::now() < grace) {
      answer_probes();
      bool all = true;
      for (int r = 0; r < size_; ++r) {
        auto& q = recvs[static_cast<std::size_t>(r)];
        if (answered[static_cast<std::size_t>(r)]) continue;
        int flag = 0;
        if (q != MPI_REQUEST_NULL && MPI_Test(&q, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag)
          answered[static_cast<std::size_t>(r)] = true;
        else
          all = false;
      }
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::string out;
    for (int r = 0; r < size_; ++r) {
      auto& q = recvs[static_cast<std::size_t>(r)];
      if (!answered[static_cast<std::size_t>(r)]) {
        out += (out.empty() ? "" : ", ") + std::to_string(r);
        if (q != MPI_REQUEST_NULL) {
          MPI_Cancel(&q);
          MPI_Request_free(&q);
        }
      }
      if (sends[static_cast<std::size_t>(r)] != MPI_REQUEST_NULL) MPI_Request_free(&sends[static_cast<std::size_t>(r)]);
    }
    return out;
  }

  MPI_Comm comm_ = MPI_COMM_NULL, probe_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  long long sequence_ = 0;
  long long answer_value_ = 0, probe_value_ = 0;  // what probe answers and probes send
  bool broken_ = false;
  std::string broken_reason_;
};

}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  return std::make_shared<MpiCommunicator>(timeout_s);
}

#endif

}  // namespace keel::distribute::detail
