#pragma once
// Image files: PNG and JPEG decoding and encoding (after tf.io.decode_png / decode_jpeg /
// encode_png / encode_jpeg), and image_dataset_from_directory (after keras.utils).
//
// Images are uint8 tensors [height, width, channels]. `channels` chooses the output: 0 keeps what
// the file stores (PNG: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA; JPEG: 1 or 3), 1 converts to gray,
// 3 to RGB and 4 to RGBA (an opaque alpha is added where the file has none). 16-bit PNGs are
// reduced to 8 bits, palettes expanded. A corrupt, truncated or oversized file is an IOError that
// names the source (`what`: a file name, or "<bytes>") and the byte offset where decoding stopped;
// width * height * channels is limited to kMaxImageBytes.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keel/data/dataset.hpp"

namespace keel::data {

inline constexpr std::int64_t kMaxImageBytes = std::int64_t{1} << 30;  // 1 GiB of pixels

Tensor decode_png(const std::string& contents, int channels = 0, const std::string& what = "<bytes>");
Tensor decode_jpeg(const std::string& contents, int channels = 0, const std::string& what = "<bytes>");
// PNG or JPEG, told apart by the file signature (as tf.io.decode_image, without GIF and BMP).
Tensor decode_image(const std::string& contents, int channels = 0, const std::string& what = "<bytes>");

// image: uint8 [height, width, channels]. PNG takes 1 to 4 channels; compression is zlib's level
// 0..9, or -1 for its default. JPEG takes 1 or 3 channels; quality 0..100 (4:2:0 chroma for colour,
// libjpeg's defaults, as tf.io.encode_jpeg).
std::string encode_png(const Tensor& image, int compression = -1);
std::string encode_jpeg(const Tensor& image, int quality = 95);

// Files: the whole file read, then decode_image (IOError names the path); writers encode and
// replace the file atomically (a temporary name, then a rename: see io::atomic_write).
std::string read_file_bytes(const std::string& path);
Tensor read_image(const std::string& path, int channels = 0);
void write_png(const std::string& path, const Tensor& image, int compression = -1);
void write_jpeg(const std::string& path, const Tensor& image, int quality = 95);

// Labels of image_dataset_from_directory: "inferred" (from the class subdirectories) or explicit
// integer labels, one per image file in the alphanumeric order of their paths.
struct DirectoryLabels {
  std::string mode = "inferred";
  std::vector<std::int64_t> values;
  DirectoryLabels(const char* m = "inferred") : mode(m) {}  // NOLINT: implicit, as Keras' string
  DirectoryLabels(std::string m) : mode(std::move(m)) {}  // NOLINT
  DirectoryLabels(std::vector<std::int64_t> v) : mode("explicit"), values(std::move(v)) {}  // NOLINT
};

struct ImageDatasetOptions {
  DirectoryLabels labels = "inferred";
  std::string label_mode = "int";  // "int" (int32 [batch]), "categorical" (float32 one-hot), "binary" (float32 [batch, 1])
  std::vector<std::string> class_names = {};  // the classes to use, in this order (default: every subdirectory)
  std::string color_mode = "rgb";             // "grayscale", "rgb" or "rgba"
  std::int64_t batch_size = 32;               // 0: no batching (elements are single images)
  std::array<std::int64_t, 2> image_size = {256, 256};
  bool shuffle = true;
  std::optional<std::uint64_t> seed = std::nullopt;
  double validation_split = 0;             // fraction in (0, 1) held out, from the end of the (shuffled) file list
  std::string subset = "";                 // "training", "validation" or "both" when validation_split is set
  std::string interpolation = "bilinear";  // or "nearest"
  bool follow_links = false;
  bool crop_to_aspect_ratio = false;  // centre crop to the target's aspect ratio before resizing
};

// What image_dataset_from_directory returns: the dataset of (images float32 [batch, h, w, c],
// labels), the class names and the files in dataset order (before the per-epoch shuffle of the
// elements). With subset "both", `dataset` is the training part and `validation` the other.
struct ImageDirectoryDataset {
  Dataset<std::pair<Tensor, Tensor>> dataset;
  std::vector<std::string> class_names;
  std::vector<std::string> file_paths;
  Dataset<std::pair<Tensor, Tensor>> validation;
  std::vector<std::string> validation_file_paths;
};

// Keras' rules: with labels "inferred", class i is the i-th subdirectory of `directory` in
// alphanumeric order (hidden ones skipped) and its images are the .png/.jpg/.jpeg files anywhere
// below it, directories and files in alphanumeric order; files directly in `directory` are not
// used. shuffle permutes the file list once (seeded) and the elements again each epoch (a buffer
// of 8 batches); validation_split with shuffle needs a seed, so both subsets see the same order.
ImageDirectoryDataset image_dataset_from_directory(const std::string& directory, const ImageDatasetOptions& options = {});

}  // namespace keel::data
