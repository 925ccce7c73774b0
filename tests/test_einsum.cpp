// einsum, tensordot and outer: values derived by hand (or by the sums the equations spell out,
// computed here with plain loops), NumPy's implicit mode and ellipsis broadcasting, diagonals,
// errors, and float64 gradient checks (einsum's gradient is einsum of the upstream gradient).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using keel_test::check_gradients;
using V = std::vector<Tensor>;

namespace {

// 0, 1, 2, ... as float64 of `shape` (distinct values, so a wrong axis order shows).
Tensor iota(Shape shape, double scale = 1, double shift = 0) {
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) * scale + shift;
  return constant(v, shape);
}

void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(w[i]).margin(1e-12));
}

}  // namespace

TEST_CASE("einsum ij,jk->ik is matmul", "[einsum]") {
  // a = [[1,2],[3,4]], b = [[5,6],[7,8]]: a@b = [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]]
  //                                            = [[19, 22], [43, 50]].
  const Tensor a = constant<double>({1, 2, 3, 4}, {2, 2});
  const Tensor b = constant<double>({5, 6, 7, 8}, {2, 2});
  CHECK(einsum("ij,jk->ik", {a, b}).to_vector<double>() == std::vector<double>{19, 22, 43, 50});
  // Implicit output: j appears twice, so "ij,jk" -> "ik".
  CHECK(einsum("ij,jk", {a, b}).to_vector<double>() == std::vector<double>{19, 22, 43, 50});
  // Spaces are ignored; transposed operands read through matmul's transpose flags.
  CHECK(einsum("ji, kj -> ik", {a, b}).to_vector<double>() ==
        std::vector<double>{1 * 5 + 3 * 6, 1 * 7 + 3 * 8, 2 * 5 + 4 * 6, 2 * 7 + 4 * 8});
}

TEST_CASE("einsum matches the loops it spells out for batched and multi-label equations", "[einsum]") {
  const Tensor a = iota({2, 3, 4}), b = iota({2, 4, 5}, 0.5, -3);
  // bij,bjk->bik
  check_close(einsum("bij,bjk->bik", {a, b}), matmul(a, b));
  // bij,bjk->bki: the same sums with the output axes permuted.
  check_close(einsum("bij,bjk->bki", {a, b}), transpose(matmul(a, b), {0, 2, 1}));
  // ijk,ikl->jl sums over the batch too: out[j,l] = sum_{i,k} a[i,j,k] b[i,k,l].
  std::vector<double> want(15, 0.0);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 5; ++l) want[j * 5 + l] += av[(i * 3 + j) * 4 + k] * bv[(i * 4 + k) * 5 + l];
  check_close(einsum("ijk,ikl->jl", {a, b}), constant(want, {3, 5}));
}

TEST_CASE("einsum sums, transposes, takes diagonals and outer products", "[einsum]") {
  const Tensor m = constant<double>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  CHECK(einsum("ij->", {m}).item<double>() == 45);                              // 1 + ... + 9
  CHECK(einsum("ij->j", {m}).to_vector<double>() == std::vector<double>{12, 15, 18});  // column sums
  CHECK(einsum("ij->ji", {m}).to_vector<double>() == transpose(m).to_vector<double>());
  CHECK(einsum("ii->i", {m}).to_vector<double>() == std::vector<double>{1, 5, 9});  // the diagonal
  CHECK(einsum("ii", {m}).item<double>() == 15);                                   // the trace
  const Tensor u = constant<double>({1, 2}, {2}), v = constant<double>({3, 4, 5}, {3});
  CHECK(einsum("i,j->ij", {u, v}).to_vector<double>() == std::vector<double>{3, 4, 5, 6, 8, 10});
  CHECK(einsum("i,i->", {u, constant<double>({7, 9}, {2})}).item<double>() == 1 * 7 + 2 * 9);
  // Three operands contract left to right: u^T m' v with m' = m[:2, :] -> sum_ij u_i m_ij v_j.
  const Tensor m2 = slice(m, {0, 0}, {2, 3});  // [[1,2,3],[4,5,6]]
  // 1*(1*3+2*4+3*5) + 2*(4*3+5*4+6*5) = 26 + 2*62 = 150
  CHECK(einsum("i,ij,j->", {u, m2, v}).item<double>() == 150);
}

TEST_CASE("einsum broadcasts ellipsis axes as NumPy does", "[einsum]") {
  const Tensor a = iota({2, 1, 3, 4}), b = iota({5, 4, 2}, 0.25);
  // ...ij,...jk->...ik: batch [2,1] against [5] broadcasts to [2,5].
  const Tensor got = einsum("...ij,...jk->...ik", {a, b});
  check_close(got, matmul(a, b));
  // Implicit mode puts the ellipsis axes first.
  check_close(einsum("...ij,...jk", {a, b}), matmul(a, b));
  // An ellipsis dropped from the output is summed.
  check_close(einsum("...ij->ij", {a}), reduce_sum(a, {0, 1}));
}

