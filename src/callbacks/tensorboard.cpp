// keras.callbacks.TensorBoard on keel::summary (see the header for what is written when).
// Names follow Keras 3's callback: "epoch_" / "batch_" prefixes, train/ and validation/ runs,
// "<weight>/histogram" and "<weight>/image" tags, a 1-based global batch counter for
// update_freq and profile_batch.
#include "keel/callbacks/tensorboard.hpp"
#include "keel/graph/function.hpp"

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "distribute/hooks.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/layers/core.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/shape.hpp"
#include "keel/optimizers/optimizer.hpp"
#include "keel/profiler/profiler.hpp"
#include "keel/summary/summary.hpp"
#include "tensorboard/compat/proto/event.pb.h"
#include "tensorboard/compat/proto/graph.pb.h"

namespace keel::callbacks {

UpdateFreq::UpdateFreq(const char* name) : UpdateFreq(std::string(name)) {}

UpdateFreq::UpdateFreq(std::string name) {
  if (name == "batch") {
    batches_ = 1;
  } else if (name != "epoch") {
    throw ValueError(fmt::format("TensorBoard: update_freq must be \"epoch\", \"batch\" or a number of batches, got "
                                 "\"{}\"", name));
  }
}

UpdateFreq::UpdateFreq(int batches) : batches_(batches) {
  if (batches < 1) throw ValueError(fmt::format("TensorBoard: update_freq must be >= 1 batches, got {}", batches));
}

TensorBoard::TensorBoard(std::string log_dir, TensorBoardOptions options)
    : log_dir_(std::move(log_dir)), options_(options) {
  if (options_.histogram_freq < 0 || options_.embeddings_freq < 0)
    throw ValueError("TensorBoard: histogram_freq and embeddings_freq must be >= 0");
  const auto [start, stop] = options_.profile_batch;
  if (start < 0 || stop < start || (start == 0) != (stop == 0))
    throw ValueError(fmt::format("TensorBoard: profile_batch must be {{0, 0}} (off) or {{start, stop}} with "
                                 "1 <= start <= stop, got {{{}, {}}}", start, stop));
}

TensorBoard::~TensorBoard() {
  if (profiling_) {
    try {
      profiler::stop();
    } catch (...) {  // a destructor must not throw; the profile of an aborted fit is dropped
    }
  }
}

summary::FileWriter& TensorBoard::writer(const std::string& run) {
  auto& w = run == "train" ? train_ : validation_;
  if (!w) w = std::make_unique<summary::FileWriter>(log_dir_ + "/" + run);
  return *w;
}

void TensorBoard::on_train_begin(const Logs&) {
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  global_batch_ = 0;
}

void TensorBoard::on_train_end(const Logs&) {
  stop_profile();
  if (train_) train_->flush();
  if (validation_) validation_->flush();
  train_.reset();
  validation_.reset();
}

void TensorBoard::on_epoch_begin(int, const Logs&) {
  epoch_batches_ = 0;
  epoch_start_ = std::chrono::steady_clock::now();
}

void TensorBoard::on_train_batch_begin(std::int64_t, const Logs&) {
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  ++global_batch_;
  batch_start_ = std::chrono::steady_clock::now();
  if (options_.profile_batch[0] > 0 && global_batch_ == options_.profile_batch[0] && !profiling_) {
    profiler::start(log_dir_);
    profiling_ = true;
  }
}

void TensorBoard::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  ++epoch_batches_;
  // After the first batch the train step has been traced (or has run eagerly): its graph.
  if (global_batch_ == 1 && options_.write_graph && model) log_graph();
  if (!options_.update_freq.per_epoch()) {
    if (options_.write_steps_per_second) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - batch_start_).count();
      if (s > 0) summary::scalar(writer("train"), "batch_steps_per_second", 1.0 / s, global_batch_);
    }
    if (batch % options_.update_freq.batches() == 0)
      for (const auto& [name, value] : logs) summary::scalar(writer("train"), "batch_" + name, value, global_batch_);
  }
  if (profiling_ && global_batch_ >= options_.profile_batch[1]) stop_profile();
}

