// Model configs: Model::get_config (Keras' Sequential and functional configs) and the factories
// that rebuild a model from one, which models/ registers with the layer registry.
#include "models/serialization.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "keel/layers/registry.hpp"
#include "keel/models/model.hpp"
#include "layers/config_args.hpp"
#include "layers/symbolic.hpp"
#include "models/graph.hpp"

namespace keel::models {

namespace detail {

// A shape as Keras writes it: the batch dimension (first) as None.
nlohmann::json batch_shape_json(const Shape& s) {
  nlohmann::json out = nlohmann::json::array();
  for (std::int64_t i = 0; i < s.rank(); ++i) {
    if (i == 0 || s[i] < 0) out.push_back(nullptr);
    else out.push_back(s[i]);
  }
  return out;
}

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

}  // namespace detail

namespace {

using detail::batch_shape_json;
using detail::check_example_size;
using layers::detail::show;
using nlohmann::json;

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
           {{"shape", batch_shape_json(layers::detail::static_shape(symbolic))},
            {"dtype", std::string(keel::name(value.dtype()))},
            {"keras_history", json::array({layer, call, 0})}}}};
}

// ---- rebuilding from a config (the registry's "Sequential" and "Functional" factories) --------

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
    std::vector<std::int64_t> dims, known;  // None (null) dimensions as -1; the known sizes
    for (const auto& d : *b) {
      if (d.is_null()) dims.push_back(-1);
      else if (d.is_number_integer() && d.get<std::int64_t>() > 0) dims.push_back(d.get<std::int64_t>());
      else throw ValueError(fmt::format("build_input_shape: bad dimension {}", show(d)));
      if (dims.size() > 1 && dims.back() > 0) known.push_back(dims.back());
    }
    dims[0] = 1;
    check_example_size(known, "build_input_shape");
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
      std::vector<std::int64_t> known;  // the sizes an example has, None dimensions left out
      for (std::size_t d = 1; d < shape->size(); ++d) {
        const json& v = (*shape)[d];
        if (v.is_null()) {
          dims.push_back(-1);
          continue;
        }
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
          throw ValueError(fmt::format("{}: config.batch_shape: dimension {} is {} (a non-negative size or None)", where,
                                       d, show(v)));
        dims.push_back(v.get<std::int64_t>());
        known.push_back(dims.back());
      }
      check_example_size(known, where + ": config.batch_shape");
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

void register_model_layers(std::map<std::string, layers::LayerFactory>& factories) {
  factories["Sequential"] = sequential_from_config;
  factories["Functional"] = functional_from_config;
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
                     {{"batch_shape", batch_shape_json(layers::detail::static_shape(in))},
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

}  // namespace keel::models
