#pragma once
// models::Model (a Layer that can be trained: functional graphs, Sequential stacks, or
// subclasses with their own call()), models::Sequential and models::Input.
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
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

// compile()'s loss: one loss for every output, a list (one per output, in model order), or a
// map by output name (Model::output_names()); an output without a loss does not train.
struct LossSpec {
  LossSpec() = default;
  template <class T, std::enable_if_t<std::is_constructible_v<losses::LossRef, T&&> &&
                                          !std::is_same_v<std::decay_t<T>, LossSpec>,
                                      int> = 0>
  LossSpec(T&& loss) : one(std::forward<T>(loss)) {}  // NOLINT: implicit, as .loss = "mse"
  LossSpec(std::initializer_list<losses::LossRef> l) : list(l) {}
  LossSpec(std::vector<losses::LossRef> l) : list(std::move(l)) {}  // NOLINT
  LossSpec(std::map<std::string, losses::LossRef> m) : by_name(std::move(m)) {}  // NOLINT
  bool defined() const { return one.defined() || !list.empty() || !by_name.empty(); }
  losses::LossRef one;
  std::vector<losses::LossRef> list;
  std::map<std::string, losses::LossRef> by_name;
};

// compile()'s loss_weights: a list in output order or a map by output name. The total loss
// is sum_i loss_weight_i * loss_i (weight 1 for an output not named), plus regularisation.
struct LossWeights {
  LossWeights() = default;
  LossWeights(std::initializer_list<double> l) : list(l) {}
  LossWeights(std::vector<double> l) : list(std::move(l)) {}             // NOLINT
  LossWeights(std::map<std::string, double> m) : by_name(std::move(m)) {}  // NOLINT
  bool empty() const { return list.empty() && by_name.empty(); }
  std::vector<double> list;
  std::map<std::string, double> by_name;
};

// compile()'s metrics: a flat list (for a multi-output model applied to every output, as
// tf.keras does), one list per output (model order), or lists by output name. A multi-output
// model logs them as "<output>_<metric>" (Keras' names: "dense_1_accuracy").
struct MetricsSpec {
  MetricsSpec() = default;
  MetricsSpec(std::initializer_list<metrics::MetricRef> l) : flat(l) {}
  MetricsSpec(std::vector<metrics::MetricRef> l) : flat(std::move(l)) {}  // NOLINT
  MetricsSpec(std::vector<std::vector<metrics::MetricRef>> l) : per_output(std::move(l)) {}  // NOLINT
  MetricsSpec(std::map<std::string, std::vector<metrics::MetricRef>> m) : by_name(std::move(m)) {}  // NOLINT
  bool empty() const { return flat.empty() && per_output.empty() && by_name.empty(); }
  std::vector<metrics::MetricRef> flat;
  std::vector<std::vector<metrics::MetricRef>> per_output;
  std::map<std::string, std::vector<metrics::MetricRef>> by_name;
};

// Options in the order of Keras' keyword arguments, with Keras' defaults.
struct CompileOptions {
  optimizers::OptimizerRef optimizer = "rmsprop";
  LossSpec loss{};
  LossWeights loss_weights{};
  MetricsSpec metrics{};
  // Keras: false traces the tensor work of each step (forward, loss, gradient, update) with
  // keel::function and replays it; true runs the steps op by op, as written.
  bool run_eagerly = false;
  // The traced steps' whole-graph optimisation (FunctionOptions::jit_compile).
  bool jit_compile = true;
};

// The x or y of fit / evaluate / predict / *_on_batch: one tensor, one per model input (or
// output) in model order, or a map by Input name (or output layer name).
struct ModelData {
  ModelData() = default;
  ModelData(Tensor t) : list{std::move(t)} {}                                  // NOLINT
  ModelData(std::initializer_list<Tensor> l) : list(l) {}
  ModelData(std::vector<Tensor> l) : list(std::move(l)) {}                     // NOLINT
  ModelData(std::map<std::string, Tensor> m) : by_name(std::move(m)) {}        // NOLINT
  bool empty() const { return list.empty() && by_name.empty(); }
  std::vector<Tensor> list;
  std::map<std::string, Tensor> by_name;
};

struct FitOptions {
  std::int64_t batch_size = 32;
  int epochs = 1;
  int verbose = 1;  // 0 silent, 1 progress bar (one line per epoch when not a terminal), 2 one line per epoch
  callbacks::CallbackList callbacks{};
  double validation_split = 0;  // the last fraction of x, y (before shuffling), as Keras
  std::optional<std::pair<ModelData, ModelData>> validation_data{};
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

// Model::load_pytorch_state_dict: strict = every tensor of the state dict is used and every
// weight of the model is set (torch's load_state_dict(strict=True)).
struct LoadStateDictOptions {
  bool strict = true;
};
// Model::pytorch_state_dict: stack_recurrent = write each run of recurrent layers of one class,
// direction and unit count (all but the last with return_sequences) as one torch module of
// num_layers = the run's length ("<i>.weight_ih_l1" ...), as nn.LSTM(num_layers = k) names them.
struct PytorchStateDictOptions {
  bool stack_recurrent = false;
};

class Model;
}  // namespace keel::models
namespace keel::graph {
class Graph;
}  // namespace keel::graph
namespace keel::models {
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

