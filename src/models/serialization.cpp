// Whole models on disk: Model::get_config (Keras' Sequential and functional configs),
// Model::save and models::load_model.
//
// A saved model is a directory, or a zip file with the same members when the path ends in ".keel":
//   config.json            {"class_name", "config" (get_config()), "build_config", "compile_config"}
//   model.safetensors      the weights, named by path ("dense/kernel"), as save_weights writes them
//   optimizer.safetensors  the optimizer's variables() ("iteration", "dense/kernel/momentum", ...)
//   metadata.json          {"format": "keel.model", "format_version": 1}
// Both forms are written under a temporary name and renamed into place (a directory is swapped
// in with renameat2(RENAME_EXCHANGE)), so a process killed during a save leaves the previous
// model whole, and the next save to the path removes the temporaries such a process left.
// Loading validates each file before using it; every problem is an IOError naming the file (for
// a .keel, the archive and its member) and the field. A compiled model's optimizer state must
// hold every variable its optimizer needs, and nothing else.
#include "models/serialization.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "io/atomic_file.hpp"
#include "io/safetensors_file.hpp"
#include "io/zip.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/layers/registry.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "layers/loading_scope.hpp"
#include "layers/symbolic.hpp"
#include "models/graph.hpp"
#include "train/optimizer_state.hpp"

namespace keel::models {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "model.safetensors";
constexpr const char* kOptimizer = "optimizer.safetensors";
constexpr const char* kMetadata = "metadata.json";
constexpr int kFormatVersion = 1;

std::string show(const json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// A shape as Keras writes it: the batch dimension (first) as None.
json batch_shape_json(const Shape& s) {
  json out = json::array();
  for (std::int64_t i = 0; i < s.rank(); ++i) {
    if (i == 0 || s[i] < 0) out.push_back(nullptr);
    else out.push_back(s[i]);
  }
  return out;
}

std::optional<DType> parse_dtype(const std::string& s) {
  for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64, DType::int32, DType::int64,
                  DType::uint8, DType::bool_})
    if (keel::name(d) == s) return d;
  return std::nullopt;
}

json tensor_ref(const std::string& layer, int call, const Tensor& symbolic) {
  const Tensor value = layers::detail::placeholder_of(symbolic);
  return {{"class_name", "__keras_tensor__"},
          {"config",
           {{"shape", batch_shape_json(value.shape())},
            {"dtype", std::string(keel::name(value.dtype()))},
            {"keras_history", json::array({layer, call, 0})}}}};
}

// ---- rebuilding from a config (the registry's "Sequential" and "Functional" factories) --------

// Models are rebuilt on one example of each input: refuse shapes no example can have (their
// element count would not even fit the index type) before allocating one.
void check_example_size(const std::vector<std::int64_t>& dims, const std::string& where) {
  constexpr std::uint64_t kMax = std::uint64_t{1} << 32;
  std::uint64_t elements = 1;
  for (auto d : dims) {
    if (d < 0) throw ValueError(fmt::format("{}: negative dimension in {}", where, Shape(dims).to_string()));
    if (d != 0 && elements > kMax / static_cast<std::uint64_t>(d))
      throw ValueError(fmt::format("{}: the shape {} is implausibly large", where, Shape(dims).to_string()));
    elements *= std::max<std::uint64_t>(static_cast<std::uint64_t>(d), 1);
  }
}

// Typed reads of a model config; ValueError naming the field relative to the config.
const json& member(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) throw ValueError(fmt::format("{}: missing '{}'", where, key));
  return *it;
}

const json& array_member(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_array()) throw ValueError(fmt::format("{}.{}: must be a list, got {}", where, key, show(v)));
  return v;
}

std::string layer_label(const json& entry, std::size_t i) {
  std::string name;
  if (entry.is_object()) {
    auto c = entry.find("config");
    if (c != entry.end() && c->is_object()) {
      auto n = c->find("name");
      if (n != c->end() && n->is_string()) name = n->get<std::string>();
    }
  }
  return name.empty() ? fmt::format("layers[{}]", i) : fmt::format("layers[{}] ('{}')", i, name);
}

// A layer entry {"class_name", "config", ...}, with its place in errors.
std::shared_ptr<layers::Layer> entry_layer(const json& entry, const std::string& where) {
  try {
    return layers::deserialize(entry);
  } catch (const IOError&) {
    throw;
  } catch (const Error& e) {
    throw ValueError(fmt::format("{}: {}", where, e.what()));
  }
}

// [layer, call, tensor] (Keras' keras_history and input/output_layers entries).
struct TensorKey {
  std::string layer;
  std::int64_t call = 0;
  bool operator<(const TensorKey& o) const { return layer != o.layer ? layer < o.layer : call < o.call; }
};

TensorKey tensor_key(const json& h, const std::string& where) {
  if (!h.is_array() || h.size() != 3 || !h[0].is_string() || !h[1].is_number_integer() || !h[2].is_number_integer())
    throw ValueError(fmt::format("{}: expected [layer name, node index, tensor index], got {}", where, show(h)));
  if (h[2].get<std::int64_t>() != 0)
    throw ValueError(fmt::format("{}: tensor index {} (keel's layers have one output)", where, show(h[2])));
  if (h[1].get<std::int64_t>() < 0) throw ValueError(fmt::format("{}: negative node index {}", where, show(h[1])));
  return {h[0].get<std::string>(), h[1].get<std::int64_t>()};
}

