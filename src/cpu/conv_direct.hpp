#pragma once
// The direct float32 convolution for few taps (AVX2 + FMA), which conv.cpp uses instead of
// im2col + BLAS where it fits.
//
// With K = kh*kw*c small (an image model's first layer: 3x3x3 = 27) the im2col GEMM is skinny:
// OpenBLAS spends about as long packing the im2col block as multiplying it, after im2col has
// spent as long writing it (3->16 @32x32 ran at 0.56x the GEMM rate). This kernel reads a
// zero-padded copy of the image instead: a tile of 6 output pixels x 16 output channels stays in
// 12 AVX registers while it runs over the K taps. It is compiled for AVX2+FMA through a target
// attribute (the library's baseline is SSE2) and used only where the CPU has them.
#include "cpu/conv.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#define KEEL_CONV_DIRECT_AVX2 1

namespace keel::cpu::direct {

// Whether the direct kernel takes this convolution: output channels a multiple of 8, K <= 64,
// and a CPU with AVX2 and FMA.
bool direct_fits(const WindowGeom& g);
// Each output row gets the epilogue (cpu/conv.hpp) as soon as it is written.
void direct_forward(const WindowGeom& g, const float* x, const float* k, float* y, const ConvEpilogue& epilogue);
void direct_backward_filter(const WindowGeom& g, const float* x, const float* dy, float* dk);

}  // namespace keel::cpu::direct

#endif
