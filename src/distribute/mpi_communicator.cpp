// The MPI transport of keel::distribute. Compiled only when keel is built with MPI (KEEL_HAVE_MPI,
// cmake/KeelDistributed.cmake); without it, make_mpi_communicator says so.
//
// Every collective is non-blocking (MPI_Iallreduce / MPI_Ibcast / MPI_Ibarrier) and polled with
// MPI_Test against a deadline (an all-reduce of 64 KiB or more: a barrier so polled, then the
// blocking MPI_Allreduce), on a duplicate of MPI_COMM_WORLD whose error handler is
// MPI_ERRORS_RETURN: a dead or stuck worker makes the others throw RuntimeError after timeout_s
// instead of hanging (MPI's blocking collectives would wait forever). While it waits, each rank
// answers "where are you?" probes on a second duplicate, so that a rank that times out can name
// the ranks that did not answer.
#include "distribute/communicator.hpp"

#include <cstdlib>
#include <string>

#include <fmt/core.h>

#include "keel/core/config.hpp"
#include "keel/core/error.hpp"

#if KEEL_HAVE_MPI
// MPI's C interface only: without these, Open MPI's and MPICH's mpi.h pull in their deprecated
// C++ bindings, which need a library keel does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstring>
#include <list>
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

namespace {
[[noreturn]] void no_mpi() {
  throw ValueError("distribute: keel was built without MPI (configure with -DKEEL_DISTRIBUTED=ON and an MPI "
                   "installation such as libopenmpi-dev)");
}
}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator(double) { no_mpi(); }
std::shared_ptr<Communicator> make_mpi_communicator(double, int) { no_mpi(); }
int mpi_world_size() { no_mpi(); }
int mpi_world_rank() { no_mpi(); }
std::shared_ptr<Mailbox> make_mpi_mailbox() { no_mpi(); }
LocalRank mpi_local_rank() { no_mpi(); }

#else

bool mpi_built() { return true; }

namespace {

constexpr int kProbeTag = 7001, kAnswerTag = 7002;
// All-reduces of this many bytes or more run blocking, behind a barrier with the deadline.
constexpr std::size_t kBlockingBytes = std::size_t{64} << 10;

// Several workers started on one machine (mpirun -np 2 on a 2-core box) would each run a pool
// of one thread per core, and the pools would fight over the cores (a parallel region waits for
// its slowest thread). Unless the program chose a thread count, each process takes its share:
// cores / processes on this machine, at least 1 (what torchrun does with OMP_NUM_THREADS).
// The processes on this machine, found once (MPI_Comm_split_type is collective: every rank asks
// when MPI starts, or when the first strategy needs it in a program that started MPI itself).
std::optional<LocalRank> local_rank;

LocalRank find_local_rank() {
  if (local_rank) return *local_rank;
  LocalRank r;
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &r.size);
    MPI_Comm_rank(local, &r.rank);
    MPI_Comm_free(&local);
  }
  local_rank = r;
  return r;
}

void share_cores() {
  const int here = find_local_rank().size;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (here > 1 && config::num_threads() == cores) config::set_num_threads(std::max(1, cores / here));
}

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
#if defined(__GLIBC__)
      // Open MPI's collectives allocate their scratch buffers on every call; glibc serves those
      // of 128 KiB and more with fresh mmaps, so each gradient all-reduce page-faulted its
      // scratch in again (a quarter of a 2-worker CNN step). Freed large blocks now stay in
      // the heap for the next call. Only in a process whose MPI keel starts: a training worker.
      mallopt(M_MMAP_THRESHOLD, 256 << 20);
      mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
      share_cores();
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

void ensure_mpi() { static MpiRuntime runtime; }  // thread-safe, once