// Keras writes one tensor as [name, node, index] and several as a list of those.
std::vector<TensorKey> tensor_keys(const json& v, const std::string& where) {
  if (v.is_array() && !v.empty() && v[0].is_string()) return {tensor_key(v, where)};
  if (!v.is_array() || v.empty()) throw ValueError(fmt::format("{}: expected a non-empty list of tensors, got {}", where, show(v)));
  std::vector<TensorKey> out;
  for (std::size_t i = 0; i < v.size(); ++i) out.push_back(tensor_key(v[i], fmt::format("{}[{}]", where, i)));
  return out;
}

TensorKey history_of(const json& ref, const std::string& where) {
  if (!ref.is_object()) throw ValueError(fmt::format("{}: expected a tensor ({{\"class_name\": \"__keras_tensor__\", ...}}), got {}", where, show(ref)));
  auto cfg = ref.find("config");
  if (cfg == ref.end() || !cfg->is_object()) throw ValueError(fmt::format("{}: the tensor has no config", where));
  auto h = cfg->find("keras_history");
  if (h == cfg->end()) throw ValueError(fmt::format("{}: the tensor has no keras_history", where));
  return tensor_key(*h, where + ".config.keras_history");
}

}  // namespace

namespace detail {

std::shared_ptr<layers::Layer> sequential_from_config(const json& config) {
  if (!config.is_object()) throw ValueError(fmt::format("Sequential config: expected an object, got {}", show(config)));
  std::string name;
  if (auto n = config.find("name"); n != config.end() && n->is_string()) name = n->get<std::string>();
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Layer>>{}, name);
  const json& list = array_member(config, "layers", "config");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = layer_label(list[i], i);
    auto layer = entry_layer(list[i], where);
    try {
      model->add(layers::LayerRef(layer));
    } catch (const Error& e) {
      throw ValueError(fmt::format("{}: adding it to the Sequential: {}", where, e.what()));
    }
  }
  // A Sequential saved built without an InputLayer (it was called on data) builds again here.
  auto b = config.find("build_input_shape");
  if (!model->built() && b != config.end() && b->is_array() && !b->empty()) {
    std::vector<std::int64_t> dims;
    for (const auto& d : *b) {
      if (d.is_null()) dims.push_back(1);
      else if (d.is_number_integer() && d.get<std::int64_t>() > 0) dims.push_back(d.get<std::int64_t>());
      else throw ValueError(fmt::format("build_input_shape: bad dimension {}", show(d)));
    }
    dims[0] = 1;
    check_example_size(dims, "build_input_shape");
    try {
      model->build(Shape(dims));
    } catch (const Error& e) {
      throw ValueError(fmt::format("build_input_shape {}: building the layers: {}", show(*b), e.what()));
    }
  }
  return model;
}

