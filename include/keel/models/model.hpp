#pragma once
// models::Model (a Layer that can be trained: functional graphs, Sequential stacks, or
// subclasses with their own call()), models::Sequential and models::Input.
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "keel/callbacks/callback.hpp"
#include "keel/data/dataset.hpp"
#include "keel/layers/layer.hpp"
#include "keel/losses/loss.hpp"
#include "keel/ops/creation.hpp"
#include "keel/metrics/metric.hpp"
#include "keel/optimizers/optimizer.hpp"

namespace keel::models {

// Per-epoch values of the loss and every metric ("loss", "accuracy", "val_loss", ...).
struct History {
  std::map<std::string, std::vector<double>> history;
  std::vector<int> epoch;
};

// Options in the order of Keras' keyword arguments, with Keras' defaults.
struct CompileOptions {
  optimizers::OptimizerRef optimizer = "rmsprop";
  losses::LossRef loss{};
  std::vector<double> loss_weights{};           // one per output of a multi-output model
  std::vector<metrics::MetricRef> metrics{};
  // Keras: false traces the tensor work of each step (forward, loss, gradient, update) with
  // keel::function and replays it; true runs the steps op by op, as written.
  bool run_eagerly = false;
  // The traced steps' whole-graph optimisation (FunctionOptions::jit_compile).
  bool jit_compile = true;
};

struct FitOptions {
  std::int64_t batch_size = 32;
  int epochs = 1;
  int verbose = 1;  // 0 silent, 1 progress bar (one line per epoch when not a terminal), 2 one line per epoch
  callbacks::CallbackList callbacks{};
  double validation_split = 0;  // the last fraction of x, y (before shuffling), as Keras
  std::optional<std::pair<Tensor, Tensor>> validation_data{};
  bool shuffle = true;
  std::map<std::int64_t, double> class_weight{};
  Tensor sample_weight{};
  int initial_epoch = 0;
  std::int64_t steps_per_epoch = -1;  // -1: the whole data set each epoch
  std::int64_t validation_steps = -1;
  std::int64_t validation_batch_size = -1;  // -1: batch_size
  int validation_freq = 1;
  // keel's addition: reseeds the model's random stream before training (shuffles, dropout), so
  // that a run repeats exactly, also alongside other threads' training.
  std::optional<std::uint64_t> seed{};
};

struct EvaluateOptions {
  std::int64_t batch_size = 32;
  int verbose = 1;
  Tensor sample_weight{};
  std::int64_t steps = -1;
  callbacks::CallbackList callbacks{};
};

struct PredictOptions {
  std::int64_t batch_size = 32;
  int verbose = 0;
  std::int64_t steps = -1;
  callbacks::CallbackList callbacks{};
};

// A symbolic tensor: the start of a functional model. shape excludes the batch dimension.
Tensor Input(Shape shape_without_batch, DType dtype = DType::float32, std::string name = "");

class Model;
namespace detail {
class EpochIterator;  // the batches of one epoch (internal)
class StepFunctions;  // the traced steps (internal)
enum class Step;
}  // namespace detail

// A model written by Model::save (a directory or a .keel file): rebuilds a Sequential or
// functional model of built-in layers without the code that made it (custom layers and
// subclassed models need their class registered first: see keel/layers/registry.hpp), loads its
// weights and, with compile = true and a model that was compiled, its optimizer, loss, metrics
// and optimizer state. Every file is validated first; IOError names the file and the field.
std::shared_ptr<Model> load_model(const std::string& path, bool compile = true);

class Model : public layers::Layer {
 public:
  // A subclassed model: override call() and track() the layers it uses.
  explicit Model(std::string name = "");
  // The functional API: outputs computed from inputs by layer calls on symbolic tensors.
  Model(Tensor inputs, Tensor outputs, std::string name = "");
  Model(std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::string name = "");
  ~Model() override;
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  // Every output of a multi-output model (call() returns the first).
  std::vector<Tensor> call_all(const std::vector<Tensor>& inputs, bool training);
  void build(const Shape& input_shape) override;
  void check_input_shape(const Shape& input_shape) const override;

  bool is_functional() const { return graph_ != nullptr; }
  std::size_t num_inputs() const;
  std::size_t num_outputs() const;
  // The layers, in the order Keras lists them (graph order for functional models).
  virtual std::vector<std::shared_ptr<layers::Layer>> layers() const;
  std::shared_ptr<layers::Layer> get_layer(const std::string& name) const;

  // Keras' table: layer name (type), output shape, parameter count; then the totals.
  void summary(std::ostream& out = std::cout);

