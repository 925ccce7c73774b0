#pragma once
// Layout changes for the cuDNN convolutions of conv.cu: one strided copy kernel that permutes,
// pads and crops 4-d blocks, and the image and filter layouts built on it.
#include <array>
#include <cstdint>

#include "cuda/runtime.cuh"
#include "keel/core/dtype.hpp"

namespace keel::cuda::conv_layout {

using i64 = std::int64_t;

// Strides of an image [n, h, w, c] stored as NHWC or as NCHW, in logical (n, h, w, c) order.
std::array<i64, 4> image_strides(bool nchw, i64 h, i64 w, i64 c);

// Copies image src (NHWC, h x w) into dst (layout `nchw`, dh x dw rows and columns), dst pixel
// (r, q) reading src pixel (r + shift_h, q + shift_w), zero outside src.
void copy_image(DType dtype, i64 n, i64 c, const void* src, bool src_nchw, i64 sh_, i64 sw_,
                void* dst, bool dst_nchw, i64 dh_, i64 dw_, i64 shift_h, i64 shift_w,
                int device);

// Strides of a filter in logical (kh, kw, cg, o) order: keel's [kh, kw, c, o] kernel (depthwise:
// [kh, kw, c, m] read as [kh, kw, 1, c*m]), or cuDNN's [o, kh, kw, cg] (NHWC) / [o, cg, kh, kw]
// (NCHW).
std::array<i64, 4> keel_filter_strides(i64 kh, i64 kw, i64 cg, i64 o);
std::array<i64, 4> cudnn_filter_strides(bool nchw, i64 kh, i64 kw, i64 cg);

void copy_filter(DType dtype, i64 kh, i64 kw, i64 cg, i64 o, const void* src,
                 std::array<i64, 4> src_strides, void* dst, std::array<i64, 4> dst_strides,
                 int device);

}  // namespace keel::cuda::conv_layout
