#pragma once
// Keras' own files, chosen by extension as Keras 3 does (Model::save / load_model and
// save_weights / load_weights dispatch here): see keras_files.cpp for the layouts.
#include <memory>
#include <string>

namespace keel::models {
class Model;
}

namespace keel::models::detail {

// ".keras" or ".h5": a Keras model file.
bool is_keras_model_path(const std::string& path);
// ".h5" (so also ".weights.h5"): a Keras weights file.
bool is_keras_weights_path(const std::string& path);

void save_keras_model(Model& model, const std::string& path);
std::shared_ptr<Model> load_keras_model(const std::string& path, bool compile);
void save_keras_weights(Model& model, const std::string& path);
void load_keras_weights(Model& model, const std::string& path);

}  // namespace keel::models::detail
