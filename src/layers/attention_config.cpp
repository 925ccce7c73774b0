// The configs of MultiHeadAttention, Attention and AdditiveAttention: its field list, get_config, and the factory the registry
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
  v("kernel_constraint", o.kernel_constraint);
  v("bias_constraint", o.bias_constraint);
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, AttentionOptions& o) {
  v("use_scale", o.use_scale);
  v("score_mode", o.score_mode);
  v("dropout", o.dropout);
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, AdditiveAttentionOptions& o) {
  v("use_scale", o.use_scale);
  v("dropout", o.dropout);
  v("seed", o.seed);
}

}  // namespace detail

nlohmann::json Attention::get_config() const {
  nlohmann::json config = Layer::get_config();
  detail::write_fields(config, options_);
  return config;
}

nlohmann::json AdditiveAttention::get_config() const {
  // The base Attention holds the options; AdditiveAttention's field list is its own subset.
  AdditiveAttentionOptions o;
  o.use_scale = options_.use_scale;
  o.dropout = options_.dropout;
  o.seed = options_.seed;
  nlohmann::json config = Layer::get_config();
  detail::write_fields(config, o);
  return config;
}

nlohmann::json MultiHeadAttention::get_config() const {
  nlohmann::json config = Layer::get_config();
  config["num_heads"] = num_heads_;
  config["key_dim"] = key_dim_;
  detail::write_fields(config, options_);
  config["value_dim"] = value_dim();  // Keras writes the resolved size
  return config;
}

void detail::register_attention_layers(Factories& f) {
  f["Attention"] = [](const nlohmann::json& c) {
    return std::make_shared<Attention>(read_fields<AttentionOptions>(Args(c, "Attention")));
  };
  f["AdditiveAttention"] = [](const nlohmann::json& c) {
    return std::make_shared<AdditiveAttention>(read_fields<AdditiveAttentionOptions>(Args(c, "AdditiveAttention")));
  };
  f["MultiHeadAttention"] = [](const nlohmann::json& c) {
    const Args a(c, "MultiHeadAttention");
    return std::make_shared<MultiHeadAttention>(a.required_int("num_heads"), a.required_int("key_dim"),
                                                read_fields<MultiHeadAttentionOptions>(a));
  };
}

}  // namespace keel::layers
