#include "cpu/blas.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"

#ifdef KEEL_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace keel::cpu::blas {

namespace {

// Multiply-adds below which a product runs on one thread (measured with oneDNN on 2 cores: a
// 64^3 product is 2x slower on two threads than on one; 256^3 gains 1.3x).
constexpr double kMinMacsPerThread = 1 << 20;

// A product is split along its inner dimension k when k is at least this many times the larger
// side of C (and C small enough that each part's own copy is cheap: at most 4 MB of float32).
constexpr std::int64_t kSplitInnerRatio = 4;
constexpr std::int64_t kMaxSplitInnerOutput = 1 << 20;

int parts_for(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (in_parallel_region()) return 1;
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const auto by_work = static_cast<std::int64_t>(macs / kMinMacsPerThread);
  return static_cast<int>(std::clamp<std::int64_t>(std::min<std::int64_t>(by_work, std::max(m, n)), 1,
                                                   parallel_threads()));
}

// OpenBLAS (the OpenMP build) and oneDNN (the OpenMP runtime) size their parallel regions by the
// calling thread's omp_get_max_threads(): one, for the call, so that they never start OpenMP
// threads beside the pool's. The caller's own setting is put back.
class OneThread {
 public:
  OneThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_;
};

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

void call_one(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
#ifdef KEEL_HAVE_ONEDNN
  // The arguments were checked by the callers (sizes, leading dimensions); a failure status here
  // would be a keel bug, and it leaves C unwritten, which the tests would see.
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  cblas_sgemm(CblasRowMajor, op(ta), op(tb), static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta,
              c, static_cast<blasint>(ldc));
#endif
}

void call_one(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
              std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, op(ta), op(tb), static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta,
              c, static_cast<blasint>(ldc));
}

// Splits C into blocks of rows (or of columns, when C is wider than tall) over the pool; each
// block is one single-threaded library call on its slice of A (or B). A product whose inner
// dimension is long against both sides of C (the kernel gradient of a recurrent layer over all
// steps, [50, 1600] x [1600, 200]; a Dense layer's forward, [64, 1024] x [1024, 128]) is split
// along k instead: each part multiplies its own rows of B and columns of A into its own C, and the
// caller adds them. Split by C, every part would read the whole of one operand, the other
// thread's half of it too (the recurrent layer's 2-thread step then ran 1.26x slower than its
// 1-thread step; now 1.07-1.10x).
template <class T>
void split_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  const int parts = parts_for(m, n, k);
  if (parts > 1 && k >= kSplitInnerRatio * std::max(m, n) && m * n <= kMaxSplitInnerOutput) {
    // Part 0 (always the caller's, cpu/thread_pool.hpp) writes C with beta; the others write
    // their own [m, n] blocks, added into C in part order.
    std::vector<T> partial(static_cast<std::size_t>((parts - 1) * m * n));
    parallel_parts(parts, [&](int p) {
      const OneThread one;
      const std::int64_t lo = k * p / parts, hi = k * (p + 1) / parts;
      const T* ap = ta ? a + lo * lda : a + lo;
      const T* bp = tb ? b + lo : b + lo * ldb;
      if (p == 0)
        call_one(ta, tb, m, n, hi - lo, alpha, ap, lda, bp, ldb, beta, c, ldc);
      else
        call_one(ta, tb, m, n, hi - lo, alpha, ap, lda, bp, ldb, T(0), partial.data() + (p - 1) * m * n, n);
    });
    const auto accumulate = typed_kernels<T>().accumulate;
    for (int p = 1; p < parts; ++p)
      for (std::int64_t i = 0; i < m; ++i)
        accumulate(kernel::ReduceOp::sum, c + i * ldc, partial.data() + ((p - 1) * m + i) * n, n);
    return;
  }
  const bool by_rows = m >= n;
  parallel_ranges(by_rows ? m : n, parts, [&](std::int64_t lo, std::int64_t hi) {
    const OneThread one;
    if (by_rows)
      call_one(ta, tb, hi - lo, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc, ldc);
    else
      call_one(ta, tb, m, hi - lo, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
  });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  split_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
          std::int64_t ldc) {
  split_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace keel::cpu::blas
