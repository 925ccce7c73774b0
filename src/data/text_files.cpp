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

#include "keel/data/text_files.hpp"
#include "keel/ops/creation.hpp"

namespace keel::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOp = "text_dataset_from_directory";

bool is_text_file(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.size() >= 4 && lower.compare(lower.size() - 4, 4, ".txt") == 0;
}

// Keras' iter_valid_files: every directory under `root` (itself included), sorted by path, and
// in each its .txt files sorted by name. Paths come back relative to `root`.
std::vector<fs::path> text_files_under(const fs::path& root, bool follow_links) {
  std::vector<fs::path> dirs{root};
  std::error_code ec;
  auto opts = follow_links ? fs::directory_options::follow_directory_symlink : fs::directory_options::none;
  for (fs::recursive_directory_iterator it(root, opts, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) dirs.push_back(it->path());
  if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", kOp, root.string(), ec.message()));
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
  std::vector<fs::path> out;
  for (const auto& d : dirs) {
    std::vector<std::string> names;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (!it->is_directory(ec) && is_text_file(n)) names.push_back(n);
    }
    if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", kOp, d.string(), ec.message()));
    std::sort(names.begin(), names.end());
    for (const auto& n : names) out.push_back(fs::relative(d / n, root));
  }
  return out;
}

void check_options(const TextDatasetOptions& o) {
  const std::string& l = o.labels.mode;
  if (l != "inferred" && l != "explicit" && !l.empty())
    throw ValueError(fmt::format("{}: labels must be \"inferred\", \"\" (None) or a list of integer labels, got \"{}\"", kOp, l));
  if (o.label_mode != "int" && o.label_mode != "categorical" && o.label_mode != "binary" && !o.label_mode.empty())
    throw ValueError(fmt::format("{}: label_mode must be \"int\", \"categorical\", \"binary\" or \"\" (None), got \"{}\"",
                                 kOp, o.label_mode));
  if (l != "inferred" && !o.class_names.empty())
    throw ValueError(fmt::format("{}: class_names can only be given with labels = \"inferred\"", kOp));
  if (o.batch_size < 0) throw ValueError(fmt::format("{}: batch_size must be positive (or 0 for none), got {}", kOp, o.batch_size));
  if (o.max_length && *o.max_length < 0) throw ValueError(fmt::format("{}: max_length must be >= 0, got {}", kOp, *o.max_length));
  // Keras' check_validation_split_arg.
  if (o.validation_split != 0 && !(o.validation_split > 0 && o.validation_split < 1))
    throw ValueError(fmt::format("{}: validation_split must be in (0, 1), got {}", kOp, o.validation_split));
  if ((o.validation_split != 0) != !o.subset.empty())
    throw ValueError(fmt::format("{}: subset and validation_split must be given together (got subset \"{}\", "
                                 "validation_split {})", kOp, o.subset, o.validation_split));
  if (!o.subset.empty() && o.subset != "training" && o.subset != "validation" && o.subset != "both")
    throw ValueError(fmt::format("{}: subset must be \"training\", \"validation\" or \"both\", got \"{}\"", kOp, o.subset));
  if (o.validation_split != 0 && o.shuffle && !o.seed)
    throw ValueError(fmt::format("{}: with validation_split and shuffle a seed is needed, so that the training and "
                                 "validation subsets do not overlap", kOp));
}

// The labels as the dataset yields them (int32 [n], float32 one-hot [n, classes], float32 [n, 1]).
Tensor label_tensor(const std::vector<std::int64_t>& labels, const std::string& mode, std::int64_t classes) {
  const auto n = static_cast<std::int64_t>(labels.size());
  if (mode == "int") return constant(std::vector<std::int32_t>(labels.begin(), labels.end()), Shape{n});
  std::vector<float> v;
  if (mode == "binary") {
    v.assign(labels.begin(), labels.end());
    return constant(v, Shape{n, 1});
  }
  v.assign(static_cast<std::size_t>(n * classes), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i * classes + labels[static_cast<std::size_t>(i)])] = 1;
  return constant(v, Shape{n, classes});
}

std::string read_text(const std::string& path, std::optional<std::int64_t> max_length) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open {}", kOp, path));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IOError(fmt::format("{}: cannot read {}", kOp, path));
  // Keras: tf.strings.substr(text, 0, max_length), in bytes.
  if (max_length && static_cast<std::int64_t>(s.size()) > *max_length) s.resize(static_cast<std::size_t>(*max_length));
  return s;
}

