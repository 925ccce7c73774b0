// The fused optimizer updates on cuda:0 (cuda/optimizers.cu, one kernel per variable and step)
// against the CPU (the fused float32 loop, and the op-based rule for float64): for every
// optimizer and option combination, three updates of a cuda:0 kernel and bias give the weights
// and slots that the same updates give on the CPU. The gradients change every step, one of them
// is a transposed (strided) view, and they are large enough for clipvalue to clamp them.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using keel_cuda_test::rnd;
namespace opt = keel::optimizers;

namespace {

struct OptimizerCase {
  std::string name;
  std::function<std::shared_ptr<opt::Optimizer>()> make;
};

template <class O, class Options>
OptimizerCase make_case(std::string name, double lr, Options options) {
  return {std::move(name), [lr, options] { return std::make_shared<O>(lr, options); }};
}

std::vector<OptimizerCase> optimizer_cases() {
  return {
      make_case<opt::SGD>("SGD", 0.1, opt::SGDOptions{}),
      make_case<opt::SGD>("SGD momentum", 0.1, opt::SGDOptions{.momentum = 0.9}),
      make_case<opt::SGD>("SGD nesterov", 0.1, opt::SGDOptions{.momentum = 0.9, .nesterov = true}),
      make_case<opt::SGD>("SGD momentum, weight decay, clipvalue", 0.1,
                          opt::SGDOptions{.momentum = 0.5, .weight_decay = 0.01, .clipvalue = 0.5}),
      make_case<opt::SGD>("SGD clipnorm (a gradient scale)", 0.1, opt::SGDOptions{.clipnorm = 1.0}),
      make_case<opt::Adam>("Adam", 0.01, opt::AdamOptions{}),
      make_case<opt::Adam>("Adam amsgrad", 0.01, opt::AdamOptions{.amsgrad = true}),
      make_case<opt::Adam>("Adam weight decay, clipvalue", 0.01,
                           opt::AdamOptions{.weight_decay = 0.05, .clipvalue = 0.5}),
      make_case<opt::Adam>("Adam amsgrad, global_clipnorm, loss scale", 0.01,
                           opt::AdamOptions{.beta_1 = 0.8,
                                            .beta_2 = 0.99,
                                            .epsilon = 1e-3,
                                            .amsgrad = true,
                                            .global_clipnorm = 2.0,
                                            .loss_scale_factor = 8.0}),
      make_case<opt::AdamW>("AdamW", 0.01, opt::AdamWOptions{}),
      make_case<opt::AdamW>("AdamW amsgrad, clipvalue", 0.01,
                            opt::AdamWOptions{.weight_decay = 0.1, .amsgrad = true, .clipvalue = 0.5}),
      make_case<opt::RMSprop>("RMSprop", 0.01, opt::RMSpropOptions{}),
      make_case<opt::RMSprop>("RMSprop momentum", 0.01, opt::RMSpropOptions{.momentum = 0.9}),
      make_case<opt::RMSprop>("RMSprop centered", 0.01, opt::RMSpropOptions{.centered = true}),
      make_case<opt::RMSprop>("RMSprop momentum, centered, weight decay, clipvalue", 0.01,
                              opt::RMSpropOptions{.rho = 0.8,
                                                  .momentum = 0.5,
                                                  .centered = true,
                                                  .weight_decay = 0.02,
                                                  .clipvalue = 0.5}),
      make_case<opt::Adagrad>("Adagrad", 0.1, opt::AdagradOptions{}),
      make_case<opt::Adagrad>("Adagrad weight decay, clipvalue", 0.1,
                              opt::AdagradOptions{.initial_accumulator_value = 0.5, .weight_decay = 0.01,
                                                  .clipvalue = 0.5}),
      make_case<opt::Nadam>("Nadam", 0.01, opt::NadamOptions{}),
      make_case<opt::Nadam>("Nadam weight decay, clipvalue", 0.01,
                            opt::NadamOptions{.weight_decay = 0.02, .clipvalue = 0.5}),
  };
}

// The optimizer state after a step: each GPU slot against the CPU's (names in the same order),
// the optimizer-wide scalars (iteration, learning_rate, Nadam's u_product) exactly.
void compare_state(opt::Optimizer& cpu, opt::Optimizer& gpu, double rtol) {
  const auto c = cpu.variables();
  const auto g = gpu.variables();
  REQUIRE(c.size() == g.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    INFO("optimizer variable " << c[i].first);
    CHECK(c[i].first == g[i].first);
    const Tensor& cv = c[i].second->peek();
    const Tensor& gv = g[i].second->peek();
    if (gv.device().is_cuda()) {
      keel_cuda_test::impl::compare(c[i].first, cv, gv, keel_cuda_test::Tol{.rtol = rtol, .grads = false});
    } else {
      CHECK(cv.to_vector<double>() == gv.to_vector<double>());
    }
  }
}

void check_case(const OptimizerCase& oc, DType dtype, double rtol) {
  INFO(oc.name << ", " << name(dtype));
  const Device gpu_device = Device::cuda(0);
  const std::shared_ptr<opt::Optimizer> cpu_opt = oc.make(), gpu_opt = oc.make();
  // A kernel of 903 elements (several warps, not a multiple of the block size) and a bias of
  // fewer elements than a warp.
  const Tensor kernel0 = rnd({7, 129}, 11, -1, 1, dtype), bias0 = rnd({5}, 12, -1, 1, dtype);
  Variable kc(kernel0, "kernel"), bc(bias0, "bias");
  Variable kg(kernel0.to(gpu_device), "kernel"), bg(bias0.to(gpu_device), "bias");
  REQUIRE(kg.device() == gpu_device);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step + 1);
    const auto seed = static_cast<std::uint32_t>(100 + 10 * step);
    // Step 2 takes the kernel's gradient as a transposed view (strided on both devices).
    const bool strided = step == 1;
    const Tensor gk = strided ? rnd({129, 7}, seed, -2, 2, dtype) : rnd({7, 129}, seed, -2, 2, dtype);
    const Tensor gb = rnd({5}, seed + 1, -2, 2, dtype);
    const Tensor gk_cpu = strided ? transpose(gk) : gk;
    const Tensor gk_gpu = strided ? transpose(gk.to(gpu_device)) : gk.to(gpu_device);
    if (strided) CHECK_FALSE(gk_gpu.is_contiguous());
    cpu_opt->apply_gradients({{gk_cpu, &kc}, {gb, &bc}});
    gpu_opt->apply_gradients({{gk_gpu, &kg}, {gb.to(gpu_device), &bg}});
    keel_cuda_test::Tol tol{.rtol = rtol, .grads = false};
    keel_cuda_test::impl::compare("kernel", kc.peek(), kg.peek(), tol);
    keel_cuda_test::impl::compare("bias", bc.peek(), bg.peek(), tol);
    compare_state(*cpu_opt, *gpu_opt, rtol);
  }
  CHECK(kg.device() == gpu_device);
  CHECK(bg.device() == gpu_device);
}

}  // namespace

TEST_CASE("fused optimizer updates of float32 variables on cuda:0 match the CPU", "[cuda][optimizers]") {
  for (const auto& oc : optimizer_cases()) check_case(oc, DType::float32, 1e-6);
}

TEST_CASE("fused optimizer updates of float64 variables on cuda:0 match the CPU", "[cuda][optimizers]") {
  for (const auto& oc : optimizer_cases()) check_case(oc, DType::float64, 1e-12);
}

TEST_CASE("a tape that saved a cuda:0 weight sees the fused update change it", "[cuda][optimizers]") {
  // The fused kernel writes the weight in place: the storage version must move, as with assign.
  DeviceScope gpu(Device::cuda(0));
  Variable w(rnd({4}, 3).to(Device::cuda(0)), "w");
  const std::uint64_t before = w.peek().impl()->storage->version();
  opt::Adam adam(0.01);
  adam.apply_gradients({{rnd({4}, 4).to(Device::cuda(0)), &w}});
  CHECK(w.peek().impl()->storage->version() != before);
}
