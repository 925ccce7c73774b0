#pragma once
// The one place keel's CPU kernels call a GEMM library. float32 goes to oneDNN's sgemm when the
// build has it (see cmake/KeelDependencies.cmake for why), else to OpenBLAS; float64 always to
// OpenBLAS. Row-major, C = alpha * op(A) * op(B) + beta * C.
//
// Threads: called outside a parallel region, a product is split into blocks of C over the thread
// pool (cpu/thread_pool.hpp), up to parallel_threads() of them, or runs on one thread when it
// is too small to gain from a second; each block is a single-threaded library call. A product
// whose inner dimension is long against both sides of a small C is split along it instead, each
// part into its own C, summed at the end. Called inside
// a region it runs on the calling thread. Internal to src/cpu/.
#include <cstdint>

namespace keel::cpu::blas {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
          std::int64_t ldc);

}  // namespace keel::cpu::blas
