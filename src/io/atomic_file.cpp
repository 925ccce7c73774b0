// Crash-safe writes: temporary names, io::atomic_write, and the removal of temporaries that
// killed processes left behind (see atomic_file.hpp).
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/io/safetensors.hpp"  // io::atomic_write's declaration

namespace keel::io {

namespace detail {

namespace {

namespace fs = std::filesystem;

constexpr const char* kKinds[] = {"tmp", "parts", "old"};

bool all_of(std::string_view s, bool (*ok)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!ok(c)) return false;
  return true;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string temp_name(const std::string& path, const char* kind) {
  std::random_device rd;
  const std::uint64_t r = (std::uint64_t{rd()} << 32) | rd();
  return fmt::format("{}.{}-{}-{:x}", path, kind, ::getpid(), r);
}

std::optional<TempName> parse_temp_name(std::string_view name) {
  // "<base>.<kind>-<pid>-<hex>": neither the pid nor the hex holds a '.', so the last one ends base.
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view suffix = name.substr(dot + 1);
  const std::size_t dash1 = suffix.find('-');
  if (dash1 == std::string_view::npos) return std::nullopt;
  const std::size_t dash2 = suffix.find('-', dash1 + 1);
  if (dash2 == std::string_view::npos) return std::nullopt;
  const std::string_view kind = suffix.substr(0, dash1);
  const std::string_view pid = suffix.substr(dash1 + 1, dash2 - dash1 - 1);
  const std::string_view hex = suffix.substr(dash2 + 1);
  bool known = false;
  for (const char* k : kKinds) known = known || kind == k;
  if (!known || !all_of(pid, is_digit) || pid.size() > 9 || !all_of(hex, is_hex) || hex.size() > 16)
    return std::nullopt;
  TempName out;
  out.base = std::string(name.substr(0, dot));
  out.kind = std::string(kind);
  for (char c : pid) out.pid = out.pid * 10 + (c - '0');  // at most 9 digits: fits pid_t
  if (out.pid <= 0) return std::nullopt;
  return out;
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return true;
  if (::kill(pid, 0) == 0) return true;
  return errno != ESRCH;  // EPERM: it exists, under another user
}

int remove_stale_temporaries_in(const std::string& folder, const std::function<bool(const std::string&)>& ours) {
  std::error_code ec;
  std::vector<std::pair<fs::path, TempName>> stale;
  // Collected first: removing entries while a directory is being read may skip others.
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    auto parsed = parse_temp_name(name);
    if (!parsed || !ours(parsed->base) || process_alive(parsed->pid)) continue;
    stale.emplace_back(it->path(), std::move(*parsed));
  }
  int removed = 0;
  for (const auto& [entry, t] : stale) {
    // A folder moved aside is the previous model until the new one is in place.
    if (t.kind == "old" && !fs::exists(fs::path(folder) / t.base, ec)) continue;
    std::error_code rec;
    if (fs::remove_all(entry, rec) > 0 && !rec) ++removed;
  }
  return removed;
}

int remove_stale_temporaries(const std::string& path) {
  const fs::path p(path);
  const std::string base = p.filename().string();
  if (base.empty()) return 0;
  const std::string folder = p.parent_path().empty() ? std::string(".") : p.parent_path().string();
  return remove_stale_temporaries_in(folder, [&](const std::string& b) { return b == base; });
}

}  // namespace detail

void atomic_write(const std::string& path, const std::string& bytes) {
  // What earlier, killed saves to this path left behind goes first.
  detail::remove_stale_temporaries(path);
  const std::string tmp = detail::temp_name(path, "tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IOError(fmt::format("cannot write {}: {}", tmp, err));
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("cannot flush {}: {}", tmp, err));
  }
  if (::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("cannot flush {}: {}", tmp, err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("cannot rename {} to {}: {}", tmp, path, err));
  }
}

}  // namespace keel::io
