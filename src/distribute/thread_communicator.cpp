// The transport of replicas that are threads of one process (a MirroredStrategy over several
// devices): the ranks share memory, so a collective is a rendezvous. Each rank posts its buffer;
// after a barrier every rank combines its own slice of the buffers across the ranks (a
// reduce-scatter), and after a second one copies every slice into its buffer (an all-gather). A
// barrier that waits longer than timeout_s, or that a failing replica aborts, throws
// RuntimeError on every rank still waiting, instead of hanging.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "distribute/communicator.hpp"
#include "keel/core/error.hpp"
#include "keel/core/dtype.hpp"

namespace keel::distribute::detail {

class ThreadGroup {
 public:
  ThreadGroup(int size, double timeout_s)
      : size_(size), timeout_s_(timeout_s), posted_(static_cast<std::size_t>(size), nullptr),
        arrived_(static_cast<std::size_t>(size), 0) {}

  int size() const { return size_; }

  // Every rank's call; returns when all have made it. RuntimeError after timeout_s (naming the
  // ranks that did not arrive) or once the group is aborted.
  void barrier(int rank, const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    check_aborted(rank, what);
    const std::uint64_t generation = generation_;
    arrived_[static_cast<std::size_t>(rank)] = generation + 1;
    if (++waiting_ == size_) {
      waiting_ = 0;
      ++generation_;
      lock.unlock();
      cv_.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    while (generation_ == generation && aborted_.empty()) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == generation) {
        std::string missing;
        for (int r = 0; r < size_; ++r)
          if (arrived_[static_cast<std::size_t>(r)] != generation + 1)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        throw RuntimeError(fmt::format("distribute: replica {} waited {} s in {} for replica(s) {} (timeout_s)", rank,
                                       timeout_s_, what, missing));
      }
    }
    if (generation_ == generation) check_aborted(rank, what);
  }

  // Wakes every waiting rank with RuntimeError(why); later collectives fail the same way until
  // reset().
  void abort(const std::string& why) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (aborted_.empty()) aborted_ = why;
    }
    cv_.notify_all();
  }
  // A fresh start once no rank is inside a collective.
  void reset() {
    const std::lock_guard<std::mutex> lock(mutex_);
    aborted_.clear();
    waiting_ = 0;
    ++generation_;
  }

  void post(int rank, void* buf) { posted_[static_cast<std::size_t>(rank)] = buf; }
  void* posted(int rank) const { return posted_[static_cast<std::size_t>(rank)]; }

 private:
  void check_aborted(int rank, const char* what) const {
    if (!aborted_.empty())
      throw RuntimeError(fmt::format("distribute: replica {} stopped in {}: {}", rank, what, aborted_));
  }

  const int size_;
  const double timeout_s_;
  std::vector<void*> posted_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int waiting_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<std::uint64_t> arrived_;  // per rank: the generation it last arrived at, plus one
  std::string aborted_;
};

namespace {

// dst[i] = op(dst[i], src[i]); 16-bit floats combine in float32 and round once (in all_reduce).
template <class T>
void combine_into(T* dst, const T* src, std::size_t n, Combine op) {
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      dst[i] = op == Combine::min ? (dst[i] && src[i]) : (dst[i] || src[i]);
    } else if (op == Combine::sum) {
      dst[i] = static_cast<T>(dst[i] + src[i]);
    } else if (op == Combine::max) {
      dst[i] = src[i] > dst[i] || src[i] != src[i] ? src[i] : dst[i];  // a NaN wins, as MPI's and NCCL's
    } else {
      dst[i] = src[i] < dst[i] || src[i] != src[i] ? src[i] : dst[i];
    }
  }
}

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int size() const override { return group_->size(); }
  int rank() const override { return rank_; }
  std::string transport() const override { return "threads"; }

  void all_reduce(void* buf, std::size_t count, DType dtype, Combine op) override {
    if (is_half(dtype)) return all_reduce_widened(buf, count, dtype, op);  // as the MPI transport
    const int n = size();
    const std::size_t item = itemsize(dtype);
    // This rank's slice [begin, end) of the elements.
    const std::size_t begin = count * static_cast<std::size_t>(rank_) / static_cast<std::size_t>(n);
    const std::size_t end = count * static_cast<std::size_t>(rank_ + 1) / static_cast<std::size_t>(n);
    std::vector<char> slice((end - begin) * item);
    group_->post(rank_, buf);
    group_->barrier(rank_, "all_reduce");
    // Combined in rank order: every rank's result has the same bits. (A rank whose slice is
    // empty, fewer elements than ranks, only meets the others at the barriers.)
    const bool mine = end > begin;
    if (mine) std::memcpy(slice.data(), static_cast<const char*>(group_->posted(0)) + begin * item, slice.size());
    const auto combine_from = [&]<class T>(int r) {
      const T* other = static_cast<const T*>(group_->posted(r)) + begin;
      combine_into(reinterpret_cast<T*>(slice.data()), other, end - begin, op);
    };
    for (int r = 1; r < n && mine; ++r) {
      if (dtype == DType::bool_)
        combine_from.template operator()<bool>(r);
      else
        ::keel::detail::dispatch_numeric(dtype, "all_reduce",
                                         [&]<class T>() { combine_from.template operator()<T>(r); });
    }
    group_->barrier(rank_, "all_reduce");  // every rank has read the inputs
    for (int r = 0; r < n && mine; ++r)
      std::memcpy(static_cast<char*>(group_->posted(r)) + begin * item, slice.data(), slice.size());
    group_->barrier(rank_, "all_reduce");  // every slice is in place
  }

  void broadcast(void* buf, std::size_t bytes, int root) override {
    group_->post(rank_, buf);
    group_->barrier(rank_, "broadcast");
    if (rank_ != root && bytes > 0) std::memcpy(buf, group_->posted(root), bytes);
    group_->barrier(rank_, "broadcast");  // root's buffer is read
  }

  void barrier() override { group_->barrier(rank_, "barrier"); }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

}  // namespace

ThreadWorld make_thread_world(int size, double timeout_s) {
  if (size < 1) throw ValueError(fmt::format("distribute: a world of {} replicas", size));
  ThreadWorld world;
  world.group = std::make_shared<ThreadGroup>(size, timeout_s);
  for (int r = 0; r < size; ++r) world.ranks.push_back(std::make_shared<ThreadCommunicator>(world.group, r));
  return world;
}

void abort_thread_world(ThreadGroup& group, const std::string& why) { group.abort(why); }
void reset_thread_world(ThreadGroup& group) { group.reset(); }

}  // namespace keel::distribute::detail
