// matmul, convolutions and pooling on cuda:0 against the CPU, forward and gradient: plain,
// transposed, batched and broadcast products; conv2d / conv1d / depthwise / conv2d_transpose with
// valid and same padding (symmetric and asymmetric), strides and dilations; every pooling op;
// TF32 (one matmul, one conv), float16 and bfloat16 products. Bounds: see cuda_compare.hpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using namespace keel_cuda_test;

namespace {

// Multiples of 1/64 in [-1, 1]: 7 significant bits, exact in TF32 (11). Products are multiples
// of 1/4096 and sums of a few hundred of them need fewer than 24 bits, so a TF32 product of such
// inputs is exact in any summation order: any difference from the CPU is a real error.
Tensor on_grid(const Shape& shape, std::uint32_t seed) {
  DeviceScope cpu(Device::cpu());
  return rnd_int(shape, seed, -64, 65, DType::float32) * (1.0 / 64);
}

}  // namespace

TEST_CASE("matmul on cuda:0 matches the CPU: transposes, batches, broadcasting, views",
          "[cuda][linalg]") {
  const Tensor a = rnd({33, 17}, 1), b = rnd({17, 29}, 2);
  const Tensor at = rnd({17, 33}, 3), bt = rnd({29, 17}, 4);
  const Tensor ba = rnd({4, 33, 17}, 5), bb = rnd({4, 17, 29}, 6);
  const Tensor bc_a = rnd({4, 1, 8, 16}, 7), bc_b = rnd({3, 16, 5}, 8);
  const Tensor r4 = rnd({2, 3, 8, 16}, 9), w = rnd({16, 5}, 10);
  const Tensor big_a = rnd({256, 512}, 11), big_b = rnd({512, 128}, 12);
  std::vector<Case> cases = {
      {"[33,17] x [17,29]", [](const Inputs& v) { return matmul(v[0], v[1]); }, {a, b}},
      {"transpose_a", [](const Inputs& v) { return matmul(v[0], v[1], true, false); }, {at, b}},
      {"transpose_b", [](const Inputs& v) { return matmul(v[0], v[1], false, true); }, {a, bt}},
      {"transpose_a and transpose_b", [](const Inputs& v) { return matmul(v[0], v[1], true, true); }, {at, bt}},
      {"transposed views as operands", [](const Inputs& v) { return matmul(transpose(v[0]), transpose(v[1])); }, {at, bt}},
      {"a sliced (strided) operand", [](const Inputs& v) { return matmul(slice(v[0], {0, 3}, {-1, 11}), slice(v[1], {2, 0}, {11, -1})); }, {a, b}},
      {"batched", [](const Inputs& v) { return matmul(v[0], v[1]); }, {ba, bb}},
      {"batched, transpose_b", [](const Inputs& v) { return matmul(v[0], transpose(v[1], {0, 2, 1}), false, true); }, {ba, bb}},
      {"broadcast batch [4,1,8,16] x [3,16,5]", [](const Inputs& v) { return matmul(v[0], v[1]); }, {bc_a, bc_b}},
      {"rank 4 x rank 2", [](const Inputs& v) { return matmul(v[0], v[1]); }, {r4, w}},
      {"row x column", [](const Inputs& v) { return matmul(v[0], v[1]); }, {rnd({1, 64}, 13), rnd({64, 1}, 14)}},
      {"[256,512] x [512,128]", [](const Inputs& v) { return matmul(v[0], v[1]); }, {big_a, big_b}, Tol{.sum_length = 512}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("matmul with TF32 allowed stays within TF32's bound and the setting resets",
          "[cuda][linalg]") {
  REQUIRE_FALSE(config::tf32());
  {
    TF32Scope tf32;
    CHECK(config::tf32());
    same_on_gpu("TF32 matmul of TF32-exact inputs", [](const Inputs& v) { return matmul(v[0], v[1]); },
                {on_grid({128, 256}, 1), on_grid({256, 96}, 2)}, Tol{.rtol = kTF32, .grads = false});
    // Random inputs lose their low 13 bits: about 4e-4 of the output's rms per element (one
    // TF32 rounding of each factor, 2^-11 relative, over the dot product), bounded by 3e-3.
    same_on_gpu("TF32 matmul of random inputs, with gradients", [](const Inputs& v) { return matmul(v[0], v[1]); },
                {rnd({128, 256}, 3), rnd({256, 96}, 4)}, Tol{.rtol = 3e-3});
  }
  CHECK_FALSE(config::tf32());
}

TEST_CASE("float16 and bfloat16 matmuls on cuda:0 match the CPU's float32 products of the same values",
          "[cuda][linalg]") {
  // The CPU has no half-precision arithmetic: its reference is the float32 product of the
  // rounded inputs; the GPU's result differs by its one final rounding (and float32 sums).
  for (DType dt : {DType::bfloat16, DType::float16}) {
    INFO("dtype " << name(dt));
    const double rtol = dt == DType::bfloat16 ? kBFloat16 : kFloat16;
    const Tensor a = rnd({64, 96}, 1).astype(dt), b = rnd({96, 48}, 2).astype(dt), bt = rnd({48, 96}, 3).astype(dt);
    const Tensor ref = matmul(a.astype(DType::float32), b.astype(DType::float32));
    const Tensor ref_t = matmul(a.astype(DType::float32), bt.astype(DType::float32), false, true);
    try {
      const Tensor ga = a.to(Device::cuda(0)), gb = b.to(Device::cuda(0)), gbt = bt.to(Device::cuda(0));
      const Tensor c = matmul(ga, gb);
      CHECK(c.dtype() == dt);
      CHECK(c.device() == Device::cuda(0));
      impl::compare("product", ref, c.astype(DType::float32), Tol{.rtol = rtol, .sum_length = 96});
      impl::compare("product, transpose_b", ref_t, matmul(ga, gbt, false, true).astype(DType::float32),
                      Tol{.rtol = rtol, .sum_length = 96});
    } catch (const std::exception& e) {
      FAIL_CHECK("cuda:0 threw: " << e.what());
    }
  }
}

TEST_CASE("conv2d on cuda:0 matches the CPU: valid and same padding, strides, dilation",
          "[cuda][conv]") {
  const Tensor x = rnd({2, 9, 10, 3}, 1), k = rnd({3, 3, 3, 4}, 2);
  const Tensor k4 = rnd({4, 4, 3, 4}, 3), k2 = rnd({2, 2, 3, 5}, 4), k1 = rnd({1, 1, 3, 6}, 5);
  const Tensor xt = rnd({2, 10, 9, 3}, 6);
  const Tensor xb = rnd({2, 16, 16, 64}, 7), kb = rnd({3, 3, 64, 32}, 8);
  auto conv = [](std::array<int, 2> s, std::string pad, std::array<int, 2> d = {1, 1}) {
    return [s, pad, d](const Inputs& v) { return conv2d(v[0], v[1], s, pad, d); };
  };
  std::vector<Case> cases = {
      {"3x3 valid", conv({1, 1}, "valid"), {x, k}},
      {"3x3 same", conv({1, 1}, "same"), {x, k}},
      {"3x3 same stride 2 (padding 1/1 rows, 0/1 columns)", conv({2, 2}, "same"), {x, k}},
      {"3x3 valid strides (2,1)", conv({2, 1}, "valid"), {x, k}},
      {"4x4 same (padding 1 before, 2 after)", conv({1, 1}, "same"), {x, k4}},
      {"2x2 same (padding 0 before, 1 after)", conv({1, 1}, "same"), {x, k2}},
      {"4x4 same stride 3", conv({3, 3}, "same"), {x, k4}},
      {"3x3 same dilation 2", conv({1, 1}, "same", {2, 2}), {x, k}},
      {"3x3 valid dilation (1,2)", conv({1, 1}, "valid", {1, 2}), {x, k}},
      {"1x1", conv({1, 1}, "valid"), {x, k1}},
      {"of a transposed view",
       [](const Inputs& v) { return conv2d(transpose(v[0], {0, 2, 1, 3}), v[1], {1, 1}, "same"); }, {xt, k}},
      {"64 -> 32 channels, 16x16, same", conv({1, 1}, "same"), {xb, kb}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("conv2d with TF32 allowed stays within TF32's bound and the setting resets", "[cuda][conv]") {
  {
    TF32Scope tf32;
    same_on_gpu("TF32 conv2d of TF32-exact inputs",
                [](const Inputs& v) { return conv2d(v[0], v[1], {1, 1}, "same"); },
                {on_grid({4, 16, 16, 32}, 1), on_grid({3, 3, 32, 16}, 2)}, Tol{.rtol = kTF32, .grads = false});
    same_on_gpu("TF32 conv2d of random inputs, with gradients",
                [](const Inputs& v) { return conv2d(v[0], v[1], {2, 2}, "same"); },
                {rnd({4, 16, 16, 32}, 3), rnd({3, 3, 32, 16}, 4)}, Tol{.rtol = 3e-3});
  }
  CHECK_FALSE(config::tf32());
}

TEST_CASE("conv1d, depthwise_conv2d and conv2d_transpose on cuda:0 match the CPU", "[cuda][conv]") {
  const Tensor x1 = rnd({2, 11, 3}, 1), k1 = rnd({3, 3, 5}, 2), k1b = rnd({4, 3, 2}, 3);
  const Tensor xd = rnd({2, 8, 9, 3}, 4), kd = rnd({3, 3, 3, 2}, 5), kd5 = rnd({5, 5, 3, 1}, 6);
  const Tensor xt = rnd({2, 5, 6, 4}, 7), kt = rnd({3, 3, 3, 4}, 8), kt2 = rnd({2, 2, 3, 4}, 9);
  using Pair = std::array<int, 2>;
  std::vector<Case> cases = {
      {"conv1d valid", [](const Inputs& v) { return conv1d(v[0], v[1]); }, {x1, k1}},
      {"conv1d same stride 2", [](const Inputs& v) { return conv1d(v[0], v[1], 2, "same"); }, {x1, k1}},
      {"conv1d 4-wide same (asymmetric)", [](const Inputs& v) { return conv1d(v[0], v[1], 1, "same"); }, {x1, k1b}},
      {"conv1d valid dilation 2", [](const Inputs& v) { return conv1d(v[0], v[1], 1, "valid", 2); }, {x1, k1}},
      {"depthwise valid", [](const Inputs& v) { return depthwise_conv2d(v[0], v[1]); }, {xd, kd}},
      {"depthwise same stride 2", [](const Inputs& v) { return depthwise_conv2d(v[0], v[1], {2, 2}, "same"); }, {xd, kd}},
      {"depthwise 5x5 same", [](const Inputs& v) { return depthwise_conv2d(v[0], v[1], {1, 1}, "same"); }, {xd, kd5}},
      {"depthwise same dilation 2", [](const Inputs& v) { return depthwise_conv2d(v[0], v[1], {1, 1}, "same", {2, 2}); }, {xd, kd}},
      {"conv2d_transpose valid", [](const Inputs& v) { return conv2d_transpose(v[0], v[1]); }, {xt, kt}},
      {"conv2d_transpose valid stride 2", [](const Inputs& v) { return conv2d_transpose(v[0], v[1], {2, 2}); }, {xt, kt}},
      {"conv2d_transpose same stride 2", [](const Inputs& v) { return conv2d_transpose(v[0], v[1], {2, 2}, "same"); }, {xt, kt}},
      {"conv2d_transpose same stride 1", [](const Inputs& v) { return conv2d_transpose(v[0], v[1], {1, 1}, "same"); }, {xt, kt}},
      {"conv2d_transpose 2x2 same stride 2", [](const Inputs& v) { return conv2d_transpose(v[0], v[1], {2, 2}, "same"); }, {xt, kt2}},
      {"conv2d_transpose output_padding",
       [](const Inputs& v) { return conv2d_transpose(v[0], v[1], {2, 3}, "valid", Pair{1, 2}); }, {xt, kt}},
      {"conv2d_transpose dilation 2",
       [](const Inputs& v) { return conv2d_transpose(v[0], v[1], {1, 1}, "same", std::nullopt, {2, 2}); }, {xt, kt}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("max, average and global pooling on cuda:0 match the CPU", "[cuda][conv]") {
  const Tensor x = rnd({2, 9, 10, 3}, 1);
  const Tensor xt = rnd({2, 10, 9, 3}, 2);
  std::vector<Case> cases = {
      {"max 2x2 stride 2 valid", [](const Inputs& v) { return max_pool2d(v[0], {2, 2}, {2, 2}); }, {x}},
      {"max 3x3 stride 2 same (asymmetric)", [](const Inputs& v) { return max_pool2d(v[0], {3, 3}, {2, 2}, "same"); }, {x}},
      {"max 3x3 stride 1 same", [](const Inputs& v) { return max_pool2d(v[0], {3, 3}, {1, 1}, "same"); }, {x}},
      {"max 2x3 strides (1,2) valid", [](const Inputs& v) { return max_pool2d(v[0], {2, 3}, {1, 2}); }, {x}},
      {"max of a transposed view", [](const Inputs& v) { return max_pool2d(transpose(v[0], {0, 2, 1, 3}), {2, 2}, {2, 2}, "same"); }, {xt}},
      {"avg 2x2 stride 2 valid", [](const Inputs& v) { return avg_pool2d(v[0], {2, 2}, {2, 2}); }, {x}},
      {"avg 3x3 stride 2 same (padding excluded)", [](const Inputs& v) { return avg_pool2d(v[0], {3, 3}, {2, 2}, "same"); }, {x}},
      {"avg 3x3 stride 1 same", [](const Inputs& v) { return avg_pool2d(v[0], {3, 3}, {1, 1}, "same"); }, {x}},
      {"avg 4x4 stride 3 same", [](const Inputs& v) { return avg_pool2d(v[0], {4, 4}, {3, 3}, "same"); }, {x}},
      {"global average", [](const Inputs& v) { return global_avg_pool2d(v[0]); }, {x}},
      {"global average keepdims", [](const Inputs& v) { return global_avg_pool2d(v[0], true); }, {x}},
      {"global max", [](const Inputs& v) { return global_max_pool2d(v[0]); }, {x}},
      {"global max keepdims", [](const Inputs& v) { return global_max_pool2d(v[0], true); }, {x}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}
