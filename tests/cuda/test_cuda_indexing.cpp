// The indexing kernels (gather, unsorted_segment_sum, one_hot) and dropout on cuda:0: bad indices
// raise the CPU's ValueError (found on the device) and leave the device usable, every row width
// and dtype the kernels special-case matches the CPU, and dropout keeps exactly the CPU's
// elements for the same seed or global generator state. Bounds: see cuda_compare.hpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using namespace keel_cuda_test;

namespace {

// The message of the exception f throws (empty when it throws none).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gather with an out-of-range index on cuda:0 throws the CPU's ValueError", "[cuda][shape]") {
  const Tensor params = rnd({6, 5}, 1);
  const Tensor bad64 = constant(std::vector<std::int64_t>{0, 5, 7, 2, -1, 9}, Shape{2, 3}, DType::int64);
  const Tensor bad32 = bad64.astype(DType::int32);
  const Tensor neg = constant(std::vector<std::int64_t>{1, -3, 0}, Shape{3}, DType::int64);
  const Tensor gp = params.to(Device::cuda(0));
  for (const Tensor& ids : {bad64, bad32}) {
    INFO("indices " << name(ids.dtype()));
    const Tensor gids = ids.to(Device::cuda(0));
    // Axis 0 (dim 6): position 2 (value 7) is the first bad one; axis 1 (dim 5): position 1 (5).
    for (int axis : {0, 1}) {
      const std::string cpu_msg = message_of([&] { gather(params, ids, axis); });
      const std::string gpu_msg = message_of([&] { gather(gp, gids, axis); });
      CHECK_FALSE(cpu_msg.empty());
      CHECK(gpu_msg == cpu_msg);
      CHECK_THAT(gpu_msg, Catch::Contains("gather") && Catch::Contains("out of range"));
    }
  }
  CHECK(message_of([&] { gather(gp, neg.to(Device::cuda(0)), 0); }) == message_of([&] { gather(params, neg, 0); }));
  CHECK_THAT(message_of([&] { gather(gp, neg.to(Device::cuda(0)), 0); }), Catch::Contains("index -3"));
  // The device is still usable: the same tensors gather and compute correctly afterwards.
  const Tensor good = constant(std::vector<std::int64_t>{5, 0, 3}, Shape{3}, DType::int64);
  const Tensor back = gather(gp * 2.0, good.to(Device::cuda(0)), 0).to(Device::cpu());
  CHECK(back.to_vector<float>() == gather(params * 2.0, good, 0).to_vector<float>());
  cuda_synchronize();
}

TEST_CASE("unsorted_segment_sum with a too-large id on cuda:0 throws the CPU's ValueError", "[cuda][shape]") {
  const Tensor data = rnd({5, 3}, 1);
  const Tensor ids = constant(std::vector<std::int64_t>{0, -1, 4, 2, 3}, Shape{5}, DType::int64);
  for (DType dt : {DType::int64, DType::int32}) {
    const Tensor cids = ids.astype(dt);
    const std::string cpu_msg = message_of([&] { unsorted_segment_sum(data, cids, 3); });
    const std::string gpu_msg =
        message_of([&] { unsorted_segment_sum(data.to(Device::cuda(0)), cids.to(Device::cuda(0)), 3); });
    CHECK_FALSE(cpu_msg.empty());
    CHECK(gpu_msg == cpu_msg);
  }
  // And the device goes on working.
  const Tensor sum = unsorted_segment_sum(data.to(Device::cuda(0)), ids.to(Device::cuda(0)), 5);
  CHECK(sum.to(Device::cpu()).shape() == Shape{5, 3});
}

