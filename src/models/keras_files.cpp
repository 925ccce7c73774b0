// Keras' files (keras_files.hpp):
//
//   m.keras   Keras 3's zip (keras/src/saving/saving_lib.py): metadata.json {"keras_version",
//             "date_saved"}, config.json (serialize_keras_object of the model, with build_config
//             and compile_config) and model.weights.h5, H5IOStore's layout: each saveable's own
//             variables as datasets "0", "1", ... of a group "<path>/vars", where the path walks
//             the model: "" (the model itself: "vars"), "layers/<snake_case(class)>[_<n>]" for the
//             entries of model.layers (numbered per class, in order; a functional model's
//             InputLayers count), and attributes of layers below: "<layer>/cell" (the variables of
//             an RNN layer live in its cell), "<layer>/forward_layer" and "backward_layer"
//             (Bidirectional), "<layer>/layer" (TimeDistributed), "<model>/layers/..." (a nested
//             model). keel's optimizer state goes to "optimizer/keel_state" (datasets "0".. with
//             attribute "names"), beside an empty "optimizer/vars": Keras then skips the
//             optimizer's variables with its warning instead of assigning keel's by position.
//   m.h5      legacy Keras HDF5 (tf_keras/src/saving/legacy/hdf5_format.py): root attributes
//             model_config (the Keras 2 JSON), keras_version, backend and, for a compiled model,
//             training_config; group model_weights with attributes layer_names, backend,
//             keras_version and one group per layer with attribute weight_names
//             ("dense/kernel:0", ...) naming its datasets (trainable weights first);
//             optimizer_weights for keel's optimizer state.
//   w.weights.h5   the H5IOStore layout alone; w.h5 (not .weights.h5) the legacy weight groups
//             at the root. load_weights reads either layout, and a legacy model file's weights.
// Legacy weights load by position, layer by layer (layers without weights skipped), as Keras'
// load_weights_from_hdf5_group does; Keras 3 weights by path. Every mismatch is an IOError naming
// the file and the HDF5 object.
#include "models/keras_files.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "io/hdf5_file.hpp"
#include "io/keras_config.hpp"
#include "io/read_file.hpp"
#include "io/safetensors_file.hpp"
#include "io/zip.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/layers/registry.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "layers/loading_scope.hpp"
#include "models/keras_optimizer_vars.hpp"
#include "models/model_files.hpp"
#include "models/serialization.hpp"

namespace keel::models::detail {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace h5 = io::hdf5;

constexpr const char* kKerasWeights = "model.weights.h5";
constexpr const char* kKeras3Version = "3.3.3";
constexpr const char* kKeras2Version = "2.15.0";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---- the H5IOStore layout ---------------------------------------------------------------------

struct VarsEntry {
  std::string path;  // "" for the model itself
  std::vector<Variable*> vars;
};

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "/" + b; }

// The layer's own variables: its weights() (trainable first, as Keras' _trainable_variables +
// _non_trainable_variables) less its sublayers'.
std::vector<Variable*> own_vars(layers::Layer& layer) {
  std::set<Variable*> nested;
  for (const auto& s : layer.sublayers())
    for (Variable* v : s->weights()) nested.insert(v);
  std::vector<Variable*> out;
  for (Variable* v : layer.weights())
    if (!nested.count(v)) out.push_back(v);
  return out;
}

void walk_layer(layers::Layer& layer, const std::string& path, std::vector<VarsEntry>& out);

void walk_model(Model& model, const std::string& path, std::vector<VarsEntry>& out) {
  out.push_back({path, own_vars(model)});
  std::map<std::string, int> used;
  const auto slot = [&](const std::string& cls) {
    const std::string base = io::keras::keras_snake_case(cls);
    const int n = used.count(base) ? ++used[base] : (used[base] = 0);
    return n == 0 ? base : fmt::format("{}_{}", base, n);
  };
  // Keras' Functional.layers lists its InputLayers (no variables; their groups are still made).
  if (model.is_functional())
    for (std::size_t i = 0; i < model.num_inputs(); ++i) out.push_back({join(path, "layers/" + slot("InputLayer")), {}});
  for (const auto& l : model.layers()) walk_layer(*l, join(path, "layers/" + slot(l->class_name())), out);
}

