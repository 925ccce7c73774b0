// Model::compile / fit / evaluate / predict and the default train_step / test_step: Keras'
// training loop, over the batches of an EpochIterator (in-memory tensors or a Dataset).
#include <cmath>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/recorder.hpp"
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

void require_compiled(const Model& m, const char* what) {
  if (!m.compiled())
    throw ValueError(fmt::format("{}: call compile() before {}()", m.name(), what));
}

// fit's options that Keras rejects (its -1 is keel's "None" for the step counts).
void check_fit_options(Model& m, const FitOptions& o) {
  if (o.epochs < 0) throw ValueError(fmt::format("fit: epochs must be >= 0, got {}", o.epochs));
  if (o.steps_per_epoch == 0 || o.steps_per_epoch < -1)
    throw ValueError(fmt::format("fit: steps_per_epoch must be positive (or -1 for the whole data), got {}",
                                 o.steps_per_epoch));
  if (o.validation_steps == 0 || o.validation_steps < -1)
    throw ValueError(fmt::format("fit: validation_steps must be positive (or -1), got {}", o.validation_steps));
  if (o.validation_freq <= 0)
    throw ValueError(fmt::format("fit: validation_freq must be a positive integer, got {}", o.validation_freq));
  if (!(o.validation_split >= 0 && o.validation_split < 1))  // also NaN
    throw ValueError(fmt::format("fit: validation_split must be in [0, 1), got {}", o.validation_split));
  if (o.initial_epoch < 0) throw ValueError(fmt::format("fit: initial_epoch must be >= 0, got {}", o.initial_epoch));
  if (auto* seq = dynamic_cast<Sequential*>(&m); seq && seq->layers().empty())
    throw ValueError(fmt::format("{}: fit() on a Sequential with no layers; add layers first", m.name()));
}

// Metrics read half-precision predictions in float32, as Keras' metrics convert them to their
// float32 dtype (the loss does the same in Loss::operator()).
Tensor for_metrics(const Tensor& y_pred) {
  if (y_pred.dtype() != DType::float16 && y_pred.dtype() != DType::bfloat16) return y_pred;
  autograd::NoRecordScope no_record;
  return cast(y_pred, DType::float32);
}

// Keras' class_weight: each sample weighted by the weight of its class (integer labels, or
// the argmax of one-hot labels).
Tensor class_weights(const std::map<std::int64_t, double>& cw, const Tensor& y) {
  Tensor labels = y;
  if (is_floating(y.dtype()) && y.rank() >= 2 && y.shape()[y.rank() - 1] > 1) labels = argmax(y, -1);
  const auto ids = labels.to_vector<std::int64_t>();
  std::vector<float> w(ids.size(), 1.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = cw.find(ids[i]);
    if (it != cw.end()) w[i] = static_cast<float>(it->second);
  }
  return constant(w);  // [batch]
}

// Class weights [batch] times the sample weights (per sample, or per sample and time step).
Tensor combine_weights(const Tensor& cw, const Tensor& sw) {
  if (!sw.defined()) return cw;
  std::vector<std::int64_t> dims(static_cast<std::size_t>(sw.rank()), 1);
  dims[0] = cw.shape()[0];
  return mul(reshape(cw, Shape(dims)), sw);
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
  if (options.loss_weights.size() > num_outputs())
    throw ValueError(fmt::format("{}.compile: {} loss_weights for a model with {} output(s)", name(),
                                 options.loss_weights.size(), num_outputs()));
  for (double w : options.loss_weights)
    if (!std::isfinite(w)) throw ValueError(fmt::format("{}.compile: loss_weights must be finite, got {}", name(), w));
  loss_ = options.loss.get();
  metrics_.clear();
  metric_names_.clear();
  for (const auto& m : options.metrics) {
    // "accuracy" is resolved from the first batch's shapes, as Keras 3 does.
    const bool accuracy = m.is_name() && (m.name() == "accuracy" || m.name() == "acc");
    metrics_.push_back(accuracy ? nullptr : (loss_ ? m.get(*loss_) : m.get()));
    metric_names_.push_back(m.name());
  }
  compile_options_ = std::move(options);
  steps_.reset();  // a new loss or optimizer: the steps trace again
  loss_sum_ = 0;
  loss_count_ = 0;
}

std::vector<std::shared_ptr<metrics::Metric>> Model::metrics() {
  std::vector<std::shared_ptr<metrics::Metric>> out;
  for (auto& m : metrics_)
    if (m) out.push_back(m);
  return out;
}

