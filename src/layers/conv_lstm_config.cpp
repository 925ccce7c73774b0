// The config of ConvLSTM2D (one field list, get_config) and its factory under the Keras name.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/conv_lstm.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, ConvLSTM2DOptions& o) {
  v("strides", o.strides);
  v("padding", o.padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate);
  v("activation", o.activation);
  v("recurrent_activation", o.recurrent_activation);
  v("use_bias", o.use_bias);
  v("kernel_initializer", o.kernel_initializer);
  v("recurrent_initializer", o.recurrent_initializer);
  v("bias_initializer", o.bias_initializer);
  v("unit_forget_bias", o.unit_forget_bias);
  v("kernel_regularizer", o.kernel_regularizer, Spelling::keras3);
  v("recurrent_regularizer", o.recurrent_regularizer, Spelling::keras3);
  v("bias_regularizer", o.bias_regularizer, Spelling::keras3);
  v("activity_regularizer", o.activity_regularizer, Spelling::keras3);
  v("kernel_constraint", o.kernel_constraint);
  v("recurrent_constraint", o.recurrent_constraint);
  v("bias_constraint", o.bias_constraint);
  v("dropout", o.dropout);
  v("recurrent_dropout", o.recurrent_dropout);
  v("seed", o.seed);
  v("return_sequences", o.return_sequences);
  v("return_state", o.return_state);
  v("go_backwards", o.go_backwards);
}

}  // namespace detail

nlohmann::json ConvLSTM2D::get_config() const {
  auto c = Layer::get_config();
  c["filters"] = filters_;
  c["kernel_size"] = detail::pair_json(kernel_size_);
  detail::write_fields(c, options_);
  c["stateful"] = false;
  c["unroll"] = false;
  return c;
}

void detail::register_conv_lstm_layers(Factories& f) {
  f["ConvLSTM2D"] = [](const nlohmann::json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "ConvLSTM2D");
    auto o = read_fields<ConvLSTM2DOptions>(a);
    if (!a.has("kernel_size")) throw ValueError("ConvLSTM2D.from_config: the config has no 'kernel_size'");
    if (a.flag("stateful", false)) throw ValueError("ConvLSTM2D.from_config: stateful = true is not supported");
    return std::make_shared<ConvLSTM2D>(a.required_int("filters"), a.pair("kernel_size", {1, 1}), o);
  };
}

}  // namespace keel::layers
