// MirroredStrategy over the GPUs of one process: a replica per GPU, each a thread of the process
// with a copy of the model on its GPU, gradients all-reduced in GPU memory by NCCL (where keel has
// it). Needs two GPUs: its CTest entry (cuda_tests.mirrored) reports skipped on machines with
// fewer.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "distribute/communicator.hpp"
#include "distribute/mirrored_replicas.hpp"
#include "regression_data.hpp"

using namespace keel;

namespace {

std::vector<double> host_values(const Tensor& t) {
  return cast(t, DType::float64).to(Device::cpu()).to_vector<double>();
}

}  // namespace

TEST_CASE("MirroredStrategy() takes every GPU, a replica each, reduced over NCCL in GPU memory", "[cuda][mirrored]") {
  REQUIRE(cuda_device_count() >= 2);
  distribute::MirroredStrategy all;
  CHECK(all.num_replicas_in_sync() == cuda_device_count());
  distribute::MirroredStrategy two({Device::cuda(0), Device::cuda(1)});
  auto scope = two.scope();
  CHECK(default_device() == Device::cuda(0));
  std::vector<std::string> transports(2);
  std::vector<Device> buffers(2), defaults(2);
  std::vector<double> sums(2);
  two.replicas().run([&](int r) {
    const auto& comm = distribute::get_strategy().communicator();
    transports[static_cast<std::size_t>(r)] = comm->transport();
    buffers[static_cast<std::size_t>(r)] = comm->buffer_device();
    defaults[static_cast<std::size_t>(r)] = default_device();
    // Replica r holds r + 1 on its GPU: the sum is 3 on both.
    const Tensor v = full({4}, static_cast<double>(r + 1));
    sums[static_cast<std::size_t>(r)] = host_values(distribute::get_strategy().all_reduce(v))[0];
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(defaults[static_cast<std::size_t>(r)] == Device::cuda(r));
    CHECK(sums[static_cast<std::size_t>(r)] == 3.0);
    if (distribute::detail::nccl_built()) {
      CHECK(transports[static_cast<std::size_t>(r)] == "nccl");
      CHECK(buffers[static_cast<std::size_t>(r)] == Device::cuda(r));
    } else {
      CHECK(transports[static_cast<std::size_t>(r)] == "threads");
    }
  }
}

TEST_CASE("MirroredStrategy over two GPUs: global batch B reaches the weights of one GPU with batch B",
          "[cuda][mirrored]") {
  REQUIRE(cuda_device_count() >= 2);
  const auto [x, y] = test::regression_data(97);
  const Device gpu0 = Device::cuda(0);
  const auto adam = [] { return std::make_shared<optimizers::Adam>(0.01); };
  DeviceScope on_gpu0(gpu0);
  random::set_seed(11);
  auto single = test::regression_mlp();
  single.compile({.optimizer = adam(), .loss = "mse"});
  single.fit(x.to(gpu0), y.to(gpu0), {.batch_size = 16, .epochs = 0, .verbose = 0});
  const std::vector<Tensor> start = single.get_weights();
  const auto h1 = single.fit(x.to(gpu0), y.to(gpu0), {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
  distribute::MirroredStrategy two({Device::cuda(0), Device::cuda(1)});
  auto scope = two.scope();
  auto par = test::regression_mlp();
  par.compile({.optimizer = adam(), .loss = "mse"});
  par.fit(x.to(gpu0), y.to(gpu0), {.batch_size = 16, .epochs = 0, .verbose = 0});
  par.set_weights(start);
  const auto hn = par.fit(x.to(gpu0), y.to(gpu0), {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
  for (Variable* w : par.weights()) CHECK(w->device() == gpu0);
  CHECK(hn.history.at("loss").back() == Approx(h1.history.at("loss").back()).epsilon(1e-4));
  CHECK(test::max_weight_diff(par.get_weights(), single.get_weights()) < 1e-5);
}
