#pragma once
// What image_dataset_from_directory and text_dataset_from_directory share: Keras' file indexing
// (keras/src/utils/dataset_utils.py index_directory and iter_valid_files), the label tensors, the
// checks of validation_split/subset/seed, the seeded shuffle of the file list and the split.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"
#include "keel/data/image_files.hpp"

namespace keel::data::detail {

// One directory's files in Keras' order, with a label per file (all 0 when unlabelled).
struct DirectoryIndex {
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  std::vector<std::string> class_names;
};

struct IndexRequest {
  const char* op;                 // for messages: "image_dataset_from_directory"
  const char* kind;               // "image" / "text"
  const char* formats;            // "allowed formats: .jpeg, .jpg, .png"
  bool (*accept)(const std::string& lower_case_name);
  const DirectoryLabels& labels;  // mode "inferred", "explicit" or "" (none)
  const std::vector<std::string>& class_names;
  const std::string& label_mode;  // "int", "categorical", "binary" (or "" with no labels)
  bool follow_links;
};

// Keras' rules: with labels "inferred", class i is the i-th subdirectory in alphanumeric order
// (hidden ones skipped; class_names picks and orders them) and its files are those anywhere below
// it; otherwise every accepted file below `directory`, with explicit labels one per file. Checks
// the labels against the classes and label_mode; no files is a ValueError.
DirectoryIndex index_directory(const std::string& directory, const IndexRequest& request);

// The labels as a dataset yields them: int32 [n], float32 one-hot [n, classes] or float32 [n, 1].
Tensor label_tensor(const std::vector<std::int64_t>& labels, const std::string& mode, std::int64_t classes);

// Keras' check_validation_split_arg, and the seed that keeps shuffled subsets disjoint.
void check_split_options(const char* op, double validation_split, const std::string& subset, bool shuffle,
                         const std::optional<std::uint64_t>& seed);

// One seeded permutation of the files and their labels together (`stream` tells the users apart).
void shuffle_index(DirectoryIndex& index, const std::optional<std::uint64_t>& seed, std::uint32_t stream);

// The split: the last validation_split of the list is the validation subset. Calls
// make(paths, labels) for each subset wanted and stores the results and paths in `result`, a
// struct with dataset/file_paths/validation/validation_file_paths (ImageDirectoryDataset, ...).
template <class Result, class Make>
void split_subsets(const char* op, const DirectoryIndex& index, double validation_split, const std::string& subset,
                   Result& result, const Make& make) {
  const auto n = static_cast<std::int64_t>(index.paths.size());
  const auto n_val = static_cast<std::int64_t>(validation_split * static_cast<double>(n));
  const auto part = [&](std::int64_t begin, std::int64_t end, std::vector<std::string>& files) {
    files.assign(index.paths.begin() + begin, index.paths.begin() + end);
    const std::vector<std::int64_t> l(index.labels.begin() + begin, index.labels.begin() + end);
    if (files.empty())
      throw ValueError(fmt::format("{}: the {} subset of {} files is empty (validation_split {})", op,
                                   begin == 0 ? "training" : "validation", n, validation_split));
    return make(files, l);
  };
  if (subset.empty()) {
    result.dataset = part(0, n, result.file_paths);
  } else if (subset == "training") {
    result.dataset = part(0, n - n_val, result.file_paths);
  } else if (subset == "validation") {
    result.dataset = part(n - n_val, n, result.file_paths);
  } else {
    result.dataset = part(0, n - n_val, result.file_paths);
    result.validation = part(n - n_val, n, result.validation_file_paths);
  }
}

}  // namespace keel::data::detail