Dataset<TextBatch> make_dataset(std::vector<std::string> paths, const std::vector<std::int64_t>& labels,
                                const TextDatasetOptions& o, std::int64_t classes) {
  const auto n = static_cast<std::int64_t>(paths.size());
  std::vector<std::int64_t> index(paths.size());
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = static_cast<std::int64_t>(i);
  const bool labelled = !o.label_mode.empty();
  // Labels ride along as tensors; without labels a column of zeros stands in and is dropped.
  const Tensor label_column = labelled ? label_tensor(labels, o.label_mode, classes) : zeros(Shape{n}, DType::int32);
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
  check_options(o);
  // Keras: labels None or label_mode None makes both None (texts only, every .txt file below).
  TextDatasetOptions unlabelled = o;
  if (o.labels.mode.empty() || o.label_mode.empty()) {
    unlabelled.labels = std::string();
    unlabelled.label_mode.clear();
    unlabelled.class_names.clear();
  }
  const TextDatasetOptions& opts = unlabelled;
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) throw IOError(fmt::format("{}: {} is not a directory", kOp, directory));

  // ---- index the files (keras' index_directory) ----
  TextDirectoryDataset result;
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  if (opts.labels.mode == "inferred") {
    std::vector<std::string> subdirs;
    for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (it->is_directory(ec) && !n.empty() && n[0] != '.') subdirs.push_back(n);
    }
    if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", kOp, directory, ec.message()));
    std::sort(subdirs.begin(), subdirs.end());
    if (!opts.class_names.empty()) {
      for (const auto& c : opts.class_names)
        if (std::find(subdirs.begin(), subdirs.end(), c) == subdirs.end())
          throw ValueError(fmt::format("{}: class_names names \"{}\", which is not a subdirectory of {} (found: {})", kOp,
                                       c, directory, fmt::join(subdirs, ", ")));
      subdirs = opts.class_names;  // the caller's order
    }
    result.class_names = subdirs;
    for (std::size_t k = 0; k < subdirs.size(); ++k)
      for (const auto& rel : text_files_under(fs::path(directory) / subdirs[k], opts.follow_links)) {
        paths.push_back((fs::path(directory) / subdirs[k] / rel).string());
        labels.push_back(static_cast<std::int64_t>(k));
      }
  } else {
    for (const auto& rel : text_files_under(fs::path(directory), opts.follow_links))
      paths.push_back((fs::path(directory) / rel).string());
    if (opts.labels.mode == "explicit") {
      labels = opts.labels.values;
      if (labels.size() != paths.size())
        throw ValueError(fmt::format("{}: {} labels were given but {} text files were found in {}", kOp, labels.size(),
                                     paths.size(), directory));
      std::set<std::int64_t> unique(labels.begin(), labels.end());
      for (std::int64_t v : unique) {
        if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
          throw ValueError(fmt::format("{}: label {} is out of range [0, 2^31)", kOp, v));
        result.class_names.push_back(std::to_string(v));
      }
    } else {
      labels.assign(paths.size(), 0);
    }
  }
  if (paths.empty()) throw ValueError(fmt::format("{}: no text files found in {} (allowed format: .txt)", kOp, directory));
  const auto classes = static_cast<std::int64_t>(result.class_names.size());
  if (opts.label_mode == "binary" && classes != 2)
    throw ValueError(fmt::format("{}: label_mode \"binary\" needs exactly 2 classes, found {}", kOp, classes));
  if (opts.label_mode == "categorical" || opts.label_mode == "binary")
    for (std::int64_t v : labels)
      if (v >= classes)
        throw ValueError(fmt::format("{}: label {} is out of range for {} classes (label_mode \"{}\")", kOp, v, classes,
                                     opts.label_mode));

  // ---- one seeded permutation of the list (paths and labels together) ----
  if (opts.shuffle) {
    detail::ShuffleRng rng(opts.seed ? *opts.seed : detail::fresh_shuffle_key(), 0x74657874u /* "text" */);
    for (std::size_t i = paths.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(rng.below(i));
      std::swap(paths[i - 1], paths[j]);
      std::swap(labels[i - 1], labels[j]);
    }
  }

  // ---- the split: the last validation_split of the list is the validation subset ----
  const auto n = static_cast<std::int64_t>(paths.size());
  const auto n_val = static_cast<std::int64_t>(opts.validation_split * static_cast<double>(n));
  const auto part = [&](std::int64_t begin, std::int64_t end, std::vector<std::string>& files) {
    files.assign(paths.begin() + begin, paths.begin() + end);
    const std::vector<std::int64_t> l(labels.begin() + begin, labels.begin() + end);
    if (files.empty())
      throw ValueError(fmt::format("{}: the {} subset of {} files is empty (validation_split {})", kOp,
                                   begin == 0 ? "training" : "validation", n, opts.validation_split));
    return make_dataset(files, l, opts, classes);
  };
  if (opts.subset.empty()) {
    result.dataset = part(0, n, result.file_paths);
  } else if (opts.subset == "training") {
    result.dataset = part(0, n - n_val, result.file_paths);
  } else if (opts.subset == "validation") {
    result.dataset = part(n - n_val, n, result.file_paths);
  } else {
    result.dataset = part(0, n - n_val, result.file_paths);
    result.validation = part(n - n_val, n, result.validation_file_paths);
  }
  return result;
}

}  // namespace keel::data
