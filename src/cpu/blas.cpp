#include "cpu/blas.hpp"

#include <cblas.h>
#include <fmt/core.h>
#include <omp.h>

#include <string>

#include "keel/core/config.hpp"

#ifdef KEEL_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace keel::cpu::blas {

namespace {

// Multiply-adds below which a product runs on one thread.
constexpr double kMinMacsPerThread = 1 << 20;

int threads_for(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (omp_in_parallel()) return 1;
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int by_work = static_cast<int>(macs / kMinMacsPerThread);
  return std::max(1, std::min(config::num_threads(), by_work));
}

// OpenBLAS (the OpenMP build) and oneDNN (the OpenMP runtime) both size their parallel regions by
// the calling thread's omp_get_max_threads(); set it for one call and put the caller's back.
class CallThreads {
 public:
  explicit CallThreads(int n) : previous_(omp_get_max_threads()) {
    if (n != previous_) omp_set_num_threads(n);
  }
  ~CallThreads() {
    if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
  }
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

 private:
  int previous_;
};

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  const CallThreads threads(threads_for(m, n, k));
#ifdef KEEL_HAVE_ONEDNN
  // The arguments were checked by the callers (sizes, leading dimensions); a failure status here
  // would be a keel bug, and it leaves C unwritten, which the tests would see.
  dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb),
              beta, c, static_cast<blasint>(ldc));
#endif
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
          std::int64_t ldc) {
  const CallThreads threads(threads_for(m, n, k));
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb),
              beta, c, static_cast<blasint>(ldc));
}

const char* sgemm_library() {
  static const std::string name = [] {
#ifdef KEEL_HAVE_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
#else
    return fmt::format("OpenBLAS {}", openblas_get_corename());
#endif
  }();
  return name.c_str();
}

}  // namespace keel::cpu::blas
