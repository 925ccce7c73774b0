// Tensors on cuda:0: copies to and from the GPU, and ops on the GPU matching the CPU.
// Runs only where keel_cuda_tests finds a GPU (see cuda/main.cpp).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <vector>

using namespace keel;

TEST_CASE("a tensor copied to cuda:0 and back keeps its values, shape and dtype", "[cuda]") {
  DeviceScope on_cpu(Device::cpu());
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  const Tensor x = constant(values, Shape{2, 3});
  REQUIRE(x.device() == Device::cpu());

  const Tensor g = x.to(Device::cuda());
  CHECK(g.device() == Device::cuda(0));
  CHECK(g.device().is_cuda());
  CHECK(g.device().index() == 0);
  CHECK(g.shape() == Shape{2, 3});
  CHECK(g.dtype() == DType::float32);

  const Tensor back = g.to(Device::cpu());
  CHECK(back.device() == Device::cpu());
  CHECK(back.shape() == Shape{2, 3});
  CHECK(back.to_vector<float>() == values);  // a copy is bit exact
  CHECK(g.to_vector<float>() == values);     // to_vector synchronises and copies back too
}

TEST_CASE("float64 and int32 tensors round trip through cuda:0 bit exactly", "[cuda]") {
  DeviceScope on_cpu(Device::cpu());
  const std::vector<double> d = {0.1, -1e300, 3.0};
  const std::vector<std::int32_t> i = {-7, 0, 2147483647};
  CHECK(constant(d).to(Device::cuda(0)).to(Device::cpu()).to_vector<double>() == d);
  CHECK(constant(i).to(Device::cuda(0)).to(Device::cpu()).to_vector<std::int32_t>() == i);
}

TEST_CASE("elementwise ops and matmul on cuda:0 give the CPU's values", "[cuda]") {
  DeviceScope on_cpu(Device::cpu());
  // Small integers: every product and sum below is exact in float32 on either device.
  const Tensor a = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor b = constant({1.f, 0.f, -1.f, 2.f, 3.f, 1.f}, {3, 2});
  const Tensor ga = a.to(Device::cuda());
  const Tensor gb = b.to(Device::cuda());

  const Tensor sum_gpu = ga + ga * 2.0;  // 3a
  CHECK(sum_gpu.device().is_cuda());
  CHECK(sum_gpu.to_vector<float>() == (a + a * 2.0).to_vector<float>());

  // [[1,2,3],[4,5,6]] x [[1,0],[-1,2],[3,1]] = [[1-2+9, 0+4+3], [4-5+18, 0+10+6]] = [[8,7],[17,16]]
  const Tensor p = matmul(ga, gb);
  CHECK(p.device().is_cuda());
  CHECK(p.shape() == Shape{2, 2});
  CHECK(p.to_vector<float>() == std::vector<float>{8, 7, 17, 16});
}

TEST_CASE("gradients on cuda:0 equal the hand-derived ones", "[cuda]") {
  DeviceScope on_gpu(Device::cuda());
  // y = sum(x^2) -> dy/dx = 2x
  const Tensor x = constant({1.0, -2.0, 3.0}, {3}, DType::float64);
  CHECK(x.device().is_cuda());
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(square(x));
  const Tensor g = tape.gradient(y, x);
  REQUIRE(g.defined());
  CHECK(g.device().is_cuda());
  CHECK(g.to_vector<double>() == std::vector<double>{2.0, -4.0, 6.0});
}

TEST_CASE("ops on tensors on different devices throw DeviceError", "[cuda]") {
  DeviceScope on_cpu(Device::cpu());
  const Tensor c = constant({1.f, 2.f}, {2});
  const Tensor g = c.to(Device::cuda());
  CHECK_THROWS_AS(add(c, g), DeviceError);
  CHECK_THROWS_WITH(add(c, g), Catch::Contains("add"));
}

TEST_CASE("Tensor::to is differentiable: the gradient flows back to the CPU source", "[cuda]") {
  DeviceScope on_cpu(Device::cpu());
  const Tensor x = constant({1.f, -2.f, 3.f}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(square(x.to(Device::cuda(0))));  // computed on the GPU
  CHECK(y.device() == Device::cuda(0));
  const Tensor g = tape.gradient(y, x);
  REQUIRE(g.defined());
  CHECK(g.device() == Device::cpu());
  CHECK(g.to_vector<float>() == std::vector<float>{2.f, -4.f, 6.f});
}

TEST_CASE("a transposed view copied to cuda:0 keeps its logical element order", "[cuda]") {
  DeviceScope on_cpu(Device::cpu());
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor t = transpose(x);  // [[1,4],[2,5],[3,6]], not contiguous
  const Tensor g = t.to(Device::cuda(0));
  CHECK(g.shape() == Shape{3, 2});
  CHECK(g.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(transpose(g).to_vector<float>() == x.to_vector<float>());  // a view of GPU memory
}
