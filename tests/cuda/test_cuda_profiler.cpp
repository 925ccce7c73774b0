// The profiler on a GPU: each kernel's device time from CUDA events on keel's stream around it,
// summed per op (OpStat::device_total_us, the table's "Device total"), and a track per GPU in
// the Chrome trace with the kernels where the device ran them.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "scratch.hpp"

using namespace keel;

TEST_CASE("the profiler gives GPU kernels their device time, and each GPU a track in the trace",
          "[cuda][profiler]") {
  DeviceScope gpu(Device::cuda(0));
  const Tensor a = random::uniform({512, 512}), b = random::uniform({512, 512});
  Tensor host_sum;
  cuda_synchronize();
  const auto began = std::chrono::steady_clock::now();
  profiler::start("", {.record_shapes = true, .profile_memory = false});
  Tensor c;
  for (int i = 0; i < 5; ++i) c = matmul(a, b);
  {
    DeviceScope cpu(Device::cpu());
    host_sum = add(constant({1.f, 2.f}, {2}), constant({3.f, 4.f}, {2}));
  }
  profiler::stop();  // waits for the device's marks
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count();
  const auto stats = profiler::key_averages();
  const auto row = [&](const std::string& name) {
    return std::find_if(stats.begin(), stats.end(), [&](const profiler::OpStat& s) { return s.name == name; });
  };
  const auto mm = row("BatchMatMulV2"), add_op = row("AddV2");
  REQUIRE(mm != stats.end());
  REQUIRE(add_op != stats.end());
  CHECK(mm->calls == 5);
  CHECK(mm->device == "cuda:0");
  // Five 512^3 float32 products (1.3 GFLOP): more than a microsecond on any GPU, and no more
  // than the whole profile's wall time.
  CHECK(mm->device_total_us > 1.0);
  CHECK(mm->device_total_us < wall_us);
  CHECK(add_op->device == "cpu");
  CHECK(add_op->device_total_us == 0);
  CHECK_THAT(profiler::key_averages_table(), Catch::Contains("Device total"));

  keel_test::Scratch dir("profiler-cuda");
  const std::string path = dir.dir + "/trace.json";
  profiler::export_chrome_trace(path);
  const auto j = nlohmann::json::parse(keel_test::read_all(path));
  int device_tid = -1, device_kernels = 0;
  double last_ts = -1, device_sum = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "cuda:0 stream") device_tid = e["tid"];
  REQUIRE(device_tid > 0);
  for (const auto& e : j.at("traceEvents")) {
    if (e["ph"] != "X" || e["tid"] != device_tid) continue;
    CHECK(e["cat"] == "device kernel");
    CHECK(e["args"]["device"] == "cuda:0");
    // The device runs keel's stream in order: its kernels do not overlap or go back in time.
    CHECK(e["ts"].get<double>() >= last_ts);
    last_ts = e["ts"].get<double>() + e["dur"].get<double>();
    if (e["name"] == "BatchMatMulV2") {
      ++device_kernels;
      device_sum += e["dur"].get<double>();
    }
  }
  CHECK(device_kernels == 5);
  CHECK(device_sum == Approx(mm->device_total_us).epsilon(1e-6));
  // The results are as without the profiler.
  CHECK(host_sum.to_vector<float>() == std::vector<float>{4.f, 6.f});
  CHECK(c.to(Device::cpu()).to_vector<float>() == matmul(a, b).to(Device::cpu()).to_vector<float>());
}
