#pragma once
// keras.optimizers.schedules: learning rates as a function of the optimizer's step (its
// iteration count before the update). An optimizer given a schedule evaluates it before every
// update; the formulas are Keras 3's, evaluated in double precision.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace keel::optimizers::schedules {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  // The learning rate for the update that follows `step` completed updates.
  virtual double operator()(std::int64_t step) const = 0;
  // Keras' config dictionary; the base returns an empty object (a custom schedule that wants to
  // be saved and loaded again overrides it).
  virtual nlohmann::json get_config() const;
  virtual std::string class_name() const { return "LearningRateSchedule"; }
};

// Keras' serialized form {"module", "class_name", "config", "registered_name"} and back; the
// built-in schedules only (ValueError for other class names).
nlohmann::json serialize(const LearningRateSchedule& schedule);
std::shared_ptr<LearningRateSchedule> deserialize(const nlohmann::json& serialized);
// The schedule classes deserialize rebuilds, by class name.
std::vector<std::string> registered_schedules();

// initial_learning_rate * decay_rate ^ (step / decay_steps); the exponent is floored when
// staircase is set.
struct ExponentialDecayOptions {
  bool staircase = false;
  std::string name = "ExponentialDecay";
};
class ExponentialDecay : public LearningRateSchedule {
 public:
  ExponentialDecay(double initial_learning_rate, double decay_steps, double decay_rate,
                   ExponentialDecayOptions options = {});
  double operator()(std::int64_t step) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "ExponentialDecay"; }

 private:
  double initial_learning_rate_, decay_steps_, decay_rate_;
  ExponentialDecayOptions options_;
};

// values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <= boundaries[i],
// values.back() after the last boundary. values has one entry more than boundaries.
struct PiecewiseConstantDecayOptions {
  std::string name = "PiecewiseConstant";
};
class PiecewiseConstantDecay : public LearningRateSchedule {
 public:
  PiecewiseConstantDecay(std::vector<double> boundaries, std::vector<double> values,
                         PiecewiseConstantDecayOptions options = {});
  double operator()(std::int64_t step) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "PiecewiseConstantDecay"; }

 private:
  std::vector<double> boundaries_, values_;
  PiecewiseConstantDecayOptions options_;
};

// Cosine decay from initial_learning_rate (or, with a warmup_target, a linear warmup from
// initial_learning_rate to warmup_target over warmup_steps, then the cosine decay from
// warmup_target) down to alpha times that rate over decay_steps; constant afterwards.
struct CosineDecayOptions {
  double alpha = 0.0;
  std::string name = "CosineDecay";
  std::optional<double> warmup_target;
  std::int64_t warmup_steps = 0;
};
class CosineDecay : public LearningRateSchedule {
 public:
  CosineDecay(double initial_learning_rate, double decay_steps, CosineDecayOptions options = {});
  double operator()(std::int64_t step) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CosineDecay"; }

 private:
  double initial_learning_rate_, decay_steps_;
  CosineDecayOptions options_;
};

// SGDR: cosine decay that restarts after first_decay_steps, each period t_mul times longer
// than the one before and each restart at m_mul times the previous initial rate.
struct CosineDecayRestartsOptions {
  double t_mul = 2.0;
  double m_mul = 1.0;
  double alpha = 0.0;
  std::string name = "SGDRDecay";
};
class CosineDecayRestarts : public LearningRateSchedule {
 public:
  CosineDecayRestarts(double initial_learning_rate, double first_decay_steps,
                      CosineDecayRestartsOptions options = {});
  double operator()(std::int64_t step) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CosineDecayRestarts"; }

 private:
  double initial_learning_rate_, first_decay_steps_;
  CosineDecayRestartsOptions options_;
};

// (initial - end) * (1 - step / decay_steps) ^ power + end, constant at end_learning_rate
// after decay_steps; with cycle, decay_steps grows to the first multiple above step instead.
struct PolynomialDecayOptions {
  double end_learning_rate = 0.0001;
  double power = 1.0;
  bool cycle = false;
  std::string name = "PolynomialDecay";
};
class PolynomialDecay : public LearningRateSchedule {
 public:
  PolynomialDecay(double initial_learning_rate, double decay_steps, PolynomialDecayOptions options = {});
  double operator()(std::int64_t step) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "PolynomialDecay"; }

 private:
  double initial_learning_rate_, decay_steps_;
  PolynomialDecayOptions options_;
};

// initial_learning_rate / (1 + decay_rate * step / decay_steps); the ratio is floored with
// staircase.
struct InverseTimeDecayOptions {
  bool staircase = false;
  std::string name = "InverseTimeDecay";
};
class InverseTimeDecay : public LearningRateSchedule {
 public:
  InverseTimeDecay(double initial_learning_rate, double decay_steps, double decay_rate,
                   InverseTimeDecayOptions options = {});
  double operator()(std::int64_t step) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "InverseTimeDecay"; }

 private:
  double initial_learning_rate_, decay_steps_, decay_rate_;
  InverseTimeDecayOptions options_;
};

}  // namespace keel::optimizers::schedules
