// image_dataset_from_directory, after keras.utils.image_dataset_from_directory (Keras 3):
// index the files (keras' dataset_utils.index_directory), shuffle the list once with the seed,
// split it, then a Dataset that loads, decodes and resizes each file (in parallel) and batches.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "keel/data/image.hpp"
#include "keel/data/image_files.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/shape.hpp"

namespace keel::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOp = "image_dataset_from_directory";

// The decodable formats of Keras' allow list (.bmp and .gif are not decoded by keel).
bool is_image_file(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* ext : {".jpeg", ".jpg", ".png"}) {
    const std::string e = ext;
    if (lower.size() >= e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

// Keras' iter_valid_files: every directory under `root` (itself included), sorted by path, and
// in each its image files sorted by name. Paths come back relative to `root`.
std::vector<fs::path> image_files_under(const fs::path& root, bool follow_links) {
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
      if (!it->is_directory(ec) && is_image_file(n)) names.push_back(n);
    }
    if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", kOp, d.string(), ec.message()));
    std::sort(names.begin(), names.end());
    for (const auto& n : names) out.push_back(fs::relative(d / n, root));
  }
  return out;
}

int channels_of(const std::string& color_mode) {
  if (color_mode == "grayscale") return 1;
  if (color_mode == "rgb") return 3;
  if (color_mode == "rgba") return 4;
  throw ValueError(fmt::format("{}: color_mode must be \"grayscale\", \"rgb\" or \"rgba\", got \"{}\"", kOp, color_mode));
}

void check_options(const ImageDatasetOptions& o) {
  if (o.labels.mode != "inferred" && o.labels.mode != "explicit")
    throw ValueError(fmt::format("{}: labels must be \"inferred\" or a list of integer labels, got \"{}\"", kOp,
                                 o.labels.mode));
  if (o.label_mode != "int" && o.label_mode != "categorical" && o.label_mode != "binary")
    throw ValueError(fmt::format("{}: label_mode must be \"int\", \"categorical\" or \"binary\", got \"{}\"", kOp,
                                 o.label_mode));
  if (o.labels.mode == "explicit" && !o.class_names.empty())
    throw ValueError(fmt::format("{}: class_names can only be given with labels = \"inferred\"", kOp));
  if (o.batch_size < 0) throw ValueError(fmt::format("{}: batch_size must be positive (or 0 for none), got {}", kOp, o.batch_size));
  if (o.image_size[0] <= 0 || o.image_size[1] <= 0)
    throw ValueError(fmt::format("{}: image_size must be positive, got [{}, {}]", kOp, o.image_size[0], o.image_size[1]));
  if (o.interpolation != "bilinear" && o.interpolation != "nearest")
    throw ValueError(fmt::format("{}: interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", kOp, o.interpolation));
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
  if (mode == "int") {
    std::vector<std::int32_t> v(labels.begin(), labels.end());
    return constant(v, Shape{n});
  }
  std::vector<float> v;
  if (mode == "binary") {
    v.assign(labels.begin(), labels.end());
    return constant(v, Shape{n, 1});
  }
  v.assign(static_cast<std::size_t>(n * classes), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i * classes + labels[static_cast<std::size_t>(i)])] = 1;
  return constant(v, Shape{n, classes});
}

struct Loader {
  int channels;
  std::array<std::int64_t, 2> size;
  std::string interpolation;
  bool crop;

  Tensor operator()(const std::string& path) const {
    Tensor img = read_image(path, channels);
    if (crop) {
      // keras.utils.smart_resize: the largest centred window with the target's aspect ratio.
      const std::int64_t h = img.shape()[0], w = img.shape()[1];
      const std::int64_t crop_h = std::clamp<std::int64_t>(
          static_cast<std::int64_t>(static_cast<float>(w * size[0]) / static_cast<float>(size[1])), 1, h);
      const std::int64_t crop_w = std::clamp<std::int64_t>(
          static_cast<std::int64_t>(static_cast<float>(h * size[1]) / static_cast<float>(size[0])), 1, w);
      img = slice(img, {(h - crop_h) / 2, (w - crop_w) / 2, 0}, {crop_h, crop_w, -1});
    }
    const Tensor out = image::resize(img, size, interpolation);
    return out.dtype() == DType::float32 ? out : out.astype(DType::float32);
  }
};

Dataset<std::pair<Tensor, Tensor>> make_dataset(std::vector<std::string> paths, const std::vector<std::int64_t>& labels,
                                                const ImageDatasetOptions& o, std::int64_t classes) {
  const auto n = static_cast<std::int64_t>(paths.size());
  std::vector<std::int64_t> index(paths.size());
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = static_cast<std::int64_t>(i);
  auto ds = Dataset<>::from_tensor_slices({constant(index, Shape{n}), label_tensor(labels, o.label_mode, classes)});
  if (o.shuffle) ds = ds.shuffle(o.batch_size > 0 ? o.batch_size * 8 : 1024, o.seed);
  auto shared = std::make_shared<const std::vector<std::string>>(std::move(paths));
  const Loader load{channels_of(o.color_mode), o.image_size, o.interpolation, o.crop_to_aspect_ratio};
  auto images = ds.map(
      [shared, load](const Tensor& i, const Tensor& y) {
        const auto at = static_cast<std::size_t>(i.item<std::int64_t>());
        return std::pair<Tensor, Tensor>(load((*shared)[at]), y);
      },
      AUTOTUNE);
  return o.batch_size > 0 ? images.batch(o.batch_size) : images;
}

}  // namespace

