// The worker threads behind Dataset::map(num_parallel_calls > 1) and Dataset::prefetch.
//
// Protocol. A worker first reserves room (outstanding < capacity) under `mutex`, then pulls one
// input item under `pull_mutex` (the input generator is not thread-safe, so pulls are serialised
// and numbered in pull order), transforms it without any lock, and stores the result under its
// sequence number. The consumer takes results in sequence order (ordered) or as they come. An
// exception thrown by the input or the transformation travels as the item at its position. The
// end of input is recorded once; the consumer ends when the input is done, no worker holds an
// item and nothing is left to take.
//
// A profiler that follows keel's threads sees each pull and each transformation as an event of
// this worker's thread (backend::ThreadWork).
//
// Shutdown. The destructor sets `stop` and wakes everyone; a worker notices it before every
// reservation and pull, so it exits after at most the call it is in. The threads are joined
// before the input generator (owned here) is destroyed. Nothing is ever detached.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/recorder.hpp"
#include "keel/core/device.hpp"
#include "keel/data/dataset.hpp"

namespace keel::data::detail {

namespace {
constexpr std::int64_t kAutotuneMaxCapacity = 16;
}

struct AsyncPipe::Impl {
  struct Slot {
    Box value;
    std::exception_ptr error;
  };

  std::function<Box()> pull;
  std::function<Box(Box)> work;
  bool ordered = true, autotune = false;
  Device device;  // the starting thread's default device, given to the workers

  std::mutex mutex;
  std::condition_variable can_work, can_take;
  std::int64_t capacity = 1;
  std::int64_t outstanding = 0;  // reserved by a worker or ready, not yet taken
  std::int64_t in_flight = 0;    // reserved by a worker, not yet stored
  bool input_done = false;
  bool finished = false;
  std::exception_ptr fatal;      // a failure of the machinery itself (e.g. out of memory)
  std::uint64_t next_take = 0;
  std::map<std::uint64_t, Slot> ready;
  std::atomic<bool> stop{false};

  std::mutex pull_mutex;
  bool pull_done = false;        // under pull_mutex
  std::uint64_t pull_seq = 0;    // under pull_mutex

  std::vector<std::thread> threads;

  void worker() {
    try {
      DeviceScope scope(device);
      while (work_one()) {
      }
    } catch (...) {
      // Only the bookkeeping itself can get here (allocation failure): never let it escape a
      // thread (std::terminate); report it to the consumer instead.
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (!fatal) fatal = std::current_exception();
        input_done = true;
      }
      can_take.notify_all();
      can_work.notify_all();
    }
  }

  // One item; false when this worker should exit.
  bool work_one() {
    {
      std::unique_lock<std::mutex> lock(mutex);
      can_work.wait(lock, [&] { return stop.load() || input_done || outstanding < capacity; });
      if (stop.load() || input_done) return false;
      ++outstanding;
      ++in_flight;
    }
    Slot slot;
    std::uint64_t seq = 0;
    bool end = false;
    {
      std::lock_guard<std::mutex> lock(pull_mutex);
      if (pull_done || stop.load()) {
        end = true;
      } else {
        seq = pull_seq++;
        try {
          const backend::ThreadWork traced("data", work ? "Dataset.map: input" : "Dataset.prefetch");
          slot.value = pull();
          if (!slot.value) end = pull_done = true;
        } catch (...) {
          slot.error = std::current_exception();
          pull_done = true;
        }
      }
    }
    if (!end && !slot.error && work) {
      try {
        const backend::ThreadWork traced("data", "Dataset.map");
        slot.value = work(std::move(slot.value));
      } catch (...) {
        slot.value.reset();
        slot.error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      --in_flight;
      if (end) {
        --outstanding;
        input_done = true;
      } else {
        ready.emplace(seq, std::move(slot));
      }
    }
    can_take.notify_all();
    if (end) can_work.notify_all();
    return !end;
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop.store(true);
    }
    can_work.notify_all();
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
};

AsyncPipe::AsyncPipe(std::function<Box()> pull, std::function<Box(Box)> work, int workers,
                     std::int64_t capacity, bool ordered, bool autotune)
    : impl_(std::make_unique<Impl>()) {
  impl_->pull = std::move(pull);
  impl_->work = std::move(work);
  impl_->ordered = ordered;
  impl_->autotune = autotune;
  impl_->capacity = std::max<std::int64_t>(1, capacity);
  impl_->device = default_device();
  try {
    for (int i = 0; i < std::max(1, workers); ++i) impl_->threads.emplace_back([impl = impl_.get()] { impl->worker(); });
  } catch (...) {
    impl_->shutdown();  // threads already started must not outlive a failed constructor
    throw;
  }
}

AsyncPipe::~AsyncPipe() { impl_->shutdown(); }

Box AsyncPipe::next() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mutex);
  bool grown = false;
  for (;;) {
    if (s.finished) return nullptr;
    if (s.fatal) {
      s.finished = true;
      std::rethrow_exception(s.fatal);
    }
    if (!s.ready.empty()) {
      auto it = s.ready.begin();
      if (!s.ordered || it->first == s.next_take) {
        Impl::Slot slot = std::move(it->second);
        s.next_take = it->first + 1;
        s.ready.erase(it);
        --s.outstanding;
        if (slot.error) {
          // The pass ends at the failing element: stop the workers' further work now.
          s.finished = true;
          s.stop.store(true);
        }
        lock.unlock();
        s.can_work.notify_all();
        if (slot.error) std::rethrow_exception(slot.error);
        return std::move(slot.value);
      }
    }
    if (s.input_done && s.in_flight == 0 && s.ready.empty()) {
      s.finished = true;
      return nullptr;
    }
    // The consumer has to wait: with autotune, let the workers run further ahead.
    if (s.autotune && !grown && s.capacity < kAutotuneMaxCapacity) {
      s.capacity = std::min(s.capacity * 2, kAutotuneMaxCapacity);
      grown = true;
      s.can_work.notify_all();
    }
    s.can_take.wait(lock);
  }
}

}  // namespace keel::data::detail
