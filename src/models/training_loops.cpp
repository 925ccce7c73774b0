// Model::fit / evaluate / predict and the *_on_batch forms: Keras' loops over the batches of an
// EpochIterator (in-memory tensors or a Dataset), for any number of inputs and outputs.
#include <iostream>
#include <tuple>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/recorder.hpp"
#include "distribute/hooks.hpp"
#include "distribute/mirrored_replicas.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "models/epoch_iterator.hpp"
#include "models/progbar.hpp"
#include "models/step_functions.hpp"

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

// Class weights (of the first output's labels, as Keras requires one output for them) times
// the sample weights, made beside the data.
Tensor batch_weights(const std::map<std::int64_t, double>& cw, const std::vector<Tensor>& y, const Tensor& sw) {
  if (cw.empty()) return sw;
  DeviceScope beside_data(y.at(0).device());
  return combine_weights(class_weights(cw, y[0]), sw);
}

// Batches go where the model's weights are (Keras' data adapters do the same): data pipelines
// and loaders produce host tensors while the weights may live on a GPU. An unbuilt model builds
// on the default device, so its batches go there.
Device model_device(Model& m) {
  const auto ws = m.weights();
  return ws.empty() ? default_device() : ws.front()->peek().device();
}
Tensor placed(const Tensor& t, Device d) { return !t.defined() || t.device() == d ? t : t.to(d); }
std::vector<Tensor> placed(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(placed(t, d));
  return out;
}

std::vector<Tensor> rows_of(const std::vector<Tensor>& ts, std::int64_t b, std::int64_t e) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(rows(t, b, e));
  return out;
}

void check_sample_weight(const Tensor& sw, const std::vector<Tensor>& x, const char* op) {
  if (sw.defined() && (sw.rank() == 0 || sw.shape()[0] != x.at(0).shape()[0]))
    throw ShapeError(fmt::format("{}: sample_weight {} does not match {} samples", op, sw.shape().to_string(),
                                 x[0].shape()[0]));
}

// Under a strategy with several replicas (distribute/hooks.hpp), this replica's shard of a
// global batch: its rows of every tensor. A replica left without rows (a last batch smaller
// than the replicas) runs on the batch's first row with zero sample weights and `empty` set:
// its gradients get weight 0 and its logs are left out, but it still joins the collectives.
Batch replica_shard(const Batch& batch, const Tensor& sw, bool& empty) {
  const std::int64_t n = batch.x.at(0).shape()[0];
  auto [b, e] = distribute::detail::shard_range(n);
  empty = e == b;
  if (empty) {
    b = 0;
    e = std::min<std::int64_t>(1, n);
  }
  Batch out{rows_of(batch.x, b, e), rows_of(batch.y, b, e), rows(sw, b, e)};
  if (empty) {
    DeviceScope beside_data(batch.x[0].device());
    out.sample_weight = out.sample_weight.defined() ? zeros_like(out.sample_weight) : zeros({e - b});
  }
  return out;
}

}  // namespace

History Model::fit(const ModelData& x_in, const ModelData& y_in, FitOptions o) {
  require_compiled(*this, "fit");
  std::vector<Tensor> x = inputs_in_order(x_in, "fit"), y = targets_in_order(y_in, "fit");
  check_xy(x, y, "fit");
  if (o.batch_size <= 0) throw ValueError(fmt::format("fit: batch_size must be positive, got {}", o.batch_size));
  check_fit_options(*this, o);
  Tensor sw = o.sample_weight;
  check_sample_weight(sw, x, "fit");
  std::optional<std::pair<std::vector<Tensor>, std::vector<Tensor>>> val;
  Tensor val_sw;
  if (o.validation_data) {
    val.emplace(inputs_in_order(o.validation_data->first, "fit (validation_data)"),
                targets_in_order(o.validation_data->second, "fit (validation_data)"));
    check_xy(val->first, val->second, "fit (validation_data)");
  } else if (o.validation_split > 0) {
    const std::int64_t n = x[0].shape()[0];
    const auto split_at = static_cast<std::int64_t>(static_cast<double>(n) * (1.0 - o.validation_split));
    val.emplace(rows_of(x, split_at, n), rows_of(y, split_at, n));
    val_sw = rows(sw, split_at, n);
    x = rows_of(x, 0, split_at);
    y = rows_of(y, 0, split_at);
    sw = rows(sw, 0, split_at);
  }
  if (x[0].shape()[0] == 0) throw ValueError("fit: no training samples");
  if (distribute::detail::parameter_server_mode() && !distribute::detail::is_parameter_server()) {
    // Asynchronous workers: each trains on its share of the rows.
    const auto [b, e] = distribute::detail::worker_rows(x[0].shape()[0]);
    if (e == b)
      throw ValueError(fmt::format("fit: {} training samples leave worker {} without any", x[0].shape()[0],
                                   distribute::detail::worker_number()));
    x = rows_of(x, b, e);
    y = rows_of(y, b, e);
    sw = rows(sw, b, e);
  }
  return fit_loop(EpochIterator(x, y, sw, o.batch_size, o.shuffle, o.steps_per_epoch), o, val, val_sw);
}