void TensorBoard::on_epoch_end(int epoch, const Logs& logs) {
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  Logs train_logs, val_logs;
  for (const auto& [name, value] : logs) {
    if (name.rfind("val_", 0) == 0)
      val_logs[name.substr(4)] = value;
    else
      train_logs[name] = value;
  }
  if (model && model->optimizer()) train_logs["learning_rate"] = model->optimizer()->learning_rate();
  if (options_.write_steps_per_second) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
    train_logs["steps_per_second"] = s > 0 ? static_cast<double>(epoch_batches_) / s : 0.0;
  }
  for (const auto& [name, value] : train_logs) summary::scalar(writer("train"), "epoch_" + name, value, epoch);
  for (const auto& [name, value] : val_logs) summary::scalar(writer("validation"), "epoch_" + name, value, epoch);
  if (options_.histogram_freq > 0 && epoch % options_.histogram_freq == 0) log_weights(epoch);
  if (options_.embeddings_freq > 0 && epoch % options_.embeddings_freq == 0) log_embeddings(epoch);
  writer("train").flush();
  if (validation_) validation_->flush();
}

void TensorBoard::stop_profile() {
  if (!profiling_) return;
  profiling_ = false;
  profiler::stop();
  std::cout << fmt::format("TensorBoard: profiled batches {} to {}; the profile run is under {}/plugins/profile/\n",
                           options_.profile_batch[0], std::min(global_batch_, options_.profile_batch[1]), log_dir_);
}

namespace {

// A weight as Keras' _log_weight_as_image lays it out: squeezed; a vector as one row, a matrix
// wider than tall (transposed when taller), a rank-3 kernel as one image per last-axis slice; other ranks or
// channel counts other than 1, 3 and 4 are not drawn (an undefined result).
Tensor weight_image(const Tensor& w) {
  Tensor x = squeeze(w);
  if (x.rank() == 1) return reshape(x, {1, 1, x.shape()[0], 1});
  if (x.rank() == 2) {
    if (x.shape()[0] > x.shape()[1]) x = transpose(x);
    return reshape(x, {1, x.shape()[0], x.shape()[1], 1});
  }
  if (x.rank() == 3) {
    x = transpose(x, {2, 0, 1});  // [channels, h, w]
    return expand_dims(x, -1);
  }
  return Tensor();
}

// Every layer name a config entry's inbound nodes name in a keras_history.
void inbound_layers(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    auto h = j.find("keras_history");
    if (h != j.end() && h->is_array() && !h->empty() && (*h)[0].is_string()) out.push_back((*h)[0].get<std::string>());
    for (const auto& [k, v] : j.items()) inbound_layers(v, out);
  } else if (j.is_array()) {
    for (const auto& v : j) inbound_layers(v, out);
  }
}

}  // namespace

void TensorBoard::log_weights(int epoch) {
  for (const auto& layer : model->layers()) {
    for (Variable* v : layer->weights()) {
      const std::string& name = v->name();  // "<layer>/<weight>"
      summary::histogram(writer("train"), name + "/histogram", v->peek(), epoch);
      if (options_.write_images) {
        const Tensor img = weight_image(v->peek());
        if (img.defined() && (img.shape()[3] == 1 || img.shape()[3] == 3 || img.shape()[3] == 4))
          summary::image(writer("train"), name + "/image", img, epoch, static_cast<int>(img.shape()[0]));
      }
    }
  }
}