void Model::resolve_metrics(const Tensor& y, const Tensor& y_pred) {
  for (std::size_t i = 0; i < metrics_.size(); ++i)
    if (!metrics_[i]) metrics_[i] = metrics::resolve_accuracy(y.shape(), y_pred.shape(), metric_names_[i]);
}

void Model::reset_metrics() {
  loss_sum_ = 0;
  loss_count_ = 0;
  for (auto& m : metrics_)
    if (m) m->reset_state();
}

std::map<std::string, double> Model::metrics_results() {
  std::map<std::string, double> out;
  if (loss_count_ > 0) out["loss"] = loss_sum_ / loss_count_;
  for (auto& m : metrics_) {
    if (!m) continue;
    const std::vector<double> values = m->results();
    if (values.size() == 1) {
      out[m->name()] = values[0];
    } else {  // Keras logs the list; a log holds numbers, so one entry per value
      for (std::size_t i = 0; i < values.size(); ++i) out[fmt::format("{}_{}", m->name(), i)] = values[i];
    }
  }
  return out;
}

Tensor Model::compute_loss(const Tensor&, const Tensor& y, const Tensor& y_pred, const Tensor& sample_weight) {
  if (!loss_) throw ValueError(fmt::format("{}: compile() was given no loss", name()));
  Tensor total = (*loss_)(y, y_pred, sample_weight);
  for (const Tensor& extra : losses()) total = add(total, cast(extra, total.dtype()));
  return total;
}

namespace {
// Batches go where the model's weights are (Keras' data adapters do the same): data pipelines
// and loaders produce host tensors while the weights may live on a GPU. An unbuilt model builds
// on the default device, so its batches go there.
Device model_device(Model& m) {
  const auto ws = m.weights();
  return ws.empty() ? default_device() : ws.front()->peek().device();
}
Tensor placed(const Tensor& t, Device d) { return !t.defined() || t.device() == d ? t : t.to(d); }
}  // namespace

std::vector<Tensor> Model::run_step(detail::Step step, const std::vector<Tensor>& args,
                                    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& eager) {
  if (!steps_) steps_ = std::make_shared<detail::StepFunctions>();
  static const std::string names[] = {"train_step", "test_step", "predict_step"};
  backend::ProfileRange range("step", names[static_cast<int>(step)]);
  return steps_->run(step, args, eager, !compile_options_.run_eagerly, compile_options_.jit_compile, name());
}

namespace {
// A step's arguments: x and y, and the sample weights when there are some.
std::vector<Tensor> step_args(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  std::vector<Tensor> a{x, y};
  if (sample_weight.defined()) a.push_back(sample_weight);
  return a;
}
}  // namespace

std::map<std::string, double> Model::train_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  // The tensor work, traced unless the model runs eagerly: returns the loss and the predictions
  // for the metrics.
  const std::vector<Tensor> out = run_step(detail::Step::train, step_args(x, y, sample_weight), [this](const std::vector<Tensor>& a) {
    const Tensor sw = a.size() > 2 ? a[2] : Tensor();
    Tensor y_pred, loss;
    std::vector<Tensor> grads;
    std::vector<Variable*> vars;
    {
      GradientTape tape;
      y_pred = (*this)(a[0], true);
      loss = compute_loss(a[0], a[1], y_pred, sw);
      // The weights are read after the forward pass: a model without an Input builds (creates
      // its weights) in its first call, and Keras' first step already trains them.
      vars = trainable_weights();
      // Keras' optimizer.scale_loss: the loss times the loss scale (a LossScaleOptimizer's
      // dynamic scale, or loss_scale_factor); apply() divides the gradients by it again.
      grads = tape.gradient(optimizer_->scale_loss(loss), vars);
    }
    optimizer_->apply(grads, vars);
    return std::vector<Tensor>{loss, for_metrics(y_pred)};
  });
  update_metrics(out[0], y, out[1], sample_weight, static_cast<double>(x.shape()[0]));
  return metrics_results();
}

std::map<std::string, double> Model::test_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  const std::vector<Tensor> out = run_step(detail::Step::test, step_args(x, y, sample_weight), [this](const std::vector<Tensor>& a) {
    const Tensor y_pred = (*this)(a[0], false);
    const Tensor loss = compute_loss(a[0], a[1], y_pred, a.size() > 2 ? a[2] : Tensor());
    return std::vector<Tensor>{loss, for_metrics(y_pred)};
  });
  update_metrics(out[0], y, out[1], sample_weight, static_cast<double>(x.shape()[0]));
  return metrics_results();
}

