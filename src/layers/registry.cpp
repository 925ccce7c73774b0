// The layer registry: class name -> factory(config). The built-in factories read back what each
// layer's get_config() writes (see the layer headers for the meaning of each key).
#include "keel/layers/registry.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/core.h>

#include "keel/layers/attention.hpp"
#include "keel/layers/convolutional.hpp"
#include "keel/layers/core.hpp"
#include "keel/layers/normalization.hpp"
#include "keel/layers/preprocessing.hpp"
#include "keel/layers/recurrent.hpp"
#include "keel/ops/creation.hpp"
#include "layers/loading_scope.hpp"
#include "models/serialization.hpp"

namespace keel::layers {

// ---- loading scope ---------------------------------------------------------------------------

namespace detail {
namespace {
thread_local LoadingScope* current_scope = nullptr;
}

LoadingScope::LoadingScope(std::uint64_t budget, std::string file_name)
    : remaining(budget), file(std::move(file_name)), previous(current_scope) {
  current_scope = this;
}

LoadingScope::~LoadingScope() { current_scope = previous; }
}  // namespace detail

namespace {

using nlohmann::json;

// The most elements one example of an input may have (a Sequential builds on one example).
constexpr std::uint64_t kMaxInputElements = std::uint64_t{1} << 32;

// A short rendering of a JSON value for error messages.
std::string show(const json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// An initializer by name; while a model is being loaded, zeros within the weight budget (see
// LoadingScope), which also lets a model whose initializer was a function load (its weights come
// from the file; the name is kept so the model saves the same config again).
initializers::Initializer make_initializer(const initializers::Initializer& real) {
  if (!detail::current_scope) return real;
  return initializers::Initializer(
      [real](const Shape& shape, DType dtype) {
        detail::LoadingScope* scope = detail::current_scope;
        if (!scope) return real(shape, dtype);
        const auto n = static_cast<std::uint64_t>(shape.num_elements());
        if (n > scope->remaining)
          throw IOError(fmt::format("load_model: {}: the config asks for a weight of shape {}, but the weights file "
                                    "holds no more values for it", scope->file, shape.to_string()));
        scope->remaining -= n;
        return zeros(shape, dtype);
      },
      real.name(), real.arguments());
}
initializers::Initializer make_initializer(const std::string& name) {
  return make_initializer(initializers::Initializer(name));
}

// Typed access to one layer config, with Keras' defaults for missing keys and null, and a
// ValueError naming the class and the key for a value of the wrong type.
class Args {
 public:
  Args(const json& config, std::string cls) : c_(config), cls_(std::move(cls)) {
    if (!c_.is_object()) throw ValueError(fmt::format("{}.from_config: the config must be a JSON object, got {}", cls_, show(c_)));
  }

  const json* find(const char* key) const {
    auto it = c_.find(key);
    return it == c_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  [[noreturn]] void bad(const char* key, const char* want, const json& got) const {
    throw ValueError(fmt::format("{}.from_config: '{}' must be {}, got {}", cls_, key, want, show(got)));
  }

  std::int64_t int64_of(const char* key, const json& v) const {
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        bad(key, "an integer in range", v);
      return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
    if (v.is_number_integer()) return v.get<std::int64_t>();
    if (v.is_number_float()) {  // 8.0: an integer written by a float-minded writer
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
    }
    bad(key, "an integer", v);
  }
  int int_of(const char* key, const json& v) const {
    const std::int64_t i = int64_of(key, v);
    if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) bad(key, "a 32-bit integer", v);
    return static_cast<int>(i);
  }
  double number_of(const char* key, const json& v) const {
    if (!v.is_number()) bad(key, "a number", v);
    return v.get<double>();
  }

  int required_int(const char* key) const {
    const json* v = find(key);
    if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls_, key));
    return int_of(key, *v);
  }
  int integer(const char* key, int def) const {
    const json* v = find(key);
    return v ? int_of(key, *v) : def;
  }
  std::optional<int> opt_int(const char* key) const {
    const json* v = find(key);
    return v ? std::optional<int>(int_of(key, *v)) : std::nullopt;
  }
  double required_number(const char* key) const {
    const json* v = find(key);
    if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls_, key));
    return number_of(key, *v);
  }
  double number(const char* key, double def) const {
    const json* v = find(key);
    return v ? number_of(key, *v) : def;
  }
  std::optional<double> opt_number(const char* key) const {
    const json* v = find(key);
    return v ? std::optional<double>(number_of(key, *v)) : std::nullopt;
  }
  bool flag(const char* key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) bad(key, "true or false", *v);
    return v->get<bool>();
  }
  std::string text(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_string()) bad(key, "a string", *v);
    return v->get<std::string>();
  }
  std::string name() const { return text("name", ""); }
  std::optional<std::uint64_t> seed(const char* key = "seed") const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) return v->get<std::uint64_t>();
    const std::int64_t s = int64_of(key, *v);
    if (s < 0) bad(key, "a non-negative integer", *v);
    return static_cast<std::uint64_t>(s);
  }
  // Keras' int-or-tuple arguments: [a, b] or a single a (for both).
  std::array<int, 2> pair(const char* key, std::array<int, 2> def) const {
    const json* v = find(key);
    if (!v) return def;
    if (v->is_array()) {
      if (v->size() != 2) bad(key, "an integer or a pair of integers", *v);
      return {int_of(key, (*v)[0]), int_of(key, (*v)[1])};
    }
    const int both = int_of(key, *v);
    return {both, both};
  }
  OptionalPair optional_pair(const char* key) const {
    if (!has(key)) return std::nullopt;
    return OptionalPair(pair(key, {0, 0}));
  }
  // Conv1D's int-or-1-tuple arguments.
  int single(const char* key, int def) const {
    const json* v = find(key);
    if (!v) return def;
    if (v->is_array()) {
      if (v->size() != 1) bad(key, "an integer or a list of one integer", *v);
      return int_of(key, (*v)[0]);
    }
    return int_of(key, *v);
  }
  std::vector<int> ints(const char* key) const {
    const json* v = find(key);
    if (!v) return {};
    if (!v->is_array()) return {int_of(key, *v)};
    std::vector<int> out;
    for (const auto& e : *v) out.push_back(int_of(key, e));
    return out;
  }
  // Shapes with Keras' None (null) as -1.
  std::vector<std::int64_t> dims(const char* key) const {
    const json* v = find(key);
    if (!v) return {};
    if (!v->is_array()) bad(key, "a list of dimensions", *v);
    std::vector<std::int64_t> out;
    for (const auto& e : *v) out.push_back(e.is_null() ? -1 : int64_of(key, e));
    return out;
  }
  initializers::Initializer initializer(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return make_initializer(def);
    std::string name;
    if (v->is_string()) {
      name = v->get<std::string>();
    } else if (v->is_object() && v->contains("class_name") && (*v)["class_name"].is_string()) {
      // Keras' serialized initializers: {"class_name": "GlorotUniform", ...} is "glorot_uniform".
      name = to_snake_case((*v)["class_name"].get<std::string>());
      if (name == "constant") {
        double value = 0;
        const auto cfg = v->find("config");
        if (cfg != v->end() && cfg->is_object() && cfg->contains("value")) value = number_of(key, (*cfg)["value"]);
        return make_initializer(initializers::Constant(value));
      }
    } else {
      bad(key, "an initializer name or {\"class_name\": ...}", *v);
    }
    try {
      return make_initializer(name);
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("{}.from_config: '{}': {}", cls_, key, e.what()));
    }
  }
  regularizers::Regularizer regularizer(const char* key) const {
    const json* v = find(key);
    if (!v) return {};
    if (v->is_string()) {
      try {
        return regularizers::Regularizer(v->get<std::string>());
      } catch (const ValueError& e) {
        throw ValueError(fmt::format("{}.from_config: '{}': {}", cls_, key, e.what()));
      }
    }
    const auto cls_it = v->is_object() ? v->find("class_name") : v->end();
    if (!v->is_object() || cls_it == v->end() || !cls_it->is_string())
      bad(key, "null, a regularizer name or {\"class_name\": \"L1\" | \"L2\" | \"L1L2\", \"config\": ...}", *v);
    const std::string cls = cls_it->get<std::string>();
    const json empty = json::object();
    const auto cfg_it = v->find("config");
    const json& cfg = cfg_it != v->end() && cfg_it->is_object() ? *cfg_it : empty;
    const auto amount = [&](const char* which, double def) {
      auto it = cfg.find(which);
      if (it == cfg.end() || it->is_null()) return def;
      const double x = number_of(key, *it);
      if (!std::isfinite(x) || x < 0) bad(key, "a regularizer with finite, non-negative amounts", *v);
      return x;
    };
    if (cls == "L1") return regularizers::l1(amount("l1", 0.01));
    if (cls == "L2") return regularizers::l2(amount("l2", 0.01));
    if (cls == "L1L2") return regularizers::l1_l2(amount("l1", 0.0), amount("l2", 0.0));
    bad(key, "a regularizer of class L1, L2 or L1L2", *v);
  }
  activations::ActivationFn activation(const char* key, const std::string& def) const {
    const json* v = find(key);
    std::string name = def;
    if (v) {
      if (!v->is_string()) bad(key, "an activation name", *v);
      name = v->get<std::string>();
    }
    try {
      return activations::ActivationFn(name);
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("{}.from_config: '{}': {} (an activation given as a function cannot be saved; "
                                   "use a named activation or a registered custom layer)", cls_, key, e.what()));
    }
  }
  std::shared_ptr<Layer> sublayer(const char* key) const {
    const json* v = find(key);
    if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls_, key));
    return deserialize(*v);
  }

 private:
  const json& c_;
  std::string cls_;
};

