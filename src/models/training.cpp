// Model::compile, the compiled losses and metrics, and the default train_step / test_step
// (any number of inputs and outputs). The loops over the data are in training_loops.cpp.
#include <algorithm>
#include <cmath>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "backend/recorder.hpp"
#include "distribute/hooks.hpp"
#include "keel/autograd/tape.hpp"
#include "keel/mixed_precision/policy.hpp"
#include "keel/models/model.hpp"
#include "keel/optimizers/loss_scale_optimizer.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "models/epoch_iterator.hpp"
#include "models/step_functions.hpp"
#include "models/progbar.hpp"

namespace keel::models {

using detail::Batch;
using detail::check_xy;
using detail::EpochIterator;
using detail::rows;

namespace {

// Metrics read half-precision predictions in float32, as Keras' metrics convert them to their
// float32 dtype (the loss does the same in Loss::operator()).
Tensor for_metrics(const Tensor& y_pred) {
  if (y_pred.dtype() != DType::float16 && y_pred.dtype() != DType::bfloat16) return y_pred;
  autograd::NoRecordScope no_record;
  return cast(y_pred, DType::float32);
}

}  // namespace


namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The index of output `key`; ValueError naming the compile argument and the outputs otherwise.
std::size_t output_index(const std::vector<std::string>& outputs, const std::string& key, const std::string& model,
                         const char* argument) {
  auto it = std::find(outputs.begin(), outputs.end(), key);
  if (it == outputs.end())
    throw ValueError(fmt::format("{}.compile: {} names '{}', which is not an output of the model (its outputs: {})",
                                 model, argument, key, join(outputs)));
  return static_cast<std::size_t>(it - outputs.begin());
}

}  // namespace

void Model::compile(CompileOptions options) {
  optimizer_ = options.optimizer.get();
  if (!optimizer_) throw ValueError(fmt::format("{}.compile: no optimizer", name()));
  // Keras 3: a mixed_float16 model trains with dynamic loss scaling (float16 gradients would
  // underflow otherwise); an optimizer already wrapped is kept as it is.
  const bool float16 = dtype_policy().name() == "mixed_float16" ||
                       mixed_precision::global_policy().name() == "mixed_float16";
  if (float16 && !std::dynamic_pointer_cast<optimizers::LossScaleOptimizer>(optimizer_))
    optimizer_ = std::make_shared<optimizers::LossScaleOptimizer>(optimizer_);
  const std::size_t n_out = num_outputs();
  const std::vector<std::string> outs = output_names();

  // Losses: Keras' CompileLoss (one for all outputs, a list in output order, or a map by name).
  const LossSpec& ls = options.loss;
  output_losses_.assign(n_out, nullptr);
  if (ls.one.defined()) {
    output_losses_.assign(n_out, ls.one.get());
  } else if (!ls.list.empty()) {
    if (ls.list.size() != n_out)
      throw ValueError(fmt::format("{}.compile: a loss list needs one entry per output: {} for the {} outputs ({})",
                                   name(), ls.list.size(), n_out, join(outs)));
    for (std::size_t i = 0; i < n_out; ++i) output_losses_[i] = ls.list[i].get();
  } else {
    for (const auto& [key, l] : ls.by_name) output_losses_[output_index(outs, key, name(), "the loss map")] = l.get();
  }
  loss_ = nullptr;
  for (const auto& l : output_losses_)
    if (l && !loss_) loss_ = l;

  const LossWeights& lw = options.loss_weights;
  output_weights_.assign(n_out, 1.0);
  if (!lw.list.empty()) {
    if (lw.list.size() != n_out)
      throw ValueError(fmt::format("{}.compile: {} loss_weights for a model with {} output(s)", name(), lw.list.size(),
                                   n_out));
    output_weights_ = lw.list;
  }
  for (const auto& [key, w] : lw.by_name) output_weights_[output_index(outs, key, name(), "loss_weights")] = w;
  for (double w : output_weights_)
    if (!std::isfinite(w)) throw ValueError(fmt::format("{}.compile: loss_weights must be finite, got {}", name(), w));

  // Metrics, each tied to one output (Keras' CompileMetrics).
  metrics_.clear();
  metric_names_.clear();
  metric_outputs_.clear();
  const auto add_metric = [&](const metrics::MetricRef& m, std::size_t out, bool fresh_copy) {
    // "accuracy" is resolved from the first batch's shapes, as Keras 3 does.
    const bool accuracy = m.is_name() && (m.name() == "accuracy" || m.name() == "acc");
    const auto& loss = output_losses_[out];
    std::shared_ptr<metrics::Metric> metric;
    if (!accuracy) {
      metric = loss ? m.get(*loss) : m.get();
      // One metric object given for several outputs: each output needs its own state.
      if (fresh_copy && !m.is_name()) metric = metrics::from_config(metric->class_name(), metric->get_config());
    }
    metrics_.push_back(metric);
    metric_names_.push_back(m.name());
    metric_outputs_.push_back(static_cast<int>(out));
  };
  const MetricsSpec& ms = options.metrics;
  if (!ms.flat.empty()) {
    for (std::size_t o = 0; o < n_out; ++o)
      for (const auto& m : ms.flat) add_metric(m, o, o > 0);
  } else if (!ms.per_output.empty()) {
    if (ms.per_output.size() != n_out)
      throw ValueError(fmt::format("{}.compile: metrics given as one list per output need {} lists, got {}", name(),
                                   n_out, ms.per_output.size()));
    for (std::size_t o = 0; o < n_out; ++o)
      for (const auto& m : ms.per_output[o]) add_metric(m, o, false);
  } else {
    std::vector<std::vector<const metrics::MetricRef*>> by_out(n_out);
    for (const auto& [key, list] : ms.by_name)
      for (const auto& m : list) by_out[output_index(outs, key, name(), "the metrics map")].push_back(&m);
    for (std::size_t o = 0; o < n_out; ++o)
      for (const auto* m : by_out[o]) add_metric(*m, o, false);
  }
  compile_options_ = std::move(options);
  steps_.reset();  // a new loss or optimizer: the steps trace again
  output_loss_sums_.assign(n_out, 0.0);
  loss_sum_ = 0;
  loss_count_ = 0;
}

