#include "keel/autograd/variable.hpp"

#include <fmt/core.h>

#include "autograd/autocast.hpp"
#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/shape.hpp"
#include "ops/indexing_nd.hpp"
#include "ops/indexing_slice.hpp"

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

// v[spec].assign(value): the slice is a positive-step view of the variable's storage (the
// negative-step axes of value reversed to match it), written in place.
void Variable::assign(const Tensor& v, const SliceSpec& spec) {
  const char* op = "Variable.assign";
  detail::check_defined(v, op);
  if (!value_.defined()) throw ValueError(fmt::format("{}: the Variable is uninitialised", op));
  const detail::SlicePlan plan = detail::plan_slice(value_.shape(), spec, op);
  if (v.shape() != Shape(plan.out_dims))
    throw ShapeError(fmt::format("{}: value of shape {} does not match the slice of shape {} of the variable '{}' "
                                 "of shape {}", op, v.shape().to_string(), Shape(plan.out_dims).to_string(), name_,
                                 value_.shape().to_string()));
  if (v.dtype() != value_.dtype())
    throw DTypeError(fmt::format("{}: dtype {} does not match the variable '{}' of dtype {}", op,
                                 keel::name(v.dtype()), name_, keel::name(value_.dtype())));
  autograd::NoRecordScope no_record;
  Tensor src = v.device() == value_.device() ? v : v.to(value_.device());
  src = reshape(src, Shape(plan.count));  // only size-1 axes differ
  if (!plan.flip.empty()) src = reverse(src, plan.flip);
  if (src.impl()->storage == value_.impl()->storage) src = backend::clone(src);
  backend::copy(src, detail::plan_view(value_, plan), op);
  value_.impl()->storage->bump_version();
}

namespace {

// Variable.scatter_nd_update / _add, in place: the kernel checks every index before it writes,
// so a bad one leaves the value as it was. Operands from another device come to the variable's,
// as assign's do.
void scatter_in_place(const Tensor& value, const Tensor& indices, const Tensor& updates, backend::ScatterMode mode,
                      const char* op) {
  if (!value.defined()) throw ValueError(fmt::format("{}: the Variable is uninitialised", op));
  detail::check_defined(indices, op, "indices");
  detail::check_defined(updates, op, "updates");
  autograd::NoRecordScope no_record;
  const Tensor i = indices.device() == value.device() ? indices : indices.to(value.device());
  Tensor u = updates.device() == value.device() ? updates : updates.to(value.device());
  if (u.impl()->storage == value.impl()->storage) u = backend::clone(u);  // read before it is overwritten
  detail::scatter_into(op, mode, value, i, u, value);
  value.impl()->storage->bump_version();
}

}  // namespace

void Variable::scatter_nd_update(const Tensor& indices, const Tensor& updates) {
  scatter_in_place(value_, indices, updates, backend::ScatterMode::update, "Variable.scatter_nd_update");
}

void Variable::scatter_nd_add(const Tensor& indices, const Tensor& updates) {
  scatter_in_place(value_, indices, updates, backend::ScatterMode::add, "Variable.scatter_nd_add");
}

}  // namespace keel
