// Keras' directory indexing, shared by the image and text dataset builders (see the header).
#include "data/directory_files.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "keel/data/dataset.hpp"
#include "keel/ops/creation.hpp"

namespace keel::data::detail {

namespace fs = std::filesystem;

namespace {

// Keras' iter_valid_files: every directory under `root` (itself included), sorted by path, and
// in each its accepted files sorted by name. Paths come back relative to `root`.
std::vector<fs::path> files_under(const fs::path& root, const IndexRequest& r) {
  std::vector<fs::path> dirs{root};
  std::error_code ec;
  auto opts = r.follow_links ? fs::directory_options::follow_directory_symlink : fs::directory_options::none;
  for (fs::recursive_directory_iterator it(root, opts, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) dirs.push_back(it->path());
  if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", r.op, root.string(), ec.message()));
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
  std::vector<fs::path> out;
  for (const auto& d : dirs) {
    std::vector<std::string> names;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      std::string lower = n;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (!it->is_directory(ec) && r.accept(lower)) names.push_back(n);
    }
    if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", r.op, d.string(), ec.message()));
    std::sort(names.begin(), names.end());
    for (const auto& n : names) out.push_back(fs::relative(d / n, root));
  }
  return out;
}

}  // namespace

DirectoryIndex index_directory(const std::string& directory, const IndexRequest& r) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) throw IOError(fmt::format("{}: {} is not a directory", r.op, directory));
  DirectoryIndex index;
  if (r.labels.mode == "inferred") {
    std::vector<std::string> subdirs;
    for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (it->is_directory(ec) && !n.empty() && n[0] != '.') subdirs.push_back(n);
    }
    if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", r.op, directory, ec.message()));
    std::sort(subdirs.begin(), subdirs.end());
    if (!r.class_names.empty()) {
      for (const auto& c : r.class_names)
        if (std::find(subdirs.begin(), subdirs.end(), c) == subdirs.end())
          throw ValueError(fmt::format("{}: class_names names \"{}\", which is not a subdirectory of {} (found: {})",
                                       r.op, c, directory, fmt::join(subdirs, ", ")));
      subdirs = r.class_names;  // the caller's order
    }
    index.class_names = subdirs;
    for (std::size_t k = 0; k < subdirs.size(); ++k)
      for (const auto& rel : files_under(fs::path(directory) / subdirs[k], r)) {
        index.paths.push_back((fs::path(directory) / subdirs[k] / rel).string());
        index.labels.push_back(static_cast<std::int64_t>(k));
      }
  } else {
    for (const auto& rel : files_under(fs::path(directory), r)) index.paths.push_back((fs::path(directory) / rel).string());
    if (r.labels.mode == "explicit") {
      index.labels = r.labels.values;
      if (index.labels.size() != index.paths.size())
        throw ValueError(fmt::format("{}: {} labels were given but {} {} files were found in {}", r.op,
                                     index.labels.size(), index.paths.size(), r.kind, directory));
      // Explicit labels name their classes by value, in increasing order.
      for (std::int64_t v : std::set<std::int64_t>(index.labels.begin(), index.labels.end())) {
        if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
          throw ValueError(fmt::format("{}: label {} is out of range [0, 2^31)", r.op, v));
        index.class_names.push_back(std::to_string(v));
      }
    } else {
      index.labels.assign(index.paths.size(), 0);
    }
  }
  if (index.paths.empty())
    throw ValueError(fmt::format("{}: no {} files found in {} ({})", r.op, r.kind, directory, r.formats));
  const auto classes = static_cast<std::int64_t>(index.class_names.size());
  if (r.label_mode == "binary" && classes != 2)
    throw ValueError(fmt::format("{}: label_mode \"binary\" needs exactly 2 classes, found {}", r.op, classes));
  if (r.label_mode == "categorical" || r.label_mode == "binary")
    for (std::int64_t v : index.labels)
      if (v >= classes)
        throw ValueError(fmt::format("{}: label {} is out of range for {} classes (label_mode \"{}\")", r.op, v,
                                     classes, r.label_mode));
  return index;
}

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

void check_split_options(const char* op, double validation_split, const std::string& subset, bool shuffle,
                         const std::optional<std::uint64_t>& seed) {
  if (validation_split != 0 && !(validation_split > 0 && validation_split < 1))
    throw ValueError(fmt::format("{}: validation_split must be in (0, 1), got {}", op, validation_split));
  if ((validation_split != 0) != !subset.empty())
    throw ValueError(fmt::format("{}: subset and validation_split must be given together (got subset \"{}\", "
                                 "validation_split {})", op, subset, validation_split));
  if (!subset.empty() && subset != "training" && subset != "validation" && subset != "both")
    throw ValueError(fmt::format("{}: subset must be \"training\", \"validation\" or \"both\", got \"{}\"", op, subset));
  if (validation_split != 0 && shuffle && !seed)
    throw ValueError(fmt::format("{}: with validation_split and shuffle a seed is needed, so that the training and "
                                 "validation subsets do not overlap", op));
}

void shuffle_index(DirectoryIndex& index, const std::optional<std::uint64_t>& seed, std::uint32_t stream) {
  ShuffleRng rng(seed ? *seed : fresh_shuffle_key(), stream);
  for (std::size_t i = index.paths.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i));
    std::swap(index.paths[i - 1], index.paths[j]);
    std::swap(index.labels[i - 1], index.labels[j]);
  }
}

}  // namespace keel::data::detail