namespace {
// A parameter-server worker's share of a Dataset's elements (Dataset::shard); the Dataset
// itself otherwise.
template <class D>
D worker_share(const D& d) {
  if (!distribute::detail::parameter_server_mode() || distribute::detail::is_parameter_server()) return d;
  return d.shard(distribute::detail::worker_count(), distribute::detail::worker_number());
}

std::optional<std::pair<std::vector<Tensor>, std::vector<Tensor>>> no_validation_split(const FitOptions& o) {
  if (o.validation_split != 0)
    throw ValueError("fit: validation_split is not supported for a Dataset; pass validation_data");
  return std::nullopt;
}
}  // namespace

History Model::fit(const data::Dataset<std::pair<Tensor, Tensor>>& train, FitOptions o) {
  require_compiled(*this, "fit");
  check_fit_options(*this, o);
  auto val = no_validation_split(o);
  if (o.validation_data)
    val.emplace(inputs_in_order(o.validation_data->first, "fit (validation_data)"),
                targets_in_order(o.validation_data->second, "fit (validation_data)"));
  return fit_loop(EpochIterator(worker_share(train), o.steps_per_epoch, "fit"), o, val, Tensor());
}

History Model::fit(const data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& train, FitOptions o) {
  require_compiled(*this, "fit");
  check_fit_options(*this, o);
  auto val = no_validation_split(o);
  if (o.validation_data)
    val.emplace(inputs_in_order(o.validation_data->first, "fit (validation_data)"),
                targets_in_order(o.validation_data->second, "fit (validation_data)"));
  return fit_loop(EpochIterator(worker_share(train), o.steps_per_epoch, "fit"), o, val, Tensor());
}

