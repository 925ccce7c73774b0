#pragma once
// Reading TensorBoard event files back in the tests that write them: every TFRecord frame's
// masked CRC-32C checked, every record parsed as TensorBoard's Event proto.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "summary/record_writer.hpp"
#include "tensorboard/compat/proto/event.pb.h"

namespace keel_test {

// Every Event of an event file, the frames' CRCs checked on the way.
inline std::vector<tensorboard::Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<tensorboard::Event> events;
  std::size_t pos = 0;
  while (pos < blob.size()) {
    REQUIRE(pos + 12 <= blob.size());
    std::uint64_t len = 0;
    std::uint32_t len_crc = 0, data_crc = 0;
    std::memcpy(&len, blob.data() + pos, 8);
    std::memcpy(&len_crc, blob.data() + pos + 8, 4);
    CHECK(len_crc == keel::summary::detail::masked_crc32c(blob.data() + pos, 8));
    REQUIRE(pos + 16 + len <= blob.size());
    std::memcpy(&data_crc, blob.data() + pos + 12 + len, 4);
    CHECK(data_crc == keel::summary::detail::masked_crc32c(blob.data() + pos + 12, len));
    tensorboard::Event e;
    REQUIRE(e.ParseFromArray(blob.data() + pos + 12, static_cast<int>(len)));
    events.push_back(e);
    pos += 16 + len;
  }
  return events;
}


// The one events.out.tfevents.* file in `dir` (REQUIREd to be exactly one).
inline std::string event_file(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) found.push_back(e.path().string());
  REQUIRE(found.size() == 1);
  return found[0];
}

}  // namespace keel_test