using Factory = LayerFactory;

// ---- the built-in factories ------------------------------------------------------------------

std::shared_ptr<Layer> dense(const json& c) {
  const Args a(c, "Dense");
  DenseOptions o;
  o.activation = a.activation("activation", "linear");
  o.use_bias = a.flag("use_bias", true);
  o.kernel_initializer = a.initializer("kernel_initializer", "glorot_uniform");
  o.bias_initializer = a.initializer("bias_initializer", "zeros");
  o.kernel_regularizer = a.regularizer("kernel_regularizer");
  o.bias_regularizer = a.regularizer("bias_regularizer");
  o.activity_regularizer = a.regularizer("activity_regularizer");
  o.name = a.name();
  return std::make_shared<Dense>(a.required_int("units"), o);
}

std::shared_ptr<Layer> activation(const json& c) {
  const Args a(c, "Activation");
  return std::make_shared<Activation>(a.activation("activation", "linear"), ActivationOptions{a.name()});
}

std::shared_ptr<Layer> relu(const json& c) {
  const Args a(c, "ReLU");
  return std::make_shared<ReLU>(ReLUOptions{a.opt_number("max_value"), a.number("negative_slope", 0.0),
                                            a.number("threshold", 0.0), a.name()});
}

std::shared_ptr<Layer> leaky_relu(const json& c) {
  const Args a(c, "LeakyReLU");
  // Keras 2 called the slope "alpha".
  const double slope = a.has("negative_slope") ? a.number("negative_slope", 0.3) : a.number("alpha", 0.3);
  return std::make_shared<LeakyReLU>(LeakyReLUOptions{slope, a.name()});
}

