// Devices without a GPU: what a CPU-only machine (or a build without CUDA) reports, and the
// device-independent settings. The GPU behaviour itself is in tests/cuda/.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <string>

using namespace keel;

TEST_CASE("Tensor::to the device a tensor is on returns the same tensor") {
  DeviceScope on_cpu(Device::cpu());
  const Tensor x = constant({1.f, 2.f}, {2});
  const Tensor y = x.to(Device::cpu());
  CHECK(y.raw_data() == x.raw_data());
}

TEST_CASE("copying to a CUDA device that does not exist is a DeviceError naming the devices present") {
  DeviceScope on_cpu(Device::cpu());
  const Tensor x = constant({1.f, 2.f}, {2});
  const int n = cuda_device_count();
  try {
    (void)x.to(Device::cuda(n));  // one past the last device
    FAIL("expected DeviceError");
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("cuda:" + std::to_string(n)) != std::string::npos);
    CHECK(msg.find(std::to_string(n) + " CUDA devices present") != std::string::npos);
  }
}

TEST_CASE("factories under a DeviceScope naming a missing GPU throw DeviceError, not crash") {
  const int n = cuda_device_count();
  DeviceScope missing(Device::cuda(n));
  CHECK(default_device() == Device::cuda(n));
  CHECK_THROWS_AS(zeros({2, 2}), DeviceError);
  CHECK_THROWS_AS(random::uniform({3}), DeviceError);
  CHECK_THROWS_AS(constant({1.f, 2.f}, {2}), DeviceError);
}

TEST_CASE("DeviceScope sets the default device for its thread and restores it") {
  const Device before = default_device();
  {
    DeviceScope s(Device::cpu());
    CHECK(default_device() == Device::cpu());
    {
      DeviceScope inner(Device::cuda(3));
      CHECK(default_device() == Device::cuda(3));
    }
    CHECK(default_device() == Device::cpu());
  }
  CHECK(default_device() == before);
}

TEST_CASE("without a GPU the default device is the CPU and the CUDA memory statistics are zero") {
  if (cuda_device_count() > 0) return;  // the GPU rule is checked by the [cuda] tests
  CHECK(default_device() == Device::cpu());
  const auto s = config::cuda_memory_stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.reserved_bytes == 0);
  CHECK(s.device_mallocs == 0);
  config::empty_cache();  // a no-op, not an error
  cuda_synchronize();
}

TEST_CASE("set_tf32 is remembered and defaults to off") {
  CHECK_FALSE(config::tf32());
  config::set_tf32(true);
  CHECK(config::tf32());
  config::set_tf32(false);
  CHECK_FALSE(config::tf32());
}
