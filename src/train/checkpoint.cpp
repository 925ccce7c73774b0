// train::Checkpoint and train::CheckpointManager (see the header for the file layout).
#include "keel/train/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <fmt/core.h>

#include "io/atomic_file.hpp"
#include "io/safetensors_file.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "keel/optimizers/optimizer.hpp"
#include "train/optimizer_state.hpp"

namespace keel::train {

namespace {

namespace fs = std::filesystem;

constexpr const char* kModelPrefix = "model/";
constexpr const char* kOptimizerPrefix = "optimizer/";
constexpr const char* kEpoch = "checkpoint/epoch";
constexpr const char* kSaveCounter = "checkpoint/save_counter";
constexpr const char* kRng = "checkpoint/rng_state";
// The model's own stream (Model::seed_generator), which fit() draws from.
constexpr const char* kModelRng = "checkpoint/model_rng_state";
constexpr const char* kFormat = "keel.checkpoint";

[[noreturn]] void fail(const std::string& path, const std::string& field, const std::string& what) {
  throw IOError(fmt::format("Checkpoint.restore: {}: {}: {}", path, field, what));
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// An int64 scalar tensor of the file (epoch, save counter).
std::int64_t scalar_of(const std::map<std::string, Tensor>& t, const char* key, const std::string& path) {
  auto it = t.find(key);
  if (it == t.end()) fail(path, fmt::format("tensor '{}'", key), "missing: not a checkpoint written by keel");
  if (it->second.dtype() != DType::int64 || it->second.rank() != 0)
    fail(path, fmt::format("tensor '{}'", key),
         fmt::format("must be an int64 scalar, got {} {}", keel::name(it->second.dtype()), it->second.shape().to_string()));
  return it->second.item<std::int64_t>();
}

// The number N of "<name>-<N>.safetensors" exactly: atomic_write's temporaries
// ("....safetensors.tmp-...") and other files are not checkpoints.
std::optional<std::int64_t> is_checkpoint_file(const std::string& f, const std::string& name) {
  const std::string prefix = name + "-", suffix = ".safetensors";
  if (f.size() <= prefix.size() + suffix.size() || f.compare(0, prefix.size(), prefix) != 0 ||
      f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string digits = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(digits);
}

}  // namespace

// ---- Checkpoint ------------------------------------------------------------------------------

Checkpoint::Checkpoint(models::Model& model) : model_(&model) {}

Checkpoint::Checkpoint(models::Model& model, optimizers::Optimizer& optimizer) : model_(&model), optimizer_(&optimizer) {}

Checkpoint::Checkpoint(std::shared_ptr<models::Model> model, std::shared_ptr<optimizers::Optimizer> optimizer)
    : owned_model_(std::move(model)), owned_optimizer_(std::move(optimizer)) {
  if (!owned_model_) throw ValueError("Checkpoint: the model is null");
  model_ = owned_model_.get();
  optimizer_ = owned_optimizer_.get();
}

optimizers::Optimizer* Checkpoint::optimizer() const { return optimizer_ ? optimizer_ : model_->optimizer().get(); }

void Checkpoint::set_epoch(int epoch) {
  if (epoch < 0) throw ValueError(fmt::format("Checkpoint.set_epoch: the epoch must be >= 0, got {}", epoch));
  epoch_ = epoch;
}

void Checkpoint::write(const std::string& path) {
  std::map<std::string, Tensor> tensors;
  for (Variable* v : model_->weights())
    if (!tensors.emplace(kModelPrefix + v->name(), v->peek()).second)
      throw ValueError(fmt::format("Checkpoint.write: two weights of {} are named '{}'; give the layers unique names",
                                   model_->name(), v->name()));
  std::string optimizer_class;
  if (optimizers::Optimizer* opt = optimizer()) {
    optimizer_class = opt->class_name();
    for (const auto& [vname, v] : opt->variables()) tensors.emplace(kOptimizerPrefix + vname, v->peek());
  }
  const random::PhiloxState rng = random::get_state();
  // The generator's two 64-bit words, stored bit for bit in an int64 pair.
  tensors.emplace(kRng, constant(std::vector<std::int64_t>{static_cast<std::int64_t>(rng.key),
                                                           static_cast<std::int64_t>(rng.counter)},
                                 Shape{2}));
  const random::PhiloxState model_rng = model_->seed_generator().state();
  tensors.emplace(kModelRng, constant(std::vector<std::int64_t>{static_cast<std::int64_t>(model_rng.key),
                                                                static_cast<std::int64_t>(model_rng.counter)},
                                      Shape{2}));
  tensors.emplace(kEpoch, constant(std::vector<std::int64_t>{epoch_}, Shape()));
  tensors.emplace(kSaveCounter, constant(std::vector<std::int64_t>{save_counter_}, Shape()));
  const std::string built = optimizer() ? train::detail::optimizer_built_value(*optimizer()) : "false";
  // The weights' order, so that a model built the same way but with other layer names (made
  // after other layers in the restoring process: "dense_4" instead of "dense") restores by position.
  std::string order;
  for (Variable* v : model_->weights()) order += v->name() + "\n";
  io::save_safetensors(path, tensors,
                       {{"format", kFormat}, {"format_version", "1"}, {"model", model_->name()},
                        {"optimizer", optimizer_class}, {train::detail::kOptimizerBuiltKey, built},
                        {"weight_order", order}});
}

std::string Checkpoint::save(const std::string& file_prefix) {
  const std::int64_t n = save_counter_ + 1;
  const std::string path = fmt::format("{}-{}.safetensors", file_prefix, n);
  const std::int64_t before = save_counter_;
  save_counter_ = n;  // recorded in the file, so a restored run keeps counting from here
  try {
    write(path);
  } catch (...) {
    save_counter_ = before;
    throw;
  }
  return path;
}

void Checkpoint::restore(const std::string& path) { restore(path, RestoreOptions{}); }

void Checkpoint::restore(const std::string& path, const RestoreOptions& options) {
  if (path.empty()) throw ValueError("Checkpoint.restore: empty path (no checkpoint to restore?)");
  const io::detail::SafetensorsFile file = io::detail::read_safetensors(path);  // validates the file completely
  const auto& tensors = file.tensors;
  const auto& meta = file.metadata;
  if (auto it = meta.find("format"); it == meta.end() || it->second != kFormat)
    fail(path, "__metadata__.format", fmt::format("is not \"{}\": not a checkpoint written by keel", kFormat));

  // Check everything before assigning anything, so a mismatched file changes nothing.
  const auto vars = model_->weights();
  if (vars.empty())
    throw ValueError(fmt::format("Checkpoint.restore: {} has no weights yet; build it (call it once, or give it an "
                                 "InputLayer) before restoring", model_->name()));
  // The file's name for each model weight: the same name, or the one at the same position.
  std::map<std::string, std::string> saved_name;  // model weight name -> name in the file
  bool by_name = true;
  for (Variable* v : vars) by_name = by_name && tensors.count(kModelPrefix + v->name()) != 0;
  if (by_name) {
    for (Variable* v : vars) saved_name[v->name()] = v->name();
  } else {
    std::vector<std::string> order;
    if (auto it = meta.find("weight_order"); it != meta.end()) {
      std::string line;
      for (char ch : it->second) {
        if (ch != '\n') {
          line += ch;
        } else if (!line.empty()) {
          order.push_back(line);
          line.clear();
        }
      }
    }
    if (order.size() != vars.size()) {
      for (Variable* v : vars)
        if (!tensors.count(kModelPrefix + v->name()))
          fail(path, fmt::format("tensor '{}{}'", kModelPrefix, v->name()),
               fmt::format("missing, and the file's {} model weights do not match the model's {} by position either",
                           order.size(), vars.size()));
    }
    for (std::size_t i = 0; i < vars.size(); ++i) saved_name[vars[i]->name()] = order[i];
  }
  // An optimizer slot "<weight>/<slot>" of the file, under the model's weight names.
  std::map<std::string, std::string> model_name;  // name in the file -> model weight name
  for (const auto& [m, f] : saved_name) model_name[f] = m;
  const auto translate = [&](const std::string& slot) -> std::string {
    std::size_t cut = slot.rfind('/');
    while (cut != std::string::npos && cut > 0) {
      auto it = model_name.find(slot.substr(0, cut));
      if (it != model_name.end()) return it->second + slot.substr(cut);
      cut = slot.rfind('/', cut - 1);
    }
    return slot;  // "iteration", "learning_rate" and optimizer-wide state
  };

  std::vector<std::pair<Variable*, const Tensor*>> assignments;
  std::set<std::string> used;
  const auto match = [&](Variable* v, const std::string& key) {
    auto it = tensors.find(key);
    if (it == tensors.end()) fail(path, fmt::format("tensor '{}'", key), "missing: the checkpoint does not match the model");
    if (it->second.shape() != v->shape() || it->second.dtype() != v->dtype())
      fail(path, fmt::format("tensor '{}'", key),
           fmt::format("is {} {}, but the variable is {} {}", keel::name(it->second.dtype()), it->second.shape().to_string(),
                       keel::name(v->dtype()), v->shape().to_string()));
    assignments.emplace_back(v, &it->second);
    used.insert(key);
  };
  for (Variable* v : vars) match(v, kModelPrefix + saved_name.at(v->name()));

  // Optimizer state: the file's "optimizer/..." tensors, or none although it was written with an
  // optimizer (its metadata names the class) — then everything the optimizer needs is missing.
  std::vector<train::detail::SavedState> saved;
  for (const auto& [key, t] : tensors)
    if (starts_with(key, kOptimizerPrefix)) saved.push_back({key, translate(key.substr(std::strlen(kOptimizerPrefix))), &t});
  const auto saved_class = meta.find("optimizer");
  const bool has_optimizer_state = !saved.empty() || (saved_class != meta.end() && !saved_class->second.empty());
  optimizers::Optimizer* opt = has_optimizer_state ? optimizer() : nullptr;
  if (has_optimizer_state && !opt && !options.allow_partial)
    fail(path, "optimizer", "the checkpoint holds optimizer state, but the model has no optimizer: compile it (or give "
                            "the Checkpoint an optimizer) before restoring, or restore with {.allow_partial = true} to "
                            "skip that state");
  if (opt) {
    // Slots exist once the optimizer has seen the variables; Keras builds it on the trainable weights.
    opt->build(model_->trainable_weights());
    const auto state = train::detail::match_optimizer_state(
        *opt, saved, meta, kOptimizerPrefix, options.allow_partial,
        [&](const std::string& field, const std::string& what) { fail(path, field, what); });
    assignments.insert(assignments.end(), state.begin(), state.end());
  }
  for (const auto& [key, t] : tensors)
    if (starts_with(key, kModelPrefix) && !used.count(key) && !options.allow_partial)
      fail(path, fmt::format("tensor '{}'", key), "the model has no such weight: the checkpoint does not match it");

  const std::int64_t epoch = scalar_of(tensors, kEpoch, path);
  const std::int64_t counter = scalar_of(tensors, kSaveCounter, path);
  if (epoch < 0 || epoch > std::numeric_limits<int>::max()) fail(path, fmt::format("tensor '{}'", kEpoch), fmt::format("bad epoch {}", epoch));
  if (counter < 0) fail(path, fmt::format("tensor '{}'", kSaveCounter), fmt::format("bad save counter {}", counter));
  auto rng = tensors.find(kRng);
  if (rng == tensors.end()) fail(path, fmt::format("tensor '{}'", kRng), "missing: not a checkpoint written by keel");
  if (rng->second.dtype() != DType::int64 || rng->second.shape() != Shape{2})
    fail(path, fmt::format("tensor '{}'", kRng), "must be int64 [2] (key, counter)");
  const auto words = rng->second.to_vector<std::int64_t>();
  std::vector<std::int64_t> model_words;  // absent in checkpoints written before models had streams
  if (auto m = tensors.find(kModelRng); m != tensors.end()) {
    if (m->second.dtype() != DType::int64 || m->second.shape() != Shape{2})
      fail(path, fmt::format("tensor '{}'", kModelRng), "must be int64 [2] (key, counter)");
    model_words = m->second.to_vector<std::int64_t>();
  }

  for (const auto& [v, t] : assignments) v->assign(*t);
  epoch_ = static_cast<int>(epoch);
  save_counter_ = counter;
  random::set_state({static_cast<std::uint64_t>(words[0]), static_cast<std::uint64_t>(words[1])});
  if (!model_words.empty())
    model_->seed_generator().set_state(
        {static_cast<std::uint64_t>(model_words[0]), static_cast<std::uint64_t>(model_words[1])});
}

// ---- CheckpointManager -----------------------------------------------------------------------

CheckpointManager::CheckpointManager(Checkpoint& checkpoint, std::string directory, std::optional<int> max_to_keep,
                                     std::string checkpoint_name)
    : checkpoint_(checkpoint), directory_(std::move(directory)), max_to_keep_(max_to_keep), name_(std::move(checkpoint_name)) {
  if (directory_.empty()) throw ValueError("CheckpointManager: the directory is empty");
  if (max_to_keep_ && *max_to_keep_ < 1)
    throw ValueError(fmt::format("CheckpointManager: max_to_keep must be at least 1 (or nullopt to keep all), got {}",
                                 *max_to_keep_));
  if (name_.empty() || name_.find('/') != std::string::npos)
    throw ValueError(fmt::format("CheckpointManager: bad checkpoint_name '{}'", name_));
  remove_stale_temporaries();  // what runs killed during a save left (best effort)
}

std::vector<CheckpointManager::Found> CheckpointManager::list() const {
  std::vector<Found> out;
  std::error_code ec;
  if (!fs::is_directory(directory_, ec)) return out;
  for (const auto& entry : fs::directory_iterator(directory_, ec)) {
    const std::string f = entry.path().filename().string();
    if (const auto number = is_checkpoint_file(f, name_)) out.push_back({*number, (fs::path(directory_) / f).string()});
  }
  if (ec) throw IOError(fmt::format("CheckpointManager: cannot list {}: {}", directory_, ec.message()));
  std::sort(out.begin(), out.end(), [](const Found& a, const Found& b) { return a.number < b.number; });
  return out;
}

std::string CheckpointManager::save(std::optional<std::int64_t> checkpoint_number) {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) throw IOError(fmt::format("CheckpointManager.save: cannot create {}: {}", directory_, ec.message()));
  remove_stale_temporaries();
  auto found = list();
  std::int64_t n = checkpoint_.save_counter() + 1;
  if (!found.empty()) n = std::max(n, found.back().number + 1);
  if (checkpoint_number) {
    if (*checkpoint_number < 0)
      throw ValueError(fmt::format("CheckpointManager.save: negative checkpoint_number {}", *checkpoint_number));
    n = *checkpoint_number;
  }
  const std::string path = (fs::path(directory_) / fmt::format("{}-{}.safetensors", name_, n)).string();
  const std::int64_t before = checkpoint_.save_counter_;
  checkpoint_.save_counter_ = std::max(before, n);
  try {
    checkpoint_.write(path);
  } catch (...) {
    checkpoint_.save_counter_ = before;
    throw;
  }
  // Oldest first out, once the new one is safely on disk.
  if (max_to_keep_) {
    found = list();
    const auto keep = static_cast<std::size_t>(*max_to_keep_);
    for (std::size_t i = 0; i + keep < found.size(); ++i)
      if (found[i].path != path) std::remove(found[i].path.c_str());
  }
  return path;
}

std::string CheckpointManager::latest_checkpoint() const {
  const auto found = list();
  return found.empty() ? std::string() : found.back().path;
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::vector<std::string> out;
  for (const auto& f : list()) out.push_back(f.path);
  return out;
}

bool CheckpointManager::restore_latest() { return restore_latest(RestoreOptions{}); }

bool CheckpointManager::restore_latest(const RestoreOptions& options) {
  const std::string latest = latest_checkpoint();
  if (latest.empty()) return false;
  checkpoint_.restore(latest, options);
  return true;
}

int CheckpointManager::remove_stale_temporaries() const {
  // The temporaries of "<name>-<N>.safetensors" only: the directory may hold other files.
  return io::detail::remove_stale_temporaries_in(directory_, [&](const std::string& base) {
    return is_checkpoint_file(base, name_).has_value();
  });
}

namespace {
// Saves after every epoch, recording the number of finished epochs.
class EpochSaver : public callbacks::Callback {
 public:
  explicit EpochSaver(CheckpointManager& manager) : manager_(manager) {}
  void on_epoch_end(int epoch, const callbacks::Logs&) override {
    manager_.checkpoint().set_epoch(epoch + 1);
    manager_.save();
  }

 private:
  CheckpointManager& manager_;
};
}  // namespace

std::shared_ptr<callbacks::Callback> CheckpointManager::callback() { return std::make_shared<EpochSaver>(*this); }

}  // namespace keel::train
