// The default device where a GPU is present, and the CUDA caching allocator: reuse of freed
// blocks, empty_cache, and out-of-memory as a catchable ResourceExhaustedError after which the device works.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

using namespace keel;

TEST_CASE("with a GPU present the default device is cuda:0 and DeviceScope(cpu) overrides it",
          "[cuda]") {
  REQUIRE(cuda_device_count() >= 1);
  CHECK(default_device() == Device::cuda(0));
  CHECK(zeros({2}).device() == Device::cuda(0));
  CHECK(constant({1.f}, {1}).device() == Device::cuda(0));
  {
    DeviceScope cpu(Device::cpu());
    CHECK(default_device() == Device::cpu());
    CHECK(ones({2}).device() == Device::cpu());
    {
      DeviceScope gpu(Device::cuda(0));  // scopes nest
      CHECK(default_device() == Device::cuda(0));
    }
    CHECK(default_device() == Device::cpu());
  }
  CHECK(default_device() == Device::cuda(0));
  CHECK(Device::parse("cuda:0") == Device::cuda(0));
  CHECK(Device::cuda(0).to_string() == "cuda:0");
}

TEST_CASE("a freed block is reused for the next allocation of its size without a cudaMalloc",
          "[cuda]") {
  DeviceScope gpu(Device::cuda(0));
  const Shape shape{1 << 20};  // 4 MiB
  { const Tensor t = empty(shape); }  // the block goes back to the cache
  const config::CudaMemoryStats mid = config::cuda_memory_stats(0);
  CHECK(mid.cached_bytes >= std::size_t{4} << 20);
  {
    const Tensor t = empty(shape);
    const config::CudaMemoryStats now = config::cuda_memory_stats(0);
    CHECK(now.cache_hits > mid.cache_hits);
    CHECK(now.device_mallocs == mid.device_mallocs);
    CHECK(now.allocated_bytes >= mid.allocated_bytes + (std::size_t{4} << 20));
    CHECK(now.peak_allocated_bytes >= now.allocated_bytes);
    CHECK(now.reserved_bytes >= now.allocated_bytes);
  }
  // A loop of same-sized temporaries runs entirely from the cache.
  const Tensor x = ones(shape);
  // Two warm-up rounds: afterwards the loop's three live blocks (y, the temporary, the result)
  // and any scratch the ops need are all in the cache.
  Tensor y = x * 2.0 + 1.0;
  y = x * 2.0 + 1.0;
  const config::CudaMemoryStats before = config::cuda_memory_stats(0);
  for (int i = 0; i < 20; ++i) y = x * 2.0 + 1.0;
  CHECK(y[0].item<float>() == 3.0f);
  CHECK(config::cuda_memory_stats(0).device_mallocs == before.device_mallocs);
}

TEST_CASE("empty_cache returns every cached block and leaves live tensors alone", "[cuda]") {
  DeviceScope gpu(Device::cuda(0));
  const Tensor live = full({1 << 18}, 5.0);
  { const Tensor dead = empty({1 << 21}); }
  CHECK(config::cuda_memory_stats(0).cached_bytes > 0);
  config::empty_cache();
  const config::CudaMemoryStats s = config::cuda_memory_stats(0);
  CHECK(s.cached_bytes == 0);
  CHECK(s.reserved_bytes >= s.allocated_bytes);
  CHECK(s.allocated_bytes >= std::size_t{1} << 20);  // live's 1 MiB is still there
  CHECK(reduce_sum(live).item<double>() == 5.0 * (1 << 18));
}

TEST_CASE("an impossible allocation throws ResourceExhaustedError and the device keeps working", "[cuda]") {
  DeviceScope gpu(Device::cuda(0));
  const Tensor before = constant({1.f, 2.f, 3.f}, {3});
  const std::int64_t elements = std::int64_t{1000000000000000} / 4;  // 1e15 bytes of float32
  CHECK_THROWS_AS(empty({elements}, DType::float32), ResourceExhaustedError);
  CHECK_THROWS_AS(zeros({elements / 1000, 1000}), ResourceExhaustedError);
  // Everything still works: old tensors, new allocations, kernels, copies.
  CHECK((before * 2.0).to_vector<float>() == std::vector<float>{2, 4, 6});
  const Tensor a = random::normal({256, 256});
  CHECK(matmul(a, eye(256)).to(Device::cpu()).to_vector<float>() == a.to_vector<float>());
  CHECK(config::cuda_memory_stats(0).allocated_bytes > 0);
}