History Model::fit_loop(const EpochIterator& data, const FitOptions& o,
                        const std::optional<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& val,
                        const Tensor& val_sw) {
  History history;
  if (o.seed) seed_generator_.reset(*o.seed);
  random::GeneratorScope own_stream(seed_generator_);
  std::int64_t known_steps = data.steps();  // a Dataset's length is known after its first pass
  for (auto& cb : o.callbacks) {
    cb->set_model(this);
    cb->set_params({{"epochs", o.epochs}, {"steps", static_cast<double>(known_steps)}, {"verbose", o.verbose}});
  }
  stop_training = false;
  resume_epoch_ = -1;
  for (auto& cb : o.callbacks) cb->on_train_begin({});
  if (distribute::detail::parameter_server_mode()) {
    // Asynchronous training: every process starts from the chief's weights (built first if need
    // be); a server then serves the workers until they are done.
    if (weights().empty())
      data.run_epoch([&](std::int64_t, const Batch& b) {
        autograd::NoRecordScope build_only;
        forward(placed(b.x, model_device(*this)), false);
        return false;
      });
    distribute::detail::ps_fit_begin(weights(), trainable_weights());
    if (distribute::detail::is_parameter_server()) {
      distribute::detail::ps_serve(trainable_weights(), *optimizer_);
      distribute::detail::ps_fit_end(trainable_weights(), non_trainable_weights());
      for (auto& cb : o.callbacks) cb->on_train_end({});
      return history;
    }
  }
  // A callback (BackupAndRestore) may have restored a later epoch to continue from.
  const int first_epoch = resume_epoch_ >= 0 ? resume_epoch_ : o.initial_epoch;
  resume_epoch_ = -1;
  // Data-parallel: per replica, its rows this epoch (the weight of its logs in their reduction)
  // and whether the chief's weights reached it. One replica here, or with a MirroredStrategy over
  // several devices (in-process replicas) one per device, replica r > 0 training a copy of this
  // model that gets this model's weights before each step.
  struct ReplicaState {
    double rows = 0;
    bool synced = false;
  };
  distribute::detail::ReplicaGroup* in_process = distribute::detail::in_process_replicas();
  std::vector<std::shared_ptr<Model>> copies;
  if (in_process)
    for (int r = 1; r < in_process->size(); ++r) {
      copies.push_back(replica_copy(in_process->devices()[r]));
      // Each copy draws its own dropout masks, repeatably under fit's seed.
      if (o.seed) copies.back()->seed_generator_.reset(*o.seed + static_cast<std::uint64_t>(r));
    }
  std::vector<ReplicaState> replicas(copies.size() + 1);
  // Replica r's step on its shard of the global batch: its gradients weighted by its share of
  // the rows and all-reduced in the step; the logs of every replica's rows.
  const auto replica_step = [](Model& m, const Batch& batch, const Tensor& sw, ReplicaState& st) {
    const Device d = model_device(m);
    bool empty = false;
    const Batch shard = replica_shard(batch, sw, empty);
    const auto n_global = static_cast<double>(batch.x[0].shape()[0]);
    const auto n_local = static_cast<double>(shard.x[0].shape()[0]);
    if (!st.synced) {  // the chief's initial weights everywhere (built first if need be)
      if (m.weights().empty()) {
        autograd::NoRecordScope build_only;
        m.forward(placed(shard.x, d), false);
      }
      distribute::detail::broadcast_weights(m.weights());
      st.synced = true;
    }
    const auto saved = std::make_tuple(m.loss_sum_, m.loss_count_, m.output_loss_sums_);
    distribute::detail::gradients_reduced_flag() = false;
    std::map<std::string, double> logs;
    {
      const distribute::detail::StepWeightScope weight(empty ? 0.0 : n_local, n_global);
      logs = m.run_train_step(placed(shard.x, d), placed(shard.y, d), placed(shard.sample_weight, d));
    }
    if (!distribute::detail::gradients_reduced_flag() && !m.trainable_weights().empty())
      throw ValueError(fmt::format("{}.fit: the train step was traced without the strategy's gradient all-reduce "
                                   "(trained outside the strategy's scope first); compile the model again inside it",
                                   m.name()));
    if (empty) {  // the dummy row's loss left out again
      std::tie(m.loss_sum_, m.loss_count_, m.output_loss_sums_) = saved;
      logs = m.metrics_results();
    } else {
      st.rows += n_local;
    }
    return distribute::detail::reduce_logs(logs, st.rows);
  };
  for (int epoch = first_epoch; epoch < o.epochs; ++epoch) {
    reset_metrics();
    for (auto& copy : copies) copy->reset_metrics();
    for (ReplicaState& st : replicas) st.rows = 0;
    for (auto& cb : o.callbacks) cb->on_epoch_begin(epoch, {});
    if (o.verbose) std::cout << "Epoch " << epoch + 1 << "/" << o.epochs << std::endl;
    Progbar bar(known_steps, o.verbose, std::cout);
    std::map<std::string, double> logs;
    double epoch_rows = 0;  // this replica's rows so far (the logs' weight in their reduction)
    const std::int64_t steps = data.run_epoch([&](std::int64_t step, const Batch& batch) {
      const Tensor sw = batch_weights(o.class_weight, batch.y, batch.sample_weight);
      for (auto& cb : o.callbacks) cb->on_train_batch_begin(step, logs);
      const Device d = model_device(*this);
      if (in_process) {
        // Every replica built and holding this model's weights, then the step on all at once.
        for (std::size_t r = 0; r <= copies.size(); ++r) {
          Model& m = r == 0 ? *this : *copies[r - 1];
          if (!m.weights().empty()) continue;
          const DeviceScope on(in_process->devices()[r]);
          autograd::NoRecordScope build_only;
          m.forward(placed(rows_of(batch.x, 0, 1), model_device(m)), false);
        }
        for (auto& copy : copies) copy_weights_to(*copy);
        std::vector<std::map<std::string, double>> replica_logs(replicas.size());
        in_process->run([&](int r) {
          Model& m = r == 0 ? *this : *copies[static_cast<std::size_t>(r - 1)];
          random::GeneratorScope stream(m.seed_generator_);
          replica_logs[static_cast<std::size_t>(r)] = replica_step(m, batch, sw, replicas[static_cast<std::size_t>(r)]);
        });
        logs = replica_logs[0];
        epoch_rows = replicas[0].rows;
      } else if (!distribute::detail::multi_replica()) {
        logs = run_train_step(placed(batch.x, d), placed(batch.y, d), placed(sw, d));
        epoch_rows += static_cast<double>(batch.x[0].shape()[0]);
      } else {
        // Data-parallel across processes (distribute/hooks.hpp): this process's replica.
        logs = replica_step(*this, batch, sw, replicas[0]);
        epoch_rows = replicas[0].rows;
      }
      {
        backend::ProfileRange range("callbacks", "on_train_batch_end");
        for (auto& cb : o.callbacks) cb->on_train_batch_end(step, logs);
      }
      if (stop_training) return false;
      bar.update(step + 1, logs, false);
      return true;
    });
    if (steps == 0) throw ValueError("fit: the training data yielded no batches");
    if (known_steps != steps)
      for (auto& cb : o.callbacks) cb->params["steps"] = static_cast<double>(steps);
    known_steps = steps;
    const bool ps_worker = distribute::detail::parameter_server_mode();  // servers returned above
    std::map<std::string, double> epoch_logs = ps_worker ? distribute::detail::ps_reduce_logs(logs, epoch_rows) : logs;
    if (val && (epoch + 1 - o.initial_epoch) % o.validation_freq == 0) {
      EvaluateOptions eo;
      eo.batch_size = o.validation_batch_size > 0 ? o.validation_batch_size : o.batch_size;
      eo.verbose = 0;
      eo.steps = o.validation_steps;
      const EpochIterator val_data(val->first, val->second, val_sw, eo.batch_size, false, eo.steps);
      std::map<std::string, double> val_logs = evaluate_loop(val_data, eo);
      // Each parameter-server worker evaluates all the validation rows with its own weights.
      if (ps_worker) val_logs = distribute::detail::ps_reduce_logs(val_logs, 1.0);
      for (const auto& [k, v] : val_logs) epoch_logs["val_" + k] = v;
    }
    // Keras runs History and the progress bar after the user's callbacks, which may add to
    // the logs (LearningRateScheduler's "learning_rate").
    for (auto& cb : o.callbacks) cb->on_epoch_end(epoch, epoch_logs);
    bar.update(steps, epoch_logs, true);
    for (const auto& [k, v] : epoch_logs) history.history[k].push_back(v);
    history.epoch.push_back(epoch);
    if (stop_training) break;
  }
  if (distribute::detail::parameter_server_mode())
    distribute::detail::ps_fit_end(trainable_weights(), non_trainable_weights());
  for (auto& cb : o.callbacks) cb->on_train_end({});
  return history;
}

