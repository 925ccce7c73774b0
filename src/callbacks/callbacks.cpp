// The built-in Keras callbacks.
#include "keel/callbacks/callback.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <array>

#include <fmt/core.h>

#include "distribute/hooks.hpp"
#include "keel/core/error.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"

namespace keel::callbacks {

namespace {

const double* find(const Logs& logs, const std::string& key) {
  auto it = logs.find(key);
  return it == logs.end() ? nullptr : &it->second;
}

void require_model(const Callback& cb, const char* name) {
  if (!cb.model) throw ValueError(fmt::format("{}: not attached to a model", name));
}

void check_mode(const char* callback, const std::string& mode) {
  if (mode != "auto" && mode != "min" && mode != "max")
    throw ValueError(fmt::format("{}: mode must be \"auto\", \"min\" or \"max\", got \"{}\"", callback, mode));
}

std::string keys_of(const Logs& logs) {
  std::string out;
  for (const auto& [k, v] : logs) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

}  // namespace

void Callback::set_log(const Logs& logs, const std::string& key, double value) {
  // The map fit() passes is its own (not const): writing it is what Keras' shared logs allow.
  const_cast<Logs&>(logs)[key] = value;
}

bool monitor_maximizes(const std::string& callback, const std::string& mode, const std::string& monitor,
                       models::Model* model, const Logs& logs) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  const std::string name = monitor.rfind("val_", 0) == 0 ? monitor.substr(4) : monitor;
  if (name == "loss") return false;
  if (model) {
    // A multi-output model's "<output>_loss" and "<output>_<metric>".
    const auto outputs = model->num_outputs() > 1 ? model->output_names() : std::vector<std::string>{};
    for (const auto& out : outputs)
      if (name == out + "_loss") return false;
    for (const auto& m : model->metrics()) {
      bool match = m->name() == name;
      for (const auto& out : outputs) match = match || name == out + "_" + m->name();
      if (match && !m->direction().empty()) return m->direction() == "up";
    }
  }
  if (!logs.count(monitor))
    throw ValueError(fmt::format("{}: the monitored quantity '{}' is not in the logs (they hold: {}); monitor one of "
                                 "them, or pass mode \"min\" or \"max\"", callback, monitor, keys_of(logs)));
  throw ValueError(fmt::format("{} received monitor={}, but cannot tell whether it should be maximized or minimized; "
                               "pass mode \"max\" or \"min\"", callback, monitor));
}

// ---- EarlyStopping ----

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : o_(std::move(options)) {
  check_mode("EarlyStopping", o_.mode);
  if (o_.patience < 0) throw ValueError(fmt::format("EarlyStopping: patience must be >= 0, got {}", o_.patience));
}

bool EarlyStopping::improved(double value, std::optional<double> reference) const {
  if (!reference) return true;
  const double delta = std::abs(o_.min_delta);
  return *maximize_ ? value - delta > *reference : value + delta < *reference;
}

void EarlyStopping::on_train_begin(const Logs&) {
  wait_ = 0;
  stopped_epoch_ = 0;
  best_epoch_ = 0;
  best_.reset();
  best_weights_.clear();
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  require_model(*this, "EarlyStopping");
  if (!maximize_) maximize_ = monitor_maximizes("EarlyStopping", o_.mode, o_.monitor, model, logs);
  const double* v = find(logs, o_.monitor);
  if (!v) {
    std::cerr << "EarlyStopping: conditioned on metric '" << o_.monitor << "', which is not available; available: "
              << keys_of(logs) << "\n";
    return;
  }
  if (epoch < o_.start_from_epoch) return;
  // Copies, not views: training keeps writing into the variables.
  const auto snapshot = [&] {
    best_weights_.clear();
    for (Variable* w : model->weights()) best_weights_.push_back(w->peek() * 1.0);
  };
  if (o_.restore_best_weights && best_weights_.empty()) {
    snapshot();  // never set: the current weights are the best so far
    best_epoch_ = epoch;
  }
  ++wait_;
  if (improved(*v, best_)) {
    best_ = *v;
    best_epoch_ = epoch;
    if (o_.restore_best_weights) snapshot();
    // The wait starts again only when the baseline is beaten too.
    if (!o_.baseline || improved(*v, o_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= o_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model->stop_training = true;
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  if (stopped_epoch_ > 0 && o_.verbose) std::cout << "Epoch " << stopped_epoch_ + 1 << ": early stopping\n";
  if (o_.restore_best_weights && !best_weights_.empty() && model) {
    if (o_.verbose) std::cout << "Restoring model weights from the end of the best epoch: " << best_epoch_ + 1 << ".\n";
    const auto ws = model->weights();
    for (std::size_t i = 0; i < ws.size() && i < best_weights_.size(); ++i) ws[i]->assign(best_weights_[i]);
  }
}

// ---- ModelCheckpoint ----

ModelCheckpoint::ModelCheckpoint(std::string filepath, ModelCheckpointOptions options)
    : filepath_(std::move(filepath)), o_(std::move(options)) {
  if (filepath_.empty()) throw ValueError("ModelCheckpoint: filepath is empty");
  check_mode("ModelCheckpoint", o_.mode);
  if (const auto* n = std::get_if<std::int64_t>(&o_.save_freq)) {
    if (*n <= 0) throw ValueError(fmt::format("ModelCheckpoint: an integer save_freq must be positive, got {}", *n));
    every_ = *n;
  } else if (std::get<std::string>(o_.save_freq) != "epoch") {
    throw ValueError(fmt::format("ModelCheckpoint: unrecognized save_freq \"{}\"; expected \"epoch\" or a number of "
                                 "batches", std::get<std::string>(o_.save_freq)));
  }
  if (o_.initial_value_threshold) best_ = o_.initial_value_threshold;
}

namespace {
// Fills "{epoch}", "{epoch:02d}", "{val_loss:.2f}"-style fields (1-based epoch, as Keras).
std::string fill_path(const std::string& pattern, int epoch, const Logs& logs, std::int64_t batch = -1) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      out += pattern[i];
      continue;
    }
    const std::size_t close = pattern.find('}', i);
    if (close == std::string::npos) throw ValueError(fmt::format("ModelCheckpoint: unmatched '{{' in \"{}\"", pattern));
    const std::string field = pattern.substr(i + 1, close - i - 1);
    const std::size_t colon = field.find(':');
    const std::string key = field.substr(0, colon);
    const std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    double value;
    if (key == "epoch") {
      value = epoch + 1;
    } else if (key == "batch" && batch >= 0) {
      value = static_cast<double>(batch + 1);
    } else if (const double* v = find(logs, key)) {
      value = *v;
    } else {
      throw ValueError(fmt::format("ModelCheckpoint: the path field '{}' is not in the logs", key));
    }
    if (key == "epoch" || key == "batch" || (!spec.empty() && spec.back() == 'd')) {
      const int width = spec.size() > 1 ? std::atoi(spec.substr(0, spec.size() - 1).c_str()) : 0;
      const bool zero = !spec.empty() && spec[0] == '0';
      std::string digits = std::to_string(static_cast<long long>(value));
      while (static_cast<int>(digits.size()) < width) digits = (zero ? "0" : " ") + digits;
      out += digits;
    } else {
      int precision = 6;
      if (const auto dot = spec.find('.'); dot != std::string::npos) precision = std::atoi(spec.c_str() + dot + 1);
      out += fmt::format("{:.{}f}", value, precision);
    }
    i = close;
  }
  return out;
}
}  // namespace

void ModelCheckpoint::on_train_begin(const Logs&) { batches_since_save_ = 0; }

void ModelCheckpoint::on_epoch_begin(int epoch, const Logs&) { epoch_ = epoch; }

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  require_model(*this, "ModelCheckpoint");
  if (every_ == 0) save(epoch, -1, logs);
}

