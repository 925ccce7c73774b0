#pragma once
// The files of a saved model and how they reach the disk: every save goes to a temporary name
// beside its target and is renamed (or, for a folder, swapped) into place, so that a process
// killed during a save leaves the previous model whole.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::models::detail {

inline constexpr const char* kConfig = "config.json";
inline constexpr const char* kWeights = "model.safetensors";
inline constexpr const char* kOptimizer = "optimizer.safetensors";
inline constexpr const char* kMetadata = "metadata.json";
inline constexpr int kFormatVersion = 1;

// "<path>.<what>-<pid>-<random>": a name next to path (same filesystem, so rename is atomic) that
// a later save recognises, once this process is gone, as its leftover (io/atomic_file.hpp).
std::string sibling_name(const std::string& path, const char* what);
void fsync_path(const std::string& path, const char* op);
std::string parent_of(const std::string& path);
// Puts the finished folder `tmp` at `path`, atomically where the filesystem allows; refuses to
// replace a folder that is not a saved model (model.save("/home/me") must not wipe it).
void install_directory(const std::string& tmp, const std::string& path);
bool is_keel_file_path(const std::string& path);

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
    std::filesystem::remove_all(path_, ec);  // best effort: a leftover temporary folder harms nothing
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace keel::models::detail
