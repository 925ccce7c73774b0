// The regularization layers: compositions of differentiable ops (the noise is a constant of the
// graph, so gradients flow through the kept / scaled inputs as in Keras), training-only.
#include "keel/layers/regularization.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/core/device.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::ctor_label;
using detail::pass_mask;

using detail::who;

namespace {

// Keras' check for a drop rate; 1 is refused too, as the kept values would be scaled by 1 / 0.
void check_rate(const char* cls, const std::string& name, double rate) {
  if (!(rate >= 0 && rate < 1))  // also rejects NaN
    throw ValueError(fmt::format("{}: rate must be in [0, 1), got {}", ctor_label(cls, name), rate));
}

// The seed of the n-th training call of a seeded layer (as Dropout derives its own), so that
// successive steps draw different, reproducible noise.
std::uint64_t call_seed(std::uint64_t seed, std::uint64_t call) {
  return detail::mix(seed + 0x9E3779B97F4A7C15ull * call);
}

// Draws from a stream of its own when the layer is seeded; otherwise from the stream in effect
// (the global one, or the model's in fit()).
template <class F>
Tensor draw(const std::optional<std::uint64_t>& seed, std::uint64_t& calls, const Tensor& like, F&& f) {
  DeviceScope device(like.device());
  if (!seed) return f();
  random::SeedGenerator gen(call_seed(*seed, calls++));
  random::GeneratorScope scope(gen);
  return f();
}

bool training_now(bool training) { return training || in_training_call(); }

}  // namespace

// ---- SpatialDropout1D / 2D / 3D --------------------------------------------------------------

SpatialDropoutBase::SpatialDropoutBase(int spatial_dims, double rate, std::string data_format,
                                       std::optional<std::uint64_t> seed, std::string name)
    : Layer(name), spatial_dims_(spatial_dims), rate_(rate), seed_(seed) {
  const std::string cls = fmt::format("SpatialDropout{}D", spatial_dims);
  check_rate(cls.c_str(), name, rate);
  data_format_ = detail::lowercase(std::move(data_format));
  if (data_format_ != "channels_last" && data_format_ != "channels_first")
    throw ValueError(fmt::format("{}: data_format must be \"channels_last\" or \"channels_first\", got \"{}\"",
                                 ctor_label(cls.c_str(), name), data_format_));
}

void SpatialDropoutBase::check_input_shape(const Shape& s) const {
  if (s.rank() != spatial_dims_ + 2)
    throw ShapeError(fmt::format("{}: expects inputs of rank {} ([batch, {} spatial axes, channels]), got shape {}",
                                 who(*this), spatial_dims_ + 2, spatial_dims_, s.to_string()));
}

Tensor SpatialDropoutBase::call(const Tensor& inputs, bool training) {
  check_input_shape(inputs.shape());
  if (!training_now(training) || rate_ == 0) return inputs;
  // Keras' noise shape: (batch, 1, ..., 1, channels), or (batch, channels, 1, ..., 1).
  const Shape& s = inputs.shape();
  std::vector<std::int64_t> noise(static_cast<std::size_t>(s.rank()), 1);
  noise[0] = s[0];
  const std::int64_t channel_axis = data_format_ == "channels_first" ? 1 : s.rank() - 1;
  noise[static_cast<std::size_t>(channel_axis)] = s[channel_axis];
  std::optional<std::uint64_t> seed;
  if (seed_) seed = call_seed(*seed_, calls_++);
  DeviceScope device(inputs.device());
  // dropout of ones: the scaled keep mask (0 or 1 / (1 - rate)), broadcast over the maps.
  const Tensor mask = dropout(ones(Shape(noise), inputs.dtype()), rate_, seed);
  return pass_mask(inputs, mul(inputs, mask));
}

SpatialDropout1D::SpatialDropout1D(double rate, SpatialDropoutOptions o)
    : SpatialDropoutBase(1, rate, "channels_last", o.seed, o.name) {}
SpatialDropout2D::SpatialDropout2D(double rate, SpatialDropout2DOptions o)
    : SpatialDropoutBase(2, rate, o.data_format, o.seed, o.name) {}
SpatialDropout3D::SpatialDropout3D(double rate, SpatialDropout2DOptions o)
    : SpatialDropoutBase(3, rate, o.data_format, o.seed, o.name) {}

// ---- GaussianNoise, GaussianDropout ----------------------------------------------------------

GaussianNoise::GaussianNoise(double stddev, GaussianNoiseOptions options)
    : Layer(options.name), stddev_(stddev), options_(std::move(options)) {
  if (!(stddev >= 0 && stddev <= 1))  // Keras' range
    throw ValueError(fmt::format("{}: stddev must be in [0, 1], got {}", ctor_label("GaussianNoise", options_.name),
                                 stddev));
}

