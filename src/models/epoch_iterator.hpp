#pragma once
// Keras 3's EpochIterator: the one loop that fit, evaluate and predict run over, whatever their
// data. Internal to keel: not a public header.
//
// In-memory tensors are adapted to a data::Dataset of batches, as Keras' ArrayDataAdapter does:
// rows [b, b + batch_size) in order or, with shuffle, in an order drawn from the random stream
// in effect when the epoch starts (the model's, in fit). A Dataset of (x, y) batches is taken as
// it is (Keras' TFDatasetAdapter), each batch checked as it comes.
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"
#include "keel/data/dataset.hpp"

namespace keel::models::detail {

// One batch: inputs and targets (one tensor per model input / output, in model order; y is
// empty for predict) and per-sample weights (may be undefined).
struct Batch {
  std::vector<Tensor> x, y;
  Tensor sample_weight;
};

// ValueError / ShapeError unless x has a batch axis and y, when defined, as many samples; `op`
// names the caller.
void check_xy(const Tensor& x, const Tensor& y, const char* op);
// The same for several inputs and targets: every tensor has a batch axis of one size.
void check_xy(const std::vector<Tensor>& x, const std::vector<Tensor>& y, const char* op);
// Rows [begin, end) of t along axis 0; an undefined t stays undefined.
Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t end);

class EpochIterator {
 public:
  // x, y and sample_weight (y and sample_weight may be undefined) in batches of batch_size
  // rows; `steps` caps each epoch (-1: every batch).
  EpochIterator(const std::vector<Tensor>& x, const std::vector<Tensor>& y, const Tensor& sample_weight,
                std::int64_t batch_size, bool shuffle, std::int64_t steps);
  // A Dataset of (x, y) batches; `steps` caps each epoch (-1: the whole pass); `op` names the
  // caller in the checks of each batch.
  EpochIterator(const data::Dataset<std::pair<Tensor, Tensor>>& batches, std::int64_t steps, const char* op);
  EpochIterator(const data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& batches, std::int64_t steps,
                const char* op);

  // The steps of an epoch as known before it runs: those of the tensors, or the cap given for
  // a Dataset (-1: unknown).
  std::int64_t steps() const { return steps_; }
  bool from_dataset() const { return op_ != nullptr; }
  // One epoch (one pass over the data): f(step, batch) for each batch until f returns false or
  // the epoch ends. Returns the number of batches f was called on.
  std::int64_t run_epoch(const std::function<bool(std::int64_t, const Batch&)>& f) const;

 private:
  data::Dataset<Batch> batches_;
  std::int64_t steps_;
  const char* op_ = nullptr;  // a Dataset's batches are checked as they come
};

}  // namespace keel::models::detail
