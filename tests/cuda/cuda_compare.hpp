#pragma once
// same_on_gpu: runs one op (a lambda of its inputs) on the CPU and on cuda:0 and checks that the
// GPU gives the CPU's result and, under a GradientTape on each device, the CPU's gradients.
//
// Each side runs inside a DeviceScope of its device, so factories called by the lambda (zeros,
// scalars, random numbers) create tensors where the inputs are. The differentiated scalar is
// L = reduce_sum(y * W), W fixed pseudo-random weights in [0.5, 1.5] of y's shape (as in
// gradcheck.hpp): every element of the upstream gradient differs, so a backward kernel that
// sums the wrong axis or transposes the wrong way cannot hide behind a plain sum.
//
// The bound, per element, for a GPU value g against the CPU value c of a floating tensor C:
//
//     |g - c| <= rtol * (|c| + rms(C)) * max(1, sqrt(sum_length) / 32) + 1e-30
//
//   * rtol * |c|       the relative error (1e-5 for float32 by default);
//   * rtol * rms(C)    an absolute floor at the tensor's own scale (rms = root mean square of
//                      C): an element that is a sum with cancellation, near zero while its terms
//                      are of size rms, is judged against the size of its terms;
//   * sqrt(n) / 32     long sums: two summation orders differ by about eps * sqrt(n) relative to
//                      the terms, so the bound holds as is up to 1024 terms per output element
//                      and grows with the square root of the sum's length above that.
// Integer and bool results must be equal. NaN must meet NaN, and an infinity the same infinity.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace keel_cuda_test {

using keel::Device;
using keel::DeviceScope;
using keel::DType;
using keel::Shape;
using keel::Tensor;
using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Inputs&)>;

constexpr double kFloat32 = 1e-5;   // float32 GPU vs CPU
constexpr double kFloat64 = 1e-12;  // float64 GPU vs CPU (a few ulps of transcendental functions)
constexpr double kTF32 = 3e-4;      // float32 with TF32 tensor cores allowed
constexpr double kFloat16 = 2e-3;   // one float16 rounding step (2^-10) apart at most
constexpr double kBFloat16 = 1e-2;  // one bfloat16 rounding step (2^-7) apart at most

struct Tol {
  double rtol = kFloat32;
  std::int64_t sum_length = 1;  // the longest sum behind one output (or gradient) element
  bool grads = true;            // also compare the gradients of every float32/float64 input
};

// Uniform values in [lo, hi) from a fixed seed, made on the CPU.
inline Tensor rnd(const Shape& shape, std::uint32_t seed, double lo = -1, double hi = 1,
                  DType dtype = DType::float32) {
  DeviceScope cpu(Device::cpu());
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (auto& x : v) x = dist(gen);
  return keel::constant(v, shape, DType::float64).astype(dtype);
}

// Random integers in [lo, hi) (class ids, indices), made on the CPU.
inline Tensor rnd_int(const Shape& shape, std::uint32_t seed, std::int64_t lo, std::int64_t hi,
                      DType dtype = DType::int64) {
  DeviceScope cpu(Device::cpu());
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int64_t> dist(lo, hi - 1);
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape.num_elements()));
  for (auto& x : v) x = dist(gen);
  return keel::constant(v, shape, DType::int64).astype(dtype);
}

// Several outputs as one 1-D tensor (differentiable), for ops that return more than one.
inline Tensor pack(const std::vector<Tensor>& parts) {
  std::vector<Tensor> flat;
  for (const auto& p : parts) flat.push_back(keel::reshape(p.astype(parts.front().dtype()), Shape{-1}));
  return keel::concat(flat, 0);
}

// TF32 allowed while this lives (and switched off again even when a check throws).
struct TF32Scope {
  TF32Scope() { keel::config::set_tf32(true); }
  ~TF32Scope() { keel::config::set_tf32(false); }
  TF32Scope(const TF32Scope&) = delete;
  TF32Scope& operator=(const TF32Scope&) = delete;
};

namespace impl {

inline bool differentiable(DType d) { return d == DType::float32 || d == DType::float64; }

inline std::vector<double> grad_weights(std::size_t n) {
  std::mt19937_64 gen(0x6b65656cULL);
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  std::vector<double> w(n);
  for (auto& v : w) v = dist(gen);
  return w;
}

struct Outcome {
  Tensor y;
  std::vector<Tensor> grads;  // one per input; undefined where not watched or unconnected
};

inline Outcome run_on(const Device& device, const OpFn& f, const Inputs& cpu_inputs, bool grads) {
  DeviceScope scope(device);
  Inputs inputs;
  for (const auto& x : cpu_inputs) inputs.push_back(x.to(device));
  Outcome out;
  if (!grads) {
    out.y = f(inputs);
    return out;
  }
  keel::GradientTape tape;
  std::vector<std::size_t> watched;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (differentiable(inputs[i].dtype())) {
      tape.watch(inputs[i]);
      watched.push_back(i);
    }
  }
  out.y = f(inputs);
  out.grads.resize(inputs.size());
  if (watched.empty() || !differentiable(out.y.dtype())) return out;
  const Tensor w = keel::constant(grad_weights(static_cast<std::size_t>(out.y.size())), out.y.shape(),
                                  DType::float64)
                       .astype(out.y.dtype());
  const Tensor loss = keel::reduce_sum(out.y * w);
  std::vector<Tensor> sources;
  for (auto i : watched) sources.push_back(inputs[i]);
  const std::vector<Tensor> g = tape.gradient(loss, sources);
  for (std::size_t j = 0; j < watched.size(); ++j) out.grads[watched[j]] = g[j];
  return out;
}

