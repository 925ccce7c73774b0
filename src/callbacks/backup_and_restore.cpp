// callbacks::BackupAndRestore: fault-tolerant training, as Keras' BackupAndRestore. The backup
// is four files under backup_dir, each replaced atomically:
//   model.weights.safetensors     Model::save_weights
//   optimizer.safetensors         the optimizer's variables (slots and iterations) by position
//   training_state.json           {"epoch", "seed_key", "seed_counter"}, written last: a backup
//                                 counts only once this file names its epoch
// The random stream is part of it so that the epochs after a restore shuffle and drop out as
// the uninterrupted run did.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "distribute/hooks.hpp"
#include "io/safetensors_file.hpp"
#include "keel/callbacks/callback.hpp"
#include "keel/core/error.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/models/model.hpp"
#include "keel/optimizers/optimizer.hpp"

namespace keel::callbacks {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWeights = "model.weights.safetensors";
constexpr const char* kOptimizer = "optimizer.safetensors";
constexpr const char* kState = "training_state.json";

// Written beside the destination, then renamed over it.
void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IOError(fmt::format("BackupAndRestore: cannot write {}", tmp.string()));
    out << text;
    out.flush();
    if (!out) throw IOError(fmt::format("BackupAndRestore: writing {} failed", tmp.string()));
  }
  fs::rename(tmp, path);
}

}  // namespace

BackupAndRestore::BackupAndRestore(std::string backup_dir, BackupAndRestoreOptions options)
    : dir_(std::move(backup_dir)), o_(std::move(options)) {
  if (dir_.empty()) throw ValueError("BackupAndRestore: backup_dir is empty");
  if (o_.save_freq != "epoch")
    throw ValueError(fmt::format("BackupAndRestore: save_freq \"{}\" is not supported; use \"epoch\"", o_.save_freq));
}

void BackupAndRestore::on_train_begin(const Logs&) {
  if (!model) throw ValueError("BackupAndRestore: not attached to a model");
  restored_epoch_ = -1;
  const fs::path dir(dir_);
  std::error_code ec;
  if (!fs::is_regular_file(dir / kState, ec)) return;  // nothing backed up: a fresh start
  std::ifstream in(dir / kState);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(text.str());
  } catch (const std::exception& e) {
    throw IOError(fmt::format("BackupAndRestore: {}: not valid JSON ({})", (dir / kState).string(), e.what()));
  }
  if (!state.is_object() || !state.contains("epoch") || !state["epoch"].is_number_integer() ||
      !state.contains("seed_key") || !state.contains("seed_counter"))
    throw IOError(fmt::format("BackupAndRestore: {}: needs integer \"epoch\", \"seed_key\" and \"seed_counter\"",
                              (dir / kState).string()));
  model->load_weights((dir / kWeights).string());
  if (auto opt = model->optimizer(); opt && fs::is_regular_file(dir / kOptimizer, ec)) {
    const io::detail::SafetensorsFile file = io::detail::read_safetensors((dir / kOptimizer).string());
    opt->build(model->trainable_weights());
    // By position, as the weights file is read when names differ: a restarted program may
    // number its layers differently ("dense_4" then, "dense_6" now).
    const auto vars = opt->variables();
    const std::string label = (dir / kOptimizer).string();
    if (file.tensors.size() != vars.size())
      throw IOError(fmt::format("BackupAndRestore: {}: {} optimizer tensors, but the {} optimizer has {} variables",
                                label, file.tensors.size(), opt->class_name(), vars.size()));
    std::vector<const Tensor*> values;
    for (std::size_t i = 0; i < vars.size(); ++i) {
      auto it = file.tensors.find(fmt::format("{:06d}", i));
      if (it == file.tensors.end() || it->second.shape() != vars[i].second->shape() ||
          it->second.dtype() != vars[i].second->dtype())
        throw IOError(fmt::format("BackupAndRestore: {}: no tensor {:06d} of shape {} for the optimizer variable '{}'",
                                  label, i, vars[i].second->shape().to_string(), vars[i].first));
      values.push_back(&it->second);
    }
    for (std::size_t i = 0; i < vars.size(); ++i) vars[i].second->assign(*values[i]);
  }
  model->seed_generator().set_state({state["seed_key"].get<std::uint64_t>(), state["seed_counter"].get<std::uint64_t>()});
  restored_epoch_ = state["epoch"].get<int>();
  model->resume_at_epoch(restored_epoch_ + 1);
}

void BackupAndRestore::on_epoch_end(int epoch, const Logs&) {
  if (!model) throw ValueError("BackupAndRestore: not attached to a model");
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  const fs::path dir(dir_);
  fs::create_directories(dir);
  model->save_weights((dir / kWeights).string());
  if (auto opt = model->optimizer()) {
    std::map<std::string, Tensor> tensors;
    std::string names;
    const auto vars = opt->variables();
    for (std::size_t i = 0; i < vars.size(); ++i) {
      tensors.emplace(fmt::format("{:06d}", i), vars[i].second->peek());
      names += vars[i].first + "\n";
    }
    io::save_safetensors((dir / kOptimizer).string(), tensors, {{"optimizer", opt->class_name()}, {"names", names}});
  }
  const auto seed = model->seed_generator().state();
  write_text(dir / kState, nlohmann::json{{"epoch", epoch}, {"seed_key", seed.key}, {"seed_counter", seed.counter}}.dump());
}

void BackupAndRestore::on_train_end(const Logs&) {
  // Training finished (not interrupted): the next fit() starts afresh.
  if (!o_.delete_checkpoint) return;
  if (!distribute::detail::is_chief()) return;  // data-parallel: only the chief writes files
  std::error_code ec;
  for (const char* f : {kState, kWeights, kOptimizer}) fs::remove(fs::path(dir_) / f, ec);
  fs::remove(fs::path(dir_), ec);  // only when empty
}

}  // namespace keel::callbacks