void TensorBoard::log_graph() {
  tensorboard::GraphDef g;
  if (const graph::Graph* traced = model->train_function_graph()) {
    // One NodeDef per operation (op = its TensorFlow name, inputs = what feeds it), and one per
    // source of memory from outside the graph (arguments, captured variables, constants).
    // An operation's node name carries its scope ("forward/dense_1/BatchMatMulV2"), which
    // TensorBoard's graph view draws as nested boxes, as it does tf.function's name scopes.
    std::map<std::string, std::string> full;
    const std::vector<graph::Operation> ops = traced->operations();
    for (const auto& op : ops) full[op.name] = op.scope.empty() ? op.name : op.scope + "/" + op.name;
    for (const auto& op : ops)
      for (const std::string& in : op.inputs)
        if (full.emplace(in, in).second) {
          auto* node = g.add_node();
          node->set_name(in);
          node->set_op(in.substr(0, in.rfind('_')));  // "Placeholder_0" -> Placeholder
        }
    for (const auto& op : ops) {
      auto* node = g.add_node();
      node->set_name(full.at(op.name));
      node->set_op(op.type);
      std::set<std::string> seen;
      for (const std::string& in : op.inputs)
        if (seen.insert(in).second) node->add_input(full.at(in));
    }
  }
  // A step that runs eagerly: one NodeDef per layer: name, op = the layer's class, inputs = the
  // layers feeding it (from the functional config's keras_history entries; a Sequential model
  // is a chain).
  const nlohmann::json config = g.node_size() > 0 ? nlohmann::json::object() : model->get_config();
  std::string previous;
  if (config.contains("layers") && config["layers"].is_array()) {
    for (const auto& entry : config["layers"]) {
      auto* node = g.add_node();
      const std::string cls = entry.value("class_name", std::string("Layer"));
      std::string name = entry.value("name", std::string());
      if (name.empty() && entry.contains("config")) name = entry["config"].value("name", cls);
      node->set_name(name);
      node->set_op(cls);
      std::vector<std::string> inputs;
      if (entry.contains("inbound_nodes")) inbound_layers(entry["inbound_nodes"], inputs);
      else if (!previous.empty()) inputs.push_back(previous);
      std::set<std::string> seen;
      for (const auto& in : inputs)
        if (seen.insert(in).second) node->add_input(in);
      previous = name;
    }
  }
  g.mutable_versions()->set_producer(1);
  tensorboard::Event e;
  e.set_wall_time(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  e.set_step(0);
  e.set_graph_def(g.SerializeAsString());
  writer("train").write_event(e.SerializeAsString());
}

void TensorBoard::log_embeddings(int epoch) {
  // TensorBoard's projector reads log_dir/projector_config.pbtxt (ProjectorConfig in protobuf
  // text format); each embedding is a TSV file of the matrix, one row per line.
  std::ostringstream config;
  int count = 0;
  for (const auto& layer : model->layers()) {
    if (layer->class_name() != "Embedding") continue;
    for (Variable* v : layer->weights()) {
      const Tensor m = v->peek();
      if (m.rank() != 2) continue;
      std::string file = v->name() + ".tsv";  // "<layer>_<weight>.tsv"
      for (char& ch : file)
        if (ch == '/') ch = '_';
      const std::vector<double> values = m.to_vector<double>();
      std::string tsv;
      for (std::int64_t r = 0; r < m.shape()[0]; ++r) {
        for (std::int64_t c = 0; c < m.shape()[1]; ++c)
          tsv += fmt::format("{}{:.9g}", c ? "\t" : "", values[static_cast<std::size_t>(r * m.shape()[1] + c)]);
        tsv += "\n";
      }
      io::atomic_write(log_dir_ + "/" + file, tsv);
      config << "embeddings {\n  tensor_name: \"" << v->name() << "\"\n  tensor_path: \"" << file
             << "\"\n}\n";
      ++count;
    }
  }
  (void)epoch;  // the matrices of this epoch replace the previous ones (one projector view)
  if (count > 0) io::atomic_write(log_dir_ + "/projector_config.pbtxt", config.str());
}

}  // namespace keel::callbacks