void ModelCheckpoint::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  if (every_ == 0) return;
  require_model(*this, "ModelCheckpoint");
  // Keras counts the batches seen since the last save, across epochs.
  if (++batches_since_save_ < every_) return;
  batches_since_save_ = 0;
  save(epoch_, batch, logs);
}

void ModelCheckpoint::save(int epoch, std::int64_t batch, const Logs& logs) {
  if (o_.save_best_only) {
    if (!maximize_) maximize_ = monitor_maximizes("ModelCheckpoint", o_.mode, o_.monitor, model, logs);
    const double* v = find(logs, o_.monitor);
    if (!v) {
      std::cerr << "ModelCheckpoint: can save best model only with " << o_.monitor << " available, skipping.\n";
      return;
    }
    const bool better = !best_ || (*maximize_ ? *v > *best_ : *v < *best_);
    if (!better) {
      if (o_.verbose) std::cout << fmt::format("\nEpoch {}: {} did not improve from {:.5f}\n", epoch + 1, o_.monitor, *best_);
      return;
    }
    if (o_.verbose)
      std::cout << fmt::format("\nEpoch {}: {} improved from {} to {:.5f}, saving model to {}\n", epoch + 1, o_.monitor,
                               best_ ? fmt::format("{:.5f}", *best_) : std::string("inf"), *v,
                               fill_path(filepath_, epoch, logs, batch));
    best_ = *v;
  }
  last_saved_ = fill_path(filepath_, epoch, logs, batch);
  if (o_.verbose && !o_.save_best_only)
    std::cout << fmt::format("\nEpoch {}: saving model to {}\n", epoch + 1, last_saved_);
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  if (o_.save_weights_only) model->save_weights(last_saved_);
  else model->save(last_saved_);
}

