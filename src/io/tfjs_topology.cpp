// keel configs <-> TensorFlow.js Layers topologies (see tfjs_topology.hpp).
//
// The layer configs of the two sides share Keras' snake_case keys (tfjs-layers'
// convertTsToPythonic writes them so), so a layer's config passes through with these changes:
//   * initializers: keel's names ("glorot_uniform") <-> tfjs's {"class_name": "GlorotUniform", ...};
//     tfjs's VarianceScaling(scale, mode, distribution) is the named one it equals,
//   * Keras 3's "module" / "registered_name" and {"class_name": "DTypePolicy"} dtypes dropped,
//   * LeakyReLU: Keras 3's "negative_slope" <-> Keras 2's "alpha",
//   * InputLayer: "batch_shape" <-> "batch_input_shape"; a tfjs Sequential carries it on its first
//     layer rather than as an InputLayer entry,
//   * functional inbound nodes: Keras 3's {"args": [tensor | [tensors]], "kwargs"} <-> Keras 2's
//     [[layer, node, tensor, kwargs], ...].
// Names whose meaning differs are translated: tfjs's "hard_sigmoid" is Keras 2's
// clip(0.2 x + 0.5, 0, 1), keel's "hard_sigmoid_keras2" (keel's "hard_sigmoid" is Keras 3's
// relu6(x + 3) / 6, which tfjs has not: refused). Settings tfjs lacks are refused instead of
// passed on: tfjs's GRU has only reset_after = false; its ReLU has no negative_slope or threshold.
#include "io/tfjs_topology.hpp"

#include <nlohmann/json.hpp>

#include <set>
#include <string_view>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::io::detail {

