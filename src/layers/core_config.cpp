// The configs of the core layers (Dense, activations, reshaping, Dropout, merging, Rescaling,
// Embedding, InputLayer): one field list per options struct, get_config, and the factories the
// registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>

#include <fmt/core.h>

#include "keel/layers/core.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, DenseOptions& o) {
  v("activation", o.activation);
  v("use_bias", o.use_bias);
  v("kernel_initializer", o.kernel_initializer);
  v("bias_initializer", o.bias_initializer);
  v("kernel_regularizer", o.kernel_regularizer);
  v("bias_regularizer", o.bias_regularizer);
  v("activity_regularizer", o.activity_regularizer);
  v("kernel_constraint", o.kernel_constraint);
  v("bias_constraint", o.bias_constraint);
}

template <class V>
void fields(V&& v, ReLUOptions& o) {
  v("max_value", o.max_value);
  v("negative_slope", o.negative_slope);
  v("threshold", o.threshold);
}

template <class V>
void fields(V&& v, LeakyReLUOptions& o) {
  v("negative_slope", o.negative_slope);
}

template <class V>
void fields(V&& v, SoftmaxOptions& o) {
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, FlattenOptions& o) {
  v("data_format", o.data_format);
}

template <class V>
void fields(V&& v, DropoutOptions& o) {
  v("noise_shape", o.noise_shape);
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, ConcatenateOptions& o) {
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, RescalingOptions& o) {
  v("offset", o.offset);
}

template <class V>
void fields(V&& v, EmbeddingOptions& o) {
  v("embeddings_initializer", o.embeddings_initializer);
  v("embeddings_regularizer", o.embeddings_regularizer);
  v("activity_regularizer", o.activity_regularizer);
  v("embeddings_constraint", o.embeddings_constraint);
  v("mask_zero", o.mask_zero);
  v("input_length", o.input_length);
}

// The layers whose options hold only the base fields (name, dtype).
template <class V> void fields(V&&, ActivationOptions&) {}
template <class V> void fields(V&&, ReshapeOptions&) {}
template <class V> void fields(V&&, PermuteOptions&) {}
template <class V> void fields(V&&, MaskingOptions&) {}
template <class V> void fields(V&&, AddOptions&) {}
template <class V> void fields(V&&, MultiplyOptions&) {}

}  // namespace detail

using detail::write_fields;
using json = nlohmann::json;

nlohmann::json Dense::get_config() const {
  auto c = Layer::get_config();
  c["units"] = units_;
  write_fields(c, options_);
  return c;
}

nlohmann::json Activation::get_config() const {
  auto c = Layer::get_config();
  c["activation"] = activation_.name();
  return c;
}

nlohmann::json ReLU::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json LeakyReLU::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json Softmax::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json Flatten::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json Reshape::get_config() const {
  auto c = Layer::get_config();
  c["target_shape"] = target_shape_.dims();
  return c;
}

nlohmann::json Permute::get_config() const {
  auto c = Layer::get_config();
  c["dims"] = dims_;
  return c;
}

nlohmann::json Masking::get_config() const {
  auto c = Layer::get_config();
  c["mask_value"] = mask_value_;
  return c;
}

nlohmann::json Dropout::get_config() const {
  auto c = Layer::get_config();
  c["rate"] = rate_;
  write_fields(c, options_);
  return c;
}

nlohmann::json Concatenate::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json Rescaling::get_config() const {
  auto c = Layer::get_config();
  c["scale"] = scale_;
  write_fields(c, options_);
  return c;
}

nlohmann::json Embedding::get_config() const {
  auto c = Layer::get_config();
  c["input_dim"] = input_dim_;
  c["output_dim"] = output_dim_;
  write_fields(c, options_);
  return c;
}

namespace {

using detail::Args;
using detail::read_fields;

// The most elements one example of an input may have (a Sequential builds on one example).
constexpr std::uint64_t kMaxInputElements = std::uint64_t{1} << 32;

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

}  // namespace

void detail::register_core_layers(Factories& f) {
  f["InputLayer"] = input_layer;
  f["Dense"] = [](const json& c) {
    const Args a(c, "Dense");
    return std::make_shared<Dense>(a.required_int("units"), read_fields<DenseOptions>(a));
  };
  f["Activation"] = [](const json& c) {
    const Args a(c, "Activation");
    return std::make_shared<Activation>(a.activation("activation", "linear"), read_fields<ActivationOptions>(a));
  };
  f["ReLU"] = [](const json& c) { return std::make_shared<ReLU>(read_fields<ReLUOptions>(Args(c, "ReLU"))); };
  f["LeakyReLU"] = [](const json& c) {
    const Args a(c, "LeakyReLU");
    auto o = read_fields<LeakyReLUOptions>(a);
    if (!a.has("negative_slope") && a.has("alpha")) o.negative_slope = a.number("alpha", o.negative_slope);  // Keras 2
    return std::make_shared<LeakyReLU>(o);
  };
  f["Softmax"] = [](const json& c) { return std::make_shared<Softmax>(read_fields<SoftmaxOptions>(Args(c, "Softmax"))); };
  f["Flatten"] = [](const json& c) { return std::make_shared<Flatten>(read_fields<FlattenOptions>(Args(c, "Flatten"))); };
  f["Reshape"] = [](const json& c) {
    const Args a(c, "Reshape");
    if (!a.has("target_shape")) throw ValueError("Reshape.from_config: the config has no 'target_shape'");
    return std::make_shared<Reshape>(Shape(a.dims("target_shape")), read_fields<ReshapeOptions>(a));
  };
  f["Permute"] = [](const json& c) {
    const Args a(c, "Permute");
    return std::make_shared<Permute>(a.ints("dims"), read_fields<PermuteOptions>(a));
  };
  f["Dropout"] = [](const json& c) {
    const Args a(c, "Dropout");
    return std::make_shared<Dropout>(a.required_number("rate"), read_fields<DropoutOptions>(a));
  };
  f["Masking"] = [](const json& c) {
    const Args a(c, "Masking");
    return std::make_shared<Masking>(a.number("mask_value", 0.0), read_fields<MaskingOptions>(a));
  };
  f["Add"] = [](const json& c) { return std::make_shared<Add>(read_fields<AddOptions>(Args(c, "Add"))); };
  f["Multiply"] = [](const json& c) { return std::make_shared<Multiply>(read_fields<MultiplyOptions>(Args(c, "Multiply"))); };
  f["Concatenate"] = [](const json& c) {
    return std::make_shared<Concatenate>(read_fields<ConcatenateOptions>(Args(c, "Concatenate")));
  };
  f["Rescaling"] = [](const json& c) {
    const Args a(c, "Rescaling");
    return std::make_shared<Rescaling>(a.required_number("scale"), read_fields<RescalingOptions>(a));
  };
  f["Identity"] = [](const json& c) { return std::make_shared<Identity>(IdentityOptions{.name = Args(c, "Identity").name()}); };
  f["Lambda"] = [](const json& c) {
    const Args a(c, "Lambda");
    if (!a.has("function")) throw ValueError("Lambda.from_config: the config has no 'function'");
    return std::make_shared<Lambda>(a.text("function", ""), LambdaOptions{.name = a.name()});
  };
  f["Embedding"] = [](const json& c) {
    const Args a(c, "Embedding");
    return std::make_shared<Embedding>(a.required_int("input_dim"), a.required_int("output_dim"),
                                       read_fields<EmbeddingOptions>(a));
  };
}

}  // namespace keel::layers
