// float64 dense linear algebra: keel::linalg inv, solve, cholesky, svd and eigh against calling
// OpenBLAS's LAPACK directly in the same run, for 64x64 and 256x256 matrices. The direct column
// does what keel's kernel must do at the least: copy the (immutable) input into a work buffer
// and call the routines, with the workspaces allocated once outside the timed loop; the ratio is
// keel's overhead (checks, output allocation, layout handling, the gradient-ready outputs).
// Rates are matrices per second; the ratios are printed at the end.
//
//   build/benchmarks/bench_linalg --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rate_reporter.hpp"

extern "C" {
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work, const int* lwork, int* info);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info, std::size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, std::size_t, std::size_t);
}

namespace {

const char* const kOps[] = {"inv", "solve", "cholesky", "svd", "eigh"};
const std::int64_t kSizes[] = {64, 256};
constexpr int kRhs = 16;  // right-hand sides of solve

// A symmetric positive definite n x n matrix (B B^T / n + I of a fixed B): valid for every op.
std::vector<double> spd(std::int64_t n) {
  std::vector<double> b(static_cast<std::size_t>(n * n)), a(b.size());
  std::uint64_t state = 12345;
  for (auto& v : b) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    v = double(state >> 11) / double(1ULL << 53) - 0.5;
  }
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = i == j ? 1.0 : 0.0;
      for (std::int64_t k = 0; k < n; ++k) s += b[std::size_t(i * n + k)] * b[std::size_t(j * n + k)] / double(n);
      a[std::size_t(i * n + j)] = s;
    }
  return a;
}

void set_rate(benchmark::State& state) {
  state.counters["matrices"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_keel(benchmark::State& state, std::string op, std::int64_t n) {
  const keel::Tensor a = keel::constant(spd(n), {n, n}, keel::DType::float64);
  const keel::Tensor b = keel::ones({n, kRhs}, keel::DType::float64);
  for (auto _ : state) {
    keel::Tensor r;
    if (op == "inv") r = keel::linalg::inv(a);
    else if (op == "solve") r = keel::linalg::solve(a, b);
    else if (op == "cholesky") r = keel::linalg::cholesky(a);
    else if (op == "svd") r = keel::linalg::svd(a).s;
    else r = keel::linalg::eigh(a).e;
    benchmark::DoNotOptimize(r.raw_data());
  }
  set_rate(state);
}

void BM_lapack(benchmark::State& state, std::string op, std::int64_t n) {
  const std::vector<double> a = spd(n);
  const int N = int(n), K = kRhs;
  std::vector<double> buf(a.size()), x(static_cast<std::size_t>(n * kRhs)), s(static_cast<std::size_t>(n)), u(a.size()), vt(a.size());
  std::vector<int> ipiv(static_cast<std::size_t>(n)), iwork(static_cast<std::size_t>(8 * n));
  int info = 0, lwork = -1, liwork = -1, iq = 0;
  double q = 0;
  // workspace queries, once
  if (op == "inv") dgetri_(&N, buf.data(), &N, ipiv.data(), &q, &lwork, &info);
  if (op == "svd") dgesdd_("S", &N, &N, buf.data(), &N, s.data(), u.data(), &N, vt.data(), &N, &q, &lwork,
                           iwork.data(), &info, 1);
  if (op == "eigh") {
    dsyevd_("V", "U", &N, buf.data(), &N, s.data(), &q, &lwork, &iq, &liwork, &info, 1, 1);
    iwork.resize(std::size_t(std::max(1, iq)));
    liwork = std::max(1, iq);
  }
  lwork = std::max(1, int(q));
  std::vector<double> work(static_cast<std::size_t>(lwork));
  for (auto _ : state) {
    std::memcpy(buf.data(), a.data(), sizeof(double) * a.size());
    if (op == "inv") {
      dgetrf_(&N, &N, buf.data(), &N, ipiv.data(), &info);
      dgetri_(&N, buf.data(), &N, ipiv.data(), work.data(), &lwork, &info);
    } else if (op == "solve") {
      dgetrf_(&N, &N, buf.data(), &N, ipiv.data(), &info);
      std::fill(x.begin(), x.end(), 1.0);
      dgetrs_("N", &N, &K, buf.data(), &N, ipiv.data(), x.data(), &N, &info, 1);
    } else if (op == "cholesky") {
      dpotrf_("U", &N, buf.data(), &N, &info, 1);
    } else if (op == "svd") {
      dgesdd_("S", &N, &N, buf.data(), &N, s.data(), u.data(), &N, vt.data(), &N, work.data(), &lwork,
              iwork.data(), &info, 1);
    } else {
      dsyevd_("V", "U", &N, buf.data(), &N, s.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
    }
    benchmark::DoNotOptimize(buf.data());
    if (info != 0) state.SkipWithError("LAPACK failed");
  }
  set_rate(state);
}

std::string suffix(const char* op, std::int64_t n) { return std::string("/") + op + "/" + std::to_string(n); }

void print_ratios(const keel_bench::RateReporter& reporter) {
  std::printf("\nkeel::linalg matrices/s and its ratio to direct LAPACK calls (same run, float64):\n");
  std::printf("  %-10s %5s %14s %14s %12s\n", "op", "n", "keel", "lapack", "keel/lapack");
  for (const char* op : kOps)
    for (const std::int64_t n : kSizes) {
      const double k = reporter.rate("keel" + suffix(op, n)), l = reporter.rate("lapack" + suffix(op, n));
      if (k <= 0 || l <= 0) continue;
      std::printf("  %-10s %5lld %14.1f %14.1f %11.2fx\n", op, static_cast<long long>(n), k, l, k / l);
    }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (const char* op : kOps)
    for (const std::int64_t n : kSizes) {
      benchmark::RegisterBenchmark(("keel" + suffix(op, n)).c_str(), BM_keel, std::string(op), n)
          ->UseRealTime()->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("lapack" + suffix(op, n)).c_str(), BM_lapack, std::string(op), n)
          ->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  keel_bench::RateReporter reporter("matrices");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_ratios(reporter);
  benchmark::Shutdown();
  return 0;
}
