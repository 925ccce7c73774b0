// io::save_tfjs and io::load_tfjs: TensorFlow.js Layers models (model.json + weight shards).
//
// model.json (tfjs-core io types ModelJSON):
//   {"format": "layers-model", "generatedBy", "convertedBy",
//    "modelTopology": {"class_name", "config", "keras_version", "backend"},
//    "weightsManifest": [{"paths": ["group1-shard1of1.bin"], "weights": [{"name", "shape", "dtype"}]}]}
// Weights are named "<layer name>/<weight name>" (tfjs's LayerVariable.originalName) and listed
// as tf.LayersModel.weights lists them: every layer's trainable weights in layer order, then
// every layer's non-trainable ones. Loading matches them by name, as tfjs's loadWeights does.
#include "keel/io/tfjs.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/core.h>

#include "io/atomic_file.hpp"
#include "io/read_file.hpp"
#include "io/tfjs_topology.hpp"
#include "io/tfjs_weights.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/layers/registry.hpp"
#include "keel/models/model.hpp"
#include "models/model_files.hpp"

namespace keel::io {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string short_name(const std::string& variable_name) {
  const auto slash = variable_name.rfind('/');
  return slash == std::string::npos ? variable_name : variable_name.substr(slash + 1);
}

struct NamedVariable {
  std::string name;
  Variable* variable;
};

// The model's weights with tfjs's names, in tf.LayersModel.weights' order.
std::vector<NamedVariable> tfjs_weights_of(models::Model& model, const char* op) {
  std::vector<NamedVariable> out;
  std::set<std::string> names;
  const auto layers = model.layers();
  for (bool trainable : {true, false}) {
    for (const auto& layer : layers) {
      for (Variable* v : trainable ? layer->trainable_weights() : layer->non_trainable_weights()) {
        std::string name = layer->name() + "/" + short_name(v->name());
        if (!names.insert(name).second)
          throw ValueError(fmt::format("{}: two weights of layer '{}' are both named '{}'", op, layer->name(), name));
        out.push_back({std::move(name), v});
      }
    }
  }
  return out;
}

// A finished folder `tmp` at `dir`: renamed there, or swapped with a previous TensorFlow.js model
// (renameat2 RENAME_EXCHANGE) so that `dir` is always one whole model. A folder that is not one
// (no model.json) is never replaced.
void install_folder(const std::string& tmp, const std::string& dir) {
  const char* op = "save_tfjs";
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) throw IOError(fmt::format("{}: cannot inspect {}: {}", op, dir, std::strerror(errno)));
    if (::rename(tmp.c_str(), dir.c_str()) != 0)
      throw IOError(fmt::format("{}: cannot rename {} to {}: {}", op, tmp, dir, std::strerror(errno)));
    models::detail::fsync_path(models::detail::parent_of(dir), op);
    return;
  }
  if (!S_ISDIR(st.st_mode)) throw IOError(fmt::format("{}: {} exists and is not a folder", op, dir));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool ours = n == "model.json" || (n.rfind("group", 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".bin");
    if (!ours)
      throw IOError(fmt::format("{}: {} holds '{}', which is not part of a TensorFlow.js model: refusing to replace "
                                "the folder", op, dir, n));
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    models::detail::fsync_path(models::detail::parent_of(dir), op);
    fs::remove_all(tmp, ec);  // now the previous model
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    throw IOError(fmt::format("{}: cannot swap {} into {}: {}", op, tmp, dir, std::strerror(errno)));
  const std::string old = models::detail::sibling_name(dir, "old");
  if (::rename(dir.c_str(), old.c_str()) != 0)
    throw IOError(fmt::format("{}: cannot move {} aside: {}", op, dir, std::strerror(errno)));
  if (::rename(tmp.c_str(), dir.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), dir.c_str());
    throw IOError(fmt::format("{}: cannot rename {} to {}: {}", op, tmp, dir, std::strerror(err)));
  }
  models::detail::fsync_path(models::detail::parent_of(dir), op);
  fs::remove_all(old, ec);
}

// A shard path of the manifest as a file inside `dir`: relative, without "..", and (after
// symbolic links are resolved) still inside the folder.
std::string shard_file(const std::string& dir, const std::string& rel, const std::string& file) {
  const auto fail = [&](const std::string& why) {
    throw IOError(fmt::format("load_tfjs: {}: weightsManifest path '{}': {}", file, rel, why));
  };
  if (rel.empty()) fail("empty");
  if (rel.find('\0') != std::string::npos || rel.find('\\') != std::string::npos) fail("holds a NUL or a backslash");
  const fs::path p(rel);
  if (p.is_absolute() || rel[0] == '/') fail("absolute (paths are relative to the folder of model.json)");
  for (const auto& part : p)
    if (part == "..") fail("leaves the folder of model.json");
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(dir), ec);
  const fs::path full = fs::weakly_canonical(fs::path(dir) / p, ec);
  if (ec) fail("cannot be resolved: " + ec.message());
  const std::string b = base.string(), f = full.string();
  if (f.size() <= b.size() || f.compare(0, b.size(), b) != 0 || (b.back() != '/' && f[b.size()] != '/'))
    fail("leaves the folder of model.json");
  return f;
}

}  // namespace