TEST_CASE("einsum accepts non-contiguous operands", "[einsum][views]") {
  const Tensor a = transpose(iota({4, 3}));  // [3, 4], strided
  const Tensor b = slice(iota({4, 6}), {0, 1}, {4, 4});  // [4, 4], offset and row stride 6
  REQUIRE_FALSE(a.is_contiguous());
  REQUIRE_FALSE(b.is_contiguous());
  check_close(einsum("ij,jk->ik", {a, b}), matmul(a.contiguous(), b.contiguous()));
}

TEST_CASE("einsum errors name the equation and the shapes", "[einsum][errors]") {
  const Tensor a = iota({2, 3}), b = iota({4, 5});
  CHECK_THROWS_AS(einsum("ij,jk->ik", {a, b}), ShapeError);  // j is 3 and 4
  CHECK_THROWS_WITH(einsum("ij,jk->ik", {a, b}), Catch::Contains("ij,jk->ik") && Catch::Contains("[4,5]"));
  CHECK_THROWS_AS(einsum("ij,jk->ik", {a}), ValueError);     // two terms, one operand
  CHECK_THROWS_AS(einsum("ijk->i", {a}), ShapeError);        // rank 2 with three labels
  CHECK_THROWS_AS(einsum("ij->iz", {a}), ValueError);        // z is in no input
  CHECK_THROWS_AS(einsum("ij->ii", {a}), ValueError);        // repeated output label
  CHECK_THROWS_AS(einsum("i1->i", {a}), ValueError);         // not a letter
  CHECK_THROWS_AS(einsum("ii->i", {a}), ShapeError);         // diagonal of a 2x3
}

TEST_CASE("tensordot contracts the named axes and outer flattens", "[einsum][tensordot]") {
  const Tensor a = iota({2, 3, 4}), b = iota({3, 4, 5}, 0.5);
  // axes = 2: a's last two against b's first two = reshape(a,[2,12]) @ reshape(b,[12,5]).
  check_close(tensordot(a, b, 2), matmul(reshape(a, {2, 12}), reshape(b, {12, 5})));
  // Explicit pairs: a's axis 1 with b's axis 0 -> [2, 4, 4, 5] = einsum("ijk,jlm->iklm").
  check_close(tensordot(a, b, {{1}, {0}}), einsum("ijk,jlm->iklm", {a, b}));
  check_close(tensordot(a, b, {{-2, -1}, {0, 1}}), tensordot(a, b, 2));
  // axes = 0 is the outer product: shape [2,3,4,3,4,5].
  CHECK(tensordot(a, b, 0).shape() == Shape({2, 3, 4, 3, 4, 5}));
  CHECK_THROWS_AS(tensordot(a, b, {{0}, {0}}), ShapeError);  // 2 vs 3
  CHECK_THROWS_AS(tensordot(a, b, 4), ValueError);
  // outer([1,2],[[3],[4]]) flattens b: [[3,4],[6,8]].
  CHECK(outer(constant<double>({1, 2}, {2}), constant<double>({3, 4}, {2, 1})).to_vector<double>() ==
        std::vector<double>{3, 4, 6, 8});
}

TEST_CASE("einsum, tensordot and outer pass float64 gradient checks", "[einsum][gradient]") {
  const Tensor a = iota({2, 3}, 0.3, -0.7), b = iota({3, 4}, -0.2, 0.9), c = iota({4}, 0.5, 0.1);
  check_gradients([](const V& x) { return einsum("ij,jk->ik", {x[0], x[1]}); }, {a, b});
  check_gradients([](const V& x) { return einsum("ij,jk,k->i", {x[0], x[1], x[2]}); }, {a, b, c});
  check_gradients([](const V& x) { return einsum("ji,jk->ki", {x[0], x[1]}); }, {iota({3, 2}, 0.1), b});
  const Tensor sq = iota({3, 3}, 0.2, -0.4);
  check_gradients([](const V& x) { return einsum("ii->i", {x[0]}); }, {sq});
  check_gradients([](const V& x) { return einsum("...ij,...jk->...ik", {x[0], x[1]}); },
                  {iota({2, 1, 2, 3}, 0.1), iota({3, 3, 2}, -0.05, 0.3)});
  check_gradients([](const V& x) { return tensordot(x[0], x[1], {{0}, {0}}); }, {b, iota({3, 2}, 0.4)});
  check_gradients([](const V& x) { return outer(x[0], x[1]); }, {c, iota({2}, 1.5)});
}