std::shared_ptr<layers::Layer> functional_from_config(const json& config) {
  if (!config.is_object()) throw ValueError(fmt::format("Functional config: expected an object, got {}", show(config)));
  std::string name;
  if (auto n = config.find("name"); n != config.end() && n->is_string()) name = n->get<std::string>();
  const json& list = array_member(config, "layers", "config");

  std::map<TensorKey, Tensor> tensors;  // what each layer call (and each Input) produced
  struct Call {
    std::shared_ptr<layers::Layer> layer;
    std::string layer_name, where;
    std::int64_t index;
    std::vector<TensorKey> inputs;
    bool multi;
  };
  std::vector<Call> pending;
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& entry = list[i];
    const std::string where = layer_label(entry, i);
    if (!entry.is_object()) throw ValueError(fmt::format("{}: expected an object, got {}", where, show(entry)));
    const json& cls = member(entry, "class_name", where);
    const json& cfg = member(entry, "config", where);
    if (!cls.is_string() || !cfg.is_object())
      throw ValueError(fmt::format("{}: needs a \"class_name\" string and a \"config\" object", where));
    auto n = cfg.find("name");
    if (n == cfg.end() || !n->is_string() || n->get<std::string>().empty())
      throw ValueError(fmt::format("{}: config.name must be a non-empty string (the graph refers to layers by name)", where));
    const std::string lname = n->get<std::string>();
    if (!names.insert(lname).second) throw ValueError(fmt::format("{}: a second layer named '{}'", where, lname));
    if (cls.get<std::string>() == "InputLayer") {
      std::vector<std::int64_t> dims;
      const json* shape = nullptr;
      for (const char* key : {"batch_shape", "batch_input_shape"})
        if (auto s = cfg.find(key); s != cfg.end() && !s->is_null()) shape = &*s;
      if (!shape || !shape->is_array() || shape->empty())
        throw ValueError(fmt::format("{}: config.batch_shape must be a list [None, dims...]", where));
      for (std::size_t d = 1; d < shape->size(); ++d) {
        const json& v = (*shape)[d];
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
          throw ValueError(fmt::format("{}: config.batch_shape: dimension {} is {} (known, non-negative sizes only)", where,
                                       d, show(v)));
        dims.push_back(v.get<std::int64_t>());
      }
      check_example_size(dims, where + ": config.batch_shape");
      DType dtype = DType::float32;
      if (auto t = cfg.find("dtype"); t != cfg.end() && !t->is_null()) {
        const auto parsed = t->is_string() ? parse_dtype(t->get<std::string>()) : std::nullopt;
        if (!parsed) throw ValueError(fmt::format("{}: config.dtype: unknown dtype {}", where, show(*t)));
        dtype = *parsed;
      }
      try {
        tensors[{lname, 0}] = Input(Shape(dims), dtype, lname);
      } catch (const Error& e) {
        throw ValueError(fmt::format("{}: {}", where, e.what()));
      }
      continue;
    }
    auto layer = entry_layer(entry, where);
    auto nodes = entry.find("inbound_nodes");
    if (nodes == entry.end() || nodes->is_null()) continue;  // a layer the graph does not call
    if (!nodes->is_array()) throw ValueError(fmt::format("{}: inbound_nodes must be a list", where));
    for (std::size_t k = 0; k < nodes->size(); ++k) {
      const std::string nwhere = fmt::format("{}: inbound_nodes[{}]", where, k);
      const json& node = (*nodes)[k];
      if (!node.is_object()) throw ValueError(fmt::format("{}: expected {{\"args\": [...], \"kwargs\": {{}}}}, got {}", nwhere, show(node)));
      const json& args = array_member(node, "args", nwhere);
      if (args.size() != 1) throw ValueError(fmt::format("{}.args: expected one argument (a tensor or a list of tensors), got {}", nwhere, args.size()));
      Call call{layer, lname, nwhere, static_cast<std::int64_t>(k), {}, args[0].is_array()};
      if (call.multi) {
        if (args[0].empty()) throw ValueError(fmt::format("{}.args[0]: an empty list of tensors", nwhere));
        for (std::size_t t = 0; t < args[0].size(); ++t)
          call.inputs.push_back(history_of(args[0][t], fmt::format("{}.args[0][{}]", nwhere, t)));
      } else {
        call.inputs.push_back(history_of(args[0], nwhere + ".args[0]"));
      }
      pending.push_back(std::move(call));
    }
  }
  // Calls run once their inputs exist: Keras lists layers in graph order, but a shared layer's
  // later calls can depend on layers listed after it.
  while (!pending.empty()) {
    bool progress = false;
    for (auto it = pending.begin(); it != pending.end();) {
      const bool ready = std::all_of(it->inputs.begin(), it->inputs.end(),
                                     [&](const TensorKey& key) { return tensors.count(key) != 0; });
      if (!ready) {
        ++it;
        continue;
      }
      std::vector<Tensor> args;
      for (const auto& key : it->inputs) args.push_back(tensors.at(key));
      Tensor out;
      try {
        out = it->multi ? (*it->layer)(args) : (*it->layer)(args[0]);
      } catch (const IOError&) {
        throw;
      } catch (const Error& e) {
        throw ValueError(fmt::format("{}: calling the layer: {}", it->where, e.what()));
      }
      tensors[{it->layer_name, it->index}] = out;
      it = pending.erase(it);
      progress = true;
    }
    if (!progress) {
      const Call& c = pending.front();
      std::string missing;
      for (const auto& key : c.inputs)
        if (!tensors.count(key)) missing = fmt::format("['{}', {}, 0]", key.layer, key.call);
      throw ValueError(fmt::format("{}: its input {} is made by no layer call (unknown layer or node, or a cycle)",
                                   c.where, missing));
    }
  }
  const auto resolve = [&](const char* key) {
    std::vector<Tensor> out;
    for (const TensorKey& k : tensor_keys(member(config, key, "config"), std::string("config.") + key)) {
      auto it = tensors.find(k);
      if (it == tensors.end())
        throw ValueError(fmt::format("config.{}: ['{}', {}, 0] is not a tensor of the graph", key, k.layer, k.call));
      out.push_back(it->second);
    }
    return out;
  };
  const std::vector<Tensor> inputs = resolve("input_layers"), outputs = resolve("output_layers");
  try {
    return std::make_shared<Model>(inputs, outputs, name);
  } catch (const Error& e) {
    throw ValueError(fmt::format("config: the graph: {}", e.what()));
  }
}

}  // namespace detail

// ---- Model::get_config ---------------------------------------------------------------------