Tensor GaussianNoise::call(const Tensor& inputs, bool training) {
  if (!training_now(training) || stddev_ == 0) return inputs;
  const Tensor noise = draw(options_.seed, calls_, inputs,
                            [&] { return random::normal(inputs.shape(), 0.0, stddev_, inputs.dtype()); });
  return pass_mask(inputs, add(inputs, noise));
}

GaussianDropout::GaussianDropout(double rate, GaussianDropoutOptions options)
    : Layer(options.name), rate_(rate), options_(std::move(options)) {
  check_rate("GaussianDropout", options_.name, rate);
}

Tensor GaussianDropout::call(const Tensor& inputs, bool training) {
  if (!training_now(training) || rate_ == 0) return inputs;
  const double stddev = std::sqrt(rate_ / (1.0 - rate_));  // Keras: N(1, rate / (1 - rate))
  const Tensor noise = draw(options_.seed, calls_, inputs,
                            [&] { return random::normal(inputs.shape(), 1.0, stddev, inputs.dtype()); });
  return pass_mask(inputs, mul(inputs, noise));
}

// ---- AlphaDropout ----------------------------------------------------------------------------

AlphaDropout::AlphaDropout(double rate, AlphaDropoutOptions options)
    : Layer(options.name), rate_(rate), options_(std::move(options)) {
  check_rate("AlphaDropout", options_.name, rate);
  for (auto d : options_.noise_shape)
    if (d <= 0 && d != -1)
      throw ValueError(fmt::format("{}: noise_shape {} must hold positive sizes or -1 (the input's size)",
                                   ctor_label("AlphaDropout", options_.name), Shape(options_.noise_shape).to_string()));
}

Tensor AlphaDropout::call(const Tensor& inputs, bool training) {
  if (!training_now(training) || rate_ == 0) return inputs;
  std::vector<std::int64_t> dims = inputs.shape().dims();
  if (!options_.noise_shape.empty()) {
    const Shape ns(options_.noise_shape);
    if (ns.rank() != inputs.rank())
      throw ShapeError(fmt::format("{}: noise_shape {} must have the rank of the inputs {}", who(*this), ns.to_string(),
                                   inputs.shape().to_string()));
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const std::int64_t n = options_.noise_shape[d] == -1 ? dims[d] : options_.noise_shape[d];
      if (n != dims[d] && n != 1)
        throw ShapeError(fmt::format("{}: noise_shape {} does not broadcast to the inputs {}", who(*this),
                                     ns.to_string(), inputs.shape().to_string()));
      dims[d] = n;
    }
  }
  // SELU's constants; alpha' = -scale * alpha is the value SELU saturates to.
  constexpr double alpha = 1.6732632423543772848170429916717;
  constexpr double scale = 1.0507009873554804934193349852946;
  constexpr double alpha_p = -alpha * scale;
  const double r = rate_;
  const double a = std::pow((1 - r) * (1 + r * alpha_p * alpha_p), -0.5);
  const double b = -a * alpha_p * r;
  const Tensor u = draw(options_.seed, calls_, inputs,
                        [&] { return random::uniform(Shape(dims), 0.0, 1.0, inputs.dtype()); });
  const Tensor kept = cast(greater_equal(u, scalar_like(u, r)), inputs.dtype());
  // a * (x * kept + alpha' * (1 - kept)) + b
  const Tensor x = add(mul(inputs, kept), mul(sub(scalar_like(kept, 1.0), kept), scalar_like(kept, alpha_p)));
  return pass_mask(inputs, add(mul(x, scalar_like(x, a)), scalar_like(x, b)));
}

// ---- ActivityRegularization ------------------------------------------------------------------

ActivityRegularization::ActivityRegularization(ActivityRegularizationOptions options)
    : Layer(options.name), options_(std::move(options)) {
  const std::string label = ctor_label("ActivityRegularization", options_.name);
  if (!(options_.l1 >= 0) || !(options_.l2 >= 0) || !std::isfinite(options_.l1) || !std::isfinite(options_.l2))
    throw ValueError(fmt::format("{}: l1 and l2 must be non-negative numbers, got l1 = {}, l2 = {}", label,
                                 options_.l1, options_.l2));
}

Tensor ActivityRegularization::call(const Tensor& inputs, bool) {
  const regularizers::Regularizer r(options_.l1, options_.l2);
  if (r.active()) add_loss(r(inputs));  // l1 * sum|x| + l2 * sum x^2 (Keras' L1L2)
  return inputs;
}

}  // namespace keel::layers
