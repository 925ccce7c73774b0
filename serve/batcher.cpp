// Server-side batching (see batcher.hpp).
#include "batcher.hpp"

#include <fmt/core.h>

#include "keel/ops/shape.hpp"

namespace keel::serve {

bool batch_compatible(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].rank() != b[i].rank() || a[i].rank() == 0) return false;
    for (std::int64_t d = 1; d < a[i].rank(); ++d)
      if (a[i].shape()[d] != b[i].shape()[d]) return false;
  }
  return true;
}

Batcher::Batcher(RunFn run, BatchingOptions options, BatchFn on_batch)
    : run_(std::move(run)), options_(options), on_batch_(std::move(on_batch)) {
  if (options_.max_batch_size < 1) throw ValueError("Batcher: max_batch_size must be positive");
  thread_ = std::thread([this] { loop(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<Tensor> Batcher::run(const std::vector<Tensor>& inputs) {
  if (inputs.empty() || inputs[0].rank() == 0) throw ValueError("batching: a request needs inputs with a batch dimension");
  Task task;
  task.inputs = inputs;
  task.rows = inputs[0].shape()[0];
  for (const auto& t : inputs)
    if (t.rank() == 0 || t.shape()[0] != task.rows)
      throw ValueError(fmt::format("batching: the inputs differ in their batch dimension ({} and {})",
                                   inputs[0].shape().to_string(), t.shape().to_string()));
  if (task.rows > options_.max_batch_size)
    throw ValueError(fmt::format("Task size {} is larger than maximum batch size {}", task.rows, options_.max_batch_size));
  if (task.rows == 0) return run_(inputs);  // nothing to share; still the model's own answer
  task.arrived = std::chrono::steady_clock::now();
  std::future<std::vector<Tensor>> result = task.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&task);
  }
  cv_.notify_all();
  return result.get();  // the task outlives its use: the batch thread fulfils it before get() returns
}

void Batcher::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    // Wait for company until the oldest request's deadline or a full batch.
    const auto deadline = queue_.front()->arrived + std::chrono::microseconds(options_.batch_timeout_micros);
    const auto rows_ready = [this] {
      std::int64_t rows = 0;
      for (Task* t : queue_)
        if (batch_compatible(t->inputs, queue_.front()->inputs)) rows += t->rows;
      return rows >= options_.max_batch_size;
    };
    while (!stop_ && !rows_ready() && cv_.wait_until(lock, deadline) != std::cv_status::timeout) {
    }
    // Take the oldest request and each later compatible one that still fits.
    std::vector<Task*> batch;
    std::int64_t rows = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((batch.empty() || batch_compatible((*it)->inputs, batch[0]->inputs)) &&
          rows + (*it)->rows <= options_.max_batch_size) {
        rows += (*it)->rows;
        batch.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    run_batch(batch);
    lock.lock();
  }
}

void Batcher::run_batch(std::vector<Task*>& batch) {
  std::int64_t rows = 0;
  for (Task* t : batch) rows += t->rows;
  try {
    std::vector<Tensor> inputs;
    if (batch.size() == 1) {
      inputs = batch[0]->inputs;
    } else {
      for (std::size_t i = 0; i < batch[0]->inputs.size(); ++i) {
        std::vector<Tensor> parts;
        for (Task* t : batch) parts.push_back(t->inputs[i]);
        inputs.push_back(concat(parts, 0));
      }
    }
    std::vector<Tensor> outputs = run_(inputs);
    for (const auto& o : outputs)
      if (o.rank() == 0 || o.shape()[0] != rows)
        throw ValueError(fmt::format("batching: an output of shape {} has no batch dimension of {} rows",
                                     o.shape().to_string(), rows));
    if (on_batch_) on_batch_(batch.size(), rows);
    if (batch.size() == 1) {
      batch[0]->result.set_value(std::move(outputs));
      return;
    }
    std::int64_t begin = 0;
    for (Task* t : batch) {
      std::vector<Tensor> mine;
      for (const auto& o : outputs) {
        std::vector<std::int64_t> start(static_cast<std::size_t>(o.rank()), 0), size = o.shape().dims();
        start[0] = begin;
        size[0] = t->rows;
        mine.push_back(slice(o, start, size).contiguous());
      }
      begin += t->rows;
      t->result.set_value(std::move(mine));
    }
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    for (Task* t : batch) {
      try {
        t->result.set_exception(e);
      } catch (const std::future_error&) {
        // this task already had its value
      }
    }
  }
}

}  // namespace keel::serve
