#pragma once
// Keras callbacks: hooks that fit(), evaluate() and predict() call at the start and end of
// training, epochs and batches, with the logs (loss and metrics) of that moment.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::models { class Model; }

namespace keel::callbacks {

using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void set_model(models::Model* m) { model = m; }
  virtual void on_train_begin(const Logs&) {}
  virtual void on_train_end(const Logs&) {}
  virtual void on_epoch_begin(int, const Logs&) {}
  virtual void on_epoch_end(int, const Logs&) {}
  virtual void on_train_batch_begin(std::int64_t, const Logs&) {}
  virtual void on_train_batch_end(std::int64_t, const Logs&) {}
  virtual void on_test_begin(const Logs&) {}
  virtual void on_test_end(const Logs&) {}
  virtual void on_test_batch_begin(std::int64_t, const Logs&) {}
  virtual void on_test_batch_end(std::int64_t, const Logs&) {}
  virtual void on_predict_begin(const Logs&) {}
  virtual void on_predict_end(const Logs&) {}
  virtual void on_predict_batch_begin(std::int64_t, const Logs&) {}
  virtual void on_predict_batch_end(std::int64_t, const Logs&) {}

  models::Model* model = nullptr;
};

// ---- built-in callbacks ----

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  int verbose = 0;
  std::string mode = "auto";  // "min", "max", or "auto" (max for accuracy-like names)
  std::optional<double> baseline{};
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }

 private:
  bool improved(double value, double reference) const;
  EarlyStoppingOptions o_;
  bool maximize_ = false;
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  double best_ = 0;
  bool have_best_ = false;
  std::vector<Tensor> best_weights_;
};

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  bool save_weights_only = true;  // whole-model files come with the saving issue; weights now
  std::string mode = "auto";
  std::string save_freq = "epoch";
  std::optional<double> initial_value_threshold{};
};
// filepath may contain {epoch} (1-based, formatted like {epoch:02d} too) and {<metric>} fields.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {});
  void on_epoch_end(int epoch, const Logs& logs) override;
  const std::string& last_saved() const { return last_saved_; }

 private:
  std::string filepath_;
  ModelCheckpointOptions o_;
  bool maximize_ = false;
  std::optional<double> best_;
  std::string last_saved_;
};

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  int verbose = 0;
  std::string mode = "auto";
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
};
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  ReduceLROnPlateauOptions o_;
  bool maximize_ = false;
  int wait_ = 0, cooldown_counter_ = 0;
  std::optional<double> best_;
};

// schedule(epoch, current_lr) -> new learning rate, set at the start of each epoch.
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int, double)> schedule, int verbose = 0);
  void on_epoch_begin(int epoch, const Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  int verbose_;
};

// Appends one row per epoch: epoch, then the logs in sorted key order (as Keras).
struct CSVLoggerOptions {
  std::string separator = ",";
  bool append = false;
};
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, CSVLoggerOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  std::string filename_;
  CSVLoggerOptions o_;
  std::vector<std::string> keys_;
  bool header_written_ = false;
};

// Stops training when a batch loss is NaN or infinite.
class TerminateOnNaN : public Callback {
 public:
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
};

// Writes TensorBoard event files (scalars per epoch: loss and metrics) under log_dir/train and
// log_dir/validation.
class TensorBoard : public Callback {
 public:
  explicit TensorBoard(std::string log_dir = "logs");
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;

 private:
  void write_scalar(const std::string& run, const std::string& tag, double value, std::int64_t step);
  std::string log_dir_;
  std::map<std::string, std::string> files_;  // run -> event file path
};

// Callbacks from lambdas, as keras.callbacks.LambdaCallback.
struct LambdaCallbackOptions {
  std::function<void(int, const Logs&)> on_epoch_begin;
  std::function<void(int, const Logs&)> on_epoch_end;
  std::function<void(std::int64_t, const Logs&)> on_train_batch_begin;
  std::function<void(std::int64_t, const Logs&)> on_train_batch_end;
  std::function<void(const Logs&)> on_train_begin;
  std::function<void(const Logs&)> on_train_end;
};
class LambdaCallback : public Callback {
 public:
  explicit LambdaCallback(LambdaCallbackOptions options);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  LambdaCallbackOptions o_;
};

// The callback list fit() runs: shares one object among calls, in order.
using CallbackList = std::vector<std::shared_ptr<Callback>>;

}  // namespace keel::callbacks