namespace {

using nlohmann::json;

// Layer classes both keel and tfjs-layers have, whose configs translate as above.
const std::set<std::string>& supported_classes() {
  static const std::set<std::string> s = {
      "Activation", "ActivityRegularization", "Add", "AlphaDropout", "Average", "AveragePooling1D",
      "AveragePooling2D", "BatchNormalization", "Concatenate", "Conv1D", "Conv2D", "Conv2DTranspose", "Cropping2D",
      "Dense", "DepthwiseConv2D", "Dot", "Dropout", "ELU", "Embedding", "Flatten", "GaussianDropout", "GaussianNoise",
      "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GRU",
      "LayerNormalization", "LeakyReLU", "LSTM", "Masking", "Maximum", "MaxPooling1D", "MaxPooling2D", "Minimum",
      "Multiply", "Permute", "PReLU", "ReLU", "RepeatVector", "Rescaling", "Reshape", "SeparableConv2D", "SimpleRNN",
      "Softmax", "SpatialDropout1D", "ThresholdedReLU", "UpSampling2D", "ZeroPadding2D"};
  return s;
}

// keel's activation names whose tfjs namesake computes the same function.
const std::set<std::string>& shared_activations() {
  static const std::set<std::string> s = {"linear", "relu", "relu6", "sigmoid", "tanh", "softmax", "log_softmax",
                                          "elu", "selu", "softplus", "softsign", "swish", "mish", "gelu"};
  return s;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// keel's initializer name <-> tfjs class (tfjs-layers initializers.ts), with the config tfjs's
// constructor defaults give (Keras' defaults for the random ones).
struct NamedInit {
  const char* keel;
  const char* tfjs;
  const char* config;
};
constexpr NamedInit kInits[] = {
    {"zeros", "Zeros", "{}"},
    {"ones", "Ones", "{}"},
    {"glorot_uniform", "GlorotUniform", R"({"seed": null})"},
    {"glorot_normal", "GlorotNormal", R"({"seed": null})"},
    {"he_normal", "HeNormal", R"({"seed": null})"},
    {"he_uniform", "HeUniform", R"({"seed": null})"},
    {"lecun_normal", "LeCunNormal", R"({"seed": null})"},
    {"lecun_uniform", "LeCunUniform", R"({"seed": null})"},
    {"orthogonal", "Orthogonal", R"({"gain": 1, "seed": null})"},
    {"random_normal", "RandomNormal", R"({"mean": 0, "stddev": 0.05, "seed": null})"},
    {"random_uniform", "RandomUniform", R"({"minval": -0.05, "maxval": 0.05, "seed": null})"},
    {"truncated_normal", "TruncatedNormal", R"({"mean": 0, "stddev": 0.05, "seed": null})"},
    {"identity", "Identity", R"({"gain": 1})"},
};

json strip_keras3(json v) {
  if (v.is_object()) {
    v.erase("module");
    v.erase("registered_name");
  }
  return v;
}

json initializer_to_tfjs(const json& v) {
  if (v.is_string()) {
    for (const auto& i : kInits)
      if (v.get<std::string>() == i.keel) return {{"class_name", i.tfjs}, {"config", json::parse(i.config)}};
    return nullptr;  // no tfjs equivalent: tfjs's default initializer (weights come from the file)
  }
  return strip_keras3(v);
}

// The keel initializer a tfjs one equals, or null (keel's default: a loaded layer's weights come
// from the shards, so the initializer only matters for layers trained anew).
json initializer_from_tfjs(const json& v) {
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string()) return nullptr;
  const std::string cls = v["class_name"].get<std::string>();
  const json cfg = v.value("config", json::object());
  if (cls == "Constant") return {{"class_name", "Constant"}, {"config", cfg}};
  if (cls == "VarianceScaling" && cfg.is_object()) {
    // tfjs: glorot = (1, fan_avg), he = (2, fan_in), lecun = (1, fan_in); "normal" is truncated.
    const double scale = cfg.value("scale", 1.0);
    const std::string mode = cfg.value("mode", std::string("fan_in"));
    const std::string dist = cfg.value("distribution", std::string("normal"));
    const std::string kind = dist == "uniform" ? "uniform" : "normal";
    if (scale == 1.0 && mode == "fan_avg") return "glorot_" + kind;
    if (scale == 2.0 && mode == "fan_in") return "he_" + kind;
    if (scale == 1.0 && mode == "fan_in") return "lecun_" + kind;
    return nullptr;
  }
  for (const auto& i : kInits)
    if (cls == i.tfjs && (cfg.is_null() || cfg == json::object() || cfg == json::parse(i.config) ||
                          std::string_view(i.config) == R"({"seed": null})"))
      return i.keel;
  return nullptr;
}

// ---- keel -> tfjs ----------------------------------------------------------------------------

json layer_config_to_tfjs(const std::string& cls, const std::string& lname, const json& config) {
  const std::string where = fmt::format("save_tfjs: layer '{}' ({})", lname, cls);
  json out = json::object();
  for (auto it = config.begin(); it != config.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "dtype") {
      if (v.is_object()) out[key] = v.value("config", json::object()).value("name", std::string("float32"));
      else out[key] = v;
      if (out[key].is_string() && out[key] != "float32")
        throw ValueError(fmt::format("{}: dtype policy '{}' (TensorFlow.js layers compute in float32)", where,
                                     out[key].get<std::string>()));
    } else if (ends_with(key, "_initializer")) {
      out[key] = initializer_to_tfjs(v);
    } else if (ends_with(key, "_regularizer") || ends_with(key, "_constraint")) {
      json r = strip_keras3(v);
      // tfjs-layers registers L1L2 only (regularizers.ts); L1 and L2 are L1L2 with one amount.
      if (r.is_object() && (r.value("class_name", "") == "L1" || r.value("class_name", "") == "L2")) {
        json c = r.value("config", json::object());
        r = {{"class_name", "L1L2"}, {"config", {{"l1", c.value("l1", 0.0)}, {"l2", c.value("l2", 0.0)}}}};
      }
      out[key] = r;
    } else if (key == "activation" || key == "recurrent_activation") {
      if (!v.is_string() || !(shared_activations().count(v.get<std::string>() == "silu" ? "swish" : v.get<std::string>()) ||
                              v.get<std::string>() == "hard_sigmoid_keras2"))
        throw ValueError(fmt::format("{}: {} {} has no TensorFlow.js equivalent (tfjs's hard_sigmoid is Keras 2's "
                                     "0.2 x + 0.5, keel's hard_sigmoid_keras2; shared: linear, relu, relu6, sigmoid, tanh, "
                                     "softmax, log_softmax, elu, selu, softplus, softsign, swish, mish, gelu)", where, key, show(v)));
      const std::string name = v.get<std::string>();
      out[key] = name == "silu" ? json("swish") : name == "hard_sigmoid_keras2" ? json("hard_sigmoid") : v;
    } else {
      out[key] = v;
    }
  }
  if (cls == "LeakyReLU" && out.contains("negative_slope")) {
    out["alpha"] = out["negative_slope"];
    out.erase("negative_slope");
  }
  if (cls == "GRU" && out.value("reset_after", true))
    throw ValueError(where + ": reset_after = true (TensorFlow.js' GRU has only reset_after = false)");
  if (cls == "ReLU" && ((out.contains("negative_slope") && out["negative_slope"] != 0) ||
                        (out.contains("threshold") && out["threshold"] != 0)))
    throw ValueError(where + ": negative_slope or threshold (TensorFlow.js' ReLU has max_value only)");
  if (out.contains("groups") && out["groups"] != 1)
    throw ValueError(fmt::format("{}: groups = {} (TensorFlow.js convolutions have no groups)", where, show(out["groups"])));
  return out;
}

