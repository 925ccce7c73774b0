#pragma once
// The backend layer: one function per kernel family, between the ops (src/ops/) and the kernels
// of each device (src/cpu/, cuda/). Each function looks at the device of its operands once and
// calls the CPU or the CUDA kernel; the ops never test the device themselves.
//
// The contract every kernel call keeps, so that a recorded graph can replay it without running
// the ops' checks again:
//   * the ops have checked everything (shapes, dtypes, one device for all operands); a backend
//     function only adds the errors a device has of its own (a dtype cuBLAS lacks, an axis count
//     the CUDA views cannot hold),
//   * every output is passed in, allocated by the caller with its final shape and dtype
//     (contiguous unless the function says otherwise), and fully written; nothing is recorded on
//     the tape and no version is bumped,
//   * inputs may have any strides and broadcast to the output where the function says so.
// float16 and bfloat16 run natively on a GPU; on the CPU they are widened to float32, computed
// and rounded once into the output (kernel scratch, not an output).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kernel_kinds.hpp"
#include "backend/recorder.hpp"
#include "core/window.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

using kernel::ArgReduceOp;
using kernel::BinaryOp;
using kernel::CompareOp;
using kernel::ConvKernel;
using kernel::FloatTest;
using kernel::LogicalOp;
using kernel::PoolKernel;
using kernel::ReduceOp;
using kernel::UnaryOp;
using kernel::WindowGeom;

// ---- fills and copies (copy.cpp) ----------------------------------------------------------------

// Every element of out (contiguous, any dtype) = value, converted as detail::convert does.
void fill(const Tensor& out, double value);
// dst = src elementwise, converting the dtype; one shape, one device, any strides on both sides.
// `op` names the caller in errors.
void copy(const Tensor& src, const Tensor& dst, const char* op);
// A block of `shape` elements of `dtype` between two strided layouts (element strides; a 0
// source stride broadcasts), both in memory of `device`.
void copy_block(Device device, DType dtype, const std::vector<std::int64_t>& shape, const void* src,
                const std::vector<std::int64_t>& src_strides, void* dst,
                const std::vector<std::int64_t>& dst_strides);
// out (contiguous, on `out`'s device) = a contiguous src from another device; one shape and dtype.
void transfer(const Tensor& src, const Tensor& out);
// x's elements (any device, any strides) converted to `dtype` into host memory: dst holds
// x.size() contiguous elements (bytes for bool). Waits for the device.
void read_into(const Tensor& x, DType dtype, void* dst);

// ---- elementwise (elementwise.cpp) --------------------------------------------------------------
// Inputs broadcast to out's shape and share one dtype; out has it too (bool for compare,
// logical and float_test). alpha parameterises leaky_relu and elu.

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double alpha = 0);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void logical(LogicalOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void logical_not(const Tensor& x, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void float_test(FloatTest test, const Tensor& x, const Tensor& out);  // x float32 or float64

// ---- reductions (reduce.cpp) ----------------------------------------------------------------------

// out = x reduced over `axes` (sorted, unique), with the kept axes' shape (keepdims or not: only
// the element order matters). max and min need a non-empty x.
void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, const Tensor& out);
// out (int64, x's shape without `axis`) = the index of the extreme value along axis (non-empty).
void arg_reduce(ArgReduceOp op, const Tensor& x, int axis, const Tensor& out);

// ---- matrix products (linalg.cpp) -----------------------------------------------------------------

// out [batch..., m, n] = op(a) @ op(b) over the broadcast batch axes, op = transpose when asked.
// The shapes are checked by matmul; a and b may have any strides.
void matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, const Tensor& out);

// ---- sliding windows (window.cpp) -----------------------------------------------------------------
// Contiguous NHWC operands of g's geometry (see the kinds in core/kernel_kinds.hpp for what each
// kernel computes), float32 or float64 (or half, through float32 on the CPU).

// conv and depthwise: forward (x, kernel) -> y; backward_input (dy, kernel) -> dx;
// backward_filter (x, dy) -> dkernel.
void conv(ConvKernel k, const WindowGeom& g, const Tensor& a, const Tensor& b, const Tensor& out);
// max_forward, avg_forward: (x) -> y; max_backward, max_gather: (x, dy or dx) -> dx or out;
// avg_backward: (dy) -> dx. `b` is undefined where the kernel takes one input.
void pool(PoolKernel k, const WindowGeom& g, const Tensor& a, const Tensor& b, const Tensor& out);
// What replays pool(k, g, ...) for a traced graph, from g as the graph keeps it (Node::ints):
// graph passes that make a pooling node of their own use it.
KernelReplay pool_replay(PoolKernel k, const std::vector<std::int64_t>& ints);
// A window's geometry from the integers a traced graph keeps of it (Node::ints of a conv or pool).
WindowGeom window_geometry(const std::vector<std::int64_t>& ints);

// ---- indexing (indexing.cpp) -----------------------------------------------------------------------
// The indices are checked by the kernel, on the device they live on; the first bad one comes
// back (position -1 when none) so that the op words the error the same way on every device.

struct BadIndex {
  std::int64_t position = -1;
  std::int64_t value = 0;
};

// out [outer, n, row] = params [outer, dim, row] gathered by the n indices (row counts bytes);
// params and indices contiguous. The rows of a bad index are left unwritten.
BadIndex gather_rows(const Tensor& params, std::int64_t outer, std::int64_t dim, std::size_t row_bytes,
                     const Tensor& indices, const Tensor& out);

struct SegmentIds {
  BadIndex bad;               // the first id >= num_segments
  bool has_negative = false;  // negative ids are dropped, as in TensorFlow
};
// out [num_segments, inner] = the sums of data's rows ([n, inner]) by segment id; contiguous.
SegmentIds segment_sum(const Tensor& data, std::int64_t inner, const Tensor& ids, const Tensor& out);

// out [n, depth] = on where indices[i] == c, off elsewhere (an index outside [0, depth) gives an
// all-off row); indices contiguous, int32, int64 or uint8.
void one_hot(const Tensor& indices, std::int64_t depth, double on_value, double off_value, const Tensor& out);

// ---- conveniences that allocate (not part of the replayable interface) ---------------------------

// x itself when contiguous, else a contiguous copy where x lives.
Tensor contiguous(const Tensor& x);
// Always a new contiguous copy of x, where x lives (storage of its own).
Tensor clone(const Tensor& x);
// A contiguous copy of t on `device` (t itself when it is already there). Not recorded: Tensor::to
// adds the gradient.
Tensor to_device(const Tensor& t, Device device);
// An index tensor (int32 or int64, any strides, any device) read on the host as int64 values.
std::vector<std::int64_t> read_indices(const Tensor& idx, const char* op);
// A host tensor moved to default_device() when that is a GPU: factories compute on the host so
// that a seed gives the same numbers on every device.
Tensor place_on_default(const Tensor& host);

}  // namespace keel::backend
