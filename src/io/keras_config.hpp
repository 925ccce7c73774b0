#pragma once
// Model configs between keel's form (Model::save's config.json: layers::serialize entries, which
// already use Keras 3's class names, keys and functional "inbound_nodes") and the two forms Keras
// files hold. Internal to keel: not a public header.
//
//   Keras 3 (.keras config.json):  {"module", "class_name", "config", "registered_name"} objects
//     everywhere: dtype as a DTypePolicy object, initializers/regularizers/constraints as
//     {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, ...}.
//   Keras 2 / tf.keras (.h5 model_config): {"class_name", "config"} only; InputLayer's
//     "batch_input_shape" (or a first layer's, in a Sequential without InputLayer); functional
//     "inbound_nodes" as [[[layer, node, tensor, kwargs], ...], ...]; "Model" for "Functional";
//     old initializers as VarianceScaling; BatchNormalization's axis as a list.
// Every function takes and returns one serialized layer or model entry ({"class_name",
// "config", ...}) and recurses into nested layers (a Sequential's "layers", wrappers' "layer").
#include <nlohmann/json.hpp>

#include <string>

namespace keel::io::keras {

// keel -> Keras 3.
nlohmann::json to_keras3(const nlohmann::json& entry);
// Keras 3 -> keel (keel's factories read Keras 3's objects: this normalises what they do not).
nlohmann::json from_keras3(const nlohmann::json& entry);
// keel -> Keras 2 (tf.keras) legacy form.
nlohmann::json to_keras2(const nlohmann::json& entry);
// Keras 2 (tf.keras, standalone Keras 2.x) legacy form -> keel. ValueError naming the entry for
// a structure that cannot be translated (a node that is not a list of tensor references).
nlohmann::json from_keras2(const nlohmann::json& entry);

// Keras' naming.to_snake_case (the names of H5IOStore's container entries: "Conv2D" -> "conv2d",
// "BatchNormalization" -> "batch_normalization"): the regular expressions
//   re.sub("(.)([A-Z][a-z]+)", r"\1_\2"), then re.sub("([a-z])([A-Z])", r"\1_\2"), lower-cased.
std::string keras_snake_case(const std::string& class_name);

}  // namespace keel::io::keras
