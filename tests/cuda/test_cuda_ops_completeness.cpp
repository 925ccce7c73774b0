// The ops of the ops-completeness family on cuda:0 against the CPU, forward and gradient: the
// new elementwise kernels (cuda/elementwise.cu), and the families that run on the CUDA backend
// through a host fallback (scans and sorts, nd indexing and reversal, LAPACK): those copy a
// CUDA operand to the host, run the CPU kernel and copy the result back, and must give the CPU's
// numbers and put the result on the GPU. Composite ops (einsum, norms, pads) ride on both.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using namespace keel_cuda_test;

TEST_CASE("the new elementwise math ops on cuda:0 give the CPU's values and gradients", "[cuda][elementwise]") {
  const Tensor x = rnd({3, 17}, 1, -0.9, 0.9), pos = rnd({3, 17}, 2, 1.1, 4), y = rnd({3, 17}, 3, -3, 3);
  const Tensor nz = rnd({3, 17}, 4, 0.5, 2);
  same_on_gpu({
      {"floor ceil round", [](const Inputs& v) { return pack({floor(v[0] * 3.0), ceil(v[0] * 3.0), round(v[0] * 3.0)}); },
       {y}},
      {"tan asin acos atan", [](const Inputs& v) { return pack({tan(v[0]), asin(v[0]), acos(v[0]), atan(v[0])}); }, {x}},
      {"sinh cosh asinh atanh", [](const Inputs& v) { return pack({sinh(v[0]), cosh(v[0]), asinh(v[0]), atanh(v[0])}); },
       {x}},
      {"acosh log2 log10", [](const Inputs& v) { return pack({acosh(v[0]), log2(v[0]), log10(v[0])}); }, {pos}},
      {"expm1 reciprocal erfc", [](const Inputs& v) { return pack({expm1(v[0]), reciprocal(v[1]), erfc(v[0])}); },
       {x, nz}},
      {"selu softsign hard_sigmoid hard_swish mish",
       [](const Inputs& v) {
         return pack({selu(v[0]), softsign(v[0]), hard_sigmoid(v[0]), hard_swish(v[0]), mish(v[0])});
       },
       {y}},
      {"atan2 mod floordiv", [](const Inputs& v) { return pack({atan2(v[0], v[1]), mod(v[0], v[1]), floordiv(v[0], v[1])}); },
       {y, nz}},
  });
  same_on_gpu({
      {"mod floordiv int32",
       [](const Inputs& v) { return pack({mod(v[0], v[1]), floordiv(v[0], v[1])}); },
       {rnd_int({40}, 5, -50, 50, DType::int32), rnd_int({40}, 6, 1, 9, DType::int32)}, Tol{.grads = false}},
      {"is_inf logical_xor",
       [](const Inputs& v) { return pack({cast(is_inf(v[0] / v[1]), DType::float32), cast(logical_xor(v[0] > 0.f, v[1] > 0.f), DType::float32)}); },
       {y, y}, Tol{.grads = false}},
  });
}

TEST_CASE("scans and sorts on cuda:0 (host fallback) give the CPU's values and gradients", "[cuda][shape]") {
  const Tensor x = rnd({4, 33}, 7);
  same_on_gpu({
      {"cumsum", [](const Inputs& v) { return cumsum(v[0], 1); }, {x}, Tol{.sum_length = 33}},
      {"cumsum exclusive reverse", [](const Inputs& v) { return cumsum(v[0], 0, true, true); }, {x}, Tol{.sum_length = 4}},
      {"cumprod", [](const Inputs& v) { return cumprod(v[0], -1); }, {x}, Tol{.sum_length = 33}},
      {"sort", [](const Inputs& v) { return sort(v[0], -1, "DESCENDING"); }, {x}},
      {"top_k", [](const Inputs& v) { return top_k(v[0], 5).values; }, {x}},
  });
  same_on_gpu({
      {"argsort", [](const Inputs& v) { return argsort(v[0]); }, {x}, Tol{.grads = false}},
      {"top_k indices", [](const Inputs& v) { return top_k(v[0], 5).indices; }, {x}, Tol{.grads = false}},
      {"searchsorted",
       [](const Inputs& v) { return searchsorted(sort(v[0]), v[1], "right"); }, {x, rnd({4, 9}, 8)},
       Tol{.grads = false}},
      {"bincount", [](const Inputs& v) { return bincount(v[0], 12); }, {rnd_int({50}, 9, 0, 10, DType::int32)},
       Tol{.grads = false}},
  });
}

TEST_CASE("nd indexing and reversal on cuda:0 (host fallback) give the CPU's values and gradients", "[cuda][shape]") {
  const Tensor p = rnd({5, 4, 3}, 10);
  const Tensor idx = constant(std::vector<std::int64_t>{4, 1, 0, 3, 2, 2}, {3, 2});
  same_on_gpu({
      {"gather_nd", [idx](const Inputs& v) { return gather_nd(v[0], idx.to(v[0].device())); }, {p}},
      {"tensor_scatter_nd_add",
       [idx](const Inputs& v) { return tensor_scatter_nd_add(v[0], idx.to(v[0].device()), v[1]); },
       {p, rnd({3, 3}, 11)}},
      {"tensor_scatter_nd_max",
       [idx](const Inputs& v) { return tensor_scatter_nd_max(v[0], idx.to(v[0].device()), v[1]); },
       {p, rnd({3, 3}, 12)}},
      {"reverse", [](const Inputs& v) { return reverse(v[0], {0, 2}); }, {p}},
      {"negative-step slice", [](const Inputs& v) { return v[0].slice({range(end, end, -2), all, 1}); }, {p}},
      {"roll repeat", [](const Inputs& v) { return pack({roll(v[0], 2, 1), repeat(v[0], 2, 0)}); }, {p}},
      {"pad REFLECT", [](const Inputs& v) { return pad(v[0], {{1, 1}, {2, 1}, {0, 0}}, "REFLECT"); }, {p}},
  });
}

TEST_CASE("linalg on cuda:0 (host fallback) gives the CPU's values and gradients", "[cuda][linalg]") {
  // Diagonally dominant, so inverses and solves are well conditioned.
  const Tensor a = rnd({2, 4, 4}, 13, -0.5, 0.5, DType::float64) + eye(4, DType::float64) * 4.0;
  const Tensor spd = matmul(a, a, false, true);
  const Tensor b = rnd({2, 4, 3}, 14, -1, 1, DType::float64);
  const Tol f64{.rtol = 1e-9};
  same_on_gpu({
      {"inv", [](const Inputs& v) { return linalg::inv(v[0]); }, {a}, f64},
      {"solve", [](const Inputs& v) { return linalg::solve(v[0], v[1]); }, {a, b}, f64},
      {"cholesky", [](const Inputs& v) { return linalg::cholesky(v[0]); }, {spd}, Tol{.rtol = 1e-9, .grads = false}},
      {"det", [](const Inputs& v) { return linalg::det(v[0]); }, {a}, f64},
      {"svd singular values", [](const Inputs& v) { return linalg::svd(v[0], false, false).s; }, {a}, f64},
      {"eigh eigenvalues", [](const Inputs& v) { return linalg::eigh(v[0]).e; }, {spd}, Tol{.rtol = 1e-9, .grads = false}},
      {"einsum", [](const Inputs& v) { return einsum("bij,bjk->bik", {v[0], v[1]}); }, {a, b}, f64},
  });
}
