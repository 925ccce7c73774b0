// Models, versions, loading and the version poller (see model_registry.hpp).
#include "model_registry.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>

#include <fmt/core.h>

#include "log.hpp"
#include "metrics.hpp"

namespace keel::serve {

namespace fs = std::filesystem;

namespace {

// Version names are plain decimal numbers (TF Serving's rule): temporaries a writer leaves
// beside them ("2.tmp-...") are not versions.
std::optional<std::int64_t> version_number(const std::string& name) {
  if (name.empty() || name.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (ec != std::errc() || p != name.data() + name.size() || v < 0) return std::nullopt;
  return v;
}

// The newest modification time and the total size of a version's files: a changed stamp means
// the files changed since a failed load, so it is worth another try.
std::string files_stamp(const fs::path& p) {
  std::error_code ec;
  std::int64_t newest = 0;
  std::uintmax_t bytes = 0, files = 0;
  const auto visit = [&](const fs::path& f) {
    const auto t = fs::last_write_time(f, ec);
    if (!ec) newest = std::max<std::int64_t>(newest, t.time_since_epoch().count());
    if (fs::is_regular_file(f, ec)) bytes += fs::file_size(f, ec), ++files;
  };
  visit(p);
  if (fs::is_directory(p, ec))
    for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      visit(it->path());
  return fmt::format("{}:{}:{}", newest, bytes, files);
}

}  // namespace

std::vector<std::int64_t> list_versions(const std::string& base_path) {
  std::error_code ec;
  std::vector<std::int64_t> out;
  fs::directory_iterator it(base_path, ec);
  if (ec) throw IOError(fmt::format("{}: cannot list the model base path: {}", base_path, ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw IOError(fmt::format("{}: listing failed: {}", base_path, ec.message()));
    if (auto v = version_number(it->path().filename().string())) out.push_back(*v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- LoadedVersion ----------------------------------------------------------------------------

LoadedVersion::LoadedVersion(std::string model_name, std::int64_t version, std::shared_ptr<models::Model> model,
                             std::optional<BatchingOptions> batching, Metrics* metrics)
    : model_name_(std::move(model_name)), version_(version), model_(std::move(model)) {
  signature_ = signature_of(*model_);  // also the warm-up call
  if (batching) {
    batcher_ = std::make_unique<Batcher>([this](const std::vector<Tensor>& x) { return predict_locked(x); }, *batching,
                                         [metrics, name = model_name_](std::size_t requests, std::int64_t) {
                                           if (metrics) metrics->record_batch(name, requests);
                                         });
  }
}

std::vector<Tensor> LoadedVersion::predict_locked(const std::vector<Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(predict_mu_);
  return model_->predict_on_batch(models::ModelData(inputs));
}

std::vector<Tensor> LoadedVersion::predict(const std::vector<Tensor>& inputs) {
  return batcher_ ? batcher_->run(inputs) : predict_locked(inputs);
}

// ---- ServedModel ------------------------------------------------------------------------------

ServedModel::ServedModel(ModelSpec spec, std::optional<BatchingOptions> batching, Metrics* metrics)
    : spec_(std::move(spec)), batching_(batching), metrics_(metrics) {}

std::shared_ptr<LoadedVersion> ServedModel::get(std::optional<std::int64_t> version) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!current_ || (version && *version != current_->version())) return nullptr;
  return current_;
}

std::vector<VersionStatus> ServedModel::statuses() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<VersionStatus> out;
  for (auto it = statuses_.rbegin(); it != statuses_.rend(); ++it) out.push_back(it->second);
  return out;
}

std::string ServedModel::version_path(const std::string& dir) const {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "config.json", ec)) return dir;
  std::vector<fs::path> keel_files;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".keel") keel_files.push_back(it->path());
  if (keel_files.size() == 1) return keel_files[0].string();
  if (keel_files.size() > 1) throw IOError(fmt::format("{}: several .keel files; a version holds one model", dir));
  return dir;  // load_model says what is missing
}

void ServedModel::poll() {
  std::vector<std::int64_t> versions;
  try {
    versions = list_versions(spec_.base_path);
    last_scan_error_.clear();
  } catch (const Error& e) {
    if (last_scan_error_ != e.what()) log_line(fmt::format("{}: {}", spec_.name, e.what()));
    last_scan_error_ = e.what();
    return;
  }
  if (versions.empty()) {
    if (last_scan_error_ != "none") log_line(fmt::format("{}: no versions of servable found under base path {}", spec_.name,
                                                         spec_.base_path));
    last_scan_error_ = "none";
    return;
  }
  std::int64_t served = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_) served = current_->version();
  }
  // Newest first; stop at the version served (nothing newer loads: keep it).
  for (auto it = versions.rbegin(); it != versions.rend() && *it > served; ++it) {
    const std::int64_t v = *it;
    const std::string dir = (fs::path(spec_.base_path) / std::to_string(v)).string();
    const std::string stamp = files_stamp(dir);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto f = failed_stamp_.find(v);
      if (f != failed_stamp_.end() && f->second == stamp) continue;  // unchanged since it failed
    }
    try {
      auto model = models::load_model(version_path(dir), /*compile=*/false);
      auto loaded = std::make_shared<LoadedVersion>(spec_.name, v, std::move(model), batching_, metrics_);
      std::shared_ptr<LoadedVersion> old;
      {
        std::lock_guard<std::mutex> lock(mu_);
        old = std::move(current_);
        current_ = loaded;
        if (old) statuses_[old->version()] = {old->version(), "END", "OK", ""};
        statuses_[v] = {v, "AVAILABLE", "OK", ""};
        failed_stamp_.erase(v);
      }
      if (metrics_) metrics_->set_model_version(spec_.name, v);
      log_line(fmt::format("{}: version {} loaded from {} and serving{}", spec_.name, v, dir,
                           old ? fmt::format(" (replacing version {})", old->version()) : ""));
      return;  // `old` is released here; requests still holding it finish on it
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      failed_stamp_[v] = stamp;
      statuses_[v] = {v, "END", "UNKNOWN", e.what()};
      log_line(fmt::format("{}: loading version {} from {} failed, {}: {}", spec_.name, v, dir,
                           current_ ? fmt::format("version {} keeps serving", current_->version()) : "nothing serves yet",
                           e.what()));
    }
  }
}

// ---- ModelRegistry ----------------------------------------------------------------------------

ModelRegistry::ModelRegistry(const std::vector<ModelSpec>& specs, std::optional<BatchingOptions> batching,
                             Metrics* metrics) {
  for (const auto& s : specs) models_.push_back(std::make_unique<ServedModel>(s, batching, metrics));
}

ModelRegistry::~ModelRegistry() { stop(); }

ServedModel* ModelRegistry::find(const std::string& name) const {
  for (const auto& m : models_)
    if (m->name() == name) return m.get();
  return nullptr;
}

void ModelRegistry::poll_all() {
  for (auto& m : models_) m->poll();
}

void ModelRegistry::start_polling(int seconds) {
  if (seconds <= 0) return;
  poller_ = std::thread([this, seconds] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return stop_; })) {
      lock.unlock();
      poll_all();
      lock.lock();
    }
  });
}

void ModelRegistry::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

}  // namespace keel::serve
