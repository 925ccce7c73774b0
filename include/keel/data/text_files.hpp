#pragma once
// Text files: text_dataset_from_directory (after keras.utils.text_dataset_from_directory).
//
// keel tensors hold no strings, so the texts of a batch travel as a std::vector<std::string>
// beside the labels tensor: each element is a TextBatch (texts, labels). A TextVectorization in
// a map turns it into tensors for fit:
//
//   auto train = data::text_dataset_from_directory(dir, {.batch_size = 32});
//   vectorize.adapt(train.dataset);
//   auto ds = train.dataset.map([&](const std::vector<std::string>& t, const Tensor& y) {
//     return std::pair{vectorize(t), y};
//   });
//
// Dataset::batch/padded_batch need tensor elements, so the batching (batch_size) happens here.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keel/data/dataset.hpp"
#include "keel/data/image_files.hpp"  // DirectoryLabels, shared with image_dataset_from_directory

namespace keel::data {

// Texts (the files' contents, bytes as stored) and their labels: int32 [batch] ("int"), float32
// one-hot [batch, classes] ("categorical"), float32 [batch, 1] ("binary"), or an undefined
// Tensor with label_mode "" (Keras' None: texts only).
using TextBatch = std::pair<std::vector<std::string>, Tensor>;

struct TextDatasetOptions {
  DirectoryLabels labels = "inferred";  // "inferred", explicit integer labels, or "" (None: no labels)
  std::string label_mode = "int";       // "int", "categorical", "binary" or "" (None)
  std::vector<std::string> class_names = {};  // the classes to use, in this order (default: every subdirectory)
  std::int64_t batch_size = 32;               // 0: no batching (each element holds one text and a scalar label)
  std::optional<std::int64_t> max_length = std::nullopt;  // texts truncated to this many bytes
  bool shuffle = true;
  std::optional<std::uint64_t> seed = std::nullopt;
  double validation_split = 0;  // fraction in (0, 1) held out, from the end of the (shuffled) file list
  std::string subset = "";      // "training", "validation" or "both" when validation_split is set
  bool follow_links = false;
};

// The dataset, the class names and the files in dataset order (before the per-epoch shuffle of
// the elements). With subset "both", `dataset` is the training part and `validation` the other.
struct TextDirectoryDataset {
  Dataset<TextBatch> dataset;
  std::vector<std::string> class_names;
  std::vector<std::string> file_paths;
  Dataset<TextBatch> validation;
  std::vector<std::string> validation_file_paths;
};

// Keras' rules: with labels "inferred", class i is the i-th subdirectory of `directory` in
// alphanumeric order (hidden ones skipped) and its texts are the .txt files anywhere below it,
// directories and files in alphanumeric order; files directly in `directory` are not used.
// shuffle permutes the file list once (seeded; keel's Philox, so not NumPy's order) and the
// elements again each epoch (a buffer of 8 batches); validation_split with shuffle needs a seed,
// so both subsets see the same order. Files are read when their batch is produced; one that
// cannot be read is an IOError naming it.
TextDirectoryDataset text_dataset_from_directory(const std::string& directory, const TextDatasetOptions& options = {});

}  // namespace keel::data
