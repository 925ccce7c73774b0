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

#include "data/directory_files.hpp"
#include "keel/data/image.hpp"
#include "keel/data/image_files.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/shape.hpp"

namespace keel::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kImageOp = "image_dataset_from_directory";

// The decodable formats of Keras' allow list (.bmp and .gif are not decoded by keel).
bool is_image_file(const std::string& lower) {
  for (const char* ext : {".jpeg", ".jpg", ".png"}) {
    const std::string e = ext;
    if (lower.size() >= e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

int channels_of(const std::string& color_mode) {
  if (color_mode == "grayscale") return 1;
  if (color_mode == "rgb") return 3;
  if (color_mode == "rgba") return 4;
  throw ValueError(fmt::format("{}: color_mode must be \"grayscale\", \"rgb\" or \"rgba\", got \"{}\"", kImageOp, color_mode));
}

void check_image_options(const ImageDatasetOptions& o) {
  if (o.labels.mode != "inferred" && o.labels.mode != "explicit")
    throw ValueError(fmt::format("{}: labels must be \"inferred\" or a list of integer labels, got \"{}\"", kImageOp,
                                 o.labels.mode));
  if (o.label_mode != "int" && o.label_mode != "categorical" && o.label_mode != "binary")
    throw ValueError(fmt::format("{}: label_mode must be \"int\", \"categorical\" or \"binary\", got \"{}\"", kImageOp,
                                 o.label_mode));
  if (o.labels.mode == "explicit" && !o.class_names.empty())
    throw ValueError(fmt::format("{}: class_names can only be given with labels = \"inferred\"", kImageOp));
  if (o.batch_size < 0) throw ValueError(fmt::format("{}: batch_size must be positive (or 0 for none), got {}", kImageOp, o.batch_size));
  if (o.image_size[0] <= 0 || o.image_size[1] <= 0)
    throw ValueError(fmt::format("{}: image_size must be positive, got [{}, {}]", kImageOp, o.image_size[0], o.image_size[1]));
  if (o.interpolation != "bilinear" && o.interpolation != "nearest")
    throw ValueError(fmt::format("{}: interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", kImageOp, o.interpolation));
  detail::check_split_options(kImageOp, o.validation_split, o.subset, o.shuffle, o.seed);
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

Dataset<std::pair<Tensor, Tensor>> make_image_dataset(std::vector<std::string> paths, const std::vector<std::int64_t>& labels,
                                                const ImageDatasetOptions& o, std::int64_t classes) {
  const auto n = static_cast<std::int64_t>(paths.size());
  std::vector<std::int64_t> index(paths.size());
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = static_cast<std::int64_t>(i);
  auto ds = Dataset<>::from_tensor_slices({constant(index, Shape{n}), detail::label_tensor(labels, o.label_mode, classes)});
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
  check_image_options(o);
  channels_of(o.color_mode);
  ImageDirectoryDataset result;
  detail::DirectoryIndex index = detail::index_directory(
      directory, {kImageOp, "image", "allowed formats: .jpeg, .jpg, .png", is_image_file, o.labels, o.class_names,
                  o.label_mode, o.follow_links});
  if (o.shuffle) detail::shuffle_index(index, o.seed, 0x696d6773u /* "imgs" */);
  const auto classes = static_cast<std::int64_t>(index.class_names.size());
  result.class_names = index.class_names;
  detail::split_subsets(kImageOp, index, o.validation_split, o.subset, result,
                        [&](const std::vector<std::string>& files, const std::vector<std::int64_t>& labels) {
                          return make_image_dataset(files, labels, o, classes);
                        });
  return result;
}

}  // namespace keel::data
