#include "cpu/thread_pool.hpp"

#include <immintrin.h>
#include <omp.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/cpu_load.hpp"
#include "keel/core/config.hpp"

namespace keel::cpu {

namespace {

thread_local bool in_region = false;

struct Job {
  void (*call)(void*, int) = nullptr;
  void* ctx = nullptr;
  int parts = 0;
  int workers = 0;                 // how many workers may join
  std::atomic<int> joined{0};
  // The unclaimed parts [front, back), packed as front << 32 | back. The caller claims from the
  // front and workers from the back: the caller's share is always a run of the first parts, so
  // consecutive kernels split alike keep the same rows in the same core's cache, and when a worker
  // is descheduled (another process on its core) the caller goes on claiming parts up to the ones
  // the worker holds.
  std::atomic<std::uint64_t> unclaimed{0};
  std::atomic<int> finished{0};    // parts done
  std::mutex error_mutex;
  std::exception_ptr error;

  void start(int n) { unclaimed.store(static_cast<std::uint64_t>(n), std::memory_order_relaxed); }

  // The next part from the front (from_front) or the back, or -1 when none is left. A worker
  // never takes part 0: the caller, which publishes the job before it starts claiming, may not
  // have claimed it yet when a fast worker has run every other part.
  int claim(bool from_front) {
    std::uint64_t cur = unclaimed.load(std::memory_order_relaxed);
    for (;;) {
      const auto front = static_cast<std::uint32_t>(cur >> 32), back = static_cast<std::uint32_t>(cur);
      if (front >= back || (!from_front && back == 1)) return -1;
      const std::uint64_t next = from_front ? (std::uint64_t{front + 1} << 32) | back
                                            : (std::uint64_t{front} << 32) | (back - 1);
      if (unclaimed.compare_exchange_weak(cur, next, std::memory_order_relaxed))
        return static_cast<int>(from_front ? front : back - 1);
    }
  }

  void run_part(int p) {
    try {
      call(ctx, p);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
    finished.fetch_add(1, std::memory_order_release);
  }

  // Claims and runs parts until none is left. ctx is touched only for a claimed part, and the
  // caller returns only after every part has finished, so a worker that arrives late never
  // reads the caller's (by then dead) closure.
  void work(bool from_front) {
    for (int p = claim(from_front); p >= 0; p = claim(from_front)) run_part(p);
  }
};

// Spins this many pause instructions (about 20 us) for new work or for claimed parts before
// blocking or yielding: back-to-back kernels then hand over without a sleep and wake-up.
constexpr int kSpin = 4000;

class Pool {
 public:
  void run(int parts, void (*call)(void*, int), void* ctx) {
    const int threads = std::min(parts, parallel_threads());
    if (threads <= 1 || in_region) {
      const bool outer = in_region;
      in_region = true;
      try {
        for (int p = 0; p < parts; ++p) call(ctx, p);
      } catch (...) {
        in_region = outer;
        throw;
      }
      in_region = outer;
      return;
    }
    auto job = std::make_shared<Job>();
    job->call = call;
    job->ctx = ctx;
    job->parts = parts;
    job->workers = threads - 1;
    job->start(parts);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      grow(threads - 1);
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    in_region = true;
    job->work(true);
    in_region = false;
    // Wait only for parts that workers claimed and are running.
    for (int spin = 0; job->finished.load(std::memory_order_acquire) < parts; ++spin) {
      if (spin < kSpin) _mm_pause();
      else std::this_thread::yield();
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (job_ == job) job_.reset();
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  // Called with mutex_ held.
  void grow(int workers) {
    while (static_cast<int>(threads_.size()) < workers) {
      threads_.emplace_back([this] { worker(); });
      threads_.back().detach();  // the pool lives as long as the process
    }
  }

  void worker() {
    in_region = true;
    omp_set_num_threads(1);  // a BLAS call inside a part stays on this thread
    std::uint64_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      for (int spin = 0; spin < kSpin && generation_.load(std::memory_order_acquire) == seen; ++spin) _mm_pause();
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        job = job_;
      }
      if (job && job->joined.fetch_add(1, std::memory_order_relaxed) < job->workers) job->work(false);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<std::uint64_t> generation_{0};
  std::shared_ptr<Job> job_;
  std::vector<std::thread> threads_;
};

// Never destroyed: detached workers may still be asleep in it at exit.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

}  // namespace

namespace pool_detail {
void run(int parts, void (*call)(void*, int), void* ctx) { pool().run(parts, call, ctx); }
}  // namespace pool_detail

bool in_parallel_region() { return in_region; }

int parallel_threads() {
  const int n = config::num_threads();
  return n <= 1 || !config::yield_busy_cores() ? n : threads_left(n);
}

}  // namespace keel::cpu