void save_tfjs(models::Model& model, const std::string& dir_in, TfjsSaveOptions options) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) throw ValueError("save_tfjs: empty folder name");
  const std::string cls = model.class_name();
  if (cls != "Sequential" && cls != "Functional")
    throw ValueError(fmt::format("save_tfjs: {} is a subclassed model ({}): only Sequential and functional models have "
                                 "a topology", model.name(), cls));
  if (!model.built())
    throw ValueError(fmt::format("save_tfjs: {} is not built (call it on data, or start it with an InputLayer)", model.name()));
  const json topology = detail::tfjs_topology_from_keel({{"class_name", cls}, {"config", model.get_config()}});

  std::vector<detail::TfjsWeight> weights;
  for (const auto& w : tfjs_weights_of(model, "save_tfjs")) weights.push_back({w.name, w.variable->peek()});
  const detail::EncodedWeights encoded =
      detail::encode_tfjs_weights(weights, options.quantization, options.shard_size_bytes);
  const json model_json = {{"format", "layers-model"},
                           {"generatedBy", "keel"},
                           {"convertedBy", nullptr},
                           {"modelTopology", topology},
                           {"weightsManifest", json::parse(encoded.manifest_json)}};

  io::detail::remove_stale_temporaries(dir);
  models::detail::TempDir tmp(models::detail::sibling_name(dir, "tmp"), "save_tfjs");
  for (const auto& [name, bytes] : encoded.shards) io::atomic_write(tmp.path() + "/" + name, bytes);
  io::atomic_write(tmp.path() + "/model.json", model_json.dump(2));
  models::detail::fsync_path(tmp.path(), "save_tfjs");
  install_folder(tmp.path(), dir);
  tmp.release();
}

std::shared_ptr<models::Model> load_tfjs(const std::string& path) {
  const std::string text = io::detail::read_file(path, "load_tfjs");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw IOError(fmt::format("load_tfjs: {}: not JSON (at byte {}): {}", path, e.byte, e.what()));
  }
  const auto bad = [&](const std::string& field, const std::string& what) {
    throw IOError(fmt::format("load_tfjs: {}: {}: {}", path, field, what));
  };
  if (!doc.is_object()) bad("the document", "must be an object");
  if (auto f = doc.find("format"); f != doc.end() && !(f->is_string() && *f == "layers-model"))
    bad("format", fmt::format("{} (keel reads \"layers-model\"; a \"graph-model\" has no Keras topology)", f->dump()));
  auto topo = doc.find("modelTopology");
  if (topo == doc.end() || !topo->is_object()) bad("modelTopology", "missing or not an object");
  auto manifest = doc.find("weightsManifest");
  if (manifest == doc.end()) bad("weightsManifest", "missing");
  for (const char* key : {"generatedBy", "convertedBy"})
    if (auto g = doc.find(key); g != doc.end() && !g->is_null() && !g->is_string()) bad(key, "must be a string or null");

  const json config = detail::keel_config_from_tfjs(*topo, path);
  std::shared_ptr<layers::Layer> layer = layers::deserialize(config);
  auto model = std::dynamic_pointer_cast<models::Model>(layer);
  if (!model) throw ValueError(fmt::format("load_tfjs: {}: the topology is not a model", path));

  const std::string dir = models::detail::parent_of(path);
  const auto values = detail::decode_tfjs_weights(*manifest, path, [&](const std::string& rel) {
    return io::detail::read_file(shard_file(dir, rel, path), "load_tfjs");
  });
  std::map<std::string, Tensor> by_name;
  for (const auto& v : values) by_name[v.name] = v.value;
  // Every weight is checked before any is written.
  const auto vars = tfjs_weights_of(*model, "load_tfjs");
  for (const auto& [name, v] : vars) {
    auto it = by_name.find(name);
    if (it == by_name.end()) bad("weightsManifest", fmt::format("no weight '{}' (the model's {} needs it)", name, name));
    if (it->second.shape() != v->shape())
      bad("weightsManifest", fmt::format("weight '{}' has shape {}, the layer's is {}", name,
                                         it->second.shape().to_string(), v->shape().to_string()));
    if (it->second.dtype() != v->dtype())
      bad("weightsManifest", fmt::format("weight '{}' is {}, the layer's is {}", name, keel::name(it->second.dtype()),
                                         keel::name(v->dtype())));
  }
  if (by_name.size() != vars.size()) {
    std::set<std::string> used;
    for (const auto& nv : vars) used.insert(nv.name);
    for (const auto& [name, t] : by_name)
      if (!used.count(name)) bad("weightsManifest", fmt::format("weight '{}' belongs to no layer of the model", name));
  }
  for (const auto& [name, v] : vars) v->assign(by_name.at(name).to(v->device()));
  return model;
}

}  // namespace keel::io