std::vector<std::shared_ptr<metrics::Metric>> Model::metrics() {
  std::vector<std::shared_ptr<metrics::Metric>> out;
  for (auto& m : metrics_)
    if (m) out.push_back(m);
  return out;
}

void Model::resolve_metrics(const std::vector<Tensor>& y, const std::vector<Tensor>& y_pred) {
  for (std::size_t i = 0; i < metrics_.size(); ++i) {
    const auto o = static_cast<std::size_t>(metric_outputs_[i]);
    if (!metrics_[i]) metrics_[i] = metrics::resolve_accuracy(y[o].shape(), y_pred[o].shape(), metric_names_[i]);
  }
}

void Model::resolve_metrics(const Tensor& y, const Tensor& y_pred) {
  for (std::size_t i = 0; i < metrics_.size(); ++i)
    if (!metrics_[i] && metric_outputs_[i] == 0)
      metrics_[i] = metrics::resolve_accuracy(y.shape(), y_pred.shape(), metric_names_[i]);
}

void Model::update_metrics(const Tensor& loss, const Tensor& y, const Tensor& pred, const Tensor& sample_weight,
                           double batch) {
  loss_sum_ += loss.item<double>() * batch;
  loss_count_ += batch;
  resolve_metrics(y, pred);
  for (std::size_t i = 0; i < metrics_.size(); ++i)
    if (metric_outputs_[i] == 0) metrics_[i]->update_state(y, pred, sample_weight);
}

void Model::reset_metrics() {
  loss_sum_ = 0;
  loss_count_ = 0;
  std::fill(output_loss_sums_.begin(), output_loss_sums_.end(), 0.0);
  for (auto& m : metrics_)
    if (m) m->reset_state();
}

std::map<std::string, double> Model::metrics_results() {
  std::map<std::string, double> out;
  const bool multi = num_outputs() > 1;
  const std::vector<std::string> outs = multi ? output_names() : std::vector<std::string>{};
  if (loss_count_ > 0) {
    out["loss"] = loss_sum_ / loss_count_;
    // Keras 3 logs each output's loss (times its loss weight) as "<output>_loss".
    if (multi)
      for (std::size_t i = 0; i < output_losses_.size(); ++i)
        if (output_losses_[i]) out[outs[i] + "_loss"] = output_loss_sums_[i] / loss_count_;
  }
  for (std::size_t i = 0; i < metrics_.size(); ++i) {
    const auto& m = metrics_[i];
    if (!m) continue;
    const std::string key = multi ? outs[static_cast<std::size_t>(metric_outputs_[i])] + "_" + m->name() : m->name();
    const std::vector<double> values = m->results();
    if (values.size() == 1) {
      out[key] = values[0];
    } else {  // Keras logs the list; a log holds numbers, so one entry per value
      for (std::size_t j = 0; j < values.size(); ++j) out[fmt::format("{}_{}", key, j)] = values[j];
    }
  }
  return out;
}

