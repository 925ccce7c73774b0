#pragma once
// Variable: mutable, trainable state. Reading it inside a GradientTape makes the tape watch it.
#include <functional>
#include <memory>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel {

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor initial, std::string name = "", bool trainable = true);
  // A float32 scalar variable, as tf.Variable(5.0).
  explicit Variable(double initial, std::string name = "", bool trainable = true);

  // The live value; tapes watch the read. Inside the call() of a layer under a mixed-precision
  // policy, a float32 variable reads as its cast to the compute dtype (Keras' autocast).
  const Tensor& value() const;
  operator const Tensor&() const { return value(); }  // NOLINT: usable wherever a Tensor is

  // In-place writes: shapes and dtypes must match. Each bumps the storage version.
  void assign(const Tensor& value);
  void assign_add(const Tensor& delta);
  void assign_sub(const Tensor& delta);
  // v[spec].assign(value) (tf's sliced assign): value, of the slice's shape and the variable's
  // dtype, written into that slice in place, e.g. v.assign(value, {keel::range(1, 3)}).
  void assign(const Tensor& value, const SliceSpec& spec);
  // tf.Variable.scatter_nd_update / scatter_nd_add: the slices at indices ([..., M], as
  // tensor_scatter_nd_update) replaced by / incremented by updates, in place.
  void scatter_nd_update(const Tensor& indices, const Tensor& updates);
  void scatter_nd_add(const Tensor& indices, const Tensor& updates);

  const std::string& name() const { return name_; }
  bool trainable() const { return trainable_; }
  void set_trainable(bool trainable) { trainable_ = trainable; }
  Shape shape() const { return value_.shape(); }
  DType dtype() const { return value_.dtype(); }
  Device device() const { return value_.device(); }
  bool defined() const { return value_.defined(); }
  std::uint64_t id() const { return value_.id(); }
  // The value without notifying tapes (for optimisers and serialisation).
  const Tensor& peek() const { return value_; }
  // Keras' variable.constraint: a projection the optimizer applies after each update
  // (variable.assign(constraint(variable))); empty for none. Layers set it from their
  // *_constraint options when they create the weight.
  using Constraint = std::function<Tensor(const Tensor&)>;
  void set_constraint(Constraint constraint) { constraint_ = std::move(constraint); }
  const Constraint& constraint() const { return constraint_; }

 private:
  enum class WriteMode { assign, add, sub };  // value = v, value += v, value -= v
  void write(const Tensor& value, const char* op, WriteMode mode);
  Tensor value_;
  std::string name_;
  bool trainable_ = true;
  Constraint constraint_;
};

}  // namespace keel