nlohmann::json Model::get_config() const {
  json c = Layer::get_config();
  if (const auto* seq = dynamic_cast<const Sequential*>(this)) {
    json list = json::array();
    std::set<std::string> names;
    for (const auto& l : seq->layers()) names.insert(l->name());
    std::shared_ptr<layers::InputLayer> input;
    if (!sublayers().empty()) input = std::dynamic_pointer_cast<layers::InputLayer>(sublayers().front());
    if (input) {
      list.push_back(layers::serialize(*input));
    } else if (built()) {
      // Called on data rather than given an InputLayer: record the input shape as Keras does, as
      // an InputLayer, so that the loaded model is built (and has its weights) at once.
      std::string name = "input_layer";
      for (int i = 1; names.count(name); ++i) name = fmt::format("input_layer_{}", i);
      list.push_back({{"module", "keel.layers"},
                      {"class_name", "InputLayer"},
                      {"config", {{"name", name}, {"batch_shape", batch_shape_json(built_shape())},
                                  {"dtype", "float32"}, {"trainable", true}}},
                      {"registered_name", "InputLayer"}});
    }
    for (const auto& l : seq->layers()) list.push_back(layers::serialize(*l));
    c["layers"] = list;
    if (built()) c["build_input_shape"] = batch_shape_json(built_shape());
    return c;
  }
  if (!graph_) return c;  // a subclassed model: its class writes what it needs

  const Graph& g = *graph_;
  std::map<const SymbolicNode*, std::pair<std::string, int>> made;  // node -> (layer name, call)
  std::map<const layers::Layer*, int> calls;
  std::map<const layers::Layer*, json> inbound;
  std::set<std::string> names;
  const auto claim = [&](const std::string& n) {
    if (!names.insert(n).second)
      throw ValueError(fmt::format("{}.get_config: two layers (or inputs) are named '{}'; the saved graph refers to "
                                   "layers by name, so give them unique names", name(), n));
  };
  json list = json::array();
  for (const Tensor& in : g.inputs) {
    const SymbolicNode* node = in.impl()->symbolic.get();
    const Tensor value = layers::detail::placeholder_of(in);
    claim(node->input_name);
    made[node] = {node->input_name, 0};
    list.push_back({{"module", "keel.layers"},
                    {"class_name", "InputLayer"},
                    {"config",
                     {{"batch_shape", batch_shape_json(value.shape())},
                      {"dtype", std::string(keel::name(value.dtype()))},
                      {"sparse", false},
                      {"name", node->input_name}}},
                    {"registered_name", "InputLayer"},
                    {"name", node->input_name},
                    {"inbound_nodes", json::array()}});
  }
  for (const auto& node : g.order) {
    const int call = calls[node->layer.get()]++;
    made[node.get()] = {node->layer->name(), call};
    json refs = json::array();
    for (const Tensor& t : node->inputs) {
      const auto& [layer, index] = made.at(t.impl()->symbolic.get());  // order lists producers first
      refs.push_back(tensor_ref(layer, index, t));
    }
    // A call on a list (Add()({a, b})) passes the list as its one argument, as in Keras.
    json args = node->multi_input ? json::array({refs}) : refs;
    auto& nodes = inbound[node->layer.get()];
    if (nodes.is_null()) nodes = json::array();
    nodes.push_back({{"args", args}, {"kwargs", json::object()}});
  }
  for (const auto& layer : g.layers) {
    claim(layer->name());
    json entry = layers::serialize(*layer);
    entry["name"] = layer->name();
    entry["inbound_nodes"] = inbound.count(layer.get()) ? inbound[layer.get()] : json::array();
    list.push_back(std::move(entry));
  }
  const auto keys = [&](const std::vector<Tensor>& ts) {
    json out = json::array();
    for (const Tensor& t : ts) {
      const auto& [layer, index] = made.at(t.impl()->symbolic.get());
      out.push_back(json::array({layer, index, 0}));
    }
    return out;
  };
  c["layers"] = list;
  c["input_layers"] = keys(g.inputs);
  c["output_layers"] = keys(g.outputs);
  return c;
}

namespace {

// ---- compile settings ------------------------------------------------------------------------

json loss_json(const losses::Loss& loss) {
  return {{"module", "keel.losses"}, {"class_name", loss.class_name()}, {"config", loss.get_config()},
          {"registered_name", nullptr}};
}

json metric_json(const metrics::MetricRef& m) {
  if (m.is_name()) return m.name();
  const auto metric = m.get();
  return {{"module", "keel.metrics"}, {"class_name", metric->class_name()}, {"config", metric->get_config()},
          {"registered_name", nullptr}};
}

// A config's key as a type, or its default; ValueError naming `what` and the key otherwise.
template <class T>
T config_value(const json& c, const char* key, T def, const std::string& what) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  const bool ok = std::is_same_v<T, bool>          ? it->is_boolean()
                  : std::is_same_v<T, std::string> ? it->is_string()
                  : std::is_integral_v<T>          ? it->is_number_integer()
                                                   : it->is_number();
  if (!ok) throw ValueError(fmt::format("{}: '{}' has the wrong type: {}", what, key, show(*it)));
  return it->get<T>();
}

std::shared_ptr<losses::Loss> loss_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  if (j.is_string()) return losses::get(j.get<std::string>());
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw ValueError(fmt::format("expected a loss name or {{\"class_name\", \"config\"}}, got {}", show(j)));
  const std::string cls = j["class_name"].get<std::string>();
  const json empty = json::object();
  const json& c = j.contains("config") && j["config"].is_object() ? j["config"] : empty;
  const std::string what = "loss " + cls;
  const auto name = [&](const char* def) { return config_value<std::string>(c, "name", def, what); };
  const std::string reduction = config_value<std::string>(c, "reduction", "sum_over_batch_size", what);
  if (cls == "MeanSquaredError")
    return std::make_shared<losses::MeanSquaredError>(losses::MeanSquaredErrorOptions{reduction, name("mean_squared_error")});
  if (cls == "MeanAbsoluteError")
    return std::make_shared<losses::MeanAbsoluteError>(
        losses::MeanAbsoluteErrorOptions{reduction, name("mean_absolute_error")});
  if (cls == "Huber")
    return std::make_shared<losses::Huber>(
        losses::HuberOptions{config_value(c, "delta", 1.0, what), reduction, name("huber_loss")});
  if (cls == "BinaryCrossentropy")
    return std::make_shared<losses::BinaryCrossentropy>(losses::BinaryCrossentropyOptions{
        config_value(c, "from_logits", false, what), config_value(c, "label_smoothing", 0.0, what),
        config_value(c, "axis", -1, what), reduction, name("binary_crossentropy")});
  if (cls == "CategoricalCrossentropy")
    return std::make_shared<losses::CategoricalCrossentropy>(losses::CategoricalCrossentropyOptions{
        config_value(c, "from_logits", false, what), config_value(c, "label_smoothing", 0.0, what),
        config_value(c, "axis", -1, what), reduction, name("categorical_crossentropy")});
  if (cls == "SparseCategoricalCrossentropy") {
    std::optional<std::int64_t> ignore;
    if (c.contains("ignore_class") && !c["ignore_class"].is_null())
      ignore = config_value<std::int64_t>(c, "ignore_class", 0, what);
    return std::make_shared<losses::SparseCategoricalCrossentropy>(losses::SparseCategoricalCrossentropyOptions{
        config_value(c, "from_logits", false, what), ignore, reduction, name("sparse_categorical_crossentropy")});
  }
  if (cls == "KLDivergence")
    return std::make_shared<losses::KLDivergence>(losses::KLDivergenceOptions{reduction, name("kl_divergence")});
  throw ValueError(fmt::format("the loss class '{}' cannot be rebuilt (a function or a custom class); load with "
                               "compile = false and compile the model again", cls));
}