ImageDirectoryDataset image_dataset_from_directory(const std::string& directory, const ImageDatasetOptions& o) {
  check_options(o);
  channels_of(o.color_mode);
  std::error_code ec;
  if (!fs::is_directory(directory, ec))
    throw IOError(fmt::format("{}: {} is not a directory", kOp, directory));

  // ---- index the files (keras' index_directory) ----
  ImageDirectoryDataset result;
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  if (o.labels.mode == "inferred") {
    std::vector<std::string> subdirs;
    for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (it->is_directory(ec) && !n.empty() && n[0] != '.') subdirs.push_back(n);
    }
    if (ec) throw IOError(fmt::format("{}: cannot list {}: {}", kOp, directory, ec.message()));
    std::sort(subdirs.begin(), subdirs.end());
    if (!o.class_names.empty()) {
      for (const auto& c : o.class_names)
        if (std::find(subdirs.begin(), subdirs.end(), c) == subdirs.end())
          throw ValueError(fmt::format("{}: class_names names \"{}\", which is not a subdirectory of {} (found: {})",
                                       kOp, c, directory, fmt::join(subdirs, ", ")));
      subdirs = o.class_names;  // the caller's order
    }
    result.class_names = subdirs;
    for (std::size_t k = 0; k < subdirs.size(); ++k)
      for (const auto& rel : image_files_under(fs::path(directory) / subdirs[k], o.follow_links)) {
        paths.push_back((fs::path(directory) / subdirs[k] / rel).string());
        labels.push_back(static_cast<std::int64_t>(k));
      }
  } else {
    for (const auto& rel : image_files_under(fs::path(directory), o.follow_links))
      paths.push_back((fs::path(directory) / rel).string());
    labels = o.labels.values;
    if (labels.size() != paths.size())
      throw ValueError(fmt::format("{}: {} labels were given but {} image files were found in {}", kOp, labels.size(),
                                   paths.size(), directory));
    std::set<std::int64_t> unique(labels.begin(), labels.end());
    for (std::int64_t v : unique) {
      if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
        throw ValueError(fmt::format("{}: label {} is out of range [0, 2^31)", kOp, v));
      result.class_names.push_back(std::to_string(v));
    }
  }
  if (paths.empty())
    throw ValueError(fmt::format("{}: no images found in {} (allowed formats: .jpeg, .jpg, .png)", kOp, directory));
  const auto classes = static_cast<std::int64_t>(result.class_names.size());
  if (o.label_mode == "binary" && classes != 2)
    throw ValueError(fmt::format("{}: label_mode \"binary\" needs exactly 2 classes, found {}", kOp, classes));
  if (o.label_mode != "int")
    for (std::int64_t v : labels)
      if (v >= classes)
        throw ValueError(fmt::format("{}: label {} is out of range for {} classes (label_mode \"{}\")", kOp, v, classes,
                                     o.label_mode));

  // ---- one seeded permutation of the list (paths and labels together) ----
  if (o.shuffle) {
    detail::ShuffleRng rng(o.seed ? *o.seed : detail::fresh_shuffle_key(), 0x696d6773u /* "imgs" */);
    for (std::size_t i = paths.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(rng.below(i));
      std::swap(paths[i - 1], paths[j]);
      std::swap(labels[i - 1], labels[j]);
    }
  }

  // ---- the split: the last validation_split of the list is the validation subset ----
  const auto n = static_cast<std::int64_t>(paths.size());
  const auto n_val = static_cast<std::int64_t>(o.validation_split * static_cast<double>(n));
  const auto part = [&](std::int64_t begin, std::int64_t end, std::vector<std::string>& files) {
    files.assign(paths.begin() + begin, paths.begin() + end);
    const std::vector<std::int64_t> l(labels.begin() + begin, labels.begin() + end);
    if (files.empty())
      throw ValueError(fmt::format("{}: the {} subset of {} files is empty (validation_split {})", kOp,
                                   begin == 0 ? "training" : "validation", n, o.validation_split));
    return make_dataset(files, l, o, classes);
  };
  if (o.subset.empty()) {
    result.dataset = part(0, n, result.file_paths);
  } else if (o.subset == "training") {
    result.dataset = part(0, n - n_val, result.file_paths);
  } else if (o.subset == "validation") {
    result.dataset = part(n - n_val, n, result.file_paths);
  } else {
    result.dataset = part(0, n - n_val, result.file_paths);
    result.validation = part(n - n_val, n, result.validation_file_paths);
  }
  return result;
}

}  // namespace keel::data
