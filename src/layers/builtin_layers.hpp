#pragma once
// Each family of built-in layers registers its own classes (in its *_config.cpp, beside its field
// lists); the registry calls these once, when it is first used.
#include <map>
#include <string>

#include "keel/layers/registry.hpp"

namespace keel::layers::detail {

using Factories = std::map<std::string, LayerFactory>;

void register_core_layers(Factories& f);
void register_convolutional_layers(Factories& f);
void register_normalization_layers(Factories& f);
void register_recurrent_layers(Factories& f);
void register_attention_layers(Factories& f);
void register_preprocessing_layers(Factories& f);
void register_conv_variant_layers(Factories& f);
void register_pooling_layers(Factories& f);
void register_reshaping_layers(Factories& f);
void register_conv_lstm_layers(Factories& f);
void register_merging_layers(Factories& f);
void register_regularization_layers(Factories& f);
void register_activation_layers(Factories& f);
void register_image_preprocessing_layers(Factories& f);
void register_text_preprocessing_layers(Factories& f);
void register_pruning_layers(Factories& f);  // src/pruning/pruning_config.cpp
void register_quantization_layers(Factories& f);  // src/quantization/quantize_model.cpp

}  // namespace keel::layers::detail