std::shared_ptr<Layer> masking(const json& c) {
  const Args a(c, "Masking");
  return std::make_shared<Masking>(a.number("mask_value", 0.0), MaskingOptions{a.name()});
}

std::shared_ptr<Layer> softmax(const json& c) {
  const Args a(c, "Softmax");
  return std::make_shared<Softmax>(SoftmaxOptions{a.integer("axis", -1), a.name()});
}

std::shared_ptr<Layer> flatten(const json& c) {
  const Args a(c, "Flatten");
  return std::make_shared<Flatten>(FlattenOptions{a.text("data_format", "channels_last"), a.name()});
}

std::shared_ptr<Layer> reshape(const json& c) {
  const Args a(c, "Reshape");
  if (!a.has("target_shape")) throw ValueError("Reshape.from_config: the config has no 'target_shape'");
  return std::make_shared<Reshape>(Shape(a.dims("target_shape")), ReshapeOptions{a.name()});
}

std::shared_ptr<Layer> permute(const json& c) {
  const Args a(c, "Permute");
  return std::make_shared<Permute>(a.ints("dims"), PermuteOptions{a.name()});
}

std::shared_ptr<Layer> dropout(const json& c) {
  const Args a(c, "Dropout");
  return std::make_shared<Dropout>(a.required_number("rate"), DropoutOptions{a.dims("noise_shape"), a.seed(), a.name()});
}

