#pragma once
// Server-side batching, after TF Serving's BasicBatchScheduler: concurrent requests queue their
// inputs; one thread forms a batch from the oldest request and every later queued one with the
// same per-row shapes and dtypes, until max_batch_size rows or batch_timeout_micros after the
// oldest request arrived, concatenates them along the batch axis, runs the model once and hands
// each request its rows of every output. A request larger than max_batch_size is refused, as TF
// Serving does without large-batch splitting. The one thread also serialises the model's
// predict calls.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::serve {

struct BatchingOptions {
  std::int64_t max_batch_size = 32;        // rows per model call
  std::int64_t batch_timeout_micros = 1000;  // how long the oldest request waits for company
};

class Batcher {
 public:
  // run: the model's predict on a batch (every input with the same first dimension); it must
  // return outputs whose first dimension is that batch size. on_batch(requests, rows) is called
  // after each model call (metrics).
  using RunFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  using BatchFn = std::function<void(std::size_t requests, std::int64_t rows)>;
  Batcher(RunFn run, BatchingOptions options, BatchFn on_batch = {});
  ~Batcher();  // finishes the queued requests, then stops the thread
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Blocks until the request's batch has run; rethrows the model's error (every request of a
  // failed batch gets it). ValueError for a request larger than max_batch_size or without rows.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

 private:
  struct Task {
    std::vector<Tensor> inputs;
    std::int64_t rows = 0;
    std::chrono::steady_clock::time_point arrived;
    std::promise<std::vector<Tensor>> result;
  };
  void loop();
  void run_batch(std::vector<Task*>& batch);

  RunFn run_;
  BatchingOptions options_;
  BatchFn on_batch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task*> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Whether two requests can share a batch: the same number of inputs, each of the same dtype
// and the same shape after the batch axis.
bool batch_compatible(const std::vector<Tensor>& a, const std::vector<Tensor>& b);

}  // namespace keel::serve
