// text_dataset_from_directory, after keras.utils.text_dataset_from_directory (Keras 3): index the
// .txt files (keras' dataset_utils.index_directory), shuffle the list once with the seed, split
// it, then a Dataset of batches of file indices that reads each batch's files when it is produced.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "data/directory_files.hpp"
#include "keel/data/text_files.hpp"
#include "keel/ops/creation.hpp"

namespace keel::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTextOp = "text_dataset_from_directory";

bool is_text_file(const std::string& lower) { return lower.size() >= 4 && lower.compare(lower.size() - 4, 4, ".txt") == 0; }

void check_text_options(const TextDatasetOptions& o) {
  const std::string& l = o.labels.mode;
  if (l != "inferred" && l != "explicit" && !l.empty())
    throw ValueError(fmt::format("{}: labels must be \"inferred\", \"\" (None) or a list of integer labels, got \"{}\"", kTextOp, l));
  if (o.label_mode != "int" && o.label_mode != "categorical" && o.label_mode != "binary" && !o.label_mode.empty())
    throw ValueError(fmt::format("{}: label_mode must be \"int\", \"categorical\", \"binary\" or \"\" (None), got \"{}\"",
                                 kTextOp, o.label_mode));
  if (l != "inferred" && !o.class_names.empty())
    throw ValueError(fmt::format("{}: class_names can only be given with labels = \"inferred\"", kTextOp));
  if (o.batch_size < 0) throw ValueError(fmt::format("{}: batch_size must be positive (or 0 for none), got {}", kTextOp, o.batch_size));
  if (o.max_length && *o.max_length < 0) throw ValueError(fmt::format("{}: max_length must be >= 0, got {}", kTextOp, *o.max_length));
  detail::check_split_options(kTextOp, o.validation_split, o.subset, o.shuffle, o.seed);
}

std::string read_text(const std::string& path, std::optional<std::int64_t> max_length) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open {}", kTextOp, path));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IOError(fmt::format("{}: cannot read {}", kTextOp, path));
  // Keras: tf.strings.substr(text, 0, max_length), in bytes.
  if (max_length && static_cast<std::int64_t>(s.size()) > *max_length) s.resize(static_cast<std::size_t>(*max_length));
  return s;
}

Dataset<TextBatch> make_text_dataset(std::vector<std::string> paths, const std::vector<std::int64_t>& labels,
                                const TextDatasetOptions& o, std::int64_t classes) {
  const auto n = static_cast<std::int64_t>(paths.size());
  std::vector<std::int64_t> index(paths.size());
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = static_cast<std::int64_t>(i);
  const bool labelled = !o.label_mode.empty();
  // Labels ride along as tensors; without labels a column of zeros stands in and is dropped.
  const Tensor label_column = labelled ? detail::label_tensor(labels, o.label_mode, classes) : zeros(Shape{n}, DType::int32);
  auto ds = Dataset<>::from_tensor_slices({constant(index, Shape{n}), label_column});
  if (o.shuffle) ds = ds.shuffle(o.batch_size > 0 ? o.batch_size * 8 : 1024, o.seed);
  if (o.batch_size > 0) ds = ds.batch(o.batch_size);
  auto shared = std::make_shared<const std::vector<std::string>>(std::move(paths));
  const auto max_length = o.max_length;
  return ds.map([shared, max_length, labelled](const Tensor& i, const Tensor& y) {
    std::vector<std::string> texts;
    for (auto at : i.to_vector<std::int64_t>()) texts.push_back(read_text((*shared)[static_cast<std::size_t>(at)], max_length));
    return TextBatch(std::move(texts), labelled ? y : Tensor());
  });
}

}  // namespace

TextDirectoryDataset text_dataset_from_directory(const std::string& directory, const TextDatasetOptions& o) {
  check_text_options(o);
  // Keras: labels None or label_mode None makes both None (texts only, every .txt file below).
  TextDatasetOptions unlabelled = o;
  if (o.labels.mode.empty() || o.label_mode.empty()) {
    unlabelled.labels = std::string();
    unlabelled.label_mode.clear();
    unlabelled.class_names.clear();
  }
  const TextDatasetOptions& opts = unlabelled;
  TextDirectoryDataset result;
  detail::DirectoryIndex index = detail::index_directory(
      directory, {kTextOp, "text", "allowed format: .txt", is_text_file, opts.labels, opts.class_names, opts.label_mode,
                  opts.follow_links});
  if (opts.shuffle) detail::shuffle_index(index, opts.seed, 0x74657874u /* "text" */);
  const auto classes = static_cast<std::int64_t>(index.class_names.size());
  result.class_names = index.class_names;
  detail::split_subsets(kTextOp, index, opts.validation_split, opts.subset, result,
                        [&](const std::vector<std::string>& files, const std::vector<std::int64_t>& labels) {
                          return make_text_dataset(files, labels, opts, classes);
                        });
  return result;
}

}  // namespace keel::data