std::shared_ptr<Layer> add(const json& c) { return std::make_shared<Add>(AddOptions{Args(c, "Add").name()}); }
std::shared_ptr<Layer> multiply(const json& c) {
  return std::make_shared<Multiply>(MultiplyOptions{Args(c, "Multiply").name()});
}

std::shared_ptr<Layer> concatenate(const json& c) {
  const Args a(c, "Concatenate");
  return std::make_shared<Concatenate>(ConcatenateOptions{a.integer("axis", -1), a.name()});
}

std::shared_ptr<Layer> rescaling(const json& c) {
  const Args a(c, "Rescaling");
  return std::make_shared<Rescaling>(a.required_number("scale"), RescalingOptions{a.number("offset", 0.0), a.name()});
}

std::shared_ptr<Layer> embedding(const json& c) {
  const Args a(c, "Embedding");
  EmbeddingOptions o;
  o.embeddings_initializer = a.initializer("embeddings_initializer", "random_uniform");
  o.embeddings_regularizer = a.regularizer("embeddings_regularizer");
  o.activity_regularizer = a.regularizer("activity_regularizer");
  o.mask_zero = a.flag("mask_zero", false);
  o.input_length = a.opt_int("input_length");
  o.name = a.name();
  return std::make_shared<Embedding>(a.required_int("input_dim"), a.required_int("output_dim"), o);
}

// The options every convolution shares, by their Keras names.
template <class O>
void conv_common(const Args& a, O& o) {
  o.padding = a.text("padding", "valid");
  o.data_format = a.text("data_format", "channels_last");
  o.activation = a.activation("activation", "linear");
  o.use_bias = a.flag("use_bias", true);
  o.bias_initializer = a.initializer("bias_initializer", "zeros");
  o.bias_regularizer = a.regularizer("bias_regularizer");
  o.activity_regularizer = a.regularizer("activity_regularizer");
  o.name = a.name();
}

std::shared_ptr<Layer> conv1d(const json& c) {
  const Args a(c, "Conv1D");
  Conv1DOptions o;
  conv_common(a, o);
  o.strides = a.single("strides", 1);
  o.dilation_rate = a.single("dilation_rate", 1);
  o.groups = a.integer("groups", 1);
  o.kernel_initializer = a.initializer("kernel_initializer", "glorot_uniform");
  o.kernel_regularizer = a.regularizer("kernel_regularizer");
  if (!a.has("kernel_size")) throw ValueError("Conv1D.from_config: the config has no 'kernel_size'");
  return std::make_shared<Conv1D>(a.required_int("filters"), a.single("kernel_size", 1), o);
}

std::shared_ptr<Layer> conv2d(const json& c) {
  const Args a(c, "Conv2D");
  Conv2DOptions o;
  conv_common(a, o);
  o.strides = a.pair("strides", {1, 1});
  o.dilation_rate = a.pair("dilation_rate", {1, 1});
  o.groups = a.integer("groups", 1);
  o.kernel_initializer = a.initializer("kernel_initializer", "glorot_uniform");
  o.kernel_regularizer = a.regularizer("kernel_regularizer");
  if (!a.has("kernel_size")) throw ValueError("Conv2D.from_config: the config has no 'kernel_size'");
  return std::make_shared<Conv2D>(a.required_int("filters"), a.pair("kernel_size", {1, 1}), o);
}

std::shared_ptr<Layer> conv2d_transpose(const json& c) {
  const Args a(c, "Conv2DTranspose");
  Conv2DTransposeOptions o;
  conv_common(a, o);
  o.strides = a.pair("strides", {1, 1});
  o.output_padding = a.optional_pair("output_padding");
  o.dilation_rate = a.pair("dilation_rate", {1, 1});
  o.kernel_initializer = a.initializer("kernel_initializer", "glorot_uniform");
  o.kernel_regularizer = a.regularizer("kernel_regularizer");
  if (!a.has("kernel_size")) throw ValueError("Conv2DTranspose.from_config: the config has no 'kernel_size'");
  return std::make_shared<Conv2DTranspose>(a.required_int("filters"), a.pair("kernel_size", {1, 1}), o);
}

