// TFRecord framing and the CRC-32C it checks with.
#include "summary/record_writer.hpp"

#include <sys/stat.h>

#include <array>
#include <cstring>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::summary::detail {

std::uint32_t crc32c(const char* data, std::size_t n) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // reflected 0x1EDC6F41
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<unsigned char>(data[i])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const char* data, std::size_t n) {
  const std::uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;  // TensorFlow's mask (lib/hash/crc32c.h)
}

std::string tfrecord(const std::string& data) {
  auto put = [](std::string& out, auto v) {
    char b[sizeof(v)];
    std::memcpy(b, &v, sizeof(v));
    out.append(b, sizeof(v));
  };
  std::string frame;
  put(frame, static_cast<std::uint64_t>(data.size()));
  put(frame, masked_crc32c(frame.data(), 8));
  frame += data;
  put(frame, masked_crc32c(data.data(), data.size()));
  return frame;
}

void make_dirs(const std::string& dir, const char* what) {
  std::string partial;
  for (std::size_t i = 0; i <= dir.size(); ++i) {
    if ((i == dir.size() || dir[i] == '/') && !partial.empty()) ::mkdir(partial.c_str(), 0755);
    if (i < dir.size()) partial += dir[i];
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw IOError(fmt::format("{}: cannot create the directory {}", what, dir));
}

}  // namespace keel::summary::detail