std::map<std::string, double> Model::evaluate(const data::Dataset<std::pair<Tensor, Tensor>>& data, EvaluateOptions o) {
  require_compiled(*this, "evaluate");
  return evaluate_loop(EpochIterator(data, o.steps, "evaluate"), o);
}

std::map<std::string, double> Model::evaluate(
    const data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& data, EvaluateOptions o) {
  require_compiled(*this, "evaluate");
  return evaluate_loop(EpochIterator(data, o.steps, "evaluate"), o);
}

std::map<std::string, double> Model::evaluate(const ModelData& x_in, const ModelData& y_in, EvaluateOptions o) {
  require_compiled(*this, "evaluate");
  const std::vector<Tensor> x = inputs_in_order(x_in, "evaluate"), y = targets_in_order(y_in, "evaluate");
  check_xy(x, y, "evaluate");
  if (o.batch_size <= 0) throw ValueError(fmt::format("evaluate: batch_size must be positive, got {}", o.batch_size));
  check_sample_weight(o.sample_weight, x, "evaluate");
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
  double epoch_rows = 0;  // this replica's rows (the logs' weight in their reduction)
  const std::int64_t steps = data.run_epoch([&](std::int64_t step, const Batch& batch) {
    for (auto& cb : o.callbacks) cb->on_test_batch_begin(step, logs);
    const Device d = model_device(*this);
    if (!distribute::detail::multi_replica()) {
      logs = run_test_step(placed(batch.x, d), placed(batch.y, d), placed(batch.sample_weight, d));
    } else {  // this replica's shard; the logs of every replica's rows
      bool empty = false;
      const Batch shard = replica_shard(batch, batch.sample_weight, empty);
      const auto saved = std::make_tuple(loss_sum_, loss_count_, output_loss_sums_);
      logs = run_test_step(placed(shard.x, d), placed(shard.y, d), placed(shard.sample_weight, d));
      if (empty) {  // the dummy row's loss left out again
        std::tie(loss_sum_, loss_count_, output_loss_sums_) = saved;
        logs = metrics_results();
      } else {
        epoch_rows += static_cast<double>(shard.x[0].shape()[0]);
      }
      logs = distribute::detail::reduce_logs(logs, epoch_rows);
    }
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

Tensor Model::predict(const ModelData& x, PredictOptions o) {
  if (num_outputs() > 1)
    throw ValueError(fmt::format("{}.predict: the model has {} outputs; predict_all returns them all", name(),
                                 num_outputs()));
  return predict_all(x, std::move(o))[0];
}

std::vector<Tensor> Model::predict_all(const ModelData& x_in, PredictOptions o) {
  const std::vector<Tensor> x = inputs_in_order(x_in, "predict");
  check_xy(x, {}, "predict");
  if (o.batch_size <= 0) throw ValueError(fmt::format("predict: batch_size must be positive, got {}", o.batch_size));
  const EpochIterator data(x, {}, Tensor(), o.batch_size, false, o.steps);
  for (auto& cb : o.callbacks) {
    cb->set_model(this);
    cb->on_predict_begin({});
  }
  Progbar bar(data.steps(), o.verbose, std::cout);
  std::vector<std::vector<Tensor>> outs;  // per batch, per output
  autograd::NoRecordScope no_record;
  random::GeneratorScope own_stream(seed_generator_);
  data.run_epoch([&](std::int64_t step, const Batch& batch) {
    for (auto& cb : o.callbacks) cb->on_predict_batch_begin(step, {});
    outs.push_back(predict_on_batch(batch.x));
    for (auto& cb : o.callbacks) cb->on_predict_batch_end(step, {});
    bar.update(step + 1, {}, step + 1 == data.steps());
    return true;
  });
  for (auto& cb : o.callbacks) cb->on_predict_end({});
  if (outs.empty()) throw ValueError("predict: no samples");
  std::vector<Tensor> result;
  for (std::size_t k = 0; k < outs[0].size(); ++k) {
    std::vector<Tensor> parts;
    for (const auto& b : outs) parts.push_back(b[k]);
    result.push_back(parts.size() == 1 ? parts[0] : concat(parts, 0));
  }
  return result;
}

std::vector<Tensor> Model::predict_on_batch(const ModelData& x_in) {
  const std::vector<Tensor> x = placed(inputs_in_order(x_in, "predict_on_batch"), model_device(*this));
  check_xy(x, {}, "predict_on_batch");
  autograd::NoRecordScope no_record;
  random::GeneratorScope own_stream(seed_generator_);
  return run_step(detail::Step::predict, x, [this](const std::vector<Tensor>& a) { return forward(a, false); });
}

std::map<std::string, double> Model::train_on_batch(const ModelData& x_in, const ModelData& y_in,
                                                    const Tensor& sample_weight,
                                                    const std::map<std::int64_t, double>& class_weight) {
  require_compiled(*this, "train_on_batch");
  const std::vector<Tensor> x = inputs_in_order(x_in, "train_on_batch"), y = targets_in_order(y_in, "train_on_batch");
  check_xy(x, y, "train_on_batch");
  check_sample_weight(sample_weight, x, "train_on_batch");
  random::GeneratorScope own_stream(seed_generator_);
  const Device d = model_device(*this);
  const Tensor sw = batch_weights(class_weight, y, sample_weight);
  return run_train_step(placed(x, d), placed(y, d), placed(sw, d));
}

std::map<std::string, double> Model::test_on_batch(const ModelData& x_in, const ModelData& y_in,
                                                   const Tensor& sample_weight) {
  require_compiled(*this, "test_on_batch");
  const std::vector<Tensor> x = inputs_in_order(x_in, "test_on_batch"), y = targets_in_order(y_in, "test_on_batch");
  check_xy(x, y, "test_on_batch");
  check_sample_weight(sample_weight, x, "test_on_batch");
  autograd::NoRecordScope no_record;
  random::GeneratorScope own_stream(seed_generator_);
  const Device d = model_device(*this);
  return run_test_step(placed(x, d), placed(y, d), placed(sample_weight, d));
}

}  // namespace keel::models