void walk_layer(layers::Layer& layer, const std::string& path, std::vector<VarsEntry>& out) {
  if (auto* m = dynamic_cast<Model*>(&layer)) return walk_model(*m, path, out);
  const std::string cls = layer.class_name();
  const auto& subs = layer.sublayers();
  static const std::set<std::string> rnn = {"LSTM", "GRU", "SimpleRNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"};
  if (rnn.count(cls) && subs.empty()) {
    out.push_back({path, {}});
    out.push_back({path + "/cell", own_vars(layer)});
    return;
  }
  out.push_back({path, own_vars(layer)});
  if (cls == "Bidirectional" && subs.size() == 2) {
    walk_layer(*subs[0], path + "/forward_layer", out);
    walk_layer(*subs[1], path + "/backward_layer", out);
  } else if (cls == "TimeDistributed" && subs.size() == 1) {
    walk_layer(*subs[0], path + "/layer", out);
  } else {
    for (const auto& s : subs) walk_layer(*s, path + "/" + s->name(), out);  // keel's own naming
  }
}

std::string vars_group(const std::string& path) { return path.empty() ? "vars" : path + "/vars"; }

void write_store(h5::Group& root, Model& model) {
  std::vector<VarsEntry> entries;
  walk_model(model, "", entries);
  for (const auto& e : entries) {
    h5::Group g = root.require_group(vars_group(e.path));
    for (std::size_t i = 0; i < e.vars.size(); ++i) g.write_dataset(std::to_string(i), e.vars[i]->peek());
  }
}

[[noreturn]] void fail(const char* op, const std::string& label, const std::string& where, const std::string& what) {
  throw IOError(fmt::format("{}: {}: {}: {}", op, label, where, what));
}

// The value for `v` from dataset `name` of `g`: the same shape, converted to the variable's dtype.
Tensor checked_value(const h5::Group& g, const std::string& name, const Variable& v, const char* op,
                     const std::string& label) {
  Tensor t = g.read_dataset(name);
  const std::string where = g.path() + "/" + name;
  if (t.shape() != v.shape())
    fail(op, label, where, fmt::format("is {} {}, but the model's weight '{}' is {} {}", keel::name(t.dtype()),
                                       t.shape().to_string(), v.name(), keel::name(v.dtype()), v.shape().to_string()));
  if (t.dtype() != v.dtype()) {
    if (is_floating(t.dtype()) != is_floating(v.dtype()))
      fail(op, label, where, fmt::format("holds {} values for the {} weight '{}'", keel::name(t.dtype()),
                                         keel::name(v.dtype()), v.name()));
    t = cast(t, v.dtype());
  }
  return t;
}

void read_store(const h5::Group& root, Model& model, const char* op, const std::string& label) {
  std::vector<VarsEntry> entries;
  walk_model(model, "", entries);
  std::vector<std::pair<Variable*, Tensor>> values;
  for (const auto& e : entries) {
    if (e.vars.empty()) continue;
    const std::string gname = vars_group(e.path);
    if (!root.has_group(gname))
      fail(op, label, "/" + gname, fmt::format("missing: the model's weights {}... ({}) belong there", e.vars[0]->name(), e.vars.size()));
    const h5::Group g = root.open_group(gname);
    const auto names = g.children();
    if (names.size() != e.vars.size())
      fail(op, label, g.path(), fmt::format("holds {} variables, the model's layer has {} ({}...)", names.size(),
                                            e.vars.size(), e.vars[0]->name()));
    for (std::size_t i = 0; i < e.vars.size(); ++i)
      values.emplace_back(e.vars[i], checked_value(g, std::to_string(i), *e.vars[i], op, label));
  }
  for (auto& [v, t] : values) v->assign(t);  // only once every weight was found and checked
}

// ---- the legacy layout --------------------------------------------------------------------------

// Keras 2's model.layers: a functional model's InputLayers first (by input name), then its layers.
std::vector<std::pair<std::string, layers::Layer*>> legacy_layers(Model& model) {
  std::vector<std::pair<std::string, layers::Layer*>> out;
  if (model.is_functional())
    for (const auto& n : model.input_names()) out.emplace_back(n, nullptr);
  for (const auto& l : model.layers()) out.emplace_back(l->name(), l.get());
  return out;
}