std::shared_ptr<Layer> depthwise_conv2d(const json& c) {
  const Args a(c, "DepthwiseConv2D");
  DepthwiseConv2DOptions o;
  conv_common(a, o);
  o.strides = a.pair("strides", {1, 1});
  o.depth_multiplier = a.integer("depth_multiplier", 1);
  o.dilation_rate = a.pair("dilation_rate", {1, 1});
  o.depthwise_initializer = a.initializer("depthwise_initializer", "glorot_uniform");
  o.depthwise_regularizer = a.regularizer("depthwise_regularizer");
  if (!a.has("kernel_size")) throw ValueError("DepthwiseConv2D.from_config: the config has no 'kernel_size'");
  return std::make_shared<DepthwiseConv2D>(a.pair("kernel_size", {1, 1}), o);
}

template <class L, class O>
std::shared_ptr<Layer> pooling(const json& c, const char* cls) {
  const Args a(c, cls);
  O o;
  o.strides = a.optional_pair("strides");
  o.padding = a.text("padding", "valid");
  o.data_format = a.text("data_format", "channels_last");
  o.name = a.name();
  return std::make_shared<L>(a.pair("pool_size", {2, 2}), o);
}

template <class L, class O>
std::shared_ptr<Layer> global_pooling(const json& c, const char* cls) {
  const Args a(c, cls);
  return std::make_shared<L>(O{a.text("data_format", "channels_last"), a.flag("keepdims", false), a.name()});
}

std::shared_ptr<Layer> batch_normalization(const json& c) {
  const Args a(c, "BatchNormalization");
  BatchNormalizationOptions o;
  const std::vector<int> axes = a.ints("axis");  // Keras 2 wrote [3]
  if (axes.size() > 1) throw ValueError("BatchNormalization.from_config: 'axis' must be one axis");
  o.axis = axes.empty() ? -1 : axes[0];
  o.momentum = a.number("momentum", 0.99);
  o.epsilon = a.number("epsilon", 1e-3);
  o.center = a.flag("center", true);
  o.scale = a.flag("scale", true);
  o.beta_initializer = a.initializer("beta_initializer", "zeros");
  o.gamma_initializer = a.initializer("gamma_initializer", "ones");
  o.moving_mean_initializer = a.initializer("moving_mean_initializer", "zeros");
  o.moving_variance_initializer = a.initializer("moving_variance_initializer", "ones");
  o.beta_regularizer = a.regularizer("beta_regularizer");
  o.gamma_regularizer = a.regularizer("gamma_regularizer");
  o.name = a.name();
  return std::make_shared<BatchNormalization>(o);
}

std::shared_ptr<Layer> layer_normalization(const json& c) {
  const Args a(c, "LayerNormalization");
  LayerNormalizationOptions o;
  std::vector<int> axes = a.ints("axis");
  if (axes.empty()) axes = {-1};
  o.axis = NormalizationAxes(axes);
  o.epsilon = a.number("epsilon", 1e-3);
  o.center = a.flag("center", true);
  o.scale = a.flag("scale", true);
  o.beta_initializer = a.initializer("beta_initializer", "zeros");
  o.gamma_initializer = a.initializer("gamma_initializer", "ones");
  o.beta_regularizer = a.regularizer("beta_regularizer");
  o.gamma_regularizer = a.regularizer("gamma_regularizer");
  o.name = a.name();
  return std::make_shared<LayerNormalization>(o);
}

// The options SimpleRNN, LSTM and GRU share.
template <class O>
void rnn_common(const Args& a, O& o) {
  o.activation = a.activation("activation", "tanh");
  o.use_bias = a.flag("use_bias", true);
  o.kernel_initializer = a.initializer("kernel_initializer", "glorot_uniform");
  o.recurrent_initializer = a.initializer("recurrent_initializer", "orthogonal");
  o.bias_initializer = a.initializer("bias_initializer", "zeros");
  o.kernel_regularizer = a.regularizer("kernel_regularizer");
  o.recurrent_regularizer = a.regularizer("recurrent_regularizer");
  o.bias_regularizer = a.regularizer("bias_regularizer");
  o.activity_regularizer = a.regularizer("activity_regularizer");
  o.dropout = a.number("dropout", 0.0);
  o.recurrent_dropout = a.number("recurrent_dropout", 0.0);
  o.seed = a.seed();
  o.return_sequences = a.flag("return_sequences", false);
  o.return_state = a.flag("return_state", false);
  o.go_backwards = a.flag("go_backwards", false);
  o.stateful = a.flag("stateful", false);
  o.unroll = a.flag("unroll", false);
  o.name = a.name();
}

