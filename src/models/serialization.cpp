// Whole models on disk: Model::save and models::load_model (the configs are model_config.cpp's
// and compile_config.cpp's, the atomic writing model_files.cpp's).
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
#include "distribute/hooks.hpp"
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
#include "io/read_file.hpp"
#include "io/safetensors_file.hpp"
#include "io/zip.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/layers/registry.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "layers/config_args.hpp"
#include "layers/loading_scope.hpp"
#include "layers/symbolic.hpp"
#include "models/compile_config.hpp"
#include "models/graph.hpp"
#include "models/keras_files.hpp"
#include "models/model_files.hpp"
#include "train/optimizer_state.hpp"

namespace keel::models {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace detail;
using layers::detail::show;

}  // namespace

// ---- Model::save -----------------------------------------------------------------------------

void Model::save(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) throw ValueError(fmt::format("{}.save: empty path", name()));
  // Data-parallel training: the replicas hold the same weights, and only the chief writes.
  if (!distribute::detail::is_chief()) return;
  if (is_keras_model_path(path)) return save_keras_model(*this, path);  // Keras' .keras / .h5

  json file = {{"module", "keel.models"}, {"class_name", class_name()}, {"config", get_config()}};
  const std::string cls = class_name();
  file["registered_name"] = cls == "Sequential" || cls == "Functional" ? json(nullptr) : json(cls);
  if (built()) file["build_config"] = {{"input_shape", batch_shape_json(built_shape())}};
  if (compiled()) {
    // Keras' forms: one loss, a list or a dict by output name; the same for loss_weights and
    // metrics (a list, a list of lists, or a dict of lists).
    const auto metric_list = [](const std::vector<metrics::MetricRef>& ms) {
      json out = json::array();
      for (const auto& m : ms) out.push_back(metric_json(m));
      return out;
    };
    const CompileOptions& co = compile_options_;
    json loss = nullptr;
    if (co.loss.one.defined()) {
      loss = loss_json(*co.loss.one.get());
    } else if (!co.loss.list.empty()) {
      loss = json::array();
      for (const auto& l : co.loss.list) loss.push_back(l.defined() ? loss_json(*l.get()) : json(nullptr));
    } else if (!co.loss.by_name.empty()) {
      loss = json::object();
      for (const auto& [k, l] : co.loss.by_name) loss[k] = l.defined() ? loss_json(*l.get()) : json(nullptr);
    }
    json weights = nullptr;
    if (!co.loss_weights.list.empty()) weights = co.loss_weights.list;
    else if (!co.loss_weights.by_name.empty()) weights = co.loss_weights.by_name;
    json metric_spec = metric_list(co.metrics.flat);
    if (!co.metrics.per_output.empty()) {
      for (const auto& ms : co.metrics.per_output) metric_spec.push_back(metric_list(ms));
    } else if (!co.metrics.by_name.empty()) {
      metric_spec = json::object();
      for (const auto& [k, ms] : co.metrics.by_name) metric_spec[k] = metric_list(ms);
    }
    file["compile_config"] = {{"optimizer", optimizers::serialize(*optimizer_)},
                              {"loss", loss},
                              {"loss_weights", weights},
                              {"metrics", metric_spec}};
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
      bytes.push_back(io::detail::read_file(p, "Model.save"));
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

std::string part_text(const Part& p) { return p.disk.empty() ? p.bytes : io::detail::read_file(p.disk, "load_model"); }

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
  const auto one_loss = [&](const json& j, const std::string& where) {
    try {
      return losses::LossRef(loss_from_json(j));
    } catch (const Error& e) {
      load_fail(config.label, where, e.what());
    }
  };
  if (const json* loss = field("loss"); loss && !loss->is_null()) {
    if (loss->is_array()) {
      for (std::size_t i = 0; i < loss->size(); ++i)
        o.loss.list.push_back(one_loss((*loss)[i], fmt::format("compile_config.loss[{}]", i)));
    } else if (loss->is_object() && !loss->contains("class_name")) {
      for (const auto& [k, l] : loss->items()) o.loss.by_name[k] = one_loss(l, "compile_config.loss." + k);
    } else {
      o.loss.one = one_loss(*loss, "compile_config.loss");
    }
  }
  if (const json* w = field("loss_weights"); w && !w->is_null()) {
    if (!w->is_array() && !w->is_object())
      load_fail(config.label, "compile_config.loss_weights", fmt::format("must be a list or a dict, got {}", show(*w)));
    for (const auto& [k, x] : w->items()) {
      if (!x.is_number()) load_fail(config.label, "compile_config.loss_weights", fmt::format("must hold numbers, got {}", show(x)));
      if (w->is_array()) o.loss_weights.list.push_back(x.get<double>());
      else o.loss_weights.by_name[k] = x.get<double>();
    }
  }
  const auto metric_list = [&](const json& ms, const std::string& where) {
    std::vector<metrics::MetricRef> out;
    if (!ms.is_array()) load_fail(config.label, where, fmt::format("must be a list, got {}", show(ms)));
    for (std::size_t i = 0; i < ms.size(); ++i) {
      try {
        out.push_back(metric_from_json(ms[i]));
      } catch (const Error& e) {
        load_fail(config.label, fmt::format("{}[{}]", where, i), e.what());
      }
    }
    return out;
  };
  if (const json* ms = field("metrics"); ms && !ms->is_null()) {
    if (ms->is_object()) {
      for (const auto& [k, list] : ms->items()) o.metrics.by_name[k] = metric_list(list, "compile_config.metrics." + k);
    } else if (ms->is_array() && !ms->empty() && (*ms)[0].is_array()) {
      for (std::size_t i = 0; i < ms->size(); ++i)
        o.metrics.per_output.push_back(metric_list((*ms)[i], fmt::format("compile_config.metrics[{}]", i)));
    } else {
      o.metrics.flat = metric_list(*ms, "compile_config.metrics");
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
  if (is_keras_model_path(path) && !fs::is_directory(path)) return load_keras_model(path, compile);  // Keras' files
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
    const std::string bytes = io::detail::read_file(path, "load_model");
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