std::vector<Tensor> Model::compute_losses(const std::vector<Tensor>& y, const std::vector<Tensor>& y_pred,
                                          const Tensor& sample_weight) {
  if (!loss_) throw ValueError(fmt::format("{}: compile() was given no loss", name()));
  if (y.size() != output_losses_.size() || y_pred.size() != output_losses_.size())
    throw ValueError(fmt::format("{}: {} targets and {} predictions for a model with {} output(s)", name(), y.size(),
                                 y_pred.size(), output_losses_.size()));
  // Keras 3's CompileLoss: total = sum_i loss_weight_i * loss_i(y_i, y_pred_i), each term also
  // tracked as "<output>_loss"; then the layers' regularisation losses.
  Tensor total;
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < output_losses_.size(); ++i) {
    if (!output_losses_[i]) continue;
    Tensor l = (*output_losses_[i])(y[i], y_pred[i], sample_weight);
    if (output_weights_[i] != 1.0) l = mul(l, scalar_like(l, output_weights_[i]));
    total = total.defined() ? add(total, cast(l, total.dtype())) : l;
    parts.push_back(l);
  }
  for (const Tensor& extra : losses()) total = add(total, cast(extra, total.dtype()));
  std::vector<Tensor> out{total};
  if (output_losses_.size() > 1) out.insert(out.end(), parts.begin(), parts.end());
  return out;
}

Tensor Model::compute_loss(const Tensor&, const Tensor& y, const Tensor& y_pred, const Tensor& sample_weight) {
  if (!loss_) throw ValueError(fmt::format("{}: compile() was given no loss", name()));
  if (output_losses_.size() <= 1) return compute_losses({y}, {y_pred}, sample_weight)[0];
  // A multi-output model's custom step with one target: the first output's (weighted) loss.
  if (!output_losses_[0]) throw ValueError(fmt::format("{}: compile() gave the first output no loss", name()));
  Tensor total = (*output_losses_[0])(y, y_pred, sample_weight);
  if (output_weights_[0] != 1.0) total = mul(total, scalar_like(total, output_weights_[0]));
  for (const Tensor& extra : losses()) total = add(total, cast(extra, total.dtype()));
  return total;
}

std::vector<Tensor> Model::run_step(detail::Step step, const std::vector<Tensor>& args,
                                    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& eager) {
  if (!steps_) steps_ = std::make_shared<detail::StepFunctions>();
  static const std::string names[] = {"train_step", "test_step", "predict_step"};
  backend::ProfileRange range("step", names[static_cast<int>(step)]);
  return steps_->run(step, args, eager, !compile_options_.run_eagerly, compile_options_.jit_compile, name());
}

const graph::Graph* Model::train_function_graph() const {
  return steps_ ? steps_->first_graph(detail::Step::train) : nullptr;
}

std::vector<Tensor> Model::forward(const std::vector<Tensor>& x, bool training) {
  // A functional model with several inputs or outputs runs its graph directly (its layers
  // cast their own inputs, and each gets `training`); otherwise the model is called as a layer.
  if (graph_ && (x.size() > 1 || num_outputs() > 1)) return call_all(x, training);
  if (x.size() == 1) return {(*this)(x[0], training)};
  return {(*this)(x, training)};
}

namespace {
// A step's arguments: the inputs, the targets, and the sample weights when there are some.
std::vector<Tensor> step_args(const std::vector<Tensor>& x, const std::vector<Tensor>& y, const Tensor& sample_weight) {
  std::vector<Tensor> a = x;
  a.insert(a.end(), y.begin(), y.end());
  if (sample_weight.defined()) a.push_back(sample_weight);
  return a;
}
struct StepArgs {
  std::vector<Tensor> x, y;
  Tensor sample_weight;
};
StepArgs split_args(const std::vector<Tensor>& a, std::size_t nx, std::size_t ny) {
  StepArgs s;
  s.x.assign(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(nx));
  s.y.assign(a.begin() + static_cast<std::ptrdiff_t>(nx), a.begin() + static_cast<std::ptrdiff_t>(nx + ny));
  if (a.size() > nx + ny) s.sample_weight = a.back();
  return s;
}
double batch_rows(const std::vector<Tensor>& x) { return static_cast<double>(x.at(0).shape()[0]); }
}  // namespace

std::map<std::string, double> Model::train_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  return multi_train_step({x}, {y}, sample_weight);
}

std::map<std::string, double> Model::test_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  return multi_test_step({x}, {y}, sample_weight);
}

std::map<std::string, double> Model::run_train_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                                    const Tensor& sample_weight) {
  if (x.size() == 1 && y.size() == 1) return train_step(x[0], y[0], sample_weight);
  return multi_train_step(x, y, sample_weight);
}

std::map<std::string, double> Model::run_test_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                                   const Tensor& sample_weight) {
  if (x.size() == 1 && y.size() == 1) return test_step(x[0], y[0], sample_weight);
  return multi_test_step(x, y, sample_weight);
}

