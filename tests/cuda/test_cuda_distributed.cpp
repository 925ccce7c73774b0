// MultiWorkerMirroredStrategy over NCCL: collectives and gradients reduced in GPU memory. Every
// case runs in a job of any size: alone (the cuda_tests entries: a world of one, NCCL's
// one-rank communicator), and under mpirun -np 2 on a machine with two GPUs or more
// (distributed_nccl_mpirun_np2 in tests/cmake/distributed.cmake), where the expected values
// follow from the number of workers N and this worker's rank r.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "regression_data.hpp"

using namespace keel;

namespace {

distribute::MultiWorkerMirroredStrategy& nccl_world() {
  static distribute::MultiWorkerMirroredStrategy s({.communication = "nccl", .timeout_s = 60});
  return s;
}

std::vector<double> host_values(const Tensor& t) {
  return cast(t, DType::float64).to(Device::cpu()).to_vector<double>();
}

using test::regression_data;

}  // namespace

TEST_CASE("over NCCL each worker's replica runs on its own GPU", "[cuda][nccl]") {
  distribute::MultiWorkerMirroredStrategy& s = nccl_world();
  REQUIRE(s.replica_device().has_value());
  const Device gpu = *s.replica_device();
  CHECK(gpu.is_cuda());
  CHECK(gpu.index() < cuda_device_count());
  auto scope = s.scope();
  CHECK(default_device() == gpu);
  // The GPU is the worker's place among its machine's processes (mpirun's local rank; 0 alone).
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK(gpu.index() == (local ? std::atoi(local) : 0));
  // The workers' GPUs on one machine differ: summed over the workers, the one-hot rows of their
  // (machine-local) device indices hold at most one worker per GPU on each machine.
  std::vector<float> onehot(static_cast<std::size_t>(cuda_device_count()), 0.f);
  onehot[static_cast<std::size_t>(gpu.index())] = 1.f;
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const double machines = local_size ? double(s.num_workers()) / std::atoi(local_size) : 1.0;
  for (double c : host_values(s.all_reduce(constant(onehot, {cuda_device_count()})))) CHECK(c <= machines);
}

TEST_CASE("NCCL all_reduce: float32, float64, float16 and bfloat16 GPU tensors, every ReduceOp", "[cuda][nccl]") {
  distribute::MultiWorkerMirroredStrategy& s = nccl_world();
  const double n = s.num_workers(), r = s.worker_index();
  auto scope = s.scope();
  // This worker's value (r + 1) * base; base's entries are exact in every float type.
  const std::vector<float> base{1.f, -2.f, 0.5f, 3.f};
  std::vector<float> mine;
  for (float b : base) mine.push_back(static_cast<float>((r + 1) * b));
  for (DType dt : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    INFO("dtype " << name(dt));
    const Tensor v = cast(constant(mine, {2, 2}), dt);
    REQUIRE(v.device() == *s.replica_device());
    const Tensor sum = s.all_reduce(v, distribute::ReduceOp::sum);
    const Tensor mean = s.all_reduce(v, distribute::ReduceOp::mean);
    const Tensor hi = s.all_reduce(v, distribute::ReduceOp::max);
    const Tensor lo = s.all_reduce(v, distribute::ReduceOp::min);
    for (const Tensor& t : {sum, mean, hi, lo}) {
      CHECK(t.device() == v.device());
      CHECK(t.dtype() == dt);
      CHECK(t.shape() == Shape({2, 2}));
    }
    const auto vs = host_values(sum), vm = host_values(mean), vh = host_values(hi), vl = host_values(lo);
    for (std::size_t k = 0; k < base.size(); ++k) {
      // sum over r of (r + 1) b = b N (N + 1) / 2; mean = b (N + 1) / 2; max and min at r = 0 or N - 1.
      CHECK(vs[k] == Approx(base[k] * n * (n + 1) / 2).epsilon(1e-6));
      CHECK(vm[k] == Approx(base[k] * (n + 1) / 2).epsilon(1e-6));
      CHECK(vh[k] == Approx(base[k] > 0 ? base[k] * n : base[k]).epsilon(1e-6));
      CHECK(vl[k] == Approx(base[k] > 0 ? base[k] : base[k] * n).epsilon(1e-6));
    }
  }
  // Integers and bools are reduced over MPI from host memory, with the same results.
  const Tensor ints = constant(std::vector<std::int64_t>{static_cast<std::int64_t>(r) + 1, 7}, {2});
  CHECK(s.all_reduce(ints).to(Device::cpu()).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{static_cast<std::int64_t>(n * (n + 1) / 2), static_cast<std::int64_t>(7 * n)});
}

TEST_CASE("NCCL broadcast gives root's GPU tensor to every worker", "[cuda][nccl]") {
  distribute::MultiWorkerMirroredStrategy& s = nccl_world();
  const int r = s.worker_index();
  auto scope = s.scope();
  for (int root = 0; root < s.num_workers(); ++root) {
    const Tensor mine = constant({static_cast<float>(r), static_cast<float>(10 * r)}, {2});
    const Tensor got = s.broadcast(mine, root);
    CHECK(got.device() == mine.device());
    CHECK(host_values(got) == std::vector<double>{double(root), double(10 * root)});
  }
  s.barrier();
}

TEST_CASE("over NCCL, N workers with global batch B reach the weights of one process with batch B",
          "[cuda][nccl]") {
  distribute::MultiWorkerMirroredStrategy& s = nccl_world();
  const auto [x, y] = regression_data(96);
  const auto adam = [] { return std::make_shared<optimizers::Adam>(0.01); };
  for (bool overlap : {true, false}) {
    INFO("gradient buckets of 64 bytes, overlapped with the backward pass: " << overlap);
    distribute::MultiWorkerMirroredStrategy* strategy = &s;
    std::unique_ptr<distribute::MultiWorkerMirroredStrategy> small;
    if (!overlap) {  // another NCCL communicator: many small buckets, reduced after the backward pass
      small = std::make_unique<distribute::MultiWorkerMirroredStrategy>(distribute::MultiWorkerOptions{
          .communication = "nccl", .timeout_s = 60, .bucket_bytes = 64, .overlap_backward = false});
      strategy = small.get();
    }
    random::set_seed(2000 + static_cast<std::uint64_t>(strategy->worker_index()));  // fit broadcasts the chief's
    auto scope = std::make_unique<distribute::StrategyScope>(strategy);
    const Device gpu = default_device();
    REQUIRE(gpu.is_cuda());
    auto par = test::regression_mlp();
    par.compile({.optimizer = adam(), .loss = "mse"});
    std::vector<Tensor> chief0;
    for (const Tensor& w : par.get_weights()) chief0.push_back(strategy->broadcast(w));
    const auto hn = par.fit(x.to(gpu), y.to(gpu), {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
    for (Variable* w : par.weights()) CHECK(w->device() == gpu);
    scope.reset();
    DeviceScope same_gpu(gpu);
    auto single = test::regression_mlp();
    single.compile({.optimizer = adam(), .loss = "mse"});
    single.set_weights(chief0);
    const auto h1 = single.fit(x.to(gpu), y.to(gpu), {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
    CHECK(hn.history.at("loss").back() == Approx(h1.history.at("loss").back()).epsilon(1e-4));
    CHECK(test::max_weight_diff(par.get_weights(), single.get_weights()) < 1e-5);
  }
}