class MpiCommunicator final : public Communicator {
 public:
  // A communicator over `base` (the world, or a part of it split off), which it takes over.
  MpiCommunicator(double timeout_s, MPI_Comm base) : timeout_s_(timeout_s) {
    check(MPI_Comm_dup(base, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_dup(base, &probe_), "MPI_Comm_dup");
    if (base != MPI_COMM_WORLD) MPI_Comm_free(&base);
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
    if (is_half(dtype)) return all_reduce_widened(buf, count, dtype, op);  // no 16-bit float MPI type
    reduce_chunks(nullptr, buf, count, dtype, op);
  }

  // Out of place: MPI reads `in` itself. Half types go through the in-place path (float32).
  void all_reduce_into(const void* in, void* out, std::size_t count, DType dtype, Combine op) override {
    if (count == 0) return;
    if (size_ == 1 || is_half(dtype)) return Communicator::all_reduce_into(in, out, count, dtype, op);
    reduce_chunks(in, out, count, dtype, op);
  }

  // MPI_Iallreduce, moved on by MPI_Testall (Open MPI progresses a non-blocking collective only
  // inside MPI calls) and waited for against the deadline.
  class Pending final : public PendingCollective {
   public:
    Pending(MpiCommunicator& comm, std::string what) : comm_(comm), what_(std::move(what)) {}
    ~Pending() override {
      // MPI still writes the buffer until the collective is done (an exception left it behind).
      try {
        wait();
      } catch (...) {
      }
    }
    bool test() override {
      if (done_) return true;
      if (comm_.broken_) return false;  // wait() says why
      comm_.answer_probes();
      int flag = 0;
      const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        comm_.broken_ = true;
        comm_.broken_reason_ = mpi_error(rc);
        throw RuntimeError(fmt::format("distribute: rank {}: {} failed: {}", comm_.rank_, what_, comm_.broken_reason_));
      }
      done_ = flag != 0;
      return done_;
    }
    void wait() override {
      if (done_) return;
      done_ = true;  // once: a timeout leaves the communicator broken
      if (comm_.broken_)
        throw RuntimeError(fmt::format("distribute: rank {}: {} after an earlier collective failed ({})", comm_.rank_,
                                       what_, comm_.broken_reason_));
      for (MPI_Request& r : requests_)
        if (r != MPI_REQUEST_NULL) comm_.wait(r, what_);
    }
    std::vector<MPI_Request> requests_;

   private:
    MpiCommunicator& comm_;
    std::string what_;
    bool done_ = false;
  };

  std::unique_ptr<PendingCollective> start_all_reduce(void* buf, std::size_t count, DType dtype, Combine op) override {
    if (count == 0 || size_ == 1 || is_half(dtype)) return Communicator::start_all_reduce(buf, count, dtype, op);
    auto pending = std::make_unique<Pending>(*this, fmt::format("all_reduce of {} {} elements (overlapped)", count,
                                                                name(dtype)));
    constexpr std::size_t kChunk = std::size_t{1} << 30;  // MPI counts are int
    auto* bytes = static_cast<char*>(buf);
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      MPI_Request req;
      start(MPI_Iallreduce(MPI_IN_PLACE, bytes + done * itemsize(dtype), static_cast<int>(n), mpi_type(dtype),
                           mpi_op(op, dtype), comm_, &req),
            "all_reduce");
      pending->requests_.push_back(req);
    }
    return pending;
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
  // all_reduce of `in` (nullptr: in place) into `out`, in chunks (MPI counts are int). Large
  // chunks: a barrier with the deadline first (a dead or stuck worker is named there), then
  // MPI's blocking all-reduce among workers that are all in it (Open MPI's blocking algorithms
  // run large buffers 2-3x faster than its non-blocking ones).
  void reduce_chunks(const void* in, void* out, std::size_t count, DType dtype, Combine op) {
    constexpr std::size_t kChunk = std::size_t{1} << 30;
    const std::size_t item = itemsize(dtype);
    const std::string what = fmt::format("all_reduce of {} {} elements", count, name(dtype));
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      const void* src = in ? static_cast<const char*>(in) + done * item : MPI_IN_PLACE;
      char* dst = static_cast<char*>(out) + done * item;
      MPI_Request req;
      if (n * item >= kBlockingBytes) {
        start(MPI_Ibarrier(comm_, &req), "all_reduce");
        wait(req, what);
        start(MPI_Allreduce(src, dst, static_cast<int>(n), mpi_type(dtype), mpi_op(op, dtype), comm_), "all_reduce");
        continue;
      }
      start(MPI_Iallreduce(src, dst, static_cast<int>(n), mpi_type(dtype), mpi_op(op, dtype), comm_, &req),
            "all_reduce");
      wait(req, what);
    }
  }

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