std::string entry_name(const json& entry) {
  const json& c = entry.at("config");
  return c.is_object() && c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : "";
}

json layer_to_tfjs(const json& entry) {
  const std::string cls = entry.at("class_name").get<std::string>();
  const std::string lname = entry_name(entry);
  if (!supported_classes().count(cls))
    throw ValueError(fmt::format("save_tfjs: layer '{}': the class '{}' has no TensorFlow.js Layers equivalent that "
                                 "keel writes", lname, cls));
  return {{"class_name", cls}, {"config", layer_config_to_tfjs(cls, lname, entry.at("config"))}};
}

json input_batch_shape(const json& input_config) {
  if (input_config.contains("batch_shape")) return input_config["batch_shape"];
  return input_config.value("batch_input_shape", json(nullptr));
}

// Keras 3's {"args": [x], "kwargs": {}} node as Keras 2's [[layer, node, tensor, {}], ...].
json node_to_tfjs(const json& node, const std::string& lname) {
  const json& arg = node.at("args").at(0);
  json refs = arg.is_array() ? arg : json::array({arg});
  json out = json::array();
  for (const json& r : refs) {
    const json& h = r.at("config").at("keras_history");
    out.push_back(json::array({h.at(0), h.at(1), h.at(2), json::object()}));
  }
  if (!node.value("kwargs", json::object()).empty())
    throw ValueError(fmt::format("save_tfjs: layer '{}' is called with keyword arguments", lname));
  return out;
}

}  // namespace

json tfjs_topology_from_keel(const json& model) {
  const std::string cls = model.at("class_name").get<std::string>();
  const json& config = model.at("config");
  json out_config = {{"name", config.value("name", std::string("model"))}, {"layers", json::array()}};
  json& list = out_config["layers"];
  if (cls == "Sequential") {
    json pending_input = nullptr;
    for (const json& entry : config.at("layers")) {
      if (entry.at("class_name") == "InputLayer") {
        pending_input = entry.at("config");
        continue;
      }
      if (entry.at("class_name") == "Sequential" || entry.at("class_name") == "Functional")
        throw ValueError(fmt::format("save_tfjs: layer '{}': nested models are not written", entry_name(entry)));
      json t = layer_to_tfjs(entry);
      if (!pending_input.is_null()) {  // tfjs's Sequential: the input shape rides on the first layer
        t["config"]["batch_input_shape"] = input_batch_shape(pending_input);
        t["config"]["dtype"] = pending_input.value("dtype", std::string("float32"));
        pending_input = nullptr;
      }
      list.push_back(std::move(t));
    }
    if (list.empty() || !list[0]["config"].contains("batch_input_shape"))
      throw ValueError("save_tfjs: the Sequential has no layers or no input shape (build it, or start it with an "
                       "InputLayer)");
  } else if (cls == "Functional") {
    for (const json& entry : config.at("layers")) {
      const std::string ecls = entry.at("class_name").get<std::string>();
      const std::string lname = entry_name(entry);
      json t;
      if (ecls == "InputLayer") {
        const json& ic = entry.at("config");
        t = {{"class_name", "InputLayer"},
             {"config",
              {{"batch_input_shape", input_batch_shape(ic)}, {"dtype", ic.value("dtype", std::string("float32"))},
               {"sparse", false}, {"name", lname}}}};
      } else if (ecls == "Sequential" || ecls == "Functional") {
        throw ValueError(fmt::format("save_tfjs: layer '{}': nested models are not written", lname));
      } else {
        t = layer_to_tfjs(entry);
      }
      t["name"] = lname;
      t["inbound_nodes"] = json::array();
      for (const json& node : entry.value("inbound_nodes", json::array()))
        t["inbound_nodes"].push_back(node_to_tfjs(node, lname));
      list.push_back(std::move(t));
    }
    out_config["input_layers"] = config.at("input_layers");
    out_config["output_layers"] = config.at("output_layers");
  } else {
    throw ValueError(fmt::format("save_tfjs: a {} (subclassed models have no topology; write a Sequential or "
                                 "functional model)", cls));
  }
  return {{"class_name", cls == "Sequential" ? "Sequential" : "Model"},
          {"config", out_config},
          {"keras_version", "tfjs-layers 4.22.0"},
          {"backend", "tensor_flow.js"}};
}