std::shared_ptr<Layer> simple_rnn(const json& c) {
  const Args a(c, "SimpleRNN");
  SimpleRNNOptions o;
  rnn_common(a, o);
  return std::make_shared<SimpleRNN>(a.required_int("units"), o);
}

std::shared_ptr<Layer> lstm(const json& c) {
  const Args a(c, "LSTM");
  LSTMOptions o;
  rnn_common(a, o);
  o.recurrent_activation = a.activation("recurrent_activation", "sigmoid");
  o.unit_forget_bias = a.flag("unit_forget_bias", true);
  return std::make_shared<LSTM>(a.required_int("units"), o);
}

std::shared_ptr<Layer> gru(const json& c) {
  const Args a(c, "GRU");
  GRUOptions o;
  rnn_common(a, o);
  o.recurrent_activation = a.activation("recurrent_activation", "sigmoid");
  o.reset_after = a.flag("reset_after", true);
  return std::make_shared<GRU>(a.required_int("units"), o);
}

std::shared_ptr<Layer> bidirectional(const json& c) {
  const Args a(c, "Bidirectional");
  BidirectionalOptions o;
  o.merge_mode = a.text("merge_mode", "concat");
  if (a.has("backward_layer")) o.backward_layer = a.sublayer("backward_layer");
  o.name = a.name();
  return std::make_shared<Bidirectional>(LayerRef(a.sublayer("layer")), o);
}

std::shared_ptr<Layer> time_distributed(const json& c) {
  const Args a(c, "TimeDistributed");
  return std::make_shared<TimeDistributed>(LayerRef(a.sublayer("layer")), TimeDistributedOptions{a.name()});
}

std::shared_ptr<Layer> multi_head_attention(const json& c) {
  const Args a(c, "MultiHeadAttention");
  MultiHeadAttentionOptions o;
  o.value_dim = a.opt_int("value_dim");
  o.dropout = a.number("dropout", 0.0);
  o.use_bias = a.flag("use_bias", true);
  for (int d : a.ints("output_shape")) o.output_shape.push_back(d);
  o.attention_axes = a.ints("attention_axes");
  o.kernel_initializer = a.initializer("kernel_initializer", "glorot_uniform");
  o.bias_initializer = a.initializer("bias_initializer", "zeros");
  o.kernel_regularizer = a.regularizer("kernel_regularizer");
  o.bias_regularizer = a.regularizer("bias_regularizer");
  o.activity_regularizer = a.regularizer("activity_regularizer");
  o.seed = a.seed();
  o.name = a.name();
  return std::make_shared<MultiHeadAttention>(a.required_int("num_heads"), a.required_int("key_dim"), o);
}

std::shared_ptr<Layer> random_flip(const json& c) {
  const Args a(c, "RandomFlip");
  return std::make_shared<RandomFlip>(a.text("mode", "horizontal_and_vertical"),
                                      RandomFlipOptions{a.seed(), a.text("data_format", "channels_last"), a.name()});
}

std::shared_ptr<Layer> random_crop(const json& c) {
  const Args a(c, "RandomCrop");
  return std::make_shared<RandomCrop>(a.required_int("height"), a.required_int("width"),
                                      RandomCropOptions{a.seed(), a.text("data_format", "channels_last"), a.name()});
}

TranslationFactor translation_factor(const Args& a, const json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) throw ValueError(fmt::format("RandomTranslation.from_config: the config has no '{}'", key));
  if (it->is_array()) {
    if (it->size() != 2) a.bad(key, "a number or a pair of numbers", *it);
    return TranslationFactor(a.number_of(key, (*it)[0]), a.number_of(key, (*it)[1]));
  }
  return TranslationFactor(a.number_of(key, *it));
}

