#pragma once
// Magnitude pruning, as the TensorFlow Model Optimization Toolkit's tfmot.sparsity.keras does it:
//
//   auto pruned = pruning::prune_low_magnitude(model, pruning::PolynomialDecay{
//       .initial_sparsity = 0.5, .final_sparsity = 0.8, .begin_step = 0, .end_step = 1000});
//   pruned->compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
//   pruned->fit(x, y, {.epochs = 2, .callbacks = {std::make_shared<callbacks::UpdatePruningStep>()}});
//   auto exported = pruning::strip_pruning(*pruned);   // plain layers, the zeros kept
//
// Every prunable layer is wrapped in a PruneLowMagnitude layer that owns, per prunable weight, a
// mask (non-trainable, initially ones) and a threshold (non-trainable, initially 0), and one
// pruning_step (initially -1). The layer computes with weight * mask (so masked weights get zero
// gradients); UpdatePruningStep sets the step before every batch, updates the masks when the
// schedule says so and writes weight * mask back into the weights before the forward pass and
// after the optimizer's update, so the stored weights are exactly zero where the mask is.
//
// Prunable weights (tfmot's PruneRegistry): Dense, Conv1D/2D/3D and their transposes: kernel;
// DepthwiseConv1D/2D: depthwise_kernel; SeparableConv1D/2D: pointwise_kernel; Embedding:
// embeddings; SimpleRNN, LSTM, GRU, ConvLSTM1D/2D/3D, Bidirectional: kernel and recurrent_kernel;
// MultiHeadAttention: its four kernels.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "keel/callbacks/tensorboard.hpp"
#include "keel/models/model.hpp"

namespace keel::summary {
class FileWriter;
}

namespace keel::pruning {

// tfmot's PolynomialDecay: at a pruning step,
//   p = clamp((step - begin_step) / (end_step - begin_step), 0, 1)
//   sparsity(step) = final_sparsity + (initial_sparsity - final_sparsity) * (1 - p)^power
// (computed in float32, as tfmot does). Masks update when begin_step <= step <= end_step and
// (step - begin_step) % frequency == 0. end_step must be >= begin_step (-1 is not allowed).
struct PolynomialDecay {
  double initial_sparsity = 0, final_sparsity = 0.5;
  std::int64_t begin_step = 0, end_step = 1000;
  double power = 3;
  std::int64_t frequency = 100;
};

// tfmot's ConstantSparsity: target_sparsity at every pruning step; end_step = -1 prunes forever.
struct ConstantSparsity {
  double target_sparsity = 0.5;
  std::int64_t begin_step = 0, end_step = -1;
  std::int64_t frequency = 100;
};

using PruningSchedule = std::variant<PolynomialDecay, ConstantSparsity>;

// What a schedule says for one step (tfmot's `should_prune, sparsity = schedule(step)`).
struct ScheduleDecision {
  bool should_prune = false;
  double sparsity = 0;
};
// ValueError for tfmot's invalid parameters: begin_step < 0, end_step < begin_step (unless
// ConstantSparsity's -1), frequency <= 0, a sparsity outside [0, 1).
void validate(const PruningSchedule& schedule);
ScheduleDecision evaluate(const PruningSchedule& schedule, std::int64_t step);

// tfmot's block options. block_size {h, w} (rank-2 weights only): the magnitudes are pooled
// (block_pooling_type "AVG" or "MAX") over h x w blocks and whole blocks are kept or pruned.
// sparsity_m_by_n {m, n}: structured m:n sparsity, the m smallest of every n consecutive
// weights along the input axis (the second-to-last axis: Dense [in, out], Conv2D [h, w, in, out])
// are zeroed whenever the schedule says to prune (its sparsity value is not used), as for NVIDIA's
// 2:4 sparse tensor cores. The two options exclude each other.
struct PruningOptions {
  std::array<int, 2> block_size = {1, 1};
  std::string block_pooling_type = "AVG";
  std::optional<std::array<int, 2>> sparsity_m_by_n{};
};

// The wrapper tfmot calls PruneLowMagnitude (named "prune_low_magnitude_<layer name>").
class PruneLowMagnitude : public layers::Layer {
 public:
  // ValueError when `layer` has no prunable weights (see the list above) or is a wrapper already,
  // or for bad schedule or block options.
  explicit PruneLowMagnitude(layers::LayerRef layer, PruningSchedule schedule = ConstantSparsity{},
                             PruningOptions options = {});
  KEEL_LAYER_BOILERPLATE(PruneLowMagnitude)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  Shape compute_output_shape(const Shape& input_shape) override;
  nlohmann::json get_config() const override;

