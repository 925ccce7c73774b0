#pragma once
// The direct float32 convolution, which conv.cpp uses instead of im2col + GEMM where it fits.
//
// im2col writes every window out (9x the input for a 3x3 kernel) and the GEMM library packs that
// copy again before multiplying; with K = kh*kw*c small (an image model's first layer: 27) the
// product is skinny and the copies cost as much as the arithmetic (3->16 @32x32 ran at 0.5x the
// GEMM rate). These kernels read a zero-padded copy of one image instead. A tile of output pixels
// x output channels stays in registers while it runs over the K taps (the forward, and the input
// gradient of a stride-1 convolution, which is the forward of dy with the kernel turned), or a
// tile of kernel rows x output channels while it runs over the pixels (the kernel gradient).
// The tiles are compiled per instruction set (cpu/conv_direct/: AVX2 + FMA with 16 registers,
// AVX-512 with 32) and picked at the active SIMD level.
#include "cpu/conv.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#define KEEL_CONV_DIRECT 1

namespace keel::cpu::direct {

// Whether the direct kernel takes this pass of a convolution: output channels (of the pass) a
// multiple of the vector width and K small enough (cpu/conv_direct.cpp), at an AVX2 or AVX-512
// SIMD level; the input gradient only at stride 1.
enum class Pass { forward, input, filter };
bool direct_fits(const WindowGeom& g, Pass pass);
// Each output row gets the epilogue (cpu/conv.hpp) as soon as it is written: a bias and a ReLU
// in the tiles' registers, another activation in a pass over the band.
void direct_forward(const WindowGeom& g, const float* x, const float* k, float* y, const ConvEpilogue& epilogue);
void direct_backward_filter(const WindowGeom& g, const float* x, const float* dy, float* dk);
// The input gradient of a stride-1 convolution, as the direct forward of dy with the kernel
// turned (cpu/conv_direct.cpp).
void direct_backward_input(const WindowGeom& g, const float* dy, const float* k, float* dx);

}  // namespace keel::cpu::direct

#endif
