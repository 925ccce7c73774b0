#pragma once
// TFRecord framing, shared by every TensorBoard file keel writes: each record is
//   uint64 length, uint32 masked_crc32c(length bytes), data, uint32 masked_crc32c(data)
// (little-endian), with CRC-32C (Castagnoli) masked as TensorFlow masks it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace keel::summary::detail {

std::uint32_t crc32c(const char* data, std::size_t n);
std::uint32_t masked_crc32c(const char* data, std::size_t n);
// The framed bytes of one record.
std::string tfrecord(const std::string& data);
// mkdir -p; IOError naming `what` and the directory when it cannot be made.
void make_dirs(const std::string& dir, const char* what);

}  // namespace keel::summary::detail
