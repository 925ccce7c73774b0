// Reductions and shape ops on cuda:0 against the CPU, forward and gradient: every op of
// ops/reduce.hpp over several sets of axes (contiguous, strided and transposed inputs, a long sum)
// and every op of ops/shape.hpp. Bounds: see cuda_compare.hpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using namespace keel_cuda_test;

TEST_CASE("reductions over every set of axes on cuda:0 match the CPU", "[cuda][reduce]") {
  const Tensor x = rnd({6, 7, 8}, 1, -2, 2);
  const Tensor near_one = rnd({6, 7, 8}, 2, 0.8, 1.25);  // products of up to 336 stay finite
  using Reduce = Tensor (*)(const Tensor&, std::vector<int>, bool);
  const std::vector<std::pair<std::string, Reduce>> reductions = {
      {"reduce_sum", &reduce_sum},           {"reduce_mean", &reduce_mean},
      {"reduce_max", &reduce_max},           {"reduce_min", &reduce_min},
      {"reduce_prod", &reduce_prod},         {"reduce_logsumexp", &reduce_logsumexp},
      {"reduce_variance", &reduce_variance}, {"reduce_std", &reduce_std},
  };
  const std::vector<std::vector<int>> axis_sets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1}};
  std::vector<Case> cases;
  for (const auto& reduction : reductions) {
    const std::string& name = reduction.first;
    const auto op = reduction.second;  // a lambda may not capture a structured binding (clang 14)
    const Tensor& in = name == "reduce_prod" ? near_one : x;
    for (const auto& axes : axis_sets) {
      for (bool keepdims : {false, true}) {
        std::string label = name + " axes {";
        for (int a : axes) label += std::to_string(a) + ",";
        label += keepdims ? "} keepdims" : "}";
        cases.push_back({label, [op, axes, keepdims](const Inputs& v) { return op(v[0], axes, keepdims); }, {in},
                         Tol{.sum_length = 336}});
      }
    }
    // Strided: the same reduction of a transposed and of a sliced view.
    cases.push_back({name + " of a transposed view, axis 1",
                     [op](const Inputs& v) { return op(transpose(v[0], {2, 0, 1}), {1}, false); }, {in}});
    cases.push_back({name + " of a sliced view, axes {0,2}",
                     [op](const Inputs& v) { return op(slice(v[0], {1, 2, 0}, {4, 3, 5}), {0, 2}, false); }, {in}});
  }
  same_on_gpu(cases);
}

TEST_CASE("long sums and means on cuda:0 stay within the sqrt(n)-scaled bound", "[cuda][reduce]") {
  const std::int64_t n = std::int64_t{1} << 20;
  const Tensor big = rnd({n}, 3, -1, 1);
  const Tensor wide = rnd({64, 1 << 14}, 4, 0, 1);  // one-signed: no cancellation
  same_on_gpu({
      {"reduce_sum of 2^20 elements", [](const Inputs& v) { return reduce_sum(v[0]); }, {big}, Tol{.sum_length = n}},
      {"reduce_mean of 2^20 elements", [](const Inputs& v) { return reduce_mean(v[0]); }, {big}, Tol{.sum_length = n}},
      {"reduce_sum over the long axis", [](const Inputs& v) { return reduce_sum(v[0], {1}); }, {wide},
       Tol{.sum_length = 1 << 14}},
      {"reduce_sum over the short axis", [](const Inputs& v) { return reduce_sum(v[0], {0}); }, {wide}},
      {"reduce_variance over the long axis", [](const Inputs& v) { return reduce_variance(v[0], {1}); }, {wide},
       Tol{.sum_length = 1 << 14}},
      {"reduce_max of 2^20 elements", [](const Inputs& v) { return reduce_max(v[0]); }, {big}},
      {"reduce_sum float64", [](const Inputs& v) { return reduce_sum(v[0]); }, {big.astype(DType::float64)},
       Tol{.rtol = kFloat64, .sum_length = n}},
  });
}

TEST_CASE("argmax, argmin, any, all, integer sums and sum_to on cuda:0 match the CPU", "[cuda][reduce]") {
  const Tensor x = rnd({5, 6, 7}, 1);
  // Ties: the first index wins on both devices.
  const Tensor ties = rnd_int({5, 6, 7}, 2, 0, 3, DType::float32);
  const Tensor ints = rnd_int({5, 6, 7}, 3, -100, 100, DType::int32);
  const Tensor big_ints = rnd_int({4, 5}, 4, -1000000, 1000000, DType::int64);
  const Tol exact{.rtol = 0, .grads = false};
  same_on_gpu({
      {"argmax last axis", [](const Inputs& v) { return argmax(v[0]); }, {x}, exact},
      {"argmax axis 0", [](const Inputs& v) { return argmax(v[0], 0); }, {x}, exact},
      {"argmin axis 1", [](const Inputs& v) { return argmin(v[0], 1); }, {x}, exact},
      {"argmax with ties", [](const Inputs& v) { return pack({argmax(v[0], 1), argmin(v[0], 2)}); }, {ties}, exact},
      {"argmax of a transposed view", [](const Inputs& v) { return argmax(transpose(v[0]), 1); }, {x}, exact},
      {"reduce_any / reduce_all",
       [](const Inputs& v) {
         const Tensor b = v[0] > 0.5;
         return pack({reduce_any(b, {1}), reduce_all(b, {1}), reduce_any(b), reduce_all(v[0] > -2.0),
                      reduce_any(b, {0, 2}, true)});
       },
       {x}, exact},
      {"int32 reduce_sum / max / min / prod",
       [](const Inputs& v) {
         return pack({reduce_sum(v[0], {2}), reduce_max(v[0], {0}), reduce_min(v[0]).reshape({1}),
                      reduce_prod(slice(v[0], {0, 0, 0}, {2, 2, 3}), {2})});
       },
       {ints}, exact},
      {"int64 reduce_sum", [](const Inputs& v) { return reduce_sum(v[0], {1}); }, {big_ints}, exact},
      {"int32 reduce_mean", [](const Inputs& v) { return reduce_mean(v[0], {2}); }, {ints}, exact},
      {"sum_to", [](const Inputs& v) { return sum_to(v[0], Shape{6, 1}); }, {x}},
      {"sum_to a scalar shape", [](const Inputs& v) { return sum_to(v[0], Shape{}); }, {x}},
  });
}