  // ---- training (Keras' compile / fit / evaluate / predict) ----
  void compile(CompileOptions options);
  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  // A data::Dataset of (x, y) batches: each epoch is one pass (batch_size, shuffle,
  // validation_split and class_weight belong to the pipeline then, not to fit).
  History fit(const data::Dataset<std::pair<Tensor, Tensor>>& train, FitOptions options = {});
  std::map<std::string, double> evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  std::map<std::string, double> evaluate(const data::Dataset<std::pair<Tensor, Tensor>>& data,
                                         EvaluateOptions options = {});
  Tensor predict(const Tensor& x, PredictOptions options = {});
  // One optimisation step on a batch: forward under a GradientTape, loss (+ regularisation
  // losses), gradients, optimizer update, metric updates. Override to customise fit().
  virtual std::map<std::string, double> train_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight);
  virtual std::map<std::string, double> test_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight);
  // The compiled loss (weighted, reduced) plus the layers' regularisation losses.
  Tensor compute_loss(const Tensor& x, const Tensor& y, const Tensor& y_pred, const Tensor& sample_weight);
  // The compiled metrics (a "loss" tracker first), for custom train_step()s.
  std::vector<std::shared_ptr<metrics::Metric>> metrics();
  std::map<std::string, double> metrics_results();
  void reset_metrics();
  std::shared_ptr<optimizers::Optimizer> optimizer() const { return optimizer_; }
  std::shared_ptr<losses::Loss> loss() const { return loss_; }
  bool compiled() const { return optimizer_ != nullptr; }
  bool stop_training = false;  // set by callbacks (EarlyStopping) to end fit() after this epoch
  // The model's own random stream: fit, evaluate and predict draw from it (shuffling, dropout,
  // the weights of layers built in the first call), so models trained in separate threads give
  // the same results whatever the scheduling. Derived at construction (see SeedGenerator);
  // FitOptions::seed resets it.
  random::SeedGenerator& seed_generator() { return seed_generator_; }

  // The whole model: a directory, or one zip file when path ends in ".keel", holding
  // config.json (get_config() and the compile settings), model.safetensors (the weights by path)
  // and, once the optimizer has state, optimizer.safetensors. Written to a temporary name and
  // renamed into place: an interrupted save leaves the previous model loadable. See load_model.
  void save(const std::string& path);
  // Weights as a safetensors file, keyed by weight path ("dense/kernel").
  void save_weights(const std::string& path);
  void load_weights(const std::string& path);

  std::string class_name() const override { return is_functional() ? "Functional" : "Model"; }
  // Keras' model config: name, trainable and, for a Sequential, its "layers" (each
  // {"class_name", "config"}); for a functional model, every layer with its "inbound_nodes" and
  // the "input_layers" / "output_layers". A subclassed model has Layer's keys (override it).
  nlohmann::json get_config() const override;
  std::shared_ptr<layers::Layer> move_to_heap() override;

 protected:
  // Under a mixed-precision policy each layer casts its own inputs (as Keras' Functional does
  // not convert them); variables a subclassed call() reads are autocast.
  Autocast autocast() const override { return Autocast::variables; }
  struct Graph;
  std::shared_ptr<Graph> graph_;
  std::shared_ptr<optimizers::Optimizer> optimizer_;
  std::shared_ptr<losses::Loss> loss_;
  double loss_sum_ = 0, loss_count_ = 0;  // the running, batch-size weighted mean loss
  std::vector<std::shared_ptr<metrics::Metric>> metrics_;  // null: "accuracy" resolved at the first batch
  std::vector<std::string> metric_names_;
  CompileOptions compile_options_;
  random::SeedGenerator seed_generator_;
  std::shared_ptr<detail::StepFunctions> steps_;  // the traced steps (made on first use)
  // Runs a step's tensor work (`eager` on args) as compile()'s run_eagerly says.
  std::vector<Tensor> run_step(detail::Step step, const std::vector<Tensor>& args,
                               const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& eager);
  void resolve_metrics(const Tensor& y, const Tensor& y_pred);
  void update_metrics(const Tensor& loss, const Tensor& y, const Tensor& pred, const Tensor& sample_weight,
                      double batch);
  // The loops the tensor and Dataset forms of fit and evaluate share: each epoch is one pass
  // of an EpochIterator (src/models/epoch_iterator.hpp), whatever the data.
  History fit_loop(const detail::EpochIterator& data, const FitOptions& o,
                   const std::optional<std::pair<Tensor, Tensor>>& validation, const Tensor& validation_weights);
  std::map<std::string, double> evaluate_loop(const detail::EpochIterator& data, const EvaluateOptions& o);
};

class Sequential : public Model {
 public:
  explicit Sequential(std::vector<std::shared_ptr<layers::Layer>> layers = {}, std::string name = "");
  Sequential(std::initializer_list<layers::LayerRef> layers, std::string name = "");
  Sequential(Sequential&&) noexcept;
  ~Sequential() override;

  void add(layers::LayerRef layer);
  void pop();
  Tensor call(const Tensor& inputs, bool training) override;
  void build(const Shape& input_shape) override;  // with the batch dimension
  void check_input_shape(const Shape& input_shape) const override;
  // The stacked layers (an InputLayer is not listed, as in Keras).
  std::vector<std::shared_ptr<layers::Layer>> layers() const override;
  std::string class_name() const override { return "Sequential"; }
  std::shared_ptr<layers::Layer> move_to_heap() override;

 private:
  std::vector<std::shared_ptr<layers::Layer>> stack_;
};

}  // namespace keel::models