// ---- ReduceLROnPlateau ----

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options) : o_(std::move(options)) {
  if (o_.factor >= 1.0) throw ValueError(fmt::format("ReduceLROnPlateau: factor must be < 1, got {}", o_.factor));
  check_mode("ReduceLROnPlateau", o_.mode);
}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  wait_ = 0;
  cooldown_counter_ = 0;
  best_.reset();
}

void ReduceLROnPlateau::on_epoch_end(int epoch, const Logs& logs) {
  require_model(*this, "ReduceLROnPlateau");
  set_log(logs, "learning_rate", model->optimizer()->learning_rate());  // Keras 3 logs it too
  if (!maximize_) maximize_ = monitor_maximizes("ReduceLROnPlateau", o_.mode, o_.monitor, model, logs);
  const double* v = find(logs, o_.monitor);
  if (!v) {
    std::cerr << "ReduceLROnPlateau: conditioned on metric '" << o_.monitor << "', which is not available; available: "
              << keys_of(logs) << "\n";
    return;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  const bool better = !best_ || (*maximize_ ? *v > *best_ + o_.min_delta : *v < *best_ - o_.min_delta);
  if (better) {
    best_ = *v;
    wait_ = 0;
    return;
  }
  if (cooldown_counter_ > 0) return;
  if (++wait_ >= o_.patience) {
    auto opt = model->optimizer();
    const double old_lr = opt->learning_rate();
    if (old_lr > o_.min_lr) {
      const double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
      opt->set_learning_rate(new_lr);
      if (o_.verbose)
        std::cout << fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.\n", epoch + 1, new_lr);
      cooldown_counter_ = o_.cooldown;
      wait_ = 0;
    }
  }
}

// ---- LearningRateScheduler ----

LearningRateScheduler::LearningRateScheduler(std::function<double(int, double)> schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  if (!schedule_) throw ValueError("LearningRateScheduler: empty schedule");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  require_model(*this, "LearningRateScheduler");
  auto opt = model->optimizer();
  const double lr = schedule_(epoch, opt->learning_rate());
  if (!std::isfinite(lr)) throw ValueError(fmt::format("LearningRateScheduler: the schedule returned {}", lr));
  opt->set_learning_rate(lr);
  if (verbose_) std::cout << fmt::format("\nEpoch {}: LearningRateScheduler setting learning rate to {}.\n", epoch + 1, lr);
}

void LearningRateScheduler::on_epoch_end(int, const Logs& logs) {
  require_model(*this, "LearningRateScheduler");
  set_log(logs, "learning_rate", model->optimizer()->learning_rate());
}

// ---- CSVLogger ----

CSVLogger::CSVLogger(std::string filename, CSVLoggerOptions options) : filename_(std::move(filename)), o_(std::move(options)) {}

void CSVLogger::on_train_begin(const Logs&) {
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  header_written_ = false;
  keys_.clear();
  if (o_.append) {
    std::ifstream in(filename_);
    header_written_ = in.good() && in.peek() != std::ifstream::traits_type::eof();
  } else {
    std::ofstream truncate(filename_, std::ios::trunc);
    if (!truncate) throw IOError(fmt::format("CSVLogger: cannot write {}", filename_));
  }
}

void CSVLogger::on_epoch_end(int epoch, const Logs& logs) {
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  std::ofstream out(filename_, std::ios::app);
  if (!out) throw IOError(fmt::format("CSVLogger: cannot write {}", filename_));
  if (keys_.empty()) {
    for (const auto& [k, v] : logs) keys_.push_back(k);  // a std::map: sorted, as Keras sorts them
    bool has_val = false;
    for (const auto& k : keys_) has_val = has_val || k.rfind("val_", 0) == 0;
    // Keras: validation may come later (validation_freq > 1), so its columns are there from the start.
    if (!has_val) {
      const std::size_t n = keys_.size();
      for (std::size_t i = 0; i < n; ++i) keys_.push_back("val_" + keys_[i]);
    }
  }
  if (!header_written_) {
    out << "epoch";
    for (const auto& k : keys_) out << o_.separator << k;
    out << "\n";
    header_written_ = true;
  }
  out << epoch;
  for (const auto& k : keys_) {
    out << o_.separator;
    if (const double* v = find(logs, k)) out << fmt::format("{}", *v);
    else out << "NA";
  }
  out << "\n";
}

// ---- TerminateOnNaN ----

void TerminateOnNaN::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  const double* loss = find(logs, "loss");
  if (loss && !std::isfinite(*loss)) {
    if (raise_error_)
      throw RuntimeError(fmt::format("TerminateOnNaN: NaN or Inf loss encountered at batch {}. Loss value: {}. "
                                     "Terminating training immediately.", batch, *loss));
    std::cout << fmt::format("Batch {}: Invalid loss, terminating training\n", batch);
    if (model) model->stop_training = true;
  }
}


