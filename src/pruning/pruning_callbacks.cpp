// tfmot's pruning_callbacks.py: UpdatePruningStep and PruningSummaries.
#include <fmt/core.h>

#include "keel/ops/reduce.hpp"
#include "keel/pruning/pruning.hpp"
#include "keel/summary/summary.hpp"

namespace keel::callbacks {

namespace {

models::Model& model_of(models::Model* model, const char* cb) {
  if (!model) throw ValueError(fmt::format("{}: the callback has no model (it runs inside fit)", cb));
  return *model;
}

}  // namespace

void UpdatePruningStep::on_train_begin(const Logs&) {
  models::Model& m = model_of(model, "UpdatePruningStep");
  // tfmot: self.step = optimizer.iterations.
  step_ = m.optimizer() ? m.optimizer()->iterations() : 0;
}

void UpdatePruningStep::on_train_batch_begin(std::int64_t, const Logs&) {
  for (pruning::PruneLowMagnitude* w : pruning::collect_prunable_layers(model_of(model, "UpdatePruningStep"))) {
    // tfmot assigns the iterations here and its wrapper adds one in its call before the
    // conditional mask update: the step of a batch is its 1-based optimizer step.
    w->set_pruning_step(step_ + 1);
    w->update_masks();
    w->apply_masks();
  }
  ++step_;
}

void UpdatePruningStep::on_train_batch_end(std::int64_t, const Logs&) {
  // The optimizer moved the masked weights (momentum, Adam's moments): zero them again.
  for (pruning::PruneLowMagnitude* w : pruning::collect_prunable_layers(model_of(model, "UpdatePruningStep")))
    w->apply_masks();
}

PruningSummaries::PruningSummaries(std::string log_dir, TensorBoardOptions options)
    : TensorBoard(std::move(log_dir), std::move(options)) {}

PruningSummaries::~PruningSummaries() = default;

void PruningSummaries::on_epoch_end(int epoch, const Logs& logs) {
  TensorBoard::on_epoch_end(epoch, logs);
  models::Model& m = model_of(model, "PruningSummaries");
  if (!writer_) writer_ = std::make_unique<summary::FileWriter>(log_dir() + "/train");
  const std::int64_t step = m.optimizer() ? m.optimizer()->iterations() : 0;
  for (pruning::PruneLowMagnitude* w : pruning::collect_prunable_layers(m))
    for (const auto& p : w->pruning_vars()) {
      const double kept = reduce_mean(p.mask->peek()).to(Device::cpu()).item<double>();
      summary::scalar(*writer_, p.mask->name() + "/sparsity", 1.0 - kept, step);
      summary::scalar(*writer_, p.threshold->name() + "/threshold",
                      p.threshold->peek().to(Device::cpu()).item<double>(), step);
    }
  writer_->flush();
}

}  // namespace keel::callbacks