  // The names x and y maps are keyed by: the Input names, and the output layers' names (a
  // Sequential's or subclassed model's one output is named after its last layer / the model).
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;

  // ---- training (Keras' compile / fit / evaluate / predict) ----
  // ValueError for a loss, loss_weights or metrics entry that names no output, or lists of
  // the wrong length.
  void compile(CompileOptions options);
  // History keys: "loss" (the weighted total), the metrics and, for a multi-output model, each
  // output's weighted loss "<output>_loss" and metrics "<output>_<metric>"; "val_" for each.
  History fit(const ModelData& x, const ModelData& y, FitOptions options = {});
  // A data::Dataset of (x, y) batches: each epoch is one pass (batch_size, shuffle,
  // validation_split and class_weight belong to the pipeline then, not to fit).
  History fit(const data::Dataset<std::pair<Tensor, Tensor>>& train, FitOptions options = {});
  // Batches of several inputs / outputs, each side in model order.
  History fit(const data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& train, FitOptions options = {});
  // Elements whose x and y are nested pairs of tensors (tf.data's tuples): ((x1, x2), y).
  template <class X, class Y,
            std::enable_if_t<data::detail::tensor_tree<X>::value && data::detail::tensor_tree<Y>::value &&
                                 !(std::is_same_v<X, Tensor> && std::is_same_v<Y, Tensor>),
                             int> = 0>
  History fit(const data::Dataset<std::pair<X, Y>>& train, FitOptions options = {}) {
    return fit(flatten_batches(train), std::move(options));
  }
  std::map<std::string, double> evaluate(const ModelData& x, const ModelData& y, EvaluateOptions options = {});
  std::map<std::string, double> evaluate(const data::Dataset<std::pair<Tensor, Tensor>>& data,
                                         EvaluateOptions options = {});
  std::map<std::string, double> evaluate(const data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& data,
                                         EvaluateOptions options = {});
  template <class X, class Y,
            std::enable_if_t<data::detail::tensor_tree<X>::value && data::detail::tensor_tree<Y>::value &&
                                 !(std::is_same_v<X, Tensor> && std::is_same_v<Y, Tensor>),
                             int> = 0>
  std::map<std::string, double> evaluate(const data::Dataset<std::pair<X, Y>>& data, EvaluateOptions options = {}) {
    return evaluate(flatten_batches(data), std::move(options));
  }
  // The (first) output; ValueError for a multi-output model (use predict_all).
  Tensor predict(const ModelData& x, PredictOptions options = {});
  // Every output, in model order.
  std::vector<Tensor> predict_all(const ModelData& x, PredictOptions options = {});

  // Keras' train_on_batch / test_on_batch / predict_on_batch: one step on one batch, returning
  // the logs (Keras' return_dict = true: "loss" and the metrics). As in Keras 3 the metrics are
  // not reset between calls (reset_metrics() does).
  std::map<std::string, double> train_on_batch(const ModelData& x, const ModelData& y, const Tensor& sample_weight = {},
                                               const std::map<std::int64_t, double>& class_weight = {});
  std::map<std::string, double> test_on_batch(const ModelData& x, const ModelData& y, const Tensor& sample_weight = {});
  std::vector<Tensor> predict_on_batch(const ModelData& x);

  // Copies of every weight in Keras 3's order (layer by layer, each layer's own weights
  // before its sublayers'), and back: ValueError for a wrong count, or naming the weight
  // whose shape differs.
  std::vector<Tensor> get_weights();
  void set_weights(const std::vector<Tensor>& weights);

