#include "keel/autograd/variable.hpp"

#include <fmt/core.h>

#include "autograd/autocast.hpp"
#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel {

Variable::Variable(Tensor initial, std::string name, bool trainable)
    : name_(std::move(name)), trainable_(trainable) {
  detail::check_defined(initial, "Variable");
  // A Variable owns its storage: later assigns must not write into the caller's tensor.
  value_ = backend::clone(initial);
}

Variable::Variable(double initial, std::string name, bool trainable)
    : Variable(constant(initial), std::move(name), trainable) {}

const Tensor& Variable::value() const {
  if (!value_.defined()) throw ValueError("Variable: read of an uninitialised (default-constructed) Variable");
  if (trainable_ && autograd::recording()) autograd::notify_variable_read(value_);
  // Inside a layer's call under a mixed-precision policy, float32 variables are read in the
  // layer's compute dtype (Keras' autocast); the recorded cast carries gradients back.
  if (autograd::AutocastScope* scope = autograd::AutocastScope::current();
      scope && scope->dtype() && value_.dtype() == DType::float32 && *scope->dtype() != DType::float32)
    return scope->cast(value_);
  return value_;
}

// assign_add/assign_sub check their delta like a plain assign (same shape and dtype, as
// TensorFlow), then write value +/- delta in place.
void Variable::write(const Tensor& v, const char* op, WriteMode mode) {
  detail::check_defined(v, op);
  if (!value_.defined()) throw ValueError(fmt::format("{}: the Variable is uninitialised", op));
  if (v.shape() != value_.shape())
    throw ShapeError(fmt::format("{}: shape {} does not match the variable '{}' of shape {}", op,
                                 v.shape().to_string(), name_, value_.shape().to_string()));
  if (v.dtype() != value_.dtype())
    throw DTypeError(fmt::format("{}: dtype {} does not match the variable '{}' of dtype {}", op,
                                 keel::name(v.dtype()), name_, keel::name(value_.dtype())));
  autograd::NoRecordScope no_record;
  // A value from another device is copied to the variable's, as TensorFlow's assign does (a
  // checkpoint read on the host restoring a model on the GPU).
  Tensor src = v.device() == value_.device() ? v : v.to(value_.device());
  if (mode == WriteMode::add) src = add(value_, src);
  if (mode == WriteMode::sub) src = sub(value_, src);
  // A view of the variable itself (assign(transpose(v))) must be read before it is overwritten.
  if (src.impl()->storage == value_.impl()->storage) src = backend::clone(src);
  backend::copy(src, value_, op);
  value_.impl()->storage->bump_version();
}

void Variable::assign(const Tensor& v) { write(v, "Variable.assign", WriteMode::assign); }

void Variable::assign_add(const Tensor& delta) {
  write(delta, "Variable.assign_add", WriteMode::add);
}

void Variable::assign_sub(const Tensor& delta) {
  write(delta, "Variable.assign_sub", WriteMode::sub);
}

}  // namespace keel
