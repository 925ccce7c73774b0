#include "cpu/thread_pool.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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
  std::atomic<int> next{0};        // the next unclaimed part
  std::atomic<int> finished{0};    // parts done
  std::mutex error_mutex;
  std::exception_ptr error;

  // Claims and runs parts until none is left. ctx is touched only for a claimed part, and the
  // caller returns only after every part has finished, so a worker that arrives late never
  // reads the caller's (by then dead) closure.
  void work() {
    for (int p = next.fetch_add(1, std::memory_order_relaxed); p < parts;
         p = next.fetch_add(1, std::memory_order_relaxed)) {
      try {
        call(ctx, p);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      finished.fetch_add(1, std::memory_order_release);
    }
  }
};

// Spins this many pause instructions (about 20 us) for new work or for claimed parts before
// blocking or yielding: back-to-back kernels then hand over without a sleep and wake-up.
constexpr int kSpin = 4000;

using Clock = std::chrono::steady_clock;

// When another process keeps a core busy, a worker can be descheduled in the middle of a part it
// claimed, and the caller, done with its own parts, waits for the worker's next time slice
// (milliseconds). Measured on the seed CNN with one of two cores spinning: 2 threads took 14.6
// ms a step where 1 thread took 11.4. So a region whose caller waited longer than its own parts
// took (and over kStall) is a stall, and the regions that follow run on the caller alone for a
// while: kMinSolo, doubled for each stall that comes within kCalm of the one before (the other
// process is still there), up to kMaxSolo. The parts are the same either way, so results do not
// change; only who runs them.
class SoloPolicy {
 public:
  bool active(Clock::time_point now) const { return ticks(now) < until_.load(std::memory_order_relaxed); }
  // Called by a region's caller once the region is done.
  void after_region(Clock::duration own, Clock::duration waited, Clock::time_point now) {
    if (waited <= kStall || waited <= own) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    solo_ = ticks(now) - last_stall_ < Clock::duration(kCalm).count() ? std::min(solo_ * 2, kMaxSolo) : kMinSolo;
    last_stall_ = ticks(now);
    until_.store(ticks(now + solo_), std::memory_order_relaxed);
    stalls_.fetch_add(1, std::memory_order_relaxed);
  }
  std::int64_t stalls() const { return stalls_.load(std::memory_order_relaxed); }

 private:
  static std::int64_t ticks(Clock::time_point t) { return t.time_since_epoch().count(); }
  static constexpr Clock::duration kStall = std::chrono::microseconds(500);
  static constexpr Clock::duration kMinSolo = std::chrono::milliseconds(20);
  static constexpr Clock::duration kMaxSolo = std::chrono::milliseconds(640);
  static constexpr Clock::duration kCalm = std::chrono::seconds(2);
  std::atomic<std::int64_t> until_{0};  // regions run solo until this time (steady_clock ticks)
  std::atomic<std::int64_t> stalls_{0};
  std::mutex mutex_;
  Clock::duration solo_ = kMinSolo;
  std::int64_t last_stall_ = std::numeric_limits<std::int64_t>::min() / 2;
};

class Pool {
 public:
  void run(int parts, void (*call)(void*, int), void* ctx) {
    const int threads = std::min(parts, config::num_threads());
    if (threads <= 1 || in_region || solo_.active(Clock::now())) {
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
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      grow(threads - 1);
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    const Clock::time_point begin = Clock::now();
    in_region = true;
    job->work();
    in_region = false;
    const Clock::time_point own_done = Clock::now();
    // Wait only for parts that workers claimed and are running.
    for (int spin = 0; job->finished.load(std::memory_order_acquire) < parts; ++spin) {
      if (spin < kSpin) _mm_pause();
      else std::this_thread::yield();
    }
    solo_.after_region(own_done - begin, Clock::now() - own_done, Clock::now());
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (job_ == job) job_.reset();
    }
    if (job->error) std::rethrow_exception(job->error);
  }

  std::int64_t stalls() const { return solo_.stalls(); }
  bool solo() const { return solo_.active(Clock::now()); }

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
      if (job && job->joined.fetch_add(1, std::memory_order_relaxed) < job->workers) job->work();
    }
  }

  SoloPolicy solo_;
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
std::int64_t stalls() { return pool().stalls(); }
bool running_solo() { return pool().solo(); }
}  // namespace pool_detail

bool in_parallel_region() { return in_region; }

}  // namespace keel::cpu