  // One optimisation step on a batch: forward under a GradientTape, loss (+ regularisation
  // losses), gradients, optimizer update, metric updates. Override to customise fit() (a model
  // with several inputs or outputs runs the built-in step, multi_train_step).
  virtual std::map<std::string, double> train_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight);
  virtual std::map<std::string, double> test_step(const Tensor& x, const Tensor& y, const Tensor& sample_weight);
  // The compiled loss (weighted, reduced) plus the layers' regularisation losses (of the first
  // output for a multi-output model).
  Tensor compute_loss(const Tensor& x, const Tensor& y, const Tensor& y_pred, const Tensor& sample_weight);
  // The compiled metrics (a "loss" tracker first), for custom train_step()s.
  std::vector<std::shared_ptr<metrics::Metric>> metrics();
  std::map<std::string, double> metrics_results();
  void reset_metrics();
  std::shared_ptr<optimizers::Optimizer> optimizer() const { return optimizer_; }
  // The graph fit's train step was traced into (Keras' model.train_function), as of its first
  // traced call: nullptr before that, and when the step runs eagerly. TensorBoard(write_graph)
  // writes it.
  const graph::Graph* train_function_graph() const;
  std::shared_ptr<losses::Loss> loss() const { return loss_; }
  bool compiled() const { return optimizer_ != nullptr; }
  bool stop_training = false;  // set by callbacks (EarlyStopping) to end fit() after this epoch
  // Called from a callback's on_train_begin (BackupAndRestore): the fit() starting continues at
  // `epoch` (0-based) instead of FitOptions::initial_epoch, as Keras' model._initial_epoch.
  void resume_at_epoch(int epoch) { resume_epoch_ = epoch; }
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

  // PyTorch's layout of the weights, layer by layer in model order ("0.weight", "0.bias", ...
  // as nn.Sequential names them): Dense <-> Linear (kernel [in, out] <-> weight [out, in]),
  // Conv2D <-> Conv2d (HWIO <-> OIHW), BatchNormalization <-> BatchNorm2d (running stats and
  // num_batches_tracked), Embedding, LayerNormalization, LSTM/GRU <-> nn.LSTM/nn.GRU (gate order,
  // PyTorch's two biases summed). A mismatch is a ValueError naming the first one.
  std::map<std::string, Tensor> pytorch_state_dict(PytorchStateDictOptions options = {});
  void load_pytorch_state_dict(const std::map<std::string, Tensor>& state, LoadStateDictOptions options = {});

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
  // The compiled loss of each output (null: none) and its weight, in output order.
  std::vector<std::shared_ptr<losses::Loss>> output_losses_;
  std::vector<double> output_weights_;
  std::vector<double> output_loss_sums_;  // running, batch-size weighted, per output
  std::vector<int> metric_outputs_;       // the output each of metrics_ reads
  int resume_epoch_ = -1;                 // see resume_at_epoch
  // Runs a step's tensor work (`eager` on args) as compile()'s run_eagerly says.
  std::vector<Tensor> run_step(detail::Step step, const std::vector<Tensor>& args,
                               const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& eager);
  // The built-in steps on any number of inputs and outputs (model order).
  std::map<std::string, double> multi_train_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                                 const Tensor& sample_weight);
  std::map<std::string, double> multi_test_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                                const Tensor& sample_weight);
  // The steps fit and evaluate run: train_step / test_step for one input and one output (so
  // overrides apply), the multi_ forms otherwise.
  std::map<std::string, double> run_train_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                               const Tensor& sample_weight);
  std::map<std::string, double> run_test_step(const std::vector<Tensor>& x, const std::vector<Tensor>& y,
                                              const Tensor& sample_weight);
  // Every output of a forward pass.
  std::vector<Tensor> forward(const std::vector<Tensor>& x, bool training);
  // The weighted total loss (with regularisation) and each output's weighted loss.
  std::vector<Tensor> compute_losses(const std::vector<Tensor>& y, const std::vector<Tensor>& y_pred,
                                     const Tensor& sample_weight);
  void resolve_metrics(const std::vector<Tensor>& y, const std::vector<Tensor>& y_pred);
  // The one-output forms, for custom train_step()s (the metrics of the first output).
  void resolve_metrics(const Tensor& y, const Tensor& y_pred);
  void update_metrics(const Tensor& loss, const Tensor& y, const Tensor& pred, const Tensor& sample_weight,
                      double batch);
  void update_metrics(const std::vector<Tensor>& losses, const std::vector<Tensor>& y, const std::vector<Tensor>& pred,
                      const Tensor& sample_weight, double batch);
  // x or y as one tensor per input (output) in model order; `op` names the caller in errors.
  std::vector<Tensor> inputs_in_order(const ModelData& x, const char* op) const;
  std::vector<Tensor> targets_in_order(const ModelData& y, const char* op) const;
  template <class X, class Y>
  static data::Dataset<std::pair<std::vector<Tensor>, std::vector<Tensor>>> flatten_batches(
      const data::Dataset<std::pair<X, Y>>& ds) {
    return ds.map([](const std::pair<X, Y>& e) {
      std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
      data::detail::flatten(e.first, out.first);
      data::detail::flatten(e.second, out.second);
      return out;
    });
  }
  // A MirroredStrategy's replicas on threads of this process (src/models/replica_copies.cpp):
  // this model rebuilt by clone_model on `device` and compiled as this one (an optimizer and
  // metrics of its own), and this model's weights copied into such a copy before each step.
  std::shared_ptr<Model> replica_copy(Device device);
  void copy_weights_to(Model& copy);
  // The loops the tensor and Dataset forms of fit and evaluate share: each epoch is one pass
  // of an EpochIterator (src/models/epoch_iterator.hpp), whatever the data.
  History fit_loop(const detail::EpochIterator& data, const FitOptions& o,
                   const std::optional<std::pair<std::vector<Tensor>, std::vector<Tensor>>>& validation,
                   const Tensor& validation_weights);
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

// Keras' clone_model: the same architecture (a Sequential or functional model of registered
// layers, rebuilt from get_config()) with freshly initialised weights; not compiled.
std::shared_ptr<Model> clone_model(Model& model);

}  // namespace keel::models