void write_legacy(h5::Group& g, Model& model) {
  const auto list = legacy_layers(model);
  std::vector<std::string> names;
  for (const auto& [n, l] : list) names.push_back(n);
  g.write_string_list_attr("layer_names", names);
  g.write_string_attr("backend", "tensorflow");
  g.write_string_attr("keras_version", kKeras2Version);
  for (const auto& [n, l] : list) {
    h5::Group lg = g.create_group(n);
    std::vector<std::string> wnames;
    if (l)
      for (Variable* v : l->weights()) wnames.push_back(v->name() + ":0");
    lg.write_string_list_attr("weight_names", wnames);
    if (l) {
      const auto ws = l->weights();
      for (std::size_t i = 0; i < ws.size(); ++i) lg.write_dataset(wnames[i], ws[i]->peek());
    }
  }
}

// A list attribute as Keras' save_attributes_to_hdf5_group writes it: whole, or (past HDF5's
// 64 KiB attribute limit) in chunks "<name>0", "<name>1", ...; empty when absent.
std::vector<std::string> read_chunked_string_list(const h5::Group& g, const std::string& name) {
  if (g.has_attr(name)) return g.read_string_list_attr(name);
  std::vector<std::string> out;
  for (int chunk = 0; g.has_attr(name + std::to_string(chunk)); ++chunk)
    for (std::string& s : g.read_string_list_attr(name + std::to_string(chunk))) out.push_back(std::move(s));
  return out;
}

void read_legacy(const h5::Group& g, Model& model, const char* op, const std::string& label) {
  const auto file_layers = g.has_attr("layer_names0") ? read_chunked_string_list(g, "layer_names")
                                                     : g.read_string_list_attr("layer_names");
  std::vector<std::pair<std::string, std::vector<std::string>>> with_weights;  // file layers holding weights
  for (const auto& n : file_layers) {
    if (!g.has_group(n)) fail(op, label, g.path(), fmt::format("layer_names lists '{}', which has no group", n));
    const h5::Group lg = g.open_group(n);
    auto w = lg.has_attr("weight_names0") ? read_chunked_string_list(lg, "weight_names")
                                          : lg.read_string_list_attr("weight_names");
    if (!w.empty()) with_weights.emplace_back(n, std::move(w));
  }
  std::vector<layers::Layer*> targets;
  for (const auto& [n, l] : legacy_layers(model))
    if (l && !l->weights().empty()) targets.push_back(l);
  if (targets.size() != with_weights.size())
    fail(op, label, g.path(), fmt::format("holds weights for {} layers, but the model has {} layers with weights",
                                          with_weights.size(), targets.size()));
  std::vector<std::pair<Variable*, Tensor>> values;
  for (std::size_t k = 0; k < targets.size(); ++k) {
    const auto ws = targets[k]->weights();
    const auto& [n, wnames] = with_weights[k];
    const h5::Group lg = g.open_group(n);
    if (wnames.size() != ws.size())
      fail(op, label, lg.path(), fmt::format("holds {} weights, but the model's layer '{}' (layer #{} with weights) has {}",
                                             wnames.size(), targets[k]->name(), k, ws.size()));
    for (std::size_t i = 0; i < ws.size(); ++i) values.emplace_back(ws[i], checked_value(lg, wnames[i], *ws[i], op, label));
  }
  for (auto& [v, t] : values) v->assign(t);
}

// ---- optimizer state ------------------------------------------------------------------------

struct OptimizerState {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

void write_optimizer_state(h5::Group& g, const OptimizerState& s) {
  std::vector<std::string> names;
  std::size_t i = 0;
  for (const auto& [n, t] : s.tensors) {
    names.push_back(n);
    g.write_dataset(std::to_string(i++), t);
  }
  g.write_string_list_attr("names", names);
  for (const auto& [k, v] : s.metadata) g.write_string_attr("meta_" + k, v);
}

std::optional<OptimizerState> read_optimizer_state(const h5::Group& root, const std::string& group) {
  if (!root.has_group(group)) return std::nullopt;
  const h5::Group g = root.open_group(group);
  if (!g.has_attr("names")) return std::nullopt;  // Keras' own optimizer weights: not keel's form
  OptimizerState s;
  const auto names = g.read_string_list_attr("names");
  for (std::size_t i = 0; i < names.size(); ++i) s.tensors[names[i]] = g.read_dataset(std::to_string(i));
  for (const char* k : {"format", "optimizer", "optimizer_built"})
    if (g.has_attr(std::string("meta_") + k)) s.metadata[k] = g.read_string_attr(std::string("meta_") + k);
  return s;
}

// ---- saving ---------------------------------------------------------------------------------

// What Model::save writes, read back from a folder it saved into.
struct SavedParts {
  json top;
  std::optional<OptimizerState> optimizer;
};

SavedParts keel_parts(Model& model, const std::string& path) {
  TempDir parts(sibling_name(path, "parts"), "Model.save");
  const std::string dir = parts.path() + "/model";
  model.save(dir);
  SavedParts out;
  out.top = json::parse(io::detail::read_file(dir + "/" + kConfig, "Model.save"));
  if (fs::exists(dir + "/" + kOptimizer)) {
    auto f = io::detail::read_safetensors(dir + "/" + kOptimizer);
    out.optimizer = OptimizerState{std::move(f.tensors), std::move(f.metadata)};
  }
  return out;
}

std::string now_string() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d@%H:%M:%S", &tm);
  return buf;
}

