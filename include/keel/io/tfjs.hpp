#pragma once
// TensorFlow.js Layers format: a directory with model.json (format "layers-model", the Keras
// topology and a weightsManifest) and binary weight shards, as tf.LayersModel.save and
// tfjs-converter write it and tf.loadLayersModel reads it.
#include <cstdint>
#include <memory>
#include <string>

namespace keel::models {
class Model;
}

namespace keel::io {

// tfjs-converter's options for the weights: --quantize_uint8 / --quantize_uint16 (affine, one
// min and scale per weight, dequantized on load as q * scale + min) and
// --weight_shard_size_bytes (the weights, concatenated in manifest order, cut into shards).
struct TfjsSaveOptions {
  std::string quantization = "";            // "" (float32 as stored) | "uint8" | "uint16"
  std::int64_t shard_size_bytes = 4194304;  // 4 MiB, tfjs-converter's default
};

// Writes dir/model.json and dir/group1-shard<i>of<N>.bin (the folder is assembled under a
// temporary name and swapped into place). ValueError names the first layer, activation or
// option TensorFlow.js cannot represent.
void save_tfjs(models::Model& model, const std::string& dir, TfjsSaveOptions options = {});
// A Sequential or functional keel model with the weights of a TensorFlow.js Layers model.json
// (the shards are read from its folder). IOError names the file and the field of a malformed
// model; ValueError names a layer class or setting keel does not have.
std::shared_ptr<models::Model> load_tfjs(const std::string& model_json_path);

}  // namespace keel::io
