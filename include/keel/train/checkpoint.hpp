#pragma once
// Training checkpoints, as tf.train.Checkpoint and tf.train.CheckpointManager: everything a run
// needs to continue where it stopped.
//
//   train::Checkpoint ckpt(model);                        // the model and its compiled optimizer
//   train::CheckpointManager manager(ckpt, "ckpts", 3);   // keeps ckpts/ckpt-N.safetensors, N = 1, 2, ...
//   model.fit(x, y, {.epochs = 10, .callbacks = {manager.callback()}});   // one checkpoint per epoch
//   ...                                                   // another process, same code up to fit:
//   if (manager.restore_latest())
//     model.fit(x, y, {.epochs = 10, .initial_epoch = ckpt.epoch()});   // the uninterrupted result
//
// A checkpoint is one safetensors file holding the model's weights ("model/<weight path>", the
// non-trainable ones such as BatchNormalization's moving statistics too), the optimizer's
// variables ("optimizer/iteration", "optimizer/dense/kernel/momentum", ...), the epoch, the save
// counter, and keel's global random generator state (random::get_state). Restoring the generator
// is what lets a resumed fit() shuffle, drop out and augment exactly as the interrupted run would
// have. Files are written through a temporary file and renamed into place, so a crash during a save
// leaves the earlier checkpoints intact (and the next save removes the temporaries a killed process
// left); restore validates the whole file, and every model weight and optimizer variable in it,
// before changing anything.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/callbacks/callback.hpp"

namespace keel::models {
class Model;
}
namespace keel::optimizers {
class Optimizer;
}

namespace keel::train {

// How Checkpoint::restore treats a file whose optimizer state does not match the optimizer.
struct RestoreOptions {
  // false: every variable the optimizer needs (its "iteration", its slots such as
  // "optimizer/dense/kernel/momentum") must be in the file with its shape and dtype, and the file
  // may hold no other optimizer state; anything missing or extra is an IOError listing it all.
  // true (TF's expect_partial()): what matches is restored, the variables the file lacks keep
  // their values, its other optimizer entries are ignored, and a file's optimizer state is
  // skipped when there is no optimizer. The model's weights must match either way.
  bool allow_partial = false;
};

class Checkpoint {
 public:
  // The model and the optimizer it is compiled with (looked up at each save and restore, so the
  // checkpoint may be made before compile()). The model must outlive the checkpoint.
  explicit Checkpoint(models::Model& model);
  // The model and a given optimizer (a custom training loop's). Both must outlive the checkpoint.
  Checkpoint(models::Model& model, optimizers::Optimizer& optimizer);
  // Shared ownership: the checkpoint keeps them alive. optimizer null: the model's compiled one.
  explicit Checkpoint(std::shared_ptr<models::Model> model, std::shared_ptr<optimizers::Optimizer> optimizer = nullptr);

  // The number of finished epochs: what a save records and what a restore sets (resume with
  // fit({.initial_epoch = epoch()})). CheckpointManager::callback() keeps it up to date.
  int epoch() const { return epoch_; }
  void set_epoch(int epoch);
  // How many numbered saves this checkpoint has made (restored with it); TF's save_counter.
  std::int64_t save_counter() const { return save_counter_; }

  // Writes the checkpoint to exactly `path` (TF's Checkpoint.write).
  void write(const std::string& path);
  // Writes "<file_prefix>-<N>.safetensors" with N = save_counter() + 1, and returns that path
  // (TF's Checkpoint.save).
  std::string save(const std::string& file_prefix);
  // Restores the model's weights, the optimizer's state, the epoch, the save counter and the random
  // generator from a file written by write() or save(). The model must be built (have its weights)
  // and, when the file holds optimizer state, have an optimizer. IOError (naming the file and the
  // tensor) for a damaged file or one that does not match the model or the optimizer (see
  // RestoreOptions); nothing changes then.
  void restore(const std::string& path);
  void restore(const std::string& path, const RestoreOptions& options);

  models::Model& model() const { return *model_; }
  // The optimizer in use: the given one, else the model's compiled one (null when there is none).
  optimizers::Optimizer* optimizer() const;

 private:
  friend class CheckpointManager;
  std::shared_ptr<models::Model> owned_model_;
  std::shared_ptr<optimizers::Optimizer> owned_optimizer_;
  models::Model* model_ = nullptr;
  optimizers::Optimizer* optimizer_ = nullptr;
  int epoch_ = 0;
  std::int64_t save_counter_ = 0;
};

class CheckpointManager {
 public:
  // Manages <directory>/<checkpoint_name>-<N>.safetensors. max_to_keep: how many of the newest to
  // keep after each save (nullopt: all; at least 1 otherwise). The checkpoints are found by
  // listing the directory, so a manager made in a new process sees those of an earlier one.
  CheckpointManager(Checkpoint& checkpoint, std::string directory, std::optional<int> max_to_keep = 5,
                    std::string checkpoint_name = "ckpt");

  // Saves the checkpoint as number `checkpoint_number`, or one more than both the newest in the
  // directory and the checkpoint's save_counter(); then deletes the oldest beyond max_to_keep.
  // Returns the path written. The directory is created when missing, and cleared of the
  // temporaries that saves killed midway left there (those of live processes are kept).
  std::string save(std::optional<std::int64_t> checkpoint_number = std::nullopt);
  // The newest checkpoint's path; empty when there is none (TF's None).
  std::string latest_checkpoint() const;
  // Every checkpoint present, oldest first.
  std::vector<std::string> checkpoints() const;
  // Restores the newest checkpoint; false (and nothing changes) when there is none.
  bool restore_latest();
  bool restore_latest(const RestoreOptions& options);

  // A fit() callback that, after each epoch, sets the checkpoint's epoch to the number of finished
  // epochs and saves. The manager must outlive the fit() it is passed to.
  std::shared_ptr<callbacks::Callback> callback();

  const std::string& directory() const { return directory_; }
  std::optional<int> max_to_keep() const { return max_to_keep_; }
  Checkpoint& checkpoint() const { return checkpoint_; }

 private:
  struct Found {
    std::int64_t number;
    std::string path;
  };
  std::vector<Found> list() const;
  int remove_stale_temporaries() const;

  Checkpoint& checkpoint_;
  std::string directory_;
  std::optional<int> max_to_keep_;
  std::string name_;
};

}  // namespace keel::train
