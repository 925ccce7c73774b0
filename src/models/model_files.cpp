// Atomic model file writing (see model_files.hpp).
#include "models/model_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "io/atomic_file.hpp"

namespace keel::models::detail {

namespace fs = std::filesystem;

namespace {

// Refuses to replace a folder that is not a saved model (model.save("/home/me") must not wipe it).
void check_model_directory(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string n = entry.path().filename().string();
    bool ours = false;
    const auto temp = io::detail::parse_temp_name(n);  // atomic_write leftovers
    for (const char* known : {kConfig, kWeights, kOptimizer, kMetadata})
      ours = ours || n == known || (temp && temp->base == known);
    if (!ours)
      throw IOError(fmt::format("Model.save: {} holds '{}', so it is not a saved keel model; refusing to replace it "
                                "(save to a new path, or remove the folder first)", path, n));
  }
  if (ec) throw IOError(fmt::format("Model.save: cannot list {}: {}", path, ec.message()));
}

}  // namespace

std::string sibling_name(const std::string& path, const char* what) { return io::detail::temp_name(path, what); }

void fsync_path(const std::string& path, const char* op) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IOError(fmt::format("{}: cannot open {}: {}", op, path, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw IOError(fmt::format("{}: cannot flush {}: {}", op, path, std::strerror(err)));
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void install_directory(const std::string& tmp, const std::string& path) {
  const char* op = "Model.save";
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) throw IOError(fmt::format("{}: cannot inspect {}: {}", op, path, std::strerror(errno)));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw IOError(fmt::format("{}: cannot rename {} to {}: {}", op, tmp, path, std::strerror(errno)));
    fsync_path(parent_of(path), op);
    return;
  }
  if (!S_ISDIR(st.st_mode))
    throw IOError(fmt::format("{}: {} exists and is not a folder (a path ending in .keel saves one file)", op, path));
  check_model_directory(path);
  // Swap the two folders in one step: at every instant `path` is a whole model, old or new.
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    fsync_path(parent_of(path), op);
    std::error_code ec;
    fs::remove_all(tmp, ec);  // now the previous model
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    throw IOError(fmt::format("{}: cannot swap {} into {}: {}", op, tmp, path, std::strerror(errno)));
  // Filesystems without RENAME_EXCHANGE: two renames. A crash between them leaves the previous
  // model whole at <path>.old-*, not at path.
  const std::string old = sibling_name(path, "old");
  if (::rename(path.c_str(), old.c_str()) != 0)
    throw IOError(fmt::format("{}: cannot move {} aside: {}", op, path, std::strerror(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), path.c_str());
    throw IOError(fmt::format("{}: cannot rename {} to {}: {}", op, tmp, path, std::strerror(err)));
  }
  fsync_path(parent_of(path), op);
  std::error_code ec;
  fs::remove_all(old, ec);
}

bool is_keel_file_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".keel") == 0;
}

}  // namespace keel::models::detail