metrics::MetricRef metric_from_json(const json& j) {
  if (j.is_string()) return metrics::MetricRef(j.get<std::string>());
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw ValueError(fmt::format("expected a metric name or {{\"class_name\", \"config\"}}, got {}", show(j)));
  const std::string cls = j["class_name"].get<std::string>();
  const json empty = json::object();
  const json& c = j.contains("config") && j["config"].is_object() ? j["config"] : empty;
  const std::string what = "metric " + cls;
  if (cls == "MeanMetricWrapper" || cls == "Metric") {
    throw ValueError(fmt::format("the metric '{}' is a function or a custom class and cannot be rebuilt; load with "
                                 "compile = false and compile the model again", config_value<std::string>(c, "name", cls, what)));
  }
  // Every built-in metric class with all of its options (Precision's thresholds lists, AUC's
  // multi_label, the cross-entropy metrics, ...): the metrics module reads its own configs.
  std::shared_ptr<metrics::Metric> m = metrics::from_config(cls, c);
  m->set_name(config_value<std::string>(c, "name", m->name(), what));
  return metrics::MetricRef(m);
}

// ---- files -----------------------------------------------------------------------------------

std::string read_whole_file(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open {}: {}", op, path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw IOError(fmt::format("{}: cannot read the size of {}", op, path));
  in.seekg(0);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size)) throw IOError(fmt::format("{}: cannot read {}", op, path));
  return bytes;
}

// "<path>.<what>-<pid>-<random>": a name next to path (same filesystem, so rename is atomic) that
// a later save recognises, once this process is gone, as its leftover (io/atomic_file.hpp).
std::string sibling_name(const std::string& path, const char* what) { return io::detail::temp_name(path, what); }

// A temporary directory, removed with what it holds unless released.
class TempDir {
 public:
  TempDir(std::string path, const char* op) : path_(std::move(path)) {
    if (::mkdir(path_.c_str(), 0755) != 0)
      throw IOError(fmt::format("{}: cannot create the folder {}: {}", op, path_, std::strerror(errno)));
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);  // best effort: a leftover temporary folder harms nothing
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

void fsync_path(const std::string& path, const char* op) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IOError(fmt::format("{}: cannot open {}: {}", op, path, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw IOError(fmt::format("{}: cannot flush {}: {}", op, path, std::strerror(err)));
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Refuses to replace a folder that is not a saved model (model.save("/home/me") must not wipe it).
void check_model_directory(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string n = entry.path().filename().string();
    bool ours = false;
    const auto temp = io::detail::parse_temp_name(n);  // atomic_write leftovers
    for (const char* known : {kConfig, kWeights, kOptimizer, kMetadata})
      ours = ours || n == known || (temp && temp->base == known);
    if (!ours)
      throw IOError(fmt::format("Model.save: {} holds '{}', so it is not a saved keel model; refusing to replace it "
                                "(save to a new path, or remove the folder first)", path, n));
  }
  if (ec) throw IOError(fmt::format("Model.save: cannot list {}: {}", path, ec.message()));
}

// Puts the finished folder `tmp` at `path`, atomically where the filesystem allows.
void install_directory(const std::string& tmp, const std::string& path) {
  const char* op = "Model.save";
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) throw IOError(fmt::format("{}: cannot inspect {}: {}", op, path, std::strerror(errno)));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw IOError(fmt::format("{}: cannot rename {} to {}: {}", op, tmp, path, std::strerror(errno)));
    fsync_path(parent_of(path), op);
    return;
  }
  if (!S_ISDIR(st.st_mode))
    throw IOError(fmt::format("{}: {} exists and is not a folder (a path ending in .keel saves one file)", op, path));
  check_model_directory(path);
  // Swap the two folders in one step: at every instant `path` is a whole model, old or new.
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    fsync_path(parent_of(path), op);
    std::error_code ec;
    fs::remove_all(tmp, ec);  // now the previous model
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    throw IOError(fmt::format("{}: cannot swap {} into {}: {}", op, tmp, path, std::strerror(errno)));
  // Filesystems without RENAME_EXCHANGE: two renames. A crash between them leaves the previous
  // model whole at <path>.old-*, not at path.
  const std::string old = sibling_name(path, "old");
  if (::rename(path.c_str(), old.c_str()) != 0)
    throw IOError(fmt::format("{}: cannot move {} aside: {}", op, path, std::strerror(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), path.c_str());
    throw IOError(fmt::format("{}: cannot rename {} to {}: {}", op, tmp, path, std::strerror(err)));
  }
  fsync_path(parent_of(path), op);
  std::error_code ec;
  fs::remove_all(old, ec);
}