// The host side of a step: the batch-weighted running loss and the metrics' states.
void Model::update_metrics(const Tensor& loss, const Tensor& y, const Tensor& pred, const Tensor& sample_weight,
                           double batch) {
  loss_sum_ += loss.item<double>() * batch;
  loss_count_ += batch;
  resolve_metrics(y, pred);
  for (auto& m : metrics_) m->update_state(y, pred, sample_weight);
}

History Model::fit(const Tensor& x_all, const Tensor& y_all, FitOptions o) {
  require_compiled(*this, "fit");
  check_xy(x_all, y_all, "fit");
  if (o.batch_size <= 0) throw ValueError(fmt::format("fit: batch_size must be positive, got {}", o.batch_size));
  check_fit_options(*this, o);
  Tensor x = x_all, y = y_all, sw = o.sample_weight;
  if (sw.defined() && (sw.rank() == 0 || sw.shape()[0] != x.shape()[0]))
    throw ShapeError(fmt::format("fit: sample_weight {} does not match {} samples", sw.shape().to_string(), x.shape()[0]));
  std::optional<std::pair<Tensor, Tensor>> val = o.validation_data;
  Tensor val_sw;
  if (!val && o.validation_split > 0) {
    const std::int64_t n = x.shape()[0];
    const auto split_at = static_cast<std::int64_t>(static_cast<double>(n) * (1.0 - o.validation_split));
    val = std::make_pair(rows(x, split_at, n), rows(y, split_at, n));
    val_sw = rows(sw, split_at, n);
    x = rows(x, 0, split_at);
    y = rows(y, 0, split_at);
    sw = rows(sw, 0, split_at);
  }
  if (x.shape()[0] == 0) throw ValueError("fit: no training samples");
  return fit_loop(EpochIterator(x, y, sw, o.batch_size, o.shuffle, o.steps_per_epoch), o, val, val_sw);
}

History Model::fit(const data::Dataset<std::pair<Tensor, Tensor>>& train, FitOptions o) {
  require_compiled(*this, "fit");
  check_fit_options(*this, o);
  if (o.validation_split != 0)
    throw ValueError("fit: validation_split is not supported for a Dataset; pass validation_data");
  return fit_loop(EpochIterator(train, o.steps_per_epoch, "fit"), o, o.validation_data, Tensor());
}

History Model::fit_loop(const EpochIterator& data, const FitOptions& o,
                        const std::optional<std::pair<Tensor, Tensor>>& val, const Tensor& val_sw) {
  History history;
  if (o.seed) seed_generator_.reset(*o.seed);
  random::GeneratorScope own_stream(seed_generator_);
  for (auto& cb : o.callbacks) cb->set_model(this);
  stop_training = false;
  for (auto& cb : o.callbacks) cb->on_train_begin({});
  std::int64_t known_steps = data.steps();  // a Dataset's length is known after its first pass
  for (int epoch = o.initial_epoch; epoch < o.epochs; ++epoch) {
    reset_metrics();
    for (auto& cb : o.callbacks) cb->on_epoch_begin(epoch, {});
    if (o.verbose) std::cout << "Epoch " << epoch + 1 << "/" << o.epochs << std::endl;
    Progbar bar(known_steps, o.verbose, std::cout);
    std::map<std::string, double> logs;
    const std::int64_t steps = data.run_epoch([&](std::int64_t step, const Batch& batch) {
      Tensor sw = batch.sample_weight;
      if (!o.class_weight.empty()) {
        // Class weights are made beside the data, wherever the model is.
        DeviceScope beside_data(batch.y.device());
        sw = combine_weights(class_weights(o.class_weight, batch.y), sw);
      }
      for (auto& cb : o.callbacks) cb->on_train_batch_begin(step, logs);
      const Device d = model_device(*this);
      logs = train_step(placed(batch.x, d), placed(batch.y, d), placed(sw, d));
      {
        backend::ProfileRange range("callbacks", "on_train_batch_end");
        for (auto& cb : o.callbacks) cb->on_train_batch_end(step, logs);
      }
      if (stop_training) return false;
      bar.update(step + 1, logs, false);
      return true;
    });
    if (steps == 0) throw ValueError("fit: the training data yielded no batches");
    known_steps = steps;
    std::map<std::string, double> epoch_logs = logs;
    if (val && (epoch + 1 - o.initial_epoch) % o.validation_freq == 0) {
      EvaluateOptions eo;
      eo.batch_size = o.validation_batch_size > 0 ? o.validation_batch_size : o.batch_size;
      eo.verbose = 0;
      eo.sample_weight = val_sw;
      eo.steps = o.validation_steps;
      for (const auto& [k, v] : evaluate(val->first, val->second, eo)) epoch_logs["val_" + k] = v;
    }
    // Keras runs History and the progress bar after the user's callbacks, which may add to
    // the logs (LearningRateScheduler's "learning_rate").
    for (auto& cb : o.callbacks) cb->on_epoch_end(epoch, epoch_logs);
    bar.update(steps, epoch_logs, true);
    for (const auto& [k, v] : epoch_logs) history.history[k].push_back(v);
    history.epoch.push_back(epoch);
    if (stop_training) break;
  }
  for (auto& cb : o.callbacks) cb->on_train_end({});
  return history;
}

