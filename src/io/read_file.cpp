#include "io/read_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::io::detail {

std::string read_file(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open {}: {}", op, path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw IOError(fmt::format("{}: cannot read the size of {}", op, path));
  in.seekg(0);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size)) throw IOError(fmt::format("{}: cannot read {}", op, path));
  return bytes;
}

}  // namespace keel::io::detail
