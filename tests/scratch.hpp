#pragma once
// Shared by the file tests: a scratch folder per test (removed with everything in it at the end)
// and whole-file reads and writes for corrupting files byte by byte.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

namespace keel_test {

struct Scratch {
  std::string dir;
  explicit Scratch(const std::string& name) {
    namespace fs = std::filesystem;
    dir = (fs::temp_directory_path() / ("keel_test_" + std::to_string(::getpid()) + "_" + name)).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string operator/(const std::string& f) const { return dir + "/" + f; }
};

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace keel_test
