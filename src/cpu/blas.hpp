#pragma once
// The one place keel's CPU kernels call a GEMM library. float32 goes to oneDNN's sgemm when the
// build has it (see cmake/KeelDependencies.cmake for why), else to OpenBLAS; float64 always to
// OpenBLAS. Row-major, C = alpha * op(A) * op(B) + beta * C.
//
// Threads: called outside a parallel region, a product uses config::num_threads() threads, or
// one when it is too small to gain from a second (measured: below about a million
// multiply-adds the second thread's start-up outweighs it); called inside one of keel's
// parallel regions it runs on the calling thread. Internal to src/cpu/.
#include <cstdint>

namespace keel::cpu::blas {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
          std::int64_t ldc);

// "oneDNN <version>" or "OpenBLAS <core>": which library the float32 products run on.
const char* sgemm_library();

}  // namespace keel::cpu::blas