json keras3_compile_config(const json& cc) {
  json out = cc;
  if (out.contains("optimizer") && out["optimizer"].is_object()) {
    out["optimizer"]["module"] = "keras.optimizers";
    out["optimizer"]["registered_name"] = nullptr;
  }
  out["weighted_metrics"] = nullptr;
  out["run_eagerly"] = false;
  out["steps_per_execution"] = 1;
  out["jit_compile"] = false;
  return out;
}

void save_keras3(Model& model, const std::string& path) {
  SavedParts parts = keel_parts(model, path);
  json top = io::keras::to_keras3({{"module", "keras"},
                                   {"class_name", parts.top.at("class_name")},
                                   {"config", parts.top.at("config")},
                                   {"registered_name", nullptr}});
  if (parts.top.contains("build_config")) top["build_config"] = parts.top["build_config"];
  top["compile_config"] = parts.top.contains("compile_config") ? keras3_compile_config(parts.top["compile_config"]) : json(nullptr);
  const std::string config_text = top.dump();
  const std::string metadata_text = json{{"keras_version", kKeras3Version}, {"date_saved", now_string()}}.dump();
  std::string weights;
  {
    auto f = h5::File::create_in_memory("Model.save", path + " member '" + kKerasWeights + "'");
    h5::Group root = f->root();
    write_store(root, model);
    if (parts.optimizer) {
      h5::Group og = root.require_group("optimizer");
      h5::Group vars = og.require_group("vars");
      // Keras' own form, which Keras loads: the variables in its order (where keel knows it).
      // keel reads its own form beside it, which also holds what Keras has no place for.
      const auto order = model.optimizer() ? keras_variable_order(*model.optimizer(), model.trainable_weights())
                                           : std::nullopt;
      bool complete = order.has_value();
      for (std::size_t i = 0; complete && i < order->size(); ++i)
        complete = is_keras_only((*order)[i]) || parts.optimizer->tensors.count((*order)[i]) > 0;
      if (complete)
        for (std::size_t i = 0; i < order->size(); ++i) {
          const std::string& name = (*order)[i];
          vars.write_dataset(std::to_string(i),
                             is_keras_only(name) ? keras_only_value(name) : parts.optimizer->tensors.at(name));
        }
      h5::Group ks = og.create_group("keel_state");
      write_optimizer_state(ks, *parts.optimizer);
    }
    weights = f->image();
    f->close();
  }
  const std::vector<io::zip::Member> members = {
      {"metadata.json", metadata_text, true}, {"config.json", config_text, true}, {kKerasWeights, weights, false}};
  io::atomic_write(path, io::zip::write_archive(members, "Model.save", path));
}

