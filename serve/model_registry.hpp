#pragma once
// The served models and their versions. Each model has a base path whose numeric sub-entries
// (DIR/1, DIR/2, ...) are versions, each a model.save output: the folder itself, or a folder
// holding one .keel file. The newest loadable version serves (TF Serving's "latest" policy); a
// poller looks again every file_system_poll_wait_seconds and swaps a newer version in once it
// has loaded (requests that hold the old one finish on it); a failed load keeps the old one and
// is logged, and that version is retried only when its files change.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "batcher.hpp"
#include "keel/models/model.hpp"
#include "model_config.hpp"
#include "signature.hpp"

namespace keel::serve {

class Metrics;

// One loaded version: the model, its signature and the way predictions reach it (a batcher, or
// a lock: keel models do not promise that concurrent predict calls on one model are safe).
class LoadedVersion {
 public:
  LoadedVersion(std::string model_name, std::int64_t version, std::shared_ptr<models::Model> model,
                std::optional<BatchingOptions> batching, Metrics* metrics);
  std::int64_t version() const { return version_; }
  const Signature& signature() const { return signature_; }
  std::vector<Tensor> predict(const std::vector<Tensor>& inputs);

 private:
  std::vector<Tensor> predict_locked(const std::vector<Tensor>& inputs);
  std::string model_name_;
  std::int64_t version_;
  std::shared_ptr<models::Model> model_;
  Signature signature_;
  std::mutex predict_mu_;
  std::unique_ptr<Batcher> batcher_;  // last: its thread calls predict_locked
};

// What GET /v1/models/NAME lists for a version: TF Serving's ModelVersionStatus.
struct VersionStatus {
  std::int64_t version = 0;
  std::string state;               // "AVAILABLE", or "END" once unloaded or after a failed load
  std::string error_code = "OK";   // "OK" or "UNKNOWN" (the load failed)
  std::string error_message;
};

class ServedModel {
 public:
  ServedModel(ModelSpec spec, std::optional<BatchingOptions> batching, Metrics* metrics);
  const std::string& name() const { return spec_.name; }
  // The version to predict with: the served one (nullopt) or that number; null if none.
  std::shared_ptr<LoadedVersion> get(std::optional<std::int64_t> version) const;
  std::vector<VersionStatus> statuses() const;  // newest first
  // Scans the base path and loads (then swaps in) a newer version: what the poller runs.
  void poll();

 private:
  std::string version_path(const std::string& dir) const;
  ModelSpec spec_;
  std::optional<BatchingOptions> batching_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<LoadedVersion> current_;
  std::map<std::int64_t, VersionStatus> statuses_;
  std::map<std::int64_t, std::string> failed_stamp_;  // version -> the files' stamp when its load failed
  std::string last_scan_error_;
};

class ModelRegistry {
 public:
  ModelRegistry(const std::vector<ModelSpec>& specs, std::optional<BatchingOptions> batching, Metrics* metrics);
  ~ModelRegistry();
  ServedModel* find(const std::string& name) const;  // null when no such model
  void poll_all();
  // Polls every `seconds` (0: never again) on a thread of its own until stop().
  void start_polling(int seconds);
  void stop();

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread poller_;
};

// The numeric entries of a base path (versions), ascending; IOError if it cannot be listed.
std::vector<std::int64_t> list_versions(const std::string& base_path);

}  // namespace keel::serve
