// The strided copy kernel that puts conv.cu's operands into the layouts cuDNN wants (permuted
// filters, padded or NCHW images) and back: see conv_layout.cuh.
#include "cuda/conv_layout.cuh"

namespace keel::cuda::conv_layout {

// ---- strided copies: permutes, pads and crops ----------------------------------------------------

// dst(i0,i1,i2,i3) = src(i0+shift0, ..., i3+shift3), or 0 where that index falls outside
// src_dims; dims, strides and shifts are per logical axis. The logical index is decomposed in
// row-major order of dims, so the last axis should be the one contiguous in dst.
struct Copy4 {
  i64 dims[4];
  i64 dst_stride[4];
  i64 src_stride[4];
  i64 shift[4];
  i64 src_dims[4];
};

template <class T>
__global__ void copy4d_kernel(Copy4 p, const T* __restrict__ src, T* __restrict__ dst, i64 total) {
  for (i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    i64 rest = idx, d = 0, s = 0;
    bool inside = true;
    for (int a = 3; a >= 0; --a) {
      const i64 i = rest % p.dims[a];
      rest /= p.dims[a];
      const i64 j = i + p.shift[a];
      inside = inside && j >= 0 && j < p.src_dims[a];
      d += i * p.dst_stride[a];
      s += j * p.src_stride[a];
    }
    dst[d] = inside ? src[s] : T(0);
  }
}

void copy4d(DType dtype, const Copy4& p, const void* src, void* dst, int device) {
  const i64 total = p.dims[0] * p.dims[1] * p.dims[2] * p.dims[3];
  if (total == 0) return;
  const int blocks = blocks_for(total, device);
  if (dtype == DType::float32)
    copy4d_kernel<float><<<blocks, kThreads, 0, stream(device)>>>(
        p, static_cast<const float*>(src), static_cast<float*>(dst), total);
  else
    copy4d_kernel<double><<<blocks, kThreads, 0, stream(device)>>>(
        p, static_cast<const double*>(src), static_cast<double*>(dst), total);
  check_launch("conv copy kernel", device);
}

// ---- layouts ----------------------------------------------------------------------------------------

// Strides of an image [n, h, w, c] stored as NHWC or as NCHW, in logical (n, h, w, c) order.
std::array<i64, 4> image_strides(bool nchw, i64 h, i64 w, i64 c) {
  if (nchw) return {c * h * w, w, 1, h * w};
  return {h * w * c, w * c, c, 1};
}

// Copies image src (NHWC, h x w) into dst (layout `nchw`, dh x dw rows and columns), dst pixel
// (r, q) reading src pixel (r + shift_h, q + shift_w), zero outside src.
void copy_image(DType dtype, i64 n, i64 c, const void* src, bool src_nchw, i64 sh_, i64 sw_,
                void* dst, bool dst_nchw, i64 dh_, i64 dw_, i64 shift_h, i64 shift_w,
                int device) {
  Copy4 p{};
  const auto ds = image_strides(dst_nchw, dh_, dw_, c), ss = image_strides(src_nchw, sh_, sw_, c);
  const i64 dims[4] = {n, dh_, dw_, c}, sdims[4] = {n, sh_, sw_, c},
            shift[4] = {0, shift_h, shift_w, 0};
  for (int a = 0; a < 4; ++a) {
    p.dims[a] = dims[a];
    p.dst_stride[a] = ds[static_cast<std::size_t>(a)];
    p.src_stride[a] = ss[static_cast<std::size_t>(a)];
    p.shift[a] = shift[a];
    p.src_dims[a] = sdims[a];
  }
  copy4d(dtype, p, src, dst, device);
}

// Strides of a filter in logical (kh, kw, cg, o) order: keel's [kh, kw, c, o] kernel (depthwise:
// [kh, kw, c, m] read as [kh, kw, 1, c*m]), or cuDNN's [o, kh, kw, cg] (NHWC) / [o, cg, kh, kw]
// (NCHW).
std::array<i64, 4> keel_filter_strides(i64 kh, i64 kw, i64 cg, i64 o) {
  (void)kh;
  return {kw * cg * o, cg * o, o, 1};
}
std::array<i64, 4> cudnn_filter_strides(bool nchw, i64 kh, i64 kw, i64 cg) {
  if (nchw) return {kw, 1, kh * kw, cg * kh * kw};
  return {kw * cg, cg, 1, kh * kw * cg};
}

void copy_filter(DType dtype, i64 kh, i64 kw, i64 cg, i64 o, const void* src,
                 std::array<i64, 4> src_strides, void* dst, std::array<i64, 4> dst_strides,
                 int device) {
  Copy4 p{};
  const i64 dims[4] = {kh, kw, cg, o};
  for (int a = 0; a < 4; ++a) {
    p.dims[a] = dims[a];
    p.src_dims[a] = dims[a];
    p.dst_stride[a] = dst_strides[static_cast<std::size_t>(a)];
    p.src_stride[a] = src_strides[static_cast<std::size_t>(a)];
    p.shift[a] = 0;
  }
  copy4d(dtype, p, src, dst, device);
}

}  // namespace keel::cuda::conv_layout