void save_legacy_h5(Model& model, const std::string& path) {
  SavedParts parts = keel_parts(model, path);
  const json model_config = io::keras::to_keras2({{"class_name", parts.top.at("class_name")}, {"config", parts.top.at("config")}});
  std::string bytes;
  {
    auto f = h5::File::create_in_memory("Model.save", path);
    h5::Group root = f->root();
    root.write_string_attr("model_config", model_config.dump());
    root.write_string_attr("keras_version", kKeras2Version);
    root.write_string_attr("backend", "tensorflow");
    if (parts.top.contains("compile_config") && parts.top["compile_config"].is_object()) {
      const json& cc = parts.top["compile_config"];
      json opt = cc.value("optimizer", json(nullptr));
      json training = {{"loss", cc.value("loss", json(nullptr))},
                       {"metrics", cc.value("metrics", json(nullptr))},
                       {"weighted_metrics", nullptr},
                       {"loss_weights", cc.value("loss_weights", json(nullptr))},
                       {"optimizer_config", opt.is_object() ? json{{"class_name", opt.value("class_name", "")},
                                                                   {"config", opt.value("config", json::object())}}
                                                            : opt}};
      root.write_string_attr("training_config", training.dump());
    }
    h5::Group mw = root.create_group("model_weights");
    write_legacy(mw, model);
    if (parts.optimizer) {
      h5::Group og = root.create_group("optimizer_weights");
      write_optimizer_state(og, *parts.optimizer);
    }
    bytes = f->image();
    f->close();
  }
  io::atomic_write(path, bytes);
}

// ---- loading --------------------------------------------------------------------------------

// Sums the elements of every dataset below g: the budget a config may build within.
std::uint64_t dataset_elements(const h5::Group& g, int depth = 0) {
  if (depth > 32) return 0;
  std::uint64_t total = 0;
  for (const auto& n : g.children()) {
    if (g.has_dataset(n)) {
      std::uint64_t e = 1;
      for (auto d : g.dataset_shape(n)) e *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 1));
      total += e;
    } else if (g.has_group(n)) {
      total += dataset_elements(g.open_group(n), depth + 1);
    }
  }
  return total;
}

// The model an entry describes (keel's form), built: on its InputLayers, or on build_config.
std::shared_ptr<Model> build_model(const json& top, std::uint64_t budget, const std::string& label,
                                   const std::string& weights_label) {
  if (!top.is_object() || !top.contains("class_name") || !top["class_name"].is_string() || !top.contains("config") ||
      !top["config"].is_object())
    throw IOError(fmt::format("load_model: {}: expected {{\"class_name\": ..., \"config\": {{...}}}}", label));
  const std::string cls = top["class_name"].get<std::string>();
  std::shared_ptr<Model> model;
  try {
    layers::detail::LoadingScope scope(budget, weights_label);
    model = std::dynamic_pointer_cast<Model>(layers::from_config(cls, top["config"]));
    if (!model) throw IOError(fmt::format("load_model: {}: class_name: '{}' is a layer, not a model", label, cls));
    auto bc = top.find("build_config");
    if (!model->built() && bc != top.end() && bc->is_object() && bc->contains("input_shape") &&
        (*bc)["input_shape"].is_array() && !(*bc)["input_shape"].empty()) {
      std::vector<std::int64_t> dims{1};
      const json& shape = (*bc)["input_shape"];
      for (std::size_t d = 1; d < shape.size(); ++d) {
        if (!shape[d].is_number_integer() || shape[d].get<std::int64_t>() < 0)
          throw IOError(fmt::format("load_model: {}: build_config.input_shape: bad dimension {}", label, shape[d].dump()));
        dims.push_back(shape[d].get<std::int64_t>());
      }
      check_example_size(dims, "build_config.input_shape");
      autograd::NoRecordScope no_record;
      (*model)(zeros(Shape(dims)), false);
    }
  } catch (const IOError&) {
    throw;
  } catch (const Error& e) {
    throw IOError(fmt::format("load_model: {}: config: {}", label, e.what()));
  } catch (const json::exception& e) {
    throw IOError(fmt::format("load_model: {}: config: {}", label, e.what()));
  } catch (const std::bad_alloc&) {
    throw IOError(fmt::format("load_model: {}: config: the model it describes is too large to build", label));
  }
  return model;
}

