#pragma once
// keras.mixed_precision: dtype policies. A policy names the dtype a layer computes in and the
// dtype its variables are kept in:
//
//   name             compute_dtype   variable_dtype
//   "float32"        float32         float32          (the default)
//   "mixed_float16"  float16         float32
//   "mixed_bfloat16" bfloat16        float32
//
//   mixed_precision::set_global_policy("mixed_float16");
//   models::Sequential model{layers::Dense(64, {.activation = "relu"}),
//                            layers::Dense(10),
//                            layers::Activation("softmax", {.dtype = "float32"})};
//
// A layer takes the global policy when it is made (or its options' `dtype`). Under a mixed
// policy it casts its floating inputs to the compute dtype, keeps its weights in float32 and reads
// them in the compute dtype inside call() (Keras' autocast), so its outputs are in the compute
// dtype; gradients reach the float32 weights through the casts. compile() wraps the optimizer
// of a mixed_float16 model in optimizers::LossScaleOptimizer, as Keras does.
#include <string>

#include "keel/core/dtype.hpp"

namespace keel::mixed_precision {

class Policy {
 public:
  Policy() = default;  // "float32"
  // ValueError for a name other than "float32", "mixed_float16" and "mixed_bfloat16".
  explicit Policy(std::string name);

  const std::string& name() const { return name_; }
  DType compute_dtype() const { return compute_; }
  DType variable_dtype() const { return variable_; }
  // True for the mixed policies (compute dtype differs from the variable dtype).
  bool is_mixed() const { return compute_ != variable_; }

  friend bool operator==(const Policy& a, const Policy& b) { return a.name_ == b.name_; }
  friend bool operator!=(const Policy& a, const Policy& b) { return !(a == b); }

 private:
  std::string name_ = "float32";
  DType compute_ = DType::float32;
  DType variable_ = DType::float32;
};

// The policy layers made from now on take (process-wide, as Keras' global policy).
void set_global_policy(const std::string& name);
void set_global_policy(const Policy& policy);
Policy global_policy();

}  // namespace keel::mixed_precision
