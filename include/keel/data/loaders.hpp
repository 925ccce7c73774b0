#pragma once
// Dataset file loaders. Each checks its files' sizes and headers before trusting them and throws
// keel::IOError naming the file and the byte offset of the problem. Results are CPU tensors.
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::data {

// CIFAR-10 binary version: dir/data_batch_1.bin ... data_batch_5.bin (train) or
// dir/test_batch.bin, each record 1 label byte + 3072 pixel bytes stored channel-planar
// (1024 R, 1024 G, 1024 B, row-major 32x32). dir may also be the folder holding
// cifar-10-batches-bin/. Returns x uint8 [N,32,32,3] (NHWC) and y int64 [N] in 0..9.
std::pair<Tensor, Tensor> load_cifar10(const std::string& dir, bool train);

// One IDX file (plain, or gzip-compressed: detected from its first bytes, not its name):
// big-endian header {0, 0, type, rank} + rank u32 dimensions, then the data. Types 0x08 (uint8),
// 0x09 (int8 -> int32), 0x0B (int16 -> int32), 0x0C (int32), 0x0D (float32), 0x0E (float64).
Tensor read_idx(const std::string& path);
// MNIST / Fashion-MNIST: an images file (magic 0x00000803, uint8 [N,rows,cols]) and its labels
// file (magic 0x00000801, N labels). Returns x uint8 [N,rows,cols] and y int64 [N].
std::pair<Tensor, Tensor> load_idx(const std::string& images, const std::string& labels);
// Fashion-MNIST from a folder of {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; the default
// is where the Debian package dataset-fashion-mnist installs them. 60000 (train) or 10000 images.
std::pair<Tensor, Tensor> load_fashion_mnist(bool train,
                                             const std::string& dir = "/usr/share/datasets/fashion-mnist");

// A column chosen by 0-based position or by its header name.
using CsvColumn = std::variant<int, std::string>;
struct CsvOptions {
  std::vector<CsvColumn> columns = {};  // empty: every column
  bool header = true;                   // the first row names the columns
  char delimiter = ',';
};
// Numeric columns of a CSV file (RFC 4180 quoting; columns not selected may hold any text) as
// float32 [rows, columns]. An empty field reads as NaN; any other non-number is an IOError
// naming the file, line, column and byte offset.
Tensor load_csv(const std::string& path, CsvOptions options = {});

}  // namespace keel::data