TEST_CASE("shape ops on cuda:0 match the CPU, forward and gradient", "[cuda][shape]") {
  const Tensor x = rnd({2, 3, 4}, 1);
  const Tensor y = rnd({2, 5, 4}, 2);
  const Tensor z = rnd({2, 3, 4}, 3);
  const Tensor params = rnd({6, 5}, 4);
  const Tensor ids32 = rnd_int({3, 4}, 5, 0, 6, DType::int32);  // repeats: gradients accumulate
  const Tensor ids64 = rnd_int({7}, 6, 0, 5, DType::int64);
  const Tensor data = rnd({9, 3}, 7);
  const Tensor seg = rnd_int({9}, 8, 0, 4, DType::int32);
  same_on_gpu({
      {"reshape", [](const Inputs& v) { return reshape(v[0], {4, -1}); }, {x}},
      {"reshape of a transposed view (copies)", [](const Inputs& v) { return reshape(transpose(v[0]), {-1}) * 1.0; }, {x}},
      {"transpose", [](const Inputs& v) { return transpose(v[0], {1, 2, 0}).contiguous(); }, {x}},
      {"transpose default", [](const Inputs& v) { return transpose(v[0]) * 2.0; }, {x}},
      {"expand_dims / squeeze", [](const Inputs& v) { return squeeze(expand_dims(v[0], 1), {1}) + expand_dims(v[0], -1)[0][0][0]; }, {x}},
      {"squeeze all", [](const Inputs& v) { return squeeze(slice(v[0], {1, 0, 2}, {1, 3, 1})); }, {x}},
      {"concat axis 1", [](const Inputs& v) { return concat({v[0], v[1]}, 1); }, {x, y}},
      {"concat axis -1 of views", [](const Inputs& v) { return concat({transpose(v[0], {0, 2, 1}), v[1]}, -1); },
       {x, rnd({2, 4, 2}, 9)}},
      {"stack axis 0", [](const Inputs& v) { return stack({v[0], v[1]}, 0); }, {x, z}},
      {"stack axis 2", [](const Inputs& v) { return stack({v[0], v[1]}, 2); }, {x, z}},
      {"unstack", [](const Inputs& v) { auto p = unstack(v[0], 1); return pack({p[2], p[0] * 2.0}); }, {x}},
      {"split equal", [](const Inputs& v) { auto p = split(v[0], 2, 2); return pack({p[1] * 3.0, p[0]}); }, {x}},
      {"split sizes", [](const Inputs& v) { auto p = split(v[0], std::vector<std::int64_t>{1, 4}, 1); return pack({p[1], p[0] * 2.0}); }, {y}},
      {"tile", [](const Inputs& v) { return tile(v[0], {2, 1, 3}); }, {x}},
      {"slice", [](const Inputs& v) { return slice(v[0], {0, 1, 1}, {2, 2, -1}) * 1.0; }, {x}},
      {"operator[]", [](const Inputs& v) { return v[0][1] * 2.0; }, {x}},
      {"broadcast_to", [](const Inputs& v) { return broadcast_to(v[0], {3, 2, 3, 4}) * 1.0; }, {x}},
      {"gather axis 0", [](const Inputs& v) { return gather(v[0], v[1], 0); }, {params, ids32}},
      {"gather axis 1", [](const Inputs& v) { return gather(v[0], v[1], 1); }, {params, ids64}},
      {"gather of a transposed view", [](const Inputs& v) { return gather(transpose(v[0]), v[1], 0); }, {params, ids64}},
      {"unsorted_segment_sum", [](const Inputs& v) { return unsorted_segment_sum(v[0], v[1], 5); }, {data, seg}},
      {"one_hot", [](const Inputs& v) { return one_hot(v[0], 6, 2.0, -1.0); }, {ids32}, Tol{.grads = false}},
      {"one_hot float64", [](const Inputs& v) { return one_hot(v[0], 5, 1, 0, DType::float64); }, {ids64}, Tol{.grads = false}},
      {"pad", [](const Inputs& v) { return pad(v[0], {{1, 0}, {0, 2}, {3, 1}}, -0.5); }, {x}},
      {"pad of a transposed view", [](const Inputs& v) { return pad(transpose(v[0]), {{1, 1}, {0, 0}, {2, 0}}); }, {x}},
  });
  // Integer and bool tensors move through the same ops.
  const Tensor ix = rnd_int({2, 3, 4}, 10, -9, 9, DType::int32);
  const Tol exact{.rtol = 0, .grads = false};
  same_on_gpu({
      {"int32 transpose / concat / tile / pad",
       [](const Inputs& v) { return pack({transpose(v[0]).contiguous(), concat({v[0], v[0]}, 0), tile(v[0], {1, 2, 1}),
                                          pad(v[0], {{0, 1}, {1, 0}, {0, 0}}, 7)}); },
       {ix}, exact},
      {"bool stack / gather",
       [](const Inputs& v) { const Tensor b = v[0] > 0.0; return cast(pack({stack({b, !b}, 1), gather(b, v[1], 2)}), DType::int32); },
       {x, rnd_int({5}, 11, 0, 4, DType::int64)}, exact},
  });
}