std::shared_ptr<Layer> random_translation(const json& c) {
  const Args a(c, "RandomTranslation");
  RandomTranslationOptions o;
  o.fill_mode = a.text("fill_mode", "reflect");
  o.interpolation = a.text("interpolation", "bilinear");
  o.seed = a.seed();
  o.fill_value = a.number("fill_value", 0.0);
  o.data_format = a.text("data_format", "channels_last");
  o.name = a.name();
  return std::make_shared<RandomTranslation>(translation_factor(a, c, "height_factor"),
                                             translation_factor(a, c, "width_factor"), o);
}

std::shared_ptr<Layer> input_layer(const json& c) {
  const Args a(c, "InputLayer");
  // Keras 3 writes batch_shape; Keras 2 batch_input_shape; "shape" leaves the batch out.
  std::vector<std::int64_t> dims;
  if (a.has("batch_shape")) {
    dims = a.dims("batch_shape");
  } else if (a.has("batch_input_shape")) {
    dims = a.dims("batch_input_shape");
  } else if (a.has("shape")) {
    dims = a.dims("shape");
    dims.insert(dims.begin(), -1);
  } else {
    throw ValueError("InputLayer.from_config: the config has no 'batch_shape'");
  }
  if (dims.empty()) throw ValueError("InputLayer.from_config: 'batch_shape' needs the batch dimension");
  const std::vector<std::int64_t> rest(dims.begin() + 1, dims.end());
  std::uint64_t elements = 1;
  for (auto d : rest) {
    if (d < 0) throw ValueError(fmt::format("InputLayer.from_config: unknown (None) dimensions are not supported yet, "
                                            "got batch_shape {}", Shape(dims).to_string()));
    // A Sequential builds on one example of this shape at once: refuse one that cannot exist.
    if (d != 0 && elements > kMaxInputElements / static_cast<std::uint64_t>(d))
      throw ValueError(fmt::format("InputLayer.from_config: batch_shape {} is implausibly large", Shape(dims).to_string()));
    elements *= std::max<std::uint64_t>(static_cast<std::uint64_t>(d), 1);
  }
  return std::make_shared<InputLayer>(Shape(rest), a.name());
}

// Every built-in layer's factory.
std::map<std::string, Factory> builtin_factories() {
  std::map<std::string, Factory> f;
  f["InputLayer"] = input_layer;
  f["Dense"] = dense;
  f["Activation"] = activation;
  f["ReLU"] = relu;
  f["LeakyReLU"] = leaky_relu;
  f["Softmax"] = softmax;
  f["Flatten"] = flatten;
  f["Reshape"] = reshape;
  f["Permute"] = permute;
  f["Dropout"] = dropout;
  f["Masking"] = masking;
  f["Add"] = add;
  f["Multiply"] = multiply;
  f["Concatenate"] = concatenate;
  f["Rescaling"] = rescaling;
  f["Embedding"] = embedding;
  f["Conv1D"] = conv1d;
  f["Conv2D"] = conv2d;
  f["Conv2DTranspose"] = conv2d_transpose;
  f["DepthwiseConv2D"] = depthwise_conv2d;
  f["MaxPooling2D"] = [](const json& c) { return pooling<MaxPooling2D, MaxPooling2DOptions>(c, "MaxPooling2D"); };
  f["AveragePooling2D"] = [](const json& c) {
    return pooling<AveragePooling2D, AveragePooling2DOptions>(c, "AveragePooling2D");
  };
  f["GlobalAveragePooling2D"] = [](const json& c) {
    return global_pooling<GlobalAveragePooling2D, GlobalAveragePooling2DOptions>(c, "GlobalAveragePooling2D");
  };
  f["GlobalMaxPooling2D"] = [](const json& c) {
    return global_pooling<GlobalMaxPooling2D, GlobalMaxPooling2DOptions>(c, "GlobalMaxPooling2D");
  };
  f["BatchNormalization"] = batch_normalization;
  f["LayerNormalization"] = layer_normalization;
  f["SimpleRNN"] = simple_rnn;
  f["LSTM"] = lstm;
  f["GRU"] = gru;
  f["Bidirectional"] = bidirectional;
  f["TimeDistributed"] = time_distributed;
  f["MultiHeadAttention"] = multi_head_attention;
  f["RandomFlip"] = random_flip;
  f["RandomCrop"] = random_crop;
  f["RandomTranslation"] = random_translation;
  f["Sequential"] = models::detail::sequential_from_config;
  f["Functional"] = models::detail::functional_from_config;
  return f;
}