std::map<std::string, double> Model::multi_train_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                                      const Tensor& sample_weight) {
  const std::size_t nx = x.size(), ny = y.size();
  // The tensor work, traced unless the model runs eagerly: returns the losses (the total, then
  // each output's) and the predictions for the metrics.
  const std::vector<Tensor> out = run_step(detail::Step::train, step_args(x, y, sample_weight), [this, nx, ny](const std::vector<Tensor>& a) {
    const StepArgs s = split_args(a, nx, ny);
    std::vector<Tensor> y_pred, losses_out, grads;
    std::vector<Variable*> vars;
    {
      GradientTape tape;
      {
        backend::ProfileRange phase("phase", "forward");
        y_pred = forward(s.x, true);
      }
      {
        backend::ProfileRange phase("phase", "loss");
        losses_out = compute_losses(s.y, y_pred, s.sample_weight);
      }
      // The weights are read after the forward pass: a model without an Input builds (creates
      // its weights) in its first call, and Keras' first step already trains them. Frozen
      // layers (trainable = false) are not among them.
      vars = trainable_weights();
      // Keras' optimizer.scale_loss: the loss times the loss scale (a LossScaleOptimizer's
      // dynamic scale, or loss_scale_factor); apply() divides the gradients by it again.
      backend::ProfileRange phase("phase", "backward");
      // Under a strategy with several replicas the gradients of the global batch, their
      // all-reduce overlapping the backward pass (the tape's gradients alone otherwise, and in
      // the parameter-server mode, where the servers combine them).
      if (!vars.empty())
        grads = distribute::detail::parameter_server_mode()
                    ? tape.gradient(optimizer_->scale_loss(losses_out[0]), vars)
                    : distribute::detail::backward_and_reduce(tape, optimizer_->scale_loss(losses_out[0]), vars);
    }
    if (!vars.empty()) {
      backend::ProfileRange phase("phase", "optimizer");
      if (distribute::detail::parameter_server_mode()) {
        // Asynchronous: the servers apply the gradients; the weights come back from them.
        distribute::detail::ps_push_pull(grads, vars, *optimizer_);
      } else {
        optimizer_->apply(grads, vars);
      }
    }
    for (const Tensor& p : y_pred) losses_out.push_back(for_metrics(p));
    return losses_out;
  });
  const std::size_t n_losses = out.size() - ny;
  backend::ProfileRange phase("phase", "metrics");
  update_metrics(std::vector<Tensor>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n_losses)), y,
                 std::vector<Tensor>(out.begin() + static_cast<std::ptrdiff_t>(n_losses), out.end()), sample_weight,
                 batch_rows(x));
  return metrics_results();
}

std::map<std::string, double> Model::multi_test_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                                     const Tensor& sample_weight) {
  const std::size_t nx = x.size(), ny = y.size();
  const std::vector<Tensor> out = run_step(detail::Step::test, step_args(x, y, sample_weight), [this, nx, ny](const std::vector<Tensor>& a) {
    const StepArgs s = split_args(a, nx, ny);
    std::vector<Tensor> y_pred, losses_out;
    {
      backend::ProfileRange phase("phase", "forward");
      y_pred = forward(s.x, false);
    }
    {
      backend::ProfileRange phase("phase", "loss");
      losses_out = compute_losses(s.y, y_pred, s.sample_weight);
    }
    for (const Tensor& p : y_pred) losses_out.push_back(for_metrics(p));
    return losses_out;
  });
  const std::size_t n_losses = out.size() - ny;
  backend::ProfileRange phase("phase", "metrics");
  update_metrics(std::vector<Tensor>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n_losses)), y,
                 std::vector<Tensor>(out.begin() + static_cast<std::ptrdiff_t>(n_losses), out.end()), sample_weight,
                 batch_rows(x));
  return metrics_results();
}

// The host side of a step: the batch-weighted running losses and the metrics' states.
void Model::update_metrics(const std::vector<Tensor>& losses_in, const std::vector<Tensor>& y,
                           const std::vector<Tensor>& pred, const Tensor& sample_weight, double batch) {
  loss_sum_ += losses_in.at(0).item<double>() * batch;
  loss_count_ += batch;
  std::size_t part = 1;
  for (std::size_t i = 0; i < output_losses_.size() && losses_in.size() > 1; ++i)
    if (output_losses_[i]) output_loss_sums_[i] += losses_in.at(part++).item<double>() * batch;
  resolve_metrics(y, pred);
  for (std::size_t i = 0; i < metrics_.size(); ++i) {
    const auto o = static_cast<std::size_t>(metric_outputs_[i]);
    metrics_[i]->update_state(y[o], pred[o], sample_weight);
  }
}

}  // namespace keel::models
