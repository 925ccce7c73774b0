#pragma once
// keras.callbacks.TensorBoard: event files under log_dir/train and log_dir/validation (Keras'
// runs), written with keel::summary:
//   * per epoch: "epoch_<name>" for the logs (loss, metrics, learning_rate and, with
//     write_steps_per_second, steps_per_second); validation logs lose their "val_" prefix and
//     go to the validation run,
//   * every update_freq batches (an int; "batch" = 1; "epoch" = never): "batch_<name>" at the
//     global batch number (and "batch_steps_per_second" with write_steps_per_second),
//   * every histogram_freq epochs: a histogram of each weight ("<layer>/<weight>/histogram"), and
//     with write_images the weight as an image ("<layer>/<weight>/image": a vector as one row, a
//     matrix wider than tall (transposed when taller), kernels one image per output channel),
//   * write_graph: after the first batch, the graph the train step was traced into as a
//     GraphDef (its kernels as TensorFlow's op names, with the edges between them, as Keras
//     writes model.train_function's graph), or, for a step that runs eagerly, the layer graph
//     (one node per layer, op = its class),
//   * profile_batch {start, stop} (1-based global batches, {0, 0} off): the profiler runs over
//     those batches and writes a TensorBoard profile run under log_dir/plugins/profile/,
//   * every embeddings_freq epochs: each Embedding layer's matrix as a TSV file and
//     log_dir/projector_config.pbtxt pointing TensorBoard's projector at them.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "keel/callbacks/callback.hpp"

namespace keel::summary { class FileWriter; }

namespace keel::callbacks {

// update_freq: "epoch", "batch" or a number of batches.
class UpdateFreq {
 public:
  UpdateFreq(const char* name);  // NOLINT: "epoch" / "batch" read as Keras' strings
  UpdateFreq(std::string name);  // NOLINT
  UpdateFreq(int batches);       // NOLINT
  bool per_epoch() const { return batches_ == 0; }
  int batches() const { return batches_; }  // 0 for "epoch"

 private:
  int batches_ = 0;
};

struct TensorBoardOptions {
  int histogram_freq = 0;
  bool write_graph = true;
  bool write_images = false;
  bool write_steps_per_second = false;
  UpdateFreq update_freq = "epoch";
  std::array<std::int64_t, 2> profile_batch = {0, 0};
  int embeddings_freq = 0;
};

class TensorBoard : public Callback {
 public:
  explicit TensorBoard(std::string log_dir = "logs", TensorBoardOptions options = {});
  ~TensorBoard() override;
  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

  const std::string& log_dir() const { return log_dir_; }
  const TensorBoardOptions& options() const { return options_; }

 private:
  summary::FileWriter& writer(const std::string& run);
  void log_weights(int epoch);
  void log_graph();
  void log_embeddings(int epoch);
  void stop_profile();

  std::string log_dir_;
  TensorBoardOptions options_;
  std::unique_ptr<summary::FileWriter> train_, validation_;
  std::int64_t global_batch_ = 0;
  std::int64_t epoch_batches_ = 0;
  bool profiling_ = false;
  std::chrono::steady_clock::time_point batch_start_, epoch_start_;
};

}  // namespace keel::callbacks