std::map<std::string, double> Model::evaluate(const data::Dataset<std::pair<Tensor, Tensor>>& data, EvaluateOptions o) {
  require_compiled(*this, "evaluate");
  return evaluate_loop(EpochIterator(data, o.steps, "evaluate"), o);
}

std::map<std::string, double> Model::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions o) {
  require_compiled(*this, "evaluate");
  check_xy(x, y, "evaluate");
  if (o.batch_size <= 0) throw ValueError(fmt::format("evaluate: batch_size must be positive, got {}", o.batch_size));
  return evaluate_loop(EpochIterator(x, y, o.sample_weight, o.batch_size, false, o.steps), o);
}

std::map<std::string, double> Model::evaluate_loop(const EpochIterator& data, const EvaluateOptions& o) {
  reset_metrics();
  for (auto& cb : o.callbacks) {
    cb->set_model(this);
    cb->on_test_begin({});
  }
  Progbar bar(data.steps(), o.verbose, std::cout);
  std::map<std::string, double> logs;
  autograd::NoRecordScope no_record;
  random::GeneratorScope own_stream(seed_generator_);
  bool finalized = false;
  const std::int64_t steps = data.run_epoch([&](std::int64_t step, const Batch& batch) {
    for (auto& cb : o.callbacks) cb->on_test_batch_begin(step, logs);
    const Device d = model_device(*this);
    logs = test_step(placed(batch.x, d), placed(batch.y, d), placed(batch.sample_weight, d));
    for (auto& cb : o.callbacks) cb->on_test_batch_end(step, logs);
    finalized = step + 1 == data.steps();
    bar.update(step + 1, logs, finalized);
    return true;
  });
  if (steps == 0 && data.from_dataset()) throw ValueError("evaluate: the data yielded no batches");
  if (!finalized && steps > 0) bar.update(steps, logs, true);
  for (auto& cb : o.callbacks) cb->on_test_end(logs);
  return logs;
}

Tensor Model::predict(const Tensor& x, PredictOptions o) {
  check_xy(x, Tensor(), "predict");
  if (o.batch_size <= 0) throw ValueError(fmt::format("predict: batch_size must be positive, got {}", o.batch_size));
  const EpochIterator data(x, Tensor(), Tensor(), o.batch_size, false, o.steps);
  for (auto& cb : o.callbacks) {
    cb->set_model(this);
    cb->on_predict_begin({});
  }
  Progbar bar(data.steps(), o.verbose, std::cout);
  std::vector<Tensor> outs;
  autograd::NoRecordScope no_record;
  random::GeneratorScope own_stream(seed_generator_);
  data.run_epoch([&](std::int64_t step, const Batch& batch) {
    for (auto& cb : o.callbacks) cb->on_predict_batch_begin(step, {});
    const Tensor xb = placed(batch.x, model_device(*this));
    outs.push_back(run_step(detail::Step::predict, {xb}, [this](const std::vector<Tensor>& a) {
      return std::vector<Tensor>{(*this)(a[0], false)};
    })[0]);
    for (auto& cb : o.callbacks) cb->on_predict_batch_end(step, {});
    bar.update(step + 1, {}, step + 1 == data.steps());
    return true;
  });
  for (auto& cb : o.callbacks) cb->on_predict_end({});
  if (outs.empty()) throw ValueError("predict: no samples");
  return outs.size() == 1 ? outs[0] : concat(outs, 0);
}

}  // namespace keel::models
