#pragma once
// CPU drivers of elementwise ops: broadcasting and strides are resolved here, contiguous runs go
// to the SIMD kernels (float types) or plain loops (integers, bools).
#include "cpu/kernels.hpp"
#include "keel/core/tensor.hpp"

namespace keel::cpu {

using kernel::CompareOp;
using kernel::FloatTest;
using kernel::LogicalOp;

// `out` is a new contiguous tensor with the broadcast shape; inputs may have any strides and
// broadcast to it. Inputs share one dtype (checked by the op layer).
void unary(UnaryOp op, const Tensor& x, const Tensor& out, double alpha);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);  // out: bool
void logical(LogicalOp op, const Tensor& a, const Tensor& b, const Tensor& out);  // all bool
void logical_not(const Tensor& x, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void float_test(FloatTest test, const Tensor& x, const Tensor& out);  // out: bool
// out = op(x + bias) (no op when linear): x and out contiguous float32/float64 of one shape whose
// last axis is bias's length, bias contiguous; op relu, sigmoid, tanh or exp (ValueError else).
void bias_unary(UnaryOp op, bool linear, const Tensor& x, const Tensor& bias, const Tensor& out);

// Strides of x viewed as broadcast to `shape` (0 on broadcast axes).
std::vector<std::int64_t> broadcast_strides(const Tensor& x, const Shape& shape);

}  // namespace keel::cpu