// Sends are MPI_Isend requests kept with their bytes until MPI_Test says they are done.
class MpiMailbox final : public Mailbox {
 public:
  MpiMailbox() {
    ensure_mpi();
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comm_) != MPI_SUCCESS) throw RuntimeError("distribute: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiMailbox() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& s : sends_) {  // undelivered (a peer died): abandoned, not waited for
      MPI_Cancel(&s.request);
      MPI_Request_free(&s.request);
    }
    if (sends_.empty()) MPI_Comm_free(&comm_);
  }
  int size() const override { return size_; }
  int rank() const override { return rank_; }

  void post(int dest, int tag, std::vector<char> bytes) override {
    if (bytes.size() > static_cast<std::size_t>(INT_MAX))
      throw ValueError(fmt::format("distribute: a message of {} bytes to rank {} is over MPI's 2 GiB; spread the "
                                   "variables over more parameter servers (num_ps)", bytes.size(), dest));
    sends_.push_back({MPI_REQUEST_NULL, std::move(bytes), dest});
    Send& s = sends_.back();
    const int rc = MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_BYTE, dest, tag, comm_, &s.request);
    if (rc != MPI_SUCCESS) {
      sends_.pop_back();
      throw RuntimeError(fmt::format("distribute: rank {}: sending to rank {} failed: {}", rank_, dest, mpi_error(rc)));
    }
  }

  std::optional<Message> receive(int source, int tag, double timeout_s) override {
    using clock = std::chrono::steady_clock;
    const auto begin = clock::now();
    const auto deadline = begin + std::chrono::duration<double>(timeout_s);
    for (;;) {
      progress();
      int flag = 0;
      MPI_Status st;
      const int rc = MPI_Iprobe(source < 0 ? MPI_ANY_SOURCE : source, tag < 0 ? MPI_ANY_TAG : tag, comm_, &flag, &st);
      if (rc != MPI_SUCCESS)
        throw RuntimeError(fmt::format("distribute: rank {}: waiting for a message failed: {}", rank_, mpi_error(rc)));
      if (flag) {
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        Message m{st.MPI_SOURCE, st.MPI_TAG, std::vector<char>(static_cast<std::size_t>(count))};
        const int r = MPI_Recv(m.bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm_, MPI_STATUS_IGNORE);
        if (r != MPI_SUCCESS)
          throw RuntimeError(fmt::format("distribute: rank {}: receiving from rank {} failed: {}", rank_, m.source,
                                         mpi_error(r)));
        return m;
      }
      const auto now = clock::now();
      if (now > deadline) return std::nullopt;
      // Spin for the first milliseconds (latency), then yield the core (a server shares one).
      if (now - begin > std::chrono::milliseconds(1)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void flush(double timeout_s) override {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration<double>(timeout_s);
    while (progress() > 0) {
      if (clock::now() > deadline)
        throw RuntimeError(fmt::format("distribute: rank {}: rank {} did not take a message within timeout_s = {} s "
                                       "(dead or stuck)", rank_, sends_.front().dest, timeout_s));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  struct Send {
    MPI_Request request;
    std::vector<char> bytes;  // a vector's buffer does not move with it
    int dest;
  };
  // Retires the delivered sends; returns how many are left.
  std::size_t progress() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      if (MPI_Test(&it->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        throw RuntimeError(fmt::format("distribute: rank {}: a send to rank {} failed", rank_, it->dest));
      it = done ? sends_.erase(it) : std::next(it);
    }
    return sends_.size();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::list<Send> sends_;
};

std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  ensure_mpi();
  return std::make_shared<MpiCommunicator>(timeout_s, MPI_COMM_WORLD);
}

std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s, int members) {
  ensure_mpi();
  MPI_Comm part = MPI_COMM_NULL;
  const int rank = mpi_world_rank();
  if (MPI_Comm_split(MPI_COMM_WORLD, rank < members ? 0 : MPI_UNDEFINED, rank, &part) != MPI_SUCCESS)
    throw RuntimeError("distribute: MPI_Comm_split failed");
  if (part == MPI_COMM_NULL) return nullptr;
  return std::make_shared<MpiCommunicator>(timeout_s, part);
}

int mpi_world_size() {
  ensure_mpi();
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int mpi_world_rank() {
  ensure_mpi();
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::shared_ptr<Mailbox> make_mpi_mailbox() { return std::make_shared<MpiMailbox>(); }

LocalRank mpi_local_rank() {
  ensure_mpi();
  return find_local_rank();
}

#endif

}  // namespace keel::distribute::detail
