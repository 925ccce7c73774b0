// The configs of SimpleRNN, LSTM, GRU and the wrappers Bidirectional and TimeDistributed: one field
// list per options struct, get_config, and the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/recurrent.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

// The fields SimpleRNN, LSTM and GRU share; their options name them alike.
template <class V, class O>
void rnn_fields(V&& v, O& o) {
  v("activation", o.activation);
  v("use_bias", o.use_bias);
  v("kernel_initializer", o.kernel_initializer);
  v("recurrent_initializer", o.recurrent_initializer);
  v("bias_initializer", o.bias_initializer);
  v("kernel_regularizer", o.kernel_regularizer);
  v("recurrent_regularizer", o.recurrent_regularizer);
  v("bias_regularizer", o.bias_regularizer);
  v("activity_regularizer", o.activity_regularizer);
  v("kernel_constraint", o.kernel_constraint);
  v("recurrent_constraint", o.recurrent_constraint);
  v("bias_constraint", o.bias_constraint);
  v("dropout", o.dropout);
  v("recurrent_dropout", o.recurrent_dropout);
  v("seed", o.seed);
  v("return_sequences", o.return_sequences);
  v("return_state", o.return_state);
  v("go_backwards", o.go_backwards);
  v("stateful", o.stateful);
  v("unroll", o.unroll);
}

template <class V>
void fields(V&& v, SimpleRNNOptions& o) {
  rnn_fields(v, o);
}

template <class V>
void fields(V&& v, LSTMOptions& o) {
  rnn_fields(v, o);
  v("recurrent_activation", o.recurrent_activation);
  v("unit_forget_bias", o.unit_forget_bias);
}

template <class V>
void fields(V&& v, GRUOptions& o) {
  rnn_fields(v, o);
  v("recurrent_activation", o.recurrent_activation);
  v("reset_after", o.reset_after);
}

// backward_layer is a sublayer, written and read beside the wrapped one.
template <class V>
void fields(V&& v, BidirectionalOptions& o) {
  v("merge_mode", o.merge_mode);
}

template <class V>
void fields(V&&, TimeDistributedOptions&) {}

}  // namespace detail

namespace {

using detail::write_fields;
using json = nlohmann::json;

json layer_config(const Layer& layer) { return {{"class_name", layer.class_name()}, {"config", layer.get_config()}}; }

// The configs of the three recurrent layers.
template <class O>
json rnn_layer_config(json c, int units, const O& options) {
  c["units"] = units;
  write_fields(c, options);
  return c;
}

}  // namespace

nlohmann::json Recurrent::rnn_config() const {
  nlohmann::json config = Layer::get_config();
  config["zero_output_for_mask"] = zero_output_for_mask_;
  return config;
}

nlohmann::json SimpleRNN::get_config() const { return rnn_layer_config(rnn_config(), units(), options_); }

nlohmann::json LSTM::get_config() const { return rnn_layer_config(rnn_config(), units(), options_); }

nlohmann::json GRU::get_config() const { return rnn_layer_config(rnn_config(), units(), options_); }

nlohmann::json Bidirectional::get_config() const {
  nlohmann::json config = Layer::get_config();
  write_fields(config, options_);
  config["layer"] = layer_config(*forward_);
  config["backward_layer"] = layer_config(*backward_);
  return config;
}

nlohmann::json TimeDistributed::get_config() const {
  nlohmann::json config = Layer::get_config();
  config["layer"] = layer_config(*layer_);
  return config;
}

namespace {

using detail::Args;
using detail::read_fields;

template <class L, class O>
std::shared_ptr<Layer> recurrent(const json& c, const char* cls) {
  const Args a(c, cls);
  return std::make_shared<L>(a.required_int("units"), read_fields<O>(a));
}

}  // namespace

void detail::register_recurrent_layers(Factories& f) {
  f["SimpleRNN"] = [](const json& c) { return recurrent<SimpleRNN, SimpleRNNOptions>(c, "SimpleRNN"); };
  f["LSTM"] = [](const json& c) { return recurrent<LSTM, LSTMOptions>(c, "LSTM"); };
  f["GRU"] = [](const json& c) { return recurrent<GRU, GRUOptions>(c, "GRU"); };
  f["Bidirectional"] = [](const json& c) {
    const Args a(c, "Bidirectional");
    auto o = read_fields<BidirectionalOptions>(a);
    if (a.has("backward_layer")) o.backward_layer = a.sublayer("backward_layer");
    return std::make_shared<Bidirectional>(LayerRef(a.sublayer("layer")), o);
  };
  f["TimeDistributed"] = [](const json& c) {
    const Args a(c, "TimeDistributed");
    return std::make_shared<TimeDistributed>(LayerRef(a.sublayer("layer")), read_fields<TimeDistributedOptions>(a));
  };
}

}  // namespace keel::layers