struct Registry {
  Registry() : factories(builtin_factories()) {}
  std::mutex mutex;
  std::map<std::string, Factory> factories;
};

// Built on first use, so registering from a static initialiser in another file is safe.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_layer(const std::string& class_name, LayerFactory factory) {
  if (class_name.empty()) throw ValueError("register_layer: the class name is empty");
  if (!factory) throw ValueError(fmt::format("register_layer: the factory for '{}' is empty", class_name));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[class_name] = std::move(factory);
}

bool is_registered(const std::string& class_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.count(class_name) != 0;
}

std::vector<std::string> registered_layers() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, factory] : r.factories) out.push_back(name);
  return out;
}

std::shared_ptr<Layer> from_config(const std::string& class_name, const nlohmann::json& config) {
  Factory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(class_name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    if (class_name == "Model")
      throw ValueError("from_config: 'Model' is a subclassed model without a class name of its own; give the class "
                       "KEEL_LAYER_BOILERPLATE(YourModel) and register it with KEEL_REGISTER_LAYER(YourModel) to load it");
    throw ValueError(fmt::format("from_config: unknown layer class '{}'; register its factory with "
                                 "KEEL_REGISTER_LAYER({}) or layers::register_layer(\"{}\", ...) before loading",
                                 class_name, class_name, class_name));
  }
  if (!config.is_object())
    throw ValueError(fmt::format("{}.from_config: the config must be a JSON object, got {}", class_name, show(config)));
  std::shared_ptr<Layer> layer = factory(config);
  if (!layer) throw ValueError(fmt::format("{}.from_config: the factory returned no layer", class_name));
  // Applied here so that custom factories need not: the saved name (weights are named after it)
  // and a frozen layer (trainable defaults to true, and set_trainable(true) would unfreeze
  // sublayers saved frozen).
  if (auto it = config.find("name"); it != config.end() && it->is_string() && !it->get<std::string>().empty())
    layer->set_name(it->get<std::string>());
  if (auto it = config.find("trainable"); it != config.end() && it->is_boolean() && !it->get<bool>())
    layer->set_trainable(false);
  // The dtype policy: a policy name, or Keras 3's {"class_name": "DTypePolicy", "config": {"name": ...}}.
  // Other dtype names (an input's "int32") are not policies and leave the layer's as it is.
  if (auto it = config.find("dtype"); it != config.end()) {
    std::string policy;
    if (it->is_string()) policy = it->get<std::string>();
    else if (it->is_object() && it->contains("config") && (*it)["config"].is_object() &&
             (*it)["config"].contains("name") && (*it)["config"]["name"].is_string())
      policy = (*it)["config"]["name"].get<std::string>();
    if (policy == "float32" || policy == "mixed_float16" || policy == "mixed_bfloat16") layer->set_dtype_policy(policy);
  }
  return layer;
}

nlohmann::json serialize(const Layer& layer) {
  return {{"module", "keel.layers"},
          {"class_name", layer.class_name()},
          {"config", layer.get_config()},
          {"registered_name", layer.class_name()}};
}

std::shared_ptr<Layer> deserialize(const nlohmann::json& serialized) {
  if (!serialized.is_object())
    throw ValueError(fmt::format("layers::deserialize: expected {{\"class_name\": ..., \"config\": ...}}, got {}",
                                 show(serialized)));
  auto cls = serialized.find("class_name");
  if (cls == serialized.end() || !cls->is_string())
    throw ValueError(fmt::format("layers::deserialize: no \"class_name\" string in {}", show(serialized)));
  auto config = serialized.find("config");
  if (config == serialized.end())
    throw ValueError(fmt::format("layers::deserialize: no \"config\" for the {}", cls->get<std::string>()));
  return from_config(cls->get<std::string>(), *config);
}

}  // namespace keel::layers