  const std::shared_ptr<layers::Layer>& layer() const { return layer_; }
  const PruningSchedule& pruning_schedule() const { return schedule_; }
  const PruningOptions& options() const { return options_; }

  // One pruned weight of the wrapped layer with its mask and threshold (made at build).
  struct PrunedWeight {
    Variable* weight = nullptr;
    Variable* mask = nullptr;
    Variable* threshold = nullptr;
  };
  const std::vector<PrunedWeight>& pruning_vars() const { return pruned_; }
  // The stored pruning_step (-1 until UpdatePruningStep first sets it).
  std::int64_t pruning_step() const;

  // What UpdatePruningStep does each batch; exposed for custom training loops (tfmot's
  // pruning_obj): set the step, then update the masks if the schedule prunes at it (returns
  // whether it did), then write weight * mask into the weights.
  void set_pruning_step(std::int64_t step);
  bool update_masks();
  void apply_masks();

 protected:
  Autocast autocast() const override { return Autocast::none; }  // the wrapped layer casts

 private:
  void make_masks();  // once the wrapped layer has its weights
  std::shared_ptr<layers::Layer> layer_;
  PruningSchedule schedule_;
  PruningOptions options_;
  std::vector<PrunedWeight> pruned_;
  Variable* step_ = nullptr;
  std::int64_t step_set_ = -1;  // the step UpdatePruningStep last set (its presence check)
};

// True for the layer classes listed above.
bool is_prunable(const layers::Layer& layer);
// Every wrapper in the model, nested models included (tfmot's collect_prunable_layers).
std::vector<PruneLowMagnitude*> collect_prunable_layers(models::Model& model);

// A new model (the original unchanged) with every prunable layer wrapped, the weights copied;
// not compiled. Sequential and functional models (nested ones included); other layers and
// existing wrappers stay as they are. ValueError for a subclassed model.
std::shared_ptr<models::Model> prune_low_magnitude(models::Model& model, PruningSchedule schedule = ConstantSparsity{},
                                                   PruningOptions options = {});
// One layer wrapped (a model given here is pruned as above).
std::shared_ptr<layers::Layer> prune_low_magnitude(layers::LayerRef layer, PruningSchedule schedule = ConstantSparsity{},
                                                   PruningOptions options = {});
// A new model with every wrapper replaced by its layer holding weight * mask.
std::shared_ptr<models::Model> strip_pruning(models::Model& model);
// The share of zeros among the prunable weights (for wrappers: of weight * mask); 0 if none.
double sparsity(models::Model& model);

}  // namespace keel::pruning

namespace keel::callbacks {

// tfmot's UpdatePruningStep, required to fit a model with wrappers (a training call without it
// is a ValueError). Before each batch: every wrapper's pruning_step = optimizer iterations + 1
// (tfmot's callback sets the iterations and the wrapper adds one in its call), its masks updated
// when the schedule prunes at that step, weight = weight * mask. After each batch (the
// optimizer's update): weight = weight * mask again.
class UpdatePruningStep : public Callback {
 public:
  void on_train_begin(const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  std::int64_t step_ = 0;
};

// tfmot's PruningSummaries: the TensorBoard callback's logs plus, at each epoch end, for every
// pruned weight "<mask name>/sparsity" (1 - mean(mask)) and "<threshold name>/threshold", at the
// optimizer's iterations, in log_dir/train.
class PruningSummaries : public TensorBoard {
 public:
  explicit PruningSummaries(std::string log_dir, TensorBoardOptions options = {});
  ~PruningSummaries() override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  std::unique_ptr<summary::FileWriter> writer_;
};

}  // namespace keel::callbacks
