#pragma once
// Keras callbacks: hooks that fit(), evaluate() and predict() call at the start and end of
// training, epochs and batches, with the logs (loss and metrics) of that moment.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <iosfwd>
#include <string>
#include <variant>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::models { class Model; }

namespace keel::callbacks {

using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void set_model(models::Model* m) { model = m; }
  // Keras' callback params, set by fit() before on_train_begin: "epochs", "steps" (-1 when not
  // known yet) and "verbose".
  virtual void set_params(const Logs& p) { params = p; }
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
  Logs params;

 protected:
  // Adds an entry to the logs of an epoch (as Keras' callbacks write into the shared logs dict):
  // fit() hands on_epoch_end its own map and records History and the progress bar after every
  // callback has run, so a value set here (LearningRateScheduler's "learning_rate") reaches
  // them and the callbacks that follow.
  static void set_log(const Logs& logs, const std::string& key, double value);
};

// Which way a monitored quantity improves, settled at the first epoch end as Keras does: mode
// "min" or "max" as given; "auto" minimises "loss"/"val_loss" and follows the direction of the
// model's metric of that name (accuracies up, errors down). ValueError when "auto" cannot tell,
// naming the keys the logs do hold.
bool monitor_maximizes(const std::string& callback, const std::string& mode, const std::string& monitor,
                       models::Model* model, const Logs& logs);

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
// Keras 3's rules: `best` starts unset, so the first monitored epoch is the best so far (the
// baseline only decides whether the wait starts again); with restore_best_weights the weights of
// the best epoch come back at the end of training however it ends (patience, `epochs` reached,
// or another callback stopping it).
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }
  std::optional<double> best() const { return best_; }

 private:
  bool improved(double value, std::optional<double> reference) const;
  EarlyStoppingOptions o_;
  std::optional<bool> maximize_;  // settled at the first epoch end
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  std::optional<double> best_;
  std::vector<Tensor> best_weights_;
};

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  bool save_weights_only = true;  // keel's default (Keras': false); false writes whole models
  std::string mode = "auto";
  // "epoch", or a number N: save after every N batches (counted across epochs), as Keras.
  std::variant<std::string, std::int64_t> save_freq = std::string("epoch");
  std::optional<double> initial_value_threshold{};
};
// filepath may contain {epoch} (1-based, formatted like {epoch:02d} too), {batch} (1-based,
// with an integer save_freq) and {<metric>} fields. save_weights_only = true writes
// Model::save_weights files, false whole models (Model::save: a folder, or a ".keel" file).
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_begin(int epoch, const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  const std::string& last_saved() const { return last_saved_; }

 private:
  void save(int epoch, std::int64_t batch, const Logs& logs);
  std::string filepath_;
  ModelCheckpointOptions o_;
  std::int64_t every_ = 0;  // the integer save_freq; 0: each epoch
  std::int64_t batches_since_save_ = 0;
  int epoch_ = 0;
  std::optional<bool> maximize_;
  std::optional<double> best_;
  std::string last_saved_;
};

// Keras' BackupAndRestore: at the end of every epoch (or every save_freq batches' epoch end)
// the model's weights, its optimizer's state, its random stream and the epoch reached are
// written under backup_dir; a fit() that starts while a backup is there restores them and
// continues after that epoch, so a run interrupted by a crash and started again ends with the
// weights an uninterrupted run has. The backup is deleted when training ends normally (with
// delete_checkpoint).
struct BackupAndRestoreOptions {
  std::string save_freq = "epoch";
  bool delete_checkpoint = true;
};
class BackupAndRestore : public Callback {
 public:
  explicit BackupAndRestore(std::string backup_dir, BackupAndRestoreOptions options = {});
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  // The epoch (0-based) the last on_train_begin resumed after; -1 when it started afresh.
  int restored_epoch() const { return restored_epoch_; }

 private:
  std::string dir_;
  BackupAndRestoreOptions o_;
  int restored_epoch_ = -1;
};

// Keras' ProgbarLogger: the progress bar and epoch lines of fit() (to `out`, standard output by
// default), for runs with FitOptions::verbose = 0 that want it from the callback list.
class ProgbarLogger : public Callback {
 public:
  explicit ProgbarLogger(int verbose = 1, std::ostream* out = nullptr);
  ~ProgbarLogger() override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  struct Bar;
  int verbose_;
  std::ostream* out_;
  std::unique_ptr<Bar> bar_;
  std::int64_t seen_ = 0;
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
  std::optional<bool> maximize_;
  int wait_ = 0, cooldown_counter_ = 0;
  std::optional<double> best_;
};

// schedule(epoch, current_lr) -> new learning rate, set at the start of each epoch; the epoch's
// logs get "learning_rate" (so History and CSVLogger record it, as in Keras).
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int, double)> schedule, int verbose = 0);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  int verbose_;
};

// Appends one row per epoch: epoch, then the logs in sorted key order (as Keras). When the
// first epoch has no val_ entries (validation_freq > 1, or no validation at all) the val_
// columns are added from the start and hold "NA" where an epoch has none, as Keras writes them.
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

// Stops training when a batch loss is NaN or infinite: gracefully (stop_training, so every
// callback's on_train_end runs), or with raise_error by throwing RuntimeError at once (Keras 3).
class TerminateOnNaN : public Callback {
 public:
  explicit TerminateOnNaN(bool raise_error = false) : raise_error_(raise_error) {}
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  bool raise_error_;
};

// TensorBoard: keel/callbacks/tensorboard.hpp.

// Callbacks from lambdas, as keras.callbacks.LambdaCallback.
// The fields follow Keras' keyword order (epoch, batch, train hooks), then Keras 3's test and
// predict hooks.
struct LambdaCallbackOptions {
  std::function<void(int, const Logs&)> on_epoch_begin;
  std::function<void(int, const Logs&)> on_epoch_end;
  std::function<void(std::int64_t, const Logs&)> on_train_batch_begin;
  std::function<void(std::int64_t, const Logs&)> on_train_batch_end;
  std::function<void(const Logs&)> on_train_begin;
  std::function<void(const Logs&)> on_train_end;
  std::function<void(const Logs&)> on_test_begin;
  std::function<void(const Logs&)> on_test_end;
  std::function<void(std::int64_t, const Logs&)> on_test_batch_begin;
  std::function<void(std::int64_t, const Logs&)> on_test_batch_end;
  std::function<void(const Logs&)> on_predict_begin;
  std::function<void(const Logs&)> on_predict_end;
  std::function<void(std::int64_t, const Logs&)> on_predict_batch_begin;
  std::function<void(std::int64_t, const Logs&)> on_predict_batch_end;
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
  void on_test_begin(const Logs& logs) override;
  void on_test_end(const Logs& logs) override;
  void on_test_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_test_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_predict_begin(const Logs& logs) override;
  void on_predict_end(const Logs& logs) override;
  void on_predict_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_predict_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  LambdaCallbackOptions o_;
};

// The callback list fit() runs: shares one object among calls, in order.
using CallbackList = std::vector<std::shared_ptr<Callback>>;

}  // namespace keel::callbacks
