#pragma once
// What the libFuzzer targets share. keel's readers take paths, so each input is written to a
// scratch file of this process and read back through the public reader. A reader may throw
// keel::Error (that is how it rejects a bad file); anything else that escapes (another exception,
// a crash, a sanitizer report, a leak) is a failure that libFuzzer reports with the input.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <keel/keel.hpp>

namespace keel_fuzz {

// A private folder for this fuzzing process (removed at exit).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("keel_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("keel_fuzz_" + std::to_string(::getpid())),
                                  ec);
    });
    return d.string();
  }();
  return dir;
}

inline std::string scratch(const std::string& name) { return scratch_dir() + "/" + name; }

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();  // the harness itself is broken: not a finding about keel
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// Runs `read`, accepting keel::Error as the reader's way of saying no.
template <class F>
void expect_keel_errors_only(F&& read) {
  try {
    read();
  } catch (const keel::Error&) {
  }
}

}  // namespace keel_fuzz
