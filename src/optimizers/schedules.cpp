#include "keel/optimizers/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "keel/core/error.hpp"

namespace keel::optimizers::schedules {

namespace {

// Keras 3 rejects a decay period that is not positive (it would divide by zero or flip signs).
void check_steps(double steps, const char* what, const char* schedule) {
  if (!(steps > 0))
    throw ValueError(fmt::format("{}: argument `{}` must be > 0. Received: {}={}", schedule, what, what, steps));
}

}  // namespace

nlohmann::json LearningRateSchedule::get_config() const { return nlohmann::json::object(); }

// ---- ExponentialDecay ---------------------------------------------------------------------------

ExponentialDecay::ExponentialDecay(double initial_learning_rate, double decay_steps, double decay_rate,
                                   ExponentialDecayOptions options)
    : initial_learning_rate_(initial_learning_rate), decay_steps_(decay_steps), decay_rate_(decay_rate),
      options_(std::move(options)) {
  check_steps(decay_steps, "decay_steps", "ExponentialDecay");
}

double ExponentialDecay::operator()(std::int64_t step) const {
  double p = static_cast<double>(step) / decay_steps_;
  if (options_.staircase) p = std::floor(p);
  return initial_learning_rate_ * std::pow(decay_rate_, p);
}

// ---- PiecewiseConstantDecay ---------------------------------------------------------------------

PiecewiseConstantDecay::PiecewiseConstantDecay(std::vector<double> boundaries, std::vector<double> values,
                                               PiecewiseConstantDecayOptions options)
    : boundaries_(std::move(boundaries)), values_(std::move(values)), options_(std::move(options)) {
  if (values_.size() != boundaries_.size() + 1)
    throw ValueError(fmt::format(
        "PiecewiseConstantDecay: the length of boundaries should be 1 less than the length of values. "
        "Received: {} boundaries and {} values",
        boundaries_.size(), values_.size()));
}

double PiecewiseConstantDecay::operator()(std::int64_t step) const {
  if (boundaries_.empty()) return values_[0];
  // Keras sums indicator * value over the intervals; for increasing boundaries exactly one
  // indicator is set, which is the first interval whose upper boundary is >= step.
  const double x = static_cast<double>(step);
  double result = 0;
  if (x <= boundaries_.front()) result += values_.front();
  if (x > boundaries_.back()) result += values_.back();
  for (std::size_t i = 0; i + 1 < boundaries_.size(); ++i)
    if (x > boundaries_[i] && x <= boundaries_[i + 1]) result += values_[i + 1];
  return result;
}

// ---- CosineDecay --------------------------------------------------------------------------------

CosineDecay::CosineDecay(double initial_learning_rate, double decay_steps, CosineDecayOptions options)
    : initial_learning_rate_(initial_learning_rate), decay_steps_(decay_steps), options_(std::move(options)) {
  check_steps(decay_steps, "decay_steps", "CosineDecay");
  if (options_.warmup_steps < 0)
    throw ValueError(fmt::format("CosineDecay: argument `warmup_steps` must be >= 0. Received: {}",
                                 options_.warmup_steps));
}

double CosineDecay::operator()(std::int64_t step) const {
  const double alpha = options_.alpha;
  const auto decay = [&](double s, double from_lr) {
    const double cosine_decayed = 0.5 * (1.0 + std::cos(std::numbers::pi * (s / decay_steps_)));
    return from_lr * ((1 - alpha) * cosine_decayed + alpha);
  };
  double s = static_cast<double>(step);
  if (!options_.warmup_target) return decay(std::min(s, decay_steps_), initial_learning_rate_);
  const double target = *options_.warmup_target;
  const double warmup = static_cast<double>(options_.warmup_steps);
  s = std::min(s, decay_steps_ + warmup);
  if (s < warmup) return (target - initial_learning_rate_) * (s / warmup) + initial_learning_rate_;
  return decay(s - warmup, target);
}

// ---- CosineDecayRestarts ------------------------------------------------------------------------

CosineDecayRestarts::CosineDecayRestarts(double initial_learning_rate, double first_decay_steps,
                                         CosineDecayRestartsOptions options)
    : initial_learning_rate_(initial_learning_rate), first_decay_steps_(first_decay_steps),
      options_(std::move(options)) {
  check_steps(first_decay_steps, "first_decay_steps", "CosineDecayRestarts");
}

double CosineDecayRestarts::operator()(std::int64_t step) const {
  const double t_mul = options_.t_mul;
  double fraction = static_cast<double>(step) / first_decay_steps_;
  double i_restart;
  if (t_mul == 1.0) {
    i_restart = std::floor(fraction);
    fraction -= i_restart;
  } else {
    // Periods grow geometrically: the restart index solves sum_{k<i} t_mul^k <= fraction.
    i_restart = std::floor(std::log(1.0 - fraction * (1.0 - t_mul)) / std::log(t_mul));
    const double sum_r = (1.0 - std::pow(t_mul, i_restart)) / (1.0 - t_mul);
    fraction = (fraction - sum_r) / std::pow(t_mul, i_restart);
  }
  const double m_fac = std::pow(options_.m_mul, i_restart);
  const double cosine_decayed = 0.5 * m_fac * (1.0 + std::cos(std::numbers::pi * fraction));
  return initial_learning_rate_ * ((1 - options_.alpha) * cosine_decayed + options_.alpha);
}

// ---- PolynomialDecay ----------------------------------------------------------------------------

PolynomialDecay::PolynomialDecay(double initial_learning_rate, double decay_steps, PolynomialDecayOptions options)
    : initial_learning_rate_(initial_learning_rate), decay_steps_(decay_steps), options_(std::move(options)) {
  check_steps(decay_steps, "decay_steps", "PolynomialDecay");
}

double PolynomialDecay::operator()(std::int64_t step) const {
  double s = static_cast<double>(step);
  double steps = decay_steps_;
  if (options_.cycle) {
    // The first multiple of decay_steps at or above step (one period at step 0).
    const double multiplier = s == 0 ? 1.0 : std::ceil(s / decay_steps_);
    steps *= multiplier;
  } else {
    s = std::min(s, steps);
  }
  const double p = s / steps;
  return (initial_learning_rate_ - options_.end_learning_rate) * std::pow(1 - p, options_.power) +
         options_.end_learning_rate;
}

// ---- InverseTimeDecay ---------------------------------------------------------------------------

InverseTimeDecay::InverseTimeDecay(double initial_learning_rate, double decay_steps, double decay_rate,
                                   InverseTimeDecayOptions options)
    : initial_learning_rate_(initial_learning_rate), decay_steps_(decay_steps), decay_rate_(decay_rate),
      options_(std::move(options)) {
  check_steps(decay_steps, "decay_steps", "InverseTimeDecay");
}

double InverseTimeDecay::operator()(std::int64_t step) const {
  double p = static_cast<double>(step) / decay_steps_;
  if (options_.staircase) p = std::floor(p);
  return initial_learning_rate_ / (1.0 + decay_rate_ * p);
}

}  // namespace keel::optimizers::schedules