bool is_keel_file_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".keel") == 0;
}

}  // namespace

// ---- Model::save -----------------------------------------------------------------------------

void Model::save(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) throw ValueError(fmt::format("{}.save: empty path", name()));

  json file = {{"module", "keel.models"}, {"class_name", class_name()}, {"config", get_config()}};
  const std::string cls = class_name();
  file["registered_name"] = cls == "Sequential" || cls == "Functional" ? json(nullptr) : json(cls);
  if (built()) file["build_config"] = {{"input_shape", batch_shape_json(built_shape())}};
  if (compiled()) {
    json metric_list = json::array();
    for (const auto& m : compile_options_.metrics) metric_list.push_back(metric_json(m));
    file["compile_config"] = {
        {"optimizer", optimizers::serialize(*optimizer_)},
        {"loss", loss_ ? loss_json(*loss_) : json(nullptr)},
        {"loss_weights", compile_options_.loss_weights.empty() ? json(nullptr) : json(compile_options_.loss_weights)},
        {"metrics", metric_list}};
  }
  const std::string config_text = file.dump(2);
  const std::string metadata_text = json{{"format", "keel.model"}, {"format_version", kFormatVersion}}.dump(2);
  // The part folders, archives and folders moved aside that saves killed midway left beside path.
  io::detail::remove_stale_temporaries(path);

  // The parts go to a fresh folder next to the destination; nothing at `path` changes until the
  // final rename.
  const auto write_parts = [&](const std::string& dir) {
    io::atomic_write(dir + "/" + kConfig, config_text);
    save_weights(dir + "/" + kWeights);
    if (optimizer_) {
      std::map<std::string, Tensor> state;
      for (const auto& [vname, v] : optimizer_->variables()) state.emplace(vname, v->peek());
      io::save_safetensors(dir + "/" + kOptimizer, state,
                           {{"format", "keel"},
                            {"optimizer", optimizer_->class_name()},
                            {train::detail::kOptimizerBuiltKey, train::detail::optimizer_built_value(*optimizer_)}});
    }
    io::atomic_write(dir + "/" + kMetadata, metadata_text);
  };

  if (is_keel_file_path(path)) {
    TempDir parts(sibling_name(path, "parts"), "Model.save");
    write_parts(parts.path());
    std::vector<std::string> bytes;  // alive while the archive is assembled
    std::vector<io::zip::Member> members;
    bytes.reserve(4);
    for (const char* part : {kMetadata, kConfig, kWeights, kOptimizer}) {
      const std::string p = parts.path() + "/" + part;
      if (!fs::exists(p)) continue;
      bytes.push_back(read_whole_file(p, "Model.save"));
      // JSON compresses well; tensors hardly, and stored members load without inflating.
      const bool text = std::string(part).size() > 5 && std::string(part).compare(std::string(part).size() - 5, 5, ".json") == 0;
      members.push_back({part, bytes.back(), text});
    }
    io::atomic_write(path, io::zip::write_archive(members, "Model.save", path));
  } else {
    TempDir tmp(sibling_name(path, "tmp"), "Model.save");
    write_parts(tmp.path());
    fsync_path(tmp.path(), "Model.save");
    install_directory(tmp.path(), path);
    tmp.release();  // renamed away (or, after an exchange, already removed)
  }
}

// ---- load_model ------------------------------------------------------------------------------

namespace {

[[noreturn]] void load_fail(const std::string& label, const std::string& field, const std::string& what) {
  throw IOError(fmt::format("load_model: {}: {}: {}", label, field, what));
}

// One member of a saved model: a file in the folder, or bytes from the .keel archive.
struct Part {
  bool present = false;
  std::string label;  // how errors name it
  std::string disk;   // the file, for a folder
  std::string bytes;  // the contents, for an archive
};

std::string part_text(const Part& p) { return p.disk.empty() ? p.bytes : read_whole_file(p.disk, "load_model"); }

struct TensorFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> order;  // save_weights' "weight_order" metadata, when present
};

// Reads a safetensors part, validating it completely: a file in the folder, or an archive member
// parsed where it lies in memory (errors name the member).
TensorFile read_tensors(const Part& p) {
  io::detail::SafetensorsFile f =
      p.disk.empty() ? io::detail::parse_safetensors(p.bytes, p.label) : io::detail::read_safetensors(p.disk);
  TensorFile out;
  out.tensors = std::move(f.tensors);
  out.metadata = std::move(f.metadata);
  if (auto it = out.metadata.find("weight_order"); it != out.metadata.end()) {
    std::string line;
    for (char ch : it->second) {
      if (ch == '\n') {
        if (!line.empty()) out.order.push_back(line);
        line.clear();
      } else {
        line += ch;
      }
    }
    if (!line.empty()) out.order.push_back(line);
  }
  return out;
}