// ---- LambdaCallback ----

LambdaCallback::LambdaCallback(LambdaCallbackOptions options) : o_(std::move(options)) {}
void LambdaCallback::on_epoch_begin(int e, const Logs& l) { if (o_.on_epoch_begin) o_.on_epoch_begin(e, l); }
void LambdaCallback::on_epoch_end(int e, const Logs& l) { if (o_.on_epoch_end) o_.on_epoch_end(e, l); }
void LambdaCallback::on_train_batch_begin(std::int64_t b, const Logs& l) { if (o_.on_train_batch_begin) o_.on_train_batch_begin(b, l); }
void LambdaCallback::on_train_batch_end(std::int64_t b, const Logs& l) { if (o_.on_train_batch_end) o_.on_train_batch_end(b, l); }
void LambdaCallback::on_train_begin(const Logs& l) { if (o_.on_train_begin) o_.on_train_begin(l); }
void LambdaCallback::on_train_end(const Logs& l) { if (o_.on_train_end) o_.on_train_end(l); }
void LambdaCallback::on_test_begin(const Logs& l) { if (o_.on_test_begin) o_.on_test_begin(l); }
void LambdaCallback::on_test_end(const Logs& l) { if (o_.on_test_end) o_.on_test_end(l); }
void LambdaCallback::on_test_batch_begin(std::int64_t b, const Logs& l) { if (o_.on_test_batch_begin) o_.on_test_batch_begin(b, l); }
void LambdaCallback::on_test_batch_end(std::int64_t b, const Logs& l) { if (o_.on_test_batch_end) o_.on_test_batch_end(b, l); }
void LambdaCallback::on_predict_begin(const Logs& l) { if (o_.on_predict_begin) o_.on_predict_begin(l); }
void LambdaCallback::on_predict_end(const Logs& l) { if (o_.on_predict_end) o_.on_predict_end(l); }
void LambdaCallback::on_predict_batch_begin(std::int64_t b, const Logs& l) { if (o_.on_predict_batch_begin) o_.on_predict_batch_begin(b, l); }
void LambdaCallback::on_predict_batch_end(std::int64_t b, const Logs& l) { if (o_.on_predict_batch_end) o_.on_predict_batch_end(b, l); }

}  // namespace keel::callbacks