// ---- tfjs -> keel ----------------------------------------------------------------------------

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& field, const std::string& what) {
  throw IOError(fmt::format("load_tfjs: {}: {}: {}", file, field, what));
}

json layer_config_from_tfjs(const std::string& cls, const std::string& lname, const json& config) {
  const std::string where = fmt::format("load_tfjs: layer '{}' ({})", lname, cls);
  json out = json::object();
  for (auto it = config.begin(); it != config.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (v.is_null()) continue;  // Keras' None: keel's default
    if (ends_with(key, "_initializer")) {
      json i = initializer_from_tfjs(v);
      if (!i.is_null()) out[key] = i;
    } else if (key == "activation" || key == "recurrent_activation") {
      // tfjs's hard_sigmoid is Keras 2's clip(0.2 x + 0.5, 0, 1): keel's hard_sigmoid_keras2 (keel's
      // hard_sigmoid is Keras 3's relu6(x + 3) / 6).
      if (v.is_string() && v.get<std::string>() == "hard_sigmoid") {
        out[key] = "hard_sigmoid_keras2";
        continue;
      }
      if (!v.is_string() || !shared_activations().count(v.get<std::string>()))
        throw ValueError(fmt::format("{}: {} {} has no keel equivalent", where, key, show(v)));
      out[key] = v;
    } else if (key == "batch_input_shape" || key == "input_dtype" || key == "input_shape") {
      continue;  // the Sequential's input, handled by the caller
    } else {
      out[key] = v;
    }
  }
  if (cls == "LeakyReLU") {
    out["negative_slope"] = out.contains("alpha") ? out["alpha"] : json(0.3);  // tfjs's default alpha
    out.erase("alpha");
  }
  // tfjs's defaults where they differ from keel's (Keras 3's), for configs that leave them out.
  if (cls == "GRU") {
    if (out.value("reset_after", false)) throw ValueError(where + ": reset_after = true");
    out["reset_after"] = false;
  }
  // tfjs's default recurrent_activation is Keras 2's hard_sigmoid.
  if ((cls == "LSTM" || cls == "GRU") && !out.contains("recurrent_activation")) out["recurrent_activation"] = "hard_sigmoid_keras2";
  return out;
}

json layer_from_tfjs(const json& entry, std::size_t i, const std::string& file, bool functional) {
  const std::string w = fmt::format("layers[{}]", i);
  if (!entry.is_object()) bad(file, w, "must be an object {\"class_name\", \"config\"}");
  auto cls_it = entry.find("class_name");
  auto cfg_it = entry.find("config");
  if (cls_it == entry.end() || !cls_it->is_string()) bad(file, w + ".class_name", "missing or not a string");
  if (cfg_it == entry.end() || !cfg_it->is_object()) bad(file, w + ".config", "missing or not an object");
  const std::string cls = cls_it->get<std::string>();
  std::string lname = cfg_it->value("name", std::string());
  if (functional && entry.contains("name") && entry["name"].is_string()) lname = entry["name"].get<std::string>();
  if (cls == "InputLayer") {
    json shape = cfg_it->value("batch_input_shape", json(nullptr));
    if (shape.is_null()) shape = cfg_it->value("batch_shape", json(nullptr));
    if (!shape.is_array()) bad(file, w + ".config.batch_input_shape", "missing or not a list");
    if (cfg_it->value("sparse", false)) throw ValueError(fmt::format("load_tfjs: input '{}' is sparse", lname));
    return {{"class_name", "InputLayer"},
            {"config", {{"name", lname}, {"batch_shape", shape}, {"dtype", cfg_it->value("dtype", std::string("float32"))}}}};
  }
  if (!supported_classes().count(cls))
    throw ValueError(fmt::format("load_tfjs: layer '{}': unknown layer class '{}' (keel reads the TensorFlow.js "
                                 "layers it shares with Keras)", lname, cls));
  json cfg = layer_config_from_tfjs(cls, lname, *cfg_it);
  cfg["name"] = lname;
  return {{"class_name", cls}, {"config", cfg}};
}