// Assigns the file's tensors to the variables: by name, or (for a model whose layers were named
// differently, as a registered subclass may be) by the saved order; shapes and dtypes must agree.
void assign_weights(const std::vector<Variable*>& vars, const TensorFile& file, const std::string& label) {
  std::vector<const Tensor*> source(vars.size(), nullptr);
  bool by_name = true;
  for (std::size_t i = 0; i < vars.size() && by_name; ++i) {
    auto it = file.tensors.find(vars[i]->name());
    if (it == file.tensors.end()) by_name = false;
    else source[i] = &it->second;
  }
  if (!by_name) {
    if (file.order.size() != vars.size() || file.tensors.size() != vars.size()) {
      for (Variable* v : vars)
        if (!file.tensors.count(v->name()))
          load_fail(label, fmt::format("tensor '{}'", v->name()),
                    fmt::format("missing: the model built from config.json has this weight, the file holds {} tensors "
                                "for its {} weights", file.tensors.size(), vars.size()));
    }
    for (std::size_t i = 0; i < vars.size(); ++i) {
      auto it = file.tensors.find(file.order[i]);
      if (it == file.tensors.end()) load_fail(label, "__metadata__.weight_order", fmt::format("names a missing tensor '{}'", file.order[i]));
      source[i] = &it->second;
    }
  } else if (file.tensors.size() != vars.size()) {
    std::set<std::string> known;
    for (Variable* v : vars) known.insert(v->name());
    for (const auto& [tname, t] : file.tensors)
      if (!known.count(tname)) load_fail(label, fmt::format("tensor '{}'", tname), "the model built from config.json has no such weight");
  }
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const Tensor& t = *source[i];
    if (t.shape() != vars[i]->shape() || t.dtype() != vars[i]->dtype())
      load_fail(label, fmt::format("tensor '{}'", vars[i]->name()),
                fmt::format("is {} {}, but the model's weight is {} {}", keel::name(t.dtype()), t.shape().to_string(),
                            keel::name(vars[i]->dtype()), vars[i]->shape().to_string()));
  }
  for (std::size_t i = 0; i < vars.size(); ++i) vars[i]->assign(*source[i]);
}

void restore_compile(Model& model, const json& cc, const Part& config, const Part& optimizer_part) {
  if (!cc.is_object()) load_fail(config.label, "compile_config", fmt::format("must be an object, got {}", show(cc)));
  CompileOptions o;
  const auto field = [&](const char* key) -> const json* {
    auto it = cc.find(key);
    return it == cc.end() ? nullptr : &*it;
  };
  try {
    const json* opt = field("optimizer");
    if (!opt || opt->is_null()) load_fail(config.label, "compile_config.optimizer", "missing");
    o.optimizer = optimizers::deserialize(*opt);
  } catch (const IOError&) {
    throw;
  } catch (const Error& e) {
    load_fail(config.label, "compile_config.optimizer", e.what());
  }
  try {
    if (const json* loss = field("loss")) o.loss = losses::LossRef(loss_from_json(*loss));
  } catch (const Error& e) {
    load_fail(config.label, "compile_config.loss", e.what());
  }
  if (const json* w = field("loss_weights"); w && !w->is_null()) {
    if (!w->is_array()) load_fail(config.label, "compile_config.loss_weights", fmt::format("must be a list, got {}", show(*w)));
    for (const auto& x : *w) {
      if (!x.is_number()) load_fail(config.label, "compile_config.loss_weights", fmt::format("must hold numbers, got {}", show(x)));
      o.loss_weights.push_back(x.get<double>());
    }
  }
  if (const json* ms = field("metrics"); ms && !ms->is_null()) {
    if (!ms->is_array()) load_fail(config.label, "compile_config.metrics", fmt::format("must be a list, got {}", show(*ms)));
    for (std::size_t i = 0; i < ms->size(); ++i) {
      try {
        o.metrics.push_back(metric_from_json((*ms)[i]));
      } catch (const Error& e) {
        load_fail(config.label, fmt::format("compile_config.metrics[{}]", i), e.what());
      }
    }
  }
  try {
    model.compile(std::move(o));
  } catch (const Error& e) {
    load_fail(config.label, "compile_config", e.what());
  }
  // compile_config names an optimizer, and Model::save always writes its state beside it: a model
  // without that state would train on from a fresh optimizer without a word.
  if (!optimizer_part.present)
    load_fail(optimizer_part.label, "(member)",
              "missing, but compile_config has an optimizer whose state Model::save writes there; load with "
              "compile = false to use the model without it");
  // The optimizer's slots exist once it has seen the variables; then its state is assigned by name.
  const auto optimizer = model.optimizer();
  const TensorFile state = read_tensors(optimizer_part);
  optimizer->build(model.trainable_weights());
  std::vector<train::detail::SavedState> saved;
  for (const auto& [tname, t] : state.tensors) saved.push_back({tname, tname, &t});
  const auto assignments = train::detail::match_optimizer_state(
      *optimizer, saved, state.metadata, "", false,
      [&](const std::string& field, const std::string& what) { load_fail(optimizer_part.label, field, what); });
  for (const auto& [v, t] : assignments) v->assign(*t);
}

}  // namespace