// Compiles `model` as compile_config says, through keel's own loader (which validates it and the
// optimizer state): a folder with the config, the weights as loaded and the optimizer state.
std::shared_ptr<Model> compiled(Model& model, const json& top, const json& compile_config,
                                std::optional<OptimizerState> state, const std::string& label,
                                const std::vector<Tensor>& keras_vars = {},
                                const std::vector<std::string>& keras2_names = {}) {
  std::error_code ec;
  std::string dir = (fs::temp_directory_path(ec) / "keel-keras-XXXXXX").string();
  if (!::mkdtemp(dir.data())) throw IOError(fmt::format("load_model: {}: cannot make a temporary folder", label));
  TempDir tmp_owner(dir + "/m", "load_model");
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(d, e);
    }
  } cleanup{dir};
  const std::string m = tmp_owner.path();
  json keel_top = {{"class_name", top["class_name"]}, {"config", top["config"]}, {"compile_config", compile_config}};
  io::atomic_write(m + "/" + kConfig, keel_top.dump());
  model.save_weights(m + "/" + kWeights);
  if (!state) {
    // A file Keras wrote: its optimizer variables ("optimizer/vars") in Keras' order, mapped to
    // keel's names through the compiled optimizer built on the model's weights, as Keras'
    // compile_from_config builds it before loading them. Where they do not fit, training
    // starts afresh, as in Keras.
    std::shared_ptr<optimizers::Optimizer> opt;
    try {
      opt = optimizers::deserialize(compile_config.at("optimizer"));
    } catch (const std::exception& e) {
      throw IOError(fmt::format("load_model: {}: compile_config.optimizer: {}", label, e.what()));
    }
    if (model.built()) opt->build(model.trainable_weights());
    bool built = false;
    std::optional<std::map<std::string, Tensor>> keras;
    if (!keras2_names.empty())
      keras = tf_keras2_state_by_name(*opt, model.trainable_weights(), keras2_names, keras_vars, label, built);
    else if (!keras_vars.empty())
      keras = keras_state_by_name(*opt, model.trainable_weights(), keras_vars, label, built);
    else
      std::cerr << fmt::format("load_model: {}: the file holds no optimizer state; the optimizer starts from a "
                               "fresh state\n", label);
    state = OptimizerState{};
    for (const auto& [n, v] : opt->variables())
      if (built || n.find('/') == std::string::npos) state->tensors.emplace(n, v->peek());
    if (keras)
      for (auto& [n, t] : *keras) state->tensors[n] = t;
    state->metadata = {{"format", "keel"}, {"optimizer", opt->class_name()}, {"optimizer_built", built ? "true" : "false"}};
  }
  io::save_safetensors(m + "/" + kOptimizer, state->tensors, state->metadata);
  return load_model(m, true);
}

std::shared_ptr<Model> load_keras3(const std::string& path, bool compile) {
  const std::string bytes = io::detail::read_file(path, "load_model");
  std::optional<std::string> config_text, weights;
  io::zip::read_archive(bytes, "load_model", path, [&](const io::zip::Entry& e) {
    if (e.name == "config.json") config_text = std::string(e.data);
    else if (e.name == kKerasWeights) weights = std::string(e.data);
  });
  const std::string config_label = path + " member 'config.json'";
  if (!config_text) throw IOError(fmt::format("load_model: {}: the archive has no member 'config.json'", path));
  json top;
  try {
    top = json::parse(*config_text);
  } catch (const json::exception& e) {
    throw IOError(fmt::format("load_model: {}: not valid JSON: {}", config_label, e.what()));
  }
  top = io::keras::from_keras3(top);
  const std::string wlabel = path + " member '" + kKerasWeights + "'";
  std::unique_ptr<h5::File> f;
  std::uint64_t budget = 0;
  if (weights) {
    f = h5::File::open_image(*weights, "load_model", wlabel);
    budget = dataset_elements(f->root());
  }
  auto model = build_model(top, budget, config_label, wlabel);
  std::optional<OptimizerState> state;
  std::vector<Tensor> keras_vars;  // Keras' optimizer/vars, when keel's own state is absent
  if (f) {
    read_store(f->root(), *model, "load_model", wlabel);
    state = read_optimizer_state(f->root(), "optimizer/keel_state");
    if (!state && f->root().has_group("optimizer/vars")) {
      const h5::Group vars = f->root().open_group("optimizer/vars");
      for (std::size_t i = 0; vars.has_dataset(std::to_string(i)); ++i) keras_vars.push_back(vars.read_dataset(std::to_string(i)));
    }
  } else if (!model->weights().empty()) {
    throw IOError(fmt::format("load_model: {}: no member '{}', but the model has {} weights", path, kKerasWeights,
                              model->weights().size()));
  }
  f.reset();
  auto cc = top.find("compile_config");
  if (!compile || cc == top.end() || cc->is_null()) return model;
  return compiled(*model, top, *cc, std::move(state), config_label, keras_vars);
}

