// The config of MultiHeadAttention: its field list, get_config, and the factory the registry
// rebuilds it with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/attention.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, MultiHeadAttentionOptions& o) {
  v("value_dim", o.value_dim);
  v("dropout", o.dropout);
  v("use_bias", o.use_bias);
  v("output_shape", o.output_shape, Spelling::one_or_list1);
  v("attention_axes", o.attention_axes);
  v("kernel_initializer", o.kernel_initializer);
  v("bias_initializer", o.bias_initializer);
  v("kernel_regularizer", o.kernel_regularizer);
  v("bias_regularizer", o.bias_regularizer);
  v("activity_regularizer", o.activity_regularizer);
  v("seed", o.seed);
}

}  // namespace detail

nlohmann::json MultiHeadAttention::get_config() const {
  nlohmann::json config = Layer::get_config();
  config["num_heads"] = num_heads_;
  config["key_dim"] = key_dim_;
  detail::write_fields(config, options_);
  config["value_dim"] = value_dim();  // Keras writes the resolved size
  config["kernel_constraint"] = nullptr;  // Keras' keys for what keel has not
  config["bias_constraint"] = nullptr;
  return config;
}

void detail::register_attention_layers(Factories& f) {
  f["MultiHeadAttention"] = [](const nlohmann::json& c) {
    const Args a(c, "MultiHeadAttention");
    return std::make_shared<MultiHeadAttention>(a.required_int("num_heads"), a.required_int("key_dim"),
                                                read_fields<MultiHeadAttentionOptions>(a));
  };
}

}  // namespace keel::layers
