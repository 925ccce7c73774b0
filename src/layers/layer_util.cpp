#include "layers/layer_util.hpp"

#include <cctype>

#include "keel/core/tensor_impl.hpp"
#include "keel/layers/initializers.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "layers/weight_classes.hpp"
#include "ops/elementwise_internal.hpp"

namespace keel::layers::detail {

std::string who(const Layer& layer) { return fmt::format("{} ({})", layer.name(), layer.class_name()); }

Variable& required(const Layer& layer, Variable* v, const char* what, const char* flag) {
  if (!v) {
    if (!layer.built())
      throw ValueError(fmt::format("{}: '{}' does not exist before the layer is built (call it on data first)",
                                   who(layer), what));
    throw ValueError(fmt::format("{}: the layer has no '{}' ({} = false)", who(layer), what, flag));
  }
  return *v;
}

std::string lowercase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string checked_data_format(const Layer& layer, const std::string& data_format) {
  const std::string f = lowercase(data_format);
  if (f == "channels_last" || f == "channels_first") return f;
  throw ValueError(fmt::format("{}: data_format must be \"channels_last\" or \"channels_first\", got \"{}\"",
                               who(layer), data_format));
}

Tensor as_dtype(const Tensor& t, DType dtype) { return !t.defined() || t.dtype() == dtype ? t : cast(t, dtype); }

Tensor like(const Tensor& w, const Tensor& x) { return as_dtype(w, x.dtype()); }

Tensor bias_activation(const Tensor& y, const Tensor& bias, const activations::ActivationFn& activation) {
  if (!bias.defined()) return activation(y);
  if (activation.is_linear()) return bias_add(y, bias);
  if (activation.is_builtin() && keel::detail::bias_add_fuses(activation.name()))
    return bias_add(y, bias, activation.name());
  return activation(bias_add(y, bias));
}

Tensor as_bool(const Tensor& t) { return as_dtype(t, DType::bool_); }

std::string ctor_label(const char* cls, const std::string& name) {
  return name.empty() ? std::string(cls) : fmt::format("{} '{}'", cls, name);
}

Tensor pass_mask(const Tensor& input, Tensor output) {
  const Tensor mask = get_mask(input);
  return mask.defined() ? attach_mask(std::move(output), mask) : output;
}

Tensor merged_mask(const std::vector<Tensor>& inputs) {
  Tensor mask;
  for (const auto& x : inputs) {
    const Tensor m = get_mask(x);
    if (!m.defined()) continue;
    mask = mask.defined() ? logical_and(mask, m) : m;
  }
  return mask;
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& xs) {
  std::vector<Shape> out;
  out.reserve(xs.size());
  for (const auto& x : xs) out.push_back(x.shape());
  return out;
}

std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string out;
  for (const auto& s : shapes) out += (out.empty() ? "" : ", ") + s.to_string();
  return out;
}

[[noreturn]] void needs_list(const Layer& layer) {
  throw ValueError(fmt::format("{}: a merge layer should be called on a list of inputs, e.g. layer({{x, y}})",
                               who(layer)));
}

Tensor and_masks(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return logical_and(a, b);
}

int normalized_axis(const Layer& layer, int axis, const Shape& s) {
  const auto rank = static_cast<int>(s.rank());
  if (axis < -rank || axis >= rank)
    throw ValueError(fmt::format("{}: axis {} is out of range for an input of shape {} (rank {})", who(layer), axis,
                                 s.to_string(), rank));
  return axis < 0 ? axis + rank : axis;
}

Tensor attach_mask(Tensor y, const Tensor& mask) {
  y.impl()->keras_mask = mask.defined() ? mask.impl_ptr() : nullptr;
  return y;
}

std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

nlohmann::json regularizer_config(const regularizers::Regularizer& r) {
  const RegularizerClass* c = regularizer_class_of(r.l1(), r.l2());
  if (!c) return nullptr;
  nlohmann::json config = nlohmann::json::object();
  if (c->has_l1) config["l1"] = r.l1();
  if (c->has_l2) config["l2"] = r.l2();
  return {{"class_name", c->class_name}, {"config", config}};
}

nlohmann::json initializer_json(const initializers::Initializer& i) {
  if (i.arguments().empty()) return i.name();
  nlohmann::json config = nlohmann::json::object();
  for (const auto& [key, value] : i.arguments()) config[key] = value;
  // A built-in class by its Keras name; a user's parameterised initializer by its own, capitalised.
  const InitializerClass* c = initializer_class(i.name());
  std::string cls = c ? c->class_name : i.name();
  if (!cls.empty()) cls[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(cls[0])));
  return {{"module", "keras.initializers"}, {"class_name", cls}, {"config", config}, {"registered_name", nullptr}};
}

nlohmann::json regularizer_json(const regularizers::Regularizer& r) {
  nlohmann::json j = regularizer_config(r);
  if (!j.is_null()) {
    j["module"] = "keras.regularizers";
    j["registered_name"] = nullptr;
  }
  return j;
}

nlohmann::json seed_config(const std::optional<std::uint64_t>& seed) {
  return seed ? nlohmann::json(*seed) : nlohmann::json(nullptr);
}

}  // namespace keel::layers::detail