std::shared_ptr<Model> load_legacy_h5(const std::string& path, bool compile) {
  auto f = h5::File::open_read(path, "load_model");
  const h5::Group root = f->root();
  if (!root.has_attr("model_config"))
    throw IOError(fmt::format("load_model: {}: no attribute 'model_config': a weights file, not a saved model "
                              "(use load_weights)", path));
  json top;
  try {
    top = json::parse(root.read_string_attr("model_config"));
  } catch (const json::exception& e) {
    throw IOError(fmt::format("load_model: {}: attribute 'model_config': not valid JSON: {}", path, e.what()));
  }
  top = io::keras::from_keras2(top);
  if (!root.has_group("model_weights")) throw IOError(fmt::format("load_model: {}: no group 'model_weights'", path));
  const h5::Group mw = root.open_group("model_weights");
  auto model = build_model(top, dataset_elements(mw), path + " attribute 'model_config'", path);
  read_legacy(mw, *model, "load_model", path);
  if (!compile || !root.has_attr("training_config")) return model;
  json training;
  try {
    training = json::parse(root.read_string_attr("training_config"));
  } catch (const json::exception& e) {
    throw IOError(fmt::format("load_model: {}: attribute 'training_config': not valid JSON: {}", path, e.what()));
  }
  if (!training.is_object()) throw IOError(fmt::format("load_model: {}: attribute 'training_config': not an object", path));
  json cc = {{"optimizer", training.value("optimizer_config", json(nullptr))},
             {"loss", training.value("loss", json(nullptr))},
             {"loss_weights", training.value("loss_weights", json(nullptr))},
             {"metrics", training.value("metrics", json(nullptr))}};
  auto state = read_optimizer_state(root, "optimizer_weights");
  if (state && state->metadata.count("format") == 0) state.reset();
  // A file tf.keras 2 wrote: its optimizer_weights, named by the attribute weight_names.
  std::vector<std::string> keras2_names;
  std::vector<Tensor> keras2_values;
  if (!state && root.has_group("optimizer_weights")) {
    const h5::Group og = root.open_group("optimizer_weights");
    keras2_names = read_chunked_string_list(og, "weight_names");
    for (const std::string& n : keras2_names) keras2_values.push_back(og.read_dataset(n));
  }
  return compiled(*model, top, cc, std::move(state), path, keras2_values, keras2_names);
}

}  // namespace

bool is_keras_model_path(const std::string& path) { return ends_with(path, ".keras") || ends_with(path, ".h5"); }
bool is_keras_weights_path(const std::string& path) { return ends_with(path, ".h5"); }

void save_keras_model(Model& model, const std::string& path) {
  if (!model.built()) throw ValueError(fmt::format("{}.save({}): the model is not built; call it once first", model.name(), path));
  if (ends_with(path, ".keras")) save_keras3(model, path);
  else save_legacy_h5(model, path);
}

std::shared_ptr<Model> load_keras_model(const std::string& path, bool compile) {
  return ends_with(path, ".keras") ? load_keras3(path, compile) : load_legacy_h5(path, compile);
}

void save_keras_weights(Model& model, const std::string& path) {
  if (model.weights().empty())
    throw ValueError(fmt::format("{}.save_weights({}): the model has no weights yet; build it first", model.name(), path));
  auto f = h5::File::create_in_memory("save_weights", path);
  h5::Group root = f->root();
  if (ends_with(path, ".weights.h5")) write_store(root, model);
  else write_legacy(root, model);
  const std::string bytes = f->image();
  f->close();
  io::atomic_write(path, bytes);
}

void load_keras_weights(Model& model, const std::string& path) {
  if (model.weights().empty())
    throw ValueError(fmt::format("{}.load_weights: the model has no weights yet; build it (call it once) first", model.name()));
  auto f = h5::File::open_read(path, "load_weights");
  const h5::Group root = f->root();
  if (root.has_attr("layer_names")) return read_legacy(root, model, "load_weights", path);
  if (root.has_group("model_weights")) return read_legacy(root.open_group("model_weights"), model, "load_weights", path);
  if (root.has_group("layers") || root.has_group("vars")) return read_store(root, model, "load_weights", path);
  throw IOError(fmt::format("load_weights: {}: neither Keras 3's layout (groups 'layers', 'vars') nor the legacy one "
                            "(attribute 'layer_names')", path));
}

}  // namespace keel::models::detail