// Checks one GPU tensor against its CPU counterpart; `what` names it in the failure message.
inline void compare(const std::string& what, const Tensor& cpu, const Tensor& gpu, const Tol& tol) {
  INFO(what);
  // CHECK and return rather than REQUIRE: the other ops of a table still get compared.
  CHECK(cpu.defined() == gpu.defined());
  if (!cpu.defined() || !gpu.defined()) return;
  CHECK(gpu.device() == Device::cuda(0));
  CHECK(gpu.dtype() == cpu.dtype());
  CHECK(gpu.shape() == cpu.shape());
  if (gpu.shape() != cpu.shape()) return;
  const std::vector<double> c = cpu.to_vector<double>();
  const std::vector<double> g = gpu.to_vector<double>();
  const bool exact = !keel::is_floating(cpu.dtype());
  double sq = 0;
  std::size_t finite = 0;
  for (double v : c) {
    if (std::isfinite(v)) {
      sq += v * v;
      ++finite;
    }
  }
  const double rms = finite ? std::sqrt(sq / static_cast<double>(finite)) : 0.0;
  const double scale = std::max(1.0, std::sqrt(static_cast<double>(tol.sum_length)) / 32.0);
  std::size_t bad = 0, worst_i = 0;
  double worst = 0;  // the largest |g - c| / bound
  for (std::size_t i = 0; i < c.size(); ++i) {
    double ratio = 0;
    if (exact || !std::isfinite(c[i]) || !std::isfinite(g[i])) {
      const bool same = (std::isnan(c[i]) && std::isnan(g[i])) || c[i] == g[i];
      ratio = same ? 0 : HUGE_VAL;
    } else {
      const double bound = tol.rtol * (std::abs(c[i]) + rms) * scale + 1e-30;
      ratio = std::abs(g[i] - c[i]) / bound;
    }
    if (ratio > 1) ++bad;
    if (ratio > worst) {
      worst = ratio;
      worst_i = i;
    }
  }
  std::ostringstream msg;
  msg.precision(9);
  msg << bad << " of " << c.size() << " elements (shape " << cpu.shape().to_string() << ", "
      << keel::name(cpu.dtype()) << ") off; worst at " << worst_i;
  if (!c.empty()) msg << ": gpu " << g[worst_i] << " vs cpu " << c[worst_i];
  msg << " (error/bound " << worst << ", rtol " << tol.rtol << ", rms " << rms << ")";
  INFO(msg.str());
  CHECK(bad == 0);
}

}  // namespace impl

// The whole comparison for one op; an exception on either device fails this check (with its
// message) without ending the test case, so one run reports every op that is off.
inline void same_on_gpu(const std::string& what, const OpFn& f, const Inputs& cpu_inputs, Tol tol = {}) {
  INFO("op: " << what);
  impl::Outcome cpu, gpu;
  try {
    cpu = impl::run_on(Device::cpu(), f, cpu_inputs, tol.grads);
  } catch (const std::exception& e) {
    FAIL_CHECK("the CPU reference threw: " << e.what());
    return;
  }
  try {
    gpu = impl::run_on(Device::cuda(0), f, cpu_inputs, tol.grads);
  } catch (const std::exception& e) {
    FAIL_CHECK("cuda:0 threw: " << e.what());
    return;
  }
  try {
    impl::compare("forward", cpu.y, gpu.y, tol);
    for (std::size_t i = 0; i < cpu.grads.size(); ++i)
      impl::compare("gradient of input " + std::to_string(i), cpu.grads[i], gpu.grads[i], tol);
  } catch (const std::exception& e) {
    FAIL_CHECK("comparing threw: " << e.what());
  }
}

// One row of a table of ops.
struct Case {
  std::string name;
  OpFn f;
  Inputs inputs;
  Tol tol{};
};

inline void same_on_gpu(const std::vector<Case>& cases) {
  for (const auto& c : cases) same_on_gpu(c.name, c.f, c.inputs, c.tol);
}

// The cases as given (float32), then again with every input in float64 and its tighter bound.
inline void same_on_gpu_in_float32_and_float64(std::vector<Case> cases) {
  same_on_gpu(cases);
  for (auto& c : cases) {
    for (auto& in : c.inputs) in = in.astype(DType::float64);
    c.name += " float64";
    c.tol.rtol = kFloat64;
  }
  same_on_gpu(cases);
}

}  // namespace keel_cuda_test