std::shared_ptr<Model> load_model(const std::string& path_in, bool compile) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::map<std::string, Part> parts;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status)) {
    for (const char* n : {kConfig, kWeights, kOptimizer, kMetadata}) {
      Part p;
      p.disk = path + "/" + n;
      p.label = p.disk;
      p.present = fs::is_regular_file(p.disk, ec);
      if (!p.present) p.disk.clear();
      parts[n] = p;
    }
    if (!parts[kConfig].present)
      throw IOError(fmt::format("load_model: {}: the folder has no {}: not a model saved by Model::save", path, kConfig));
  } else if (fs::is_regular_file(status)) {
    const std::string bytes = read_whole_file(path, "load_model");
    for (const char* n : {kConfig, kWeights, kOptimizer, kMetadata}) parts[n].label = fmt::format("{} member '{}'", path, n);
    io::zip::read_archive(bytes, "load_model", path, [&](const io::zip::Entry& e) {
      auto it = parts.find(e.name);
      if (it == parts.end()) return;  // not one of ours: ignored, as Keras ignores extra members
      if (it->second.present) io::zip::fail("load_model", e.label, e.base, fmt::format("duplicate member '{}'", e.name));
      it->second.present = true;
      it->second.bytes.assign(e.data.data(), e.data.size());
    });
    if (!parts[kConfig].present)
      throw IOError(fmt::format("load_model: {}: the archive has no member '{}': not a model saved by Model::save", path,
                                kConfig));
  } else {
    throw IOError(fmt::format("load_model: cannot open {}: {}", path,
                              ec ? ec.message() : std::string("no such file or folder")));
  }
  const Part& config_part = parts[kConfig];

  // metadata.json is informative; only a newer format is refused.
  if (parts[kMetadata].present) {
    json meta;
    try {
      meta = json::parse(part_text(parts[kMetadata]));
    } catch (const json::exception& e) {
      load_fail(parts[kMetadata].label, "(document)", fmt::format("not valid JSON: {}", e.what()));
    }
    if (!meta.is_object()) load_fail(parts[kMetadata].label, "(document)", "must be a JSON object");
    if (auto v = meta.find("format_version"); v != meta.end()) {
      if (!v->is_number_integer()) load_fail(parts[kMetadata].label, "format_version", "must be an integer");
      if (v->get<std::int64_t>() > kFormatVersion)
        load_fail(parts[kMetadata].label, "format_version",
                  fmt::format("{} is newer than this keel reads ({})", v->get<std::int64_t>(), kFormatVersion));
    }
  }

  json top;
  try {
    top = json::parse(part_text(config_part));
  } catch (const json::exception& e) {
    load_fail(config_part.label, "(document)", fmt::format("not valid JSON: {}", e.what()));
  }
  if (!top.is_object()) load_fail(config_part.label, "(document)", "must be a JSON object");
  auto cls_it = top.find("class_name");
  if (cls_it == top.end() || !cls_it->is_string()) load_fail(config_part.label, "class_name", "missing, or not a string");
  auto cfg_it = top.find("config");
  if (cfg_it == top.end() || !cfg_it->is_object()) load_fail(config_part.label, "config", "missing, or not an object");
  const std::string cls = cls_it->get<std::string>();

  // Weights first: they are validated whole, and their size bounds what the config may build.
  TensorFile weights;
  if (parts[kWeights].present) weights = read_tensors(parts[kWeights]);
  const std::string weights_label = parts[kWeights].present ? parts[kWeights].label : path + " (no " + kWeights + ")";
  std::uint64_t budget = 0;
  for (const auto& [tname, t] : weights.tensors) budget += static_cast<std::uint64_t>(t.size());

  std::shared_ptr<Model> model;
  try {
    layers::detail::LoadingScope scope(budget, weights_label);
    std::shared_ptr<layers::Layer> layer = layers::from_config(cls, *cfg_it);
    model = std::dynamic_pointer_cast<Model>(layer);
    if (!model) load_fail(config_part.label, "class_name", fmt::format("'{}' is a layer, not a model", cls));
    // A subclassed model builds on its saved input shape (a graph builds as it is rebuilt).
    auto bc = top.find("build_config");
    if (!model->built() && bc != top.end() && bc->is_object()) {
      auto shape = bc->find("input_shape");
      if (shape != bc->end() && shape->is_array() && !shape->empty()) {
        std::vector<std::int64_t> dims{1};
        for (std::size_t d = 1; d < shape->size(); ++d) {
          const json& v = (*shape)[d];
          if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
            load_fail(config_part.label, "build_config.input_shape", fmt::format("bad dimension {}", show(v)));
          dims.push_back(v.get<std::int64_t>());
        }
        check_example_size(dims, "build_config.input_shape");
        autograd::NoRecordScope no_record;
        (*model)(zeros(Shape(dims)), false);
      }
    }
  } catch (const IOError&) {
    throw;
  } catch (const Error& e) {
    load_fail(config_part.label, "config", e.what());
  } catch (const json::exception& e) {  // from a custom factory reading its config
    load_fail(config_part.label, "config", e.what());
  } catch (const std::bad_alloc&) {
    load_fail(config_part.label, "config", "the model it describes is too large to build in memory");
  }

  const auto vars = model->weights();
  if (!vars.empty() && !parts[kWeights].present)
    throw IOError(fmt::format("load_model: {}: no {}, but the model has {} weights", path, kWeights, vars.size()));
  assign_weights(vars, weights, weights_label);

  if (compile) {
    auto cc = top.find("compile_config");
    if (cc != top.end() && !cc->is_null()) restore_compile(*model, *cc, config_part, parts[kOptimizer]);
  }
  return model;
}

}  // namespace keel::models
