// Reductions: the GPU reads x with its kept axes first and its reduced axes after them.
#include <algorithm>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/cuda_views.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "cpu/reduce.hpp"
#include "cuda/backend.hpp"

namespace keel::backend {

namespace {

// x's CUDA view with the kept axes first and the `axes` after them, each group merged on its
// own; `kept` receives the number of kept axes left after merging.
cuda::View grouped_view(const Tensor& x, const std::vector<int>& axes, int& kept) {
  std::vector<std::int64_t> ks, kst, rs, rst;
  for (int d = 0; d < static_cast<int>(x.rank()); ++d) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    (reduced ? rs : ks).push_back(x.shape()[d]);
    (reduced ? rst : kst).push_back(x.strides()[static_cast<std::size_t>(d)]);
  }
  const MergedAxes k = merge_axes(ks, {kst}), r = merge_axes(rs, {rst});
  if (k.shape.size() + r.shape.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw DeviceError(fmt::format("reduce: CUDA kernels take at most {} axes that do not merge; shape {} has {}",
                                  cuda::kMaxDims, x.shape().to_string(), k.shape.size() + r.shape.size()));
  cuda::View v;
  v.data = const_cast<void*>(x.raw_data());
  v.dtype = x.dtype();
  v.device = x.device().index();
  v.rank = 0;
  for (const MergedAxes* g : {&k, &r})
    for (std::size_t i = 0; i < g->shape.size(); ++i) {
      v.shape[v.rank] = g->shape[i];
      v.strides[v.rank] = g->strides[0][i];
      ++v.rank;
    }
  kept = static_cast<int>(k.shape.size());
  return v;
}

// The contiguous output of a reduction seen with the kept axes of `in` (its first `kept`).
cuda::View output_view(const Tensor& y, const cuda::View& in, int kept) {
  cuda::View v;
  v.data = y.raw_data();
  v.dtype = y.dtype();
  v.device = y.device().index();
  v.rank = kept;
  std::int64_t stride = 1;
  for (int i = kept - 1; i >= 0; --i) {
    v.shape[i] = in.shape[i];
    v.strides[i] = stride;
    stride *= in.shape[i];
  }
  return v;
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const std::vector<std::int64_t> ints(axes.begin(), axes.end());
    return r->kernel({"reduce", int(op), 0, ints.data(), ints.size()}, {&x}, {&out},
                     [=](const Tensor* t) { reduce(op, t[0], axes, t[1]); });
  }
  KernelClock clock;
  if (on_cuda(x)) {
    if (out.size() == 0) return;
    int kept = 0;
    const cuda::View xv = grouped_view(x, axes, kept);
    cuda::reduce(op, xv, kept, output_view(out, xv, kept));
    return;
  }
  // float16/bfloat16: accumulate in float32 and round once, as the GPU does.
  if (is_half(x.dtype()))
    return via_float32({&x}, out, [&](const std::vector<Tensor>& in, const Tensor& o) { cpu::reduce(op, in[0], axes, o); });
  cpu::reduce(op, x, axes, out);
}

void arg_reduce(ArgReduceOp op, const Tensor& x, int axis, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {axis};
    return r->kernel({"arg_reduce", int(op), 0, ints, 1}, {&x}, {&out},
                     [=](const Tensor* t) { arg_reduce(op, t[0], axis, t[1]); });
  }
  KernelClock clock;
  if (on_cuda(x)) {
    if (out.size() == 0) return;
    // Kept axes merged, the reduced axis last and alone (its index is what is returned).
    int kept = 0;
    const cuda::View xv = grouped_view(x, {axis}, kept);
    cuda::View v = xv;
    if (xv.rank == kept) {  // the axis had size 1 and merged away: the index is 0 everywhere
      v.rank = kept + 1;
      v.shape[kept] = 1;
      v.strides[kept] = 0;
    }
    cuda::arg_reduce(op, v, output_view(out, v, kept));
    return;
  }
  cpu::arg_reduce(op, x, axis, out);
}

}  // namespace keel::backend