json tensor_ref(const json& h) {
  return {{"class_name", "__keras_tensor__"}, {"config", {{"keras_history", json::array({h[0], h[1], h[2]})}}}};
}

}  // namespace

json keel_config_from_tfjs(const json& topology_in, const std::string& file) {
  const json& topology =
      topology_in.is_object() && topology_in.contains("model_config") ? topology_in["model_config"] : topology_in;
  if (!topology.is_object()) bad(file, "modelTopology", "must be an object");
  auto cls_it = topology.find("class_name");
  auto cfg_it = topology.find("config");
  if (cls_it == topology.end() || !cls_it->is_string()) bad(file, "modelTopology.class_name", "missing or not a string");
  if (cfg_it == topology.end()) bad(file, "modelTopology.config", "missing");
  const std::string cls = cls_it->get<std::string>();
  if (cls == "Sequential") {
    // Old tfjs wrote the layer list itself as the config.
    const json& layers = cfg_it->is_array() ? *cfg_it : cfg_it->value("layers", json(nullptr));
    if (!layers.is_array() || layers.empty()) bad(file, "modelTopology.config.layers", "missing, empty or not a list");
    std::string name = cfg_it->is_object() ? cfg_it->value("name", std::string("sequential")) : "sequential";
    json list = json::array();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      json t = layer_from_tfjs(layers[i], i, file, false);
      if (i == 0 && t["class_name"] != "InputLayer") {
        const json& c = layers[0]["config"];
        if (!c.contains("batch_input_shape") || !c["batch_input_shape"].is_array())
          bad(file, "modelTopology.config.layers[0].config.batch_input_shape", "missing (the model's input shape)");
        list.push_back({{"class_name", "InputLayer"},
                        {"config",
                         {{"name", t["config"]["name"].get<std::string>() + "_input"},
                          {"batch_shape", c["batch_input_shape"]},
                          {"dtype", c.value("dtype", std::string("float32"))}}}});
      }
      list.push_back(std::move(t));
    }
    return {{"class_name", "Sequential"}, {"config", {{"name", name}, {"layers", list}}}};
  }
  if (cls != "Model" && cls != "Functional")
    throw ValueError(fmt::format("load_tfjs: {}: modelTopology.class_name '{}' (expected Sequential or Model)", file, cls));
  if (!cfg_it->is_object()) bad(file, "modelTopology.config", "must be an object");
  const json& layers = cfg_it->value("layers", json(nullptr));
  if (!layers.is_array()) bad(file, "modelTopology.config.layers", "missing or not a list");
  json list = json::array();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    json t = layer_from_tfjs(layers[i], i, file, true);
    const std::string lname = t["config"]["name"].get<std::string>();
    t["name"] = lname;
    t["inbound_nodes"] = json::array();
    const json& nodes = layers[i].value("inbound_nodes", json::array());
    if (!nodes.is_array()) bad(file, fmt::format("layers[{}].inbound_nodes", i), "not a list");
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const std::string nw = fmt::format("layers[{}].inbound_nodes[{}]", i, k);
      const json& node = nodes[k];
      if (!node.is_array() || node.empty()) bad(file, nw, "must be a non-empty list of [layer, node, tensor, kwargs]");
      json refs = json::array();
      for (const json& r : node) {
        if (!r.is_array() || r.size() < 3 || !r[0].is_string() || !r[1].is_number_integer() || !r[2].is_number_integer())
          bad(file, nw, "expected [layer, node, tensor, kwargs], got " + show(r));
        if (r.size() > 3 && r[3].is_object() && !r[3].empty())
          throw ValueError(fmt::format("load_tfjs: layer '{}' is called with keyword arguments {}", lname, show(r[3])));
        refs.push_back(tensor_ref(r));
      }
      const json arg = refs.size() == 1 ? refs[0] : refs;
      t["inbound_nodes"].push_back({{"args", json::array({arg})}, {"kwargs", json::object()}});
    }
    list.push_back(std::move(t));
  }
  for (const char* key : {"input_layers", "output_layers"})
    if (!cfg_it->contains(key) || !(*cfg_it)[key].is_array())
      bad(file, std::string("modelTopology.config.") + key, "missing or not a list");
  return {{"class_name", "Functional"},
          {"config",
           {{"name", cfg_it->value("name", std::string("model"))},
            {"layers", list},
            {"input_layers", (*cfg_it)["input_layers"]},
            {"output_layers", (*cfg_it)["output_layers"]}}}};
}

}  // namespace keel::io::detail
