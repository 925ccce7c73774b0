#pragma once
// The weights of a TensorFlow.js Layers model: the weightsManifest of model.json and its binary
// shards, in both directions. Internal to keel: not a public header.
//
// Layout (tfjs-core io_utils.decodeWeights, tfjs-converter write_weights.py): a group's shards
// are one little-endian byte string cut into pieces; its weights lie in it one after another
// in manifest order, each numel * bytes-per-value long (float32 / int32: 4; quantized uint8: 1,
// uint16: 2, float16: 2).
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::io::detail {

struct TfjsWeight {
  std::string name;  // "dense_Dense1/kernel": the layer's name and the weight's
  Tensor value;
};

// The manifest (one group) and the shard files' contents for `weights`, in order.
// quantization: "" (each weight in its own dtype), "uint8" or "uint16" (float32 weights only, as
// tfjs-converter's --quantize_uint8/16 do). ValueError for a bad option or dtype.
struct EncodedWeights {
  std::vector<std::pair<std::string, std::string>> shards;  // file name, bytes
  std::string manifest_json;                                // the weightsManifest list, as JSON text
};
EncodedWeights encode_tfjs_weights(const std::vector<TfjsWeight>& weights, const std::string& quantization,
                                   std::int64_t shard_size_bytes);

// Reads every group of `manifest` (model.json's weightsManifest): read_shard(path) returns the
// bytes of one shard named by the manifest (the caller checks that the path stays inside the
// model's folder). Every size is checked: IOError names `file` and the field or weight.
std::vector<TfjsWeight> decode_tfjs_weights(const nlohmann::json& manifest, const std::string& file,
                                            const std::function<std::string(const std::string&)>& read_shard);

// tfjs-converter's affine quantization of one float32 weight (quantization.py):
//   scale = (max - min) / qmax; when min <= 0 <= max the zero point is nudged so that 0 is exact:
//   min' = -round(-min / scale) * scale; q = round((clip(w, min', min' + qmax * scale) - min') / scale).
//   All-equal weights: q = 0, scale = 1, min = the value. Dequantized as q * scale + min.
struct AffineQuantization {
  double min = 0, scale = 1;
  std::vector<std::uint16_t> q;
};
AffineQuantization quantize_affine(const std::vector<float>& w, int bits);

}  // namespace keel::io::detail