TEST_CASE("gather, unsorted_segment_sum and one_hot kernels match the CPU in every case", "[cuda][shape]") {
  const Tensor ids = rnd_int({4, 3}, 1, 0, 7, DType::int64);
  const Tensor seg_neg = constant(std::vector<std::int64_t>{2, -1, 0, 2, -5, 1, 2}, Shape{7}, DType::int64);
  std::vector<Case> cases = {
      // Row widths of 16, 8, 4, 2 and 1 bytes take the kernel's different word sizes.
      {"gather rows of 4 float32", [](const Inputs& v) { return gather(v[0], v[1], 0); }, {rnd({7, 4}, 2), ids}},
      {"gather rows of 2 float32", [](const Inputs& v) { return gather(v[0], v[1], 1); }, {rnd({3, 7, 2}, 3), ids}},
      {"gather rows of 1 float32, last axis", [](const Inputs& v) { return gather(v[0], v[1], -1); }, {rnd({3, 7}, 4), ids}},
      {"gather from an offset view", [](const Inputs& v) { return gather(v[0][1], v[1], 0); }, {rnd({2, 7, 3}, 5), ids}},
      // 16-byte rows 4 bytes past an aligned address: the kernel falls back to narrower words.
      {"gather 16-byte rows of a misaligned view",
       [](const Inputs& v) { return gather(reshape(slice(v[0], {1}, {28}), {7, 4}), v[1], 0); }, {rnd({29}, 15), ids}},
      {"gather float64, int32 ids", [](const Inputs& v) { return gather(v[0], v[1], 1); },
       {rnd({2, 7, 5}, 6, -1, 1, DType::float64), ids.astype(DType::int32)}, Tol{.rtol = kFloat64}},
      {"gather with empty indices", [](const Inputs& v) { return gather(v[0], v[1], 0); },
       {rnd({7, 3}, 7), constant(std::vector<std::int64_t>{}, Shape{0}, DType::int64)}},
      // Negative ids are dropped, and their rows get no gradient (the mask built with ops).
      {"unsorted_segment_sum with negative ids", [](const Inputs& v) { return unsorted_segment_sum(v[0], v[1], 4); },
       {rnd({7, 3}, 8), seg_neg}},
      {"unsorted_segment_sum rank 3, 2-d ids", [](const Inputs& v) { return unsorted_segment_sum(v[0], v[1], 7); },
       {rnd({4, 3, 2}, 9), ids}},
      {"unsorted_segment_sum float64 of many rows",
       [](const Inputs& v) { return unsorted_segment_sum(v[0], v[1], 3); },
       {rnd({300, 5}, 10, -1, 1, DType::float64), rnd_int({300}, 11, -1, 3)}, Tol{.rtol = kFloat64, .sum_length = 100}},
  };
  same_on_gpu(cases);

  const Tol exact{.rtol = 0, .grads = false};
  const Tensor ints = rnd_int({7, 3}, 12, -1000, 1000, DType::int64);
  const Tensor wild = constant(std::vector<std::int64_t>{0, 3, -1, 9, 2, 4}, Shape{2, 3}, DType::int64);
  same_on_gpu({
      {"gather int32 / int64 / uint8 / bool / float16 rows",
       [](const Inputs& v) {
         return pack({gather(v[0].astype(DType::int32), v[1], 0).astype(DType::int64),
                      gather(v[0], v[1], 1), gather(v[0].astype(DType::uint8), v[1], 1).astype(DType::int64),
                      gather(v[0] > 0.0, v[1], 0).astype(DType::int64),
                      gather(v[0].astype(DType::float16), v[1], 1).astype(DType::int64)});
       },
       {ints, rnd_int({5}, 13, 0, 3)}, exact},
      {"unsorted_segment_sum int32 / int64 / uint8",
       [](const Inputs& v) {
         return pack({unsorted_segment_sum(v[0].astype(DType::int32), v[1], 3).astype(DType::int64),
                      unsorted_segment_sum(v[0], v[1], 3),
                      unsorted_segment_sum(v[0].astype(DType::uint8), v[1], 3).astype(DType::int64)});
       },
       {ints, rnd_int({7}, 14, -1, 3)}, exact},
      {"one_hot of negative and too-large indices, every index dtype",
       [](const Inputs& v) {
         return pack({one_hot(v[0], 5, 3.0, -2.0, DType::int64), one_hot(v[0].astype(DType::int32), 5, 1, 0, DType::int64),
                      one_hot(v[0].astype(DType::uint8), 5, 7, 1, DType::int64)});
       },
       {wild}, exact},
      {"one_hot into uint8, bool, float16, bfloat16, float64",
       [](const Inputs& v) {
         return pack({one_hot(v[0], 4, 9, 2, DType::uint8).astype(DType::float64),
                      one_hot(v[0], 4, 1, 0, DType::bool_).astype(DType::float64),
                      one_hot(v[0], 4, 0.5, -1.5, DType::float16).astype(DType::float64),
                      one_hot(v[0], 4, 2.5, 0.25, DType::bfloat16).astype(DType::float64),
                      one_hot(v[0], 4, 0.1, 0.3, DType::float64)});
       },
       {wild}, exact},
      {"one_hot of depth 0", [](const Inputs& v) { return one_hot(v[0], 0); }, {wild}, exact},
  });
}

TEST_CASE("dropout on cuda:0 keeps exactly the CPU's elements for the same seed", "[cuda][nn]") {
  // An odd size (not a multiple of four elements per Philox block), values never zero.
  const Tensor x = rnd({1001, 37}, 1, 0.5, 1.5);
  const Tensor x64 = x.astype(DType::float64);
  const Tensor gx = x.to(Device::cuda(0)), gx64 = x64.to(Device::cuda(0));
  auto same = [](const Tensor& cpu, const Tensor& gpu) {
    REQUIRE(gpu.device() == Device::cuda(0));
    const auto c = cpu.to_vector<double>(), g = gpu.to_vector<double>();
    REQUIRE(c.size() == g.size());
    std::size_t differ = 0, kept = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      differ += c[i] != g[i];  // the same multiply on both devices: equal bits, not just close
      kept += c[i] != 0;
    }
    CHECK(differ == 0);
    return kept;
  };
  for (double rate : {0.1, 0.5, 0.93}) {
    INFO("rate " << rate);
    const auto kept = same(dropout(x, rate, 42), dropout(gx, rate, 42));
    CHECK(kept > 0);
    CHECK(kept < static_cast<std::size_t>(x.size()));
    same(dropout(x64, rate, 7), dropout(gx64, rate, 7));
    // The global generator: the same state gives the same mask, and both advance alike.
    random::set_seed(11);
    const Tensor c1 = dropout(x, rate), c2 = dropout(x, rate);
    random::set_seed(11);
    const Tensor g1 = dropout(gx, rate), g2 = dropout(gx, rate);
    same(c1, g1);
    same(c2, g2);
    CHECK(random::get_state().counter == static_cast<std::uint64_t>(2 * ((x.size() + 3) / 4)));
  }
  // The gradient is the same mask.
  auto grad_of = [](Tensor v) {
    GradientTape tape;
    tape.watch(v);
    return tape.gradient(reduce_sum(dropout(v, 0.4, 3)), v);
  };
  same(grad_of(x), grad_of(gx));
}
