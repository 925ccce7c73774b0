// The config translations of keras_config.hpp. Keras 3's forms follow
// keras/src/saving/serialization_lib.py (serialize_keras_object) and the layers' get_config;
// Keras 2's follow tf_keras/src/engine/functional.py (get_network_config: inbound_nodes as
// node_data lists) and tf_keras/src/saving/legacy/hdf5_format.py.
#include "io/keras_config.hpp"

#include <cctype>
#include <regex>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::io::keras {

namespace {

using nlohmann::json;

bool is_entry(const json& j) {
  return j.is_object() && j.contains("class_name") && j["class_name"].is_string() && j.contains("config");
}

// "glorot_uniform" -> "GlorotUniform" (keras.initializers' class names).
std::string camel(const std::string& snake) {
  std::string out;
  bool up = true;
  for (char c : snake) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

// The config Keras 3 writes for an initializer class with its default arguments
// (keras/src/initializers/random_initializers.py and constant_initializers.py).
json initializer_defaults(const std::string& cls) {
  if (cls == "Zeros" || cls == "Ones") return json::object();
  if (cls == "RandomNormal" || cls == "TruncatedNormal") return {{"mean", 0.0}, {"stddev", 0.05}, {"seed", nullptr}};
  if (cls == "RandomUniform") return {{"minval", -0.05}, {"maxval", 0.05}, {"seed", nullptr}};
  if (cls == "Orthogonal") return {{"gain", 1.0}, {"seed", nullptr}};
  if (cls == "Identity") return {{"gain", 1.0}};
  return {{"seed", nullptr}};  // GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal, LecunUniform
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A dtype policy object ({"class_name": "DTypePolicy" | "FloatDTypePolicy" | "Policy",
// "config": {"name": ...}}) as its name; anything else as it is.
json policy_name(const json& v) {
  if (v.is_object()) {
    auto c = v.find("config");
    if (c != v.end() && c->is_object()) {
      auto n = c->find("name");
      if (n != c->end() && n->is_string()) return *n;
    }
  }
  return v;
}

json keras3_object(const char* module, const std::string& cls, json config) {
  return {{"module", module}, {"class_name", cls}, {"config", std::move(config)}, {"registered_name", nullptr}};
}

// ---- keel -> Keras 3 --------------------------------------------------------------------------

json config_to_keras3(const std::string& cls, const json& config) {
  if (!config.is_object()) return config;
  json out = json::object();
  for (const auto& [key, v] : config.items()) {
    if (key == "dtype" && cls != "InputLayer" && v.is_string()) {
      out[key] = keras3_object("keras", "DTypePolicy", {{"name", v}});
    } else if (ends_with(key, "_initializer") && v.is_string()) {
      const std::string c = camel(v.get<std::string>());
      out[key] = keras3_object("keras.initializers", c, initializer_defaults(c));
    } else if ((ends_with(key, "_initializer") || ends_with(key, "_regularizer") || ends_with(key, "_constraint")) &&
               v.is_object() && v.contains("class_name")) {
      json o = v;
      const char* module = ends_with(key, "_initializer") ? "keras.initializers"
                           : ends_with(key, "_regularizer") ? "keras.regularizers"
                                                            : "keras.constraints";
      o["module"] = module;
      o["registered_name"] = nullptr;
      if (!o.contains("config")) o["config"] = json::object();
      out[key] = std::move(o);
    } else if (key == "layers" && v.is_array()) {
      json list = json::array();
      for (const auto& e : v) list.push_back(is_entry(e) ? to_keras3(e) : e);
      out[key] = std::move(list);
    } else if (is_entry(v)) {  // a wrapped layer (Bidirectional's "layer", TimeDistributed's)
      out[key] = to_keras3(v);
    } else {
      out[key] = v;
    }
  }
  return out;
}

// ---- Keras 2 helpers ------------------------------------------------------------------------

// An old Keras 2 VarianceScaling initializer as the named initializer it stands for
// (keras 2.x initializers.py: glorot_uniform = VarianceScaling(1, "fan_avg", "uniform"), ...).
json legacy_initializer(const json& v) {
  if (!v.is_object() || v.value("class_name", "") != "VarianceScaling") return v;
  const json c = v.value("config", json::object());
  const double scale = c.value("scale", 1.0);
  const std::string mode = c.value("mode", "fan_in");
  std::string dist = c.value("distribution", "truncated_normal");
  const bool uniform = dist == "uniform";
  if (scale == 1.0 && mode == "fan_avg") return uniform ? "glorot_uniform" : "glorot_normal";
  if (scale == 2.0 && mode == "fan_in") return uniform ? "he_uniform" : "he_normal";
  if (scale == 1.0 && mode == "fan_in") return uniform ? "lecun_uniform" : "lecun_normal";
  return uniform ? "glorot_uniform" : "glorot_normal";  // the weights come from the file anyway
}

json legacy_ref(const json& h, const std::string& where) {
  if (!h.is_array() || h.size() < 3 || !h[0].is_string())
    throw ValueError(fmt::format("{}: expected [layer name, node index, tensor index, kwargs], got {}", where, h.dump()));
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", nullptr}, {"dtype", nullptr}, {"keras_history", json::array({h[0], h[1], h[2]})}}}};
}

json nodes_from_keras2(const json& nodes, const std::string& where) {
  if (!nodes.is_array()) return nodes;
  json out = json::array();
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const json& node = nodes[k];
    if (node.is_object()) {  // already {"args", "kwargs"}
      out.push_back(node);
      continue;
    }
    const std::string nwhere = fmt::format("{}.inbound_nodes[{}]", where, k);
    if (!node.is_array() || node.empty())
      throw ValueError(fmt::format("{}: expected a list of [layer, node, tensor, kwargs], got {}", nwhere, node.dump()));
    json refs = json::array();
    for (std::size_t t = 0; t < node.size(); ++t) refs.push_back(legacy_ref(node[t], fmt::format("{}[{}]", nwhere, t)));
    json args = refs.size() == 1 ? json::array({refs[0]}) : json::array({refs});
    out.push_back({{"args", args}, {"kwargs", json::object()}});
  }
  return out;
}

json history_to_keras2(const json& ref) {
  const json h = ref.at("config").at("keras_history");
  return json::array({h[0], h[1], h[2], json::object()});
}

json nodes_to_keras2(const json& nodes) {
  if (!nodes.is_array()) return nodes;
  json out = json::array();
  for (const json& node : nodes) {
    json data = json::array();
    const json& args = node.at("args");
    if (!args.empty() && args[0].is_array()) {
      for (const json& r : args[0]) data.push_back(history_to_keras2(r));
    } else if (!args.empty()) {
      data.push_back(history_to_keras2(args[0]));
    }
    out.push_back(std::move(data));
  }
  return out;
}

}  // namespace

std::string keras_snake_case(const std::string& class_name) {
  static const std::regex non_word("[^A-Za-z0-9_]+"), first("(.)([A-Z][a-z]+)"), second("([a-z])([A-Z])");
  std::string s = std::regex_replace(class_name, non_word, "");
  s = std::regex_replace(s, first, "$1_$2");
  s = std::regex_replace(s, second, "$1_$2");
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

json to_keras3(const json& entry) {
  if (!is_entry(entry)) return entry;
  const std::string cls = entry["class_name"].get<std::string>();
  json out = entry;
  const bool model = cls == "Sequential" || cls == "Functional";
  out["module"] = model ? "keras" : "keras.layers";
  out["registered_name"] = nullptr;
  out["config"] = config_to_keras3(cls, entry["config"]);
  return out;
}

json from_keras3(const json& entry) {
  if (!is_entry(entry)) return entry;
  json out = entry;
  const std::string cls = entry["class_name"].get<std::string>();
  json& c = out["config"];
  if (!c.is_object()) return out;
  if (auto d = c.find("dtype"); d != c.end()) *d = policy_name(*d);
  if (cls == "InputLayer" && !c.contains("batch_shape") && c.contains("batch_input_shape"))
    c["batch_shape"] = c["batch_input_shape"];
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& key = it.key();
    json& v = it.value();
    if (key == "layers" && v.is_array()) {
      for (auto& e : v) e = from_keras3(e);
    } else if (is_entry(v) && !ends_with(key, "_initializer") && !ends_with(key, "_regularizer") &&
               !ends_with(key, "_constraint")) {
      v = from_keras3(v);
    }
  }
  return out;
}

json to_keras2(const json& entry) {
  if (!is_entry(entry)) return entry;
  const std::string cls = entry["class_name"].get<std::string>();
  json out = {{"class_name", cls}};
  for (const char* k : {"name", "inbound_nodes"})
    if (entry.contains(k)) out[k] = std::string(k) == "inbound_nodes" ? nodes_to_keras2(entry[k]) : entry[k];
  const json& config = entry["config"];
  json c = json::object();
  for (const auto& [key, v] : config.items()) {
    if (cls == "InputLayer" && key == "batch_shape") {
      c["batch_input_shape"] = v;
    } else if (key == "dtype" && cls != "InputLayer" && v.is_string() && v.get<std::string>() != "float32" &&
               v.get<std::string>() != "float64" && v.get<std::string>() != "float16") {
      c[key] = {{"class_name", "Policy"}, {"config", {{"name", v}}}};  // tf.keras' mixed precision policy
    } else if ((key == "activation" || key == "recurrent_activation") && v.is_string() &&
               (v == "hard_sigmoid" || v == "hard_sigmoid_keras2")) {
      // Keras 2's hard_sigmoid is clip(0.2 x + 0.5, 0, 1) (keel's hard_sigmoid_keras2); Keras 3's,
      // keel's hard_sigmoid, has no Keras 2 name and would load as the other function.
      if (v == "hard_sigmoid")
        throw ValueError(fmt::format("{}: {} \"hard_sigmoid\" (Keras 3's relu6(x + 3) / 6) has no tf.keras 2 "
                                     "equivalent (its hard_sigmoid is clip(0.2 x + 0.5, 0, 1)): save as .keras",
                                     cls, key));
      c[key] = "hard_sigmoid";
    } else if (ends_with(key, "_initializer") && v.is_string()) {
      const std::string k = camel(v.get<std::string>());
      c[key] = {{"class_name", k}, {"config", initializer_defaults(k)}};
    } else if ((ends_with(key, "_initializer") || ends_with(key, "_regularizer") || ends_with(key, "_constraint")) &&
               v.is_object()) {
      c[key] = {{"class_name", v.value("class_name", "")}, {"config", v.value("config", json::object())}};
    } else if (key == "layers" && v.is_array()) {
      json list = json::array();
      for (const auto& e : v) list.push_back(to_keras2(e));
      c[key] = std::move(list);
    } else if (is_entry(v)) {
      c[key] = to_keras2(v);
    } else {
      c[key] = v;
    }
  }
  if (cls == "InputLayer") c["ragged"] = false;
  out["config"] = std::move(c);
  return out;
}

json from_keras2(const json& entry) {
  if (!is_entry(entry)) return entry;
  json out = entry;
  std::string cls = entry["class_name"].get<std::string>();
  json& c = out["config"];
  if (!c.is_object()) return out;
  // tf.keras before 2.4 named functional models "Model".
  if (cls == "Model" && c.contains("layers") && c.contains("input_layers")) out["class_name"] = cls = "Functional";
  const std::string where = c.contains("name") && c["name"].is_string() ? "layer '" + c["name"].get<std::string>() + "'" : cls;
  if (auto d = c.find("dtype"); d != c.end()) *d = policy_name(*d);
  if (cls == "InputLayer" && !c.contains("batch_shape") && c.contains("batch_input_shape"))
    c["batch_shape"] = c["batch_input_shape"];
  if (cls == "BatchNormalization" || cls == "LayerNormalization") {
    // tf.keras writes the axis as a list once built ([3]); keel's, as Keras 3's, is an int.
    if (auto a = c.find("axis"); a != c.end() && a->is_array() && a->size() == 1) *a = (*a)[0];
  }
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& key = it.key();
    json& v = it.value();
    if (ends_with(key, "_initializer")) {
      v = legacy_initializer(v);
    } else if ((key == "activation" || key == "recurrent_activation") && v == "hard_sigmoid") {
      // Keras 2's hard_sigmoid is clip(0.2 x + 0.5, 0, 1), keel's (Keras 3's) relu6(x + 3) / 6.
      v = "hard_sigmoid_keras2";
    } else if (key == "layers" && v.is_array()) {
      for (auto& e : v) e = from_keras2(e);
    } else if (is_entry(v) && !ends_with(key, "_regularizer") && !ends_with(key, "_constraint")) {
      v = from_keras2(v);
    }
  }
  if (auto n = out.find("inbound_nodes"); n != out.end()) *n = nodes_from_keras2(*n, where);
  // A Keras 2 Sequential may give its input shape on its first layer instead of an InputLayer.
  if (cls == "Sequential") {
    json& list = c["layers"];
    if (list.is_array() && !list.empty() && is_entry(list[0]) && list[0]["class_name"] != "InputLayer") {
      const json& first = list[0]["config"];
      if (first.is_object() && first.contains("batch_input_shape") && first["batch_input_shape"].is_array()) {
        json input = {{"class_name", "InputLayer"},
                      {"config",
                       {{"batch_shape", first["batch_input_shape"]},
                        {"dtype", first.contains("dtype") && first["dtype"].is_string() ? first["dtype"] : json("float32")},
                        {"name", (first.contains("name") && first["name"].is_string() ? first["name"].get<std::string>()
                                                                                  : std::string("layer")) + "_input"}}}};
        list.insert(list.begin(), input);
      }
    }
  }
  return out;
}

}  // namespace keel::io::keras
