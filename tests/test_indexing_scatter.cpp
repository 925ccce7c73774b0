// n-d gathers and scatters (gather_nd, scatter_nd, tensor_scatter_nd_*), boolean_mask,
// where(condition) and Variable's in-place scatters: values from TensorFlow's definitions,
// negative indices, errors naming the bad index, and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"
#include "value_fixtures.hpp"

using namespace keel;

using keel_test::f64;
using keel_test::wavy;

namespace {

using F = std::vector<float>;
using I = std::vector<std::int64_t>;
using V = std::vector<Tensor>;
F fv(const Tensor& t) { return t.to_vector<float>(); }
Tensor idx(const I& v, Shape s) { return constant(v, std::move(s)); }

}  // namespace

TEST_CASE("gather_nd picks elements or slices by index tuples", "[indexing][gather_nd]") {
  // params = [[1, 2], [3, 4]]
  const Tensor p = constant<float>({1, 2, 3, 4}, {2, 2});
  // full tuples pick elements: p[0,0] = 1, p[1,1] = 4
  CHECK(fv(gather_nd(p, idx({0, 0, 1, 1}, {2, 2}))) == F{1, 4});
  // one-entry tuples pick rows: p[1], p[0]
  const Tensor rows = gather_nd(p, idx({1, 0}, {2, 1}));
  CHECK(rows.shape() == Shape{2, 2});
  CHECK(fv(rows) == F{3, 4, 1, 2});
  // batched tuples: indices [2,1,2] -> out [2,1]: p[0,1] = 2, p[1,0] = 3
  const Tensor b = gather_nd(p, idx({0, 1, 1, 0}, {2, 1, 2}));
  CHECK(b.shape() == Shape{2, 1});
  CHECK(fv(b) == F{2, 3});
  // negative entries count from the end: p[-1, -2] = p[1, 0] = 3
  CHECK(fv(gather_nd(p, idx({-1, -2}, {1, 2}))) == F{3});
  // c[i,j,k] = 12 i + 4 j + k: c[1, 2] = [20, 21, 22, 23]; int32 indices work too
  const Tensor c = reshape(arange(24), {2, 3, 4});
  CHECK(fv(gather_nd(c, constant<std::int32_t>({1, 2}, {1, 2}))) == F{20, 21, 22, 23});
  // empty tuples (M = 0) take all of params per index row
  CHECK(gather_nd(p, zeros({3, 0}, DType::int64)).shape() == Shape{3, 2, 2});
  // no index rows
  CHECK(gather_nd(c, zeros({0, 2}, DType::int64)).shape() == Shape{0, 4});
  // a non-contiguous params: transpose(p) = [[1, 3], [2, 4]]; [0,1] -> 3
  CHECK(fv(gather_nd(transpose(p), idx({0, 1}, {1, 2}))) == F{3});
  // integer params
  CHECK(gather_nd(constant<std::int64_t>({5, 6, 7}, {3}), idx({2}, {1, 1})).to_vector<std::int64_t>() == I{7});
}

TEST_CASE("gather_nd errors name the index tuple and the bound", "[indexing][gather_nd][errors]") {
  const Tensor p = zeros({3, 2});
  // indices[1,0] = 3 is out of [-3, 3) for axis 0
  check_error<ValueError>([&] { gather_nd(p, idx({0, 0, 3, 1}, {2, 2})); },
                          {"gather_nd", "indices[1,0] = 3", "[-3, 3)", "axis 0", "[3,2]"});
  check_error<ValueError>([&] { gather_nd(p, idx({0, -3}, {1, 2})); }, {"indices[0,1] = -3", "[-2, 2)"});
  check_error<ShapeError>([&] { gather_nd(p, idx({0, 0, 0}, {1, 3})); }, {"gather_nd", "length 3", "[3,2]"});
  CHECK_THROWS_AS(gather_nd(p, constant<float>({0, 0}, {1, 2})), DTypeError);
  CHECK_THROWS_AS(gather_nd(p, constant(std::int64_t{0}, DType::int64)), ShapeError);
}

TEST_CASE("scatter_nd adds updates into zeros, duplicates adding up", "[indexing][scatter_nd]") {
  // TF's example: indices [[4], [3], [1], [7]], updates [9, 10, 11, 12], shape [8]
  const Tensor s = scatter_nd(idx({4, 3, 1, 7}, {4, 1}), constant<float>({9, 10, 11, 12}, {4}), {8});
  CHECK(fv(s) == F{0, 11, 0, 10, 9, 0, 0, 12});
  // duplicates add: 2 + 3 at index 1; -1 is index 2
  CHECK(fv(scatter_nd(idx({1, 1, -1}, {3, 1}), constant<float>({2, 3, 4}, {3}), {3})) == F{0, 5, 4});
  // slices: rows 0 and 2 of a [3,2] result
  CHECK(fv(scatter_nd(idx({0, 2}, {2, 1}), constant<float>({1, 2, 3, 4}, {2, 2}), {3, 2})) == F{1, 2, 0, 0, 3, 4});
  // integer updates, and nothing to scatter
  CHECK(scatter_nd(idx({1}, {1, 1}), constant<std::int32_t>({7}, {1}), {2}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{0, 7});
  CHECK(fv(scatter_nd(zeros({0, 1}, DType::int64), zeros({0}), {2})) == F{0, 0});
  check_error<ShapeError>([&] { scatter_nd(idx({0, 1}, {2, 1}), zeros({3}), {4}); }, {"scatter_nd", "[3]", "[2]"});
  check_error<ValueError>([&] { scatter_nd(idx({0, 4}, {2, 1}), zeros({2}), {4}); },
                          {"scatter_nd", "indices[1,0] = 4", "[-4, 4)"});
  CHECK_THROWS_AS(scatter_nd(idx({0}, {1, 1}), constant<bool>({true}, {1}), {2}), DTypeError);
}

TEST_CASE("tensor_scatter_nd_update / add / max / min combine updates into a copy", "[indexing][scatter_nd]") {
  const Tensor t = constant<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  const Tensor i = idx({4, 3, 1, 7}, {4, 1});
  // TF's examples: update puts 9 at 4, 10 at 3, 11 at 1, 12 at 7
  CHECK(fv(tensor_scatter_nd_update(t, i, constant<float>({9, 10, 11, 12}, {4}))) == F{1, 11, 3, 10, 9, 6, 7, 12});
  // add: 2 + 11, 4 + 10, 5 + 9, 8 + 12
  CHECK(fv(tensor_scatter_nd_add(t, i, constant<float>({9, 10, 11, 12}, {4}))) == F{1, 13, 3, 14, 14, 6, 7, 20});
  // max / min against [3 at 4, 1 at 3, 11 at 1, 6 at 7]: max(5,3)=5, max(4,1)=4, max(2,11)=11,
  // max(8,6)=8; min(5,3)=3, min(4,1)=1, min(2,11)=2, min(8,6)=6
  const Tensor u = constant<float>({3, 1, 11, 6}, {4});
  CHECK(fv(tensor_scatter_nd_max(t, i, u)) == F{1, 11, 3, 4, 5, 6, 7, 8});
  CHECK(fv(tensor_scatter_nd_min(t, i, u)) == F{1, 2, 3, 1, 3, 6, 7, 6});
  CHECK(fv(t) == F{1, 2, 3, 4, 5, 6, 7, 8});  // the input is not written
  // duplicates: add sums them, max keeps the largest, update the last
  const Tensor dup = idx({0, 0}, {2, 1});
  CHECK(fv(tensor_scatter_nd_add(t, dup, constant<float>({10, 20}, {2})))[0] == 31);
  CHECK(fv(tensor_scatter_nd_max(t, dup, constant<float>({10, 20}, {2})))[0] == 20);
  CHECK(fv(tensor_scatter_nd_update(t, dup, constant<float>({10, 20}, {2})))[0] == 20);
  // rows of a non-contiguous tensor: transpose([[0,1,2],[3,4,5]]) = [[0,3],[1,4],[2,5]]; row -1 := [9,9]
  const Tensor tt = transpose(reshape(arange(6), {2, 3}));
  CHECK(fv(tensor_scatter_nd_update(tt, idx({-1}, {1, 1}), constant<float>({9, 9}, {1, 2}))) == F{0, 3, 1, 4, 9, 9});
  // update works for bool; add does not
  const Tensor bt = constant<bool>({false, false}, {2});
  CHECK(tensor_scatter_nd_update(bt, idx({1}, {1, 1}), constant<bool>({true}, {1})).to_vector<bool>() ==
        std::vector<bool>{false, true});
  CHECK_THROWS_AS(tensor_scatter_nd_add(bt, idx({1}, {1, 1}), constant<bool>({true}, {1})), DTypeError);
  CHECK_THROWS_AS(tensor_scatter_nd_add(t, i, constant<double>({1, 2, 3, 4}, {4})), DTypeError);
  check_error<ValueError>([&] { tensor_scatter_nd_min(t, idx({8}, {1, 1}), constant<float>({0}, {1})); },
                          {"tensor_scatter_nd_min", "indices[0,0] = 8", "[-8, 8)"});
  CHECK_THROWS_AS(tensor_scatter_nd_update(t, i, zeros({3})), ShapeError);
}

TEST_CASE("gather_nd, scatter_nd and tensor_scatter_nd_* pass gradient checks", "[indexing][gradient]") {
  const Tensor p = wavy({3, 2, 2});
  // duplicate tuples: their gradients add up in params
  const Tensor i2 = idx({0, 1, 2, 0, 0, 1, -1, -1}, {4, 2});
  check_gradients([&](const V& xs) { return gather_nd(xs[0], i2); }, {p});
  check_gradients([&](const V& xs) { return gather_nd(transpose(xs[0], {2, 0, 1}), idx({1, 2, 0, 0}, {2, 2})); }, {p});
  check_gradients([&](const V& xs) { return scatter_nd(i2, xs[0], {3, 2, 2}); }, {wavy({4, 2})});
  const Tensor t = wavy({3, 2}, 0.1), u = wavy({2, 2}, 1.7);
  const Tensor rows = idx({2, 0}, {2, 1});
  check_gradients([&](const V& xs) { return tensor_scatter_nd_update(xs[0], rows, xs[1]); }, {t, u});
  check_gradients([&](const V& xs) { return tensor_scatter_nd_add(xs[0], rows, xs[1]); }, {t, u});
  // max / min away from ties (the values differ by far more than the finite-difference step)
  check_gradients([&](const V& xs) { return tensor_scatter_nd_max(xs[0], rows, xs[1]); }, {t, u});
  check_gradients([&](const V& xs) { return tensor_scatter_nd_min(xs[0], rows, xs[1]); }, {t, u});
  check_gradients([&](const V& xs) { return tensor_scatter_nd_max(xs[0], idx({1, 1}, {2, 1}), xs[1]); }, {t, u});
}

TEST_CASE("tensor_scatter_nd_max splits the gradient between ties, as TensorFlow does", "[indexing][gradient]") {
  // max([1, 2] at 0 with update 1): element 0 ties (1 == 1), so tensor and update share its
  // upstream gradient 3: 1.5 each; element 1 passes its gradient 5 to the tensor.
  const Tensor t = f64({1, 2}, {2}), u = f64({1}, {1});
  GradientTape tape;
  tape.watch(t);
  tape.watch(u);
  const Tensor y = tensor_scatter_nd_max(t, idx({0}, {1, 1}), u);
  const auto g = tape.gradient(reduce_sum(y * f64({3, 5}, {2})), {t, u});
  CHECK(g[0].to_vector<double>() == std::vector<double>{1.5, 5});
  CHECK(g[1].to_vector<double>() == std::vector<double>{1.5});
}

TEST_CASE("boolean_mask keeps the elements or slices where the mask is true", "[indexing][boolean_mask]") {
  // TF's examples: [0, 1, 2, 3] with [T, F, T, F] -> [0, 2]
  CHECK(fv(boolean_mask(arange(4), constant<bool>({true, false, true, false}, {4}))) == F{0, 2});
  // [[1, 2], [3, 4], [5, 6]] with [T, F, T] -> [[1, 2], [5, 6]]
  const Tensor x = constant<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor m = boolean_mask(x, constant<bool>({true, false, true}, {3}));
  CHECK(m.shape() == Shape{2, 2});
  CHECK(fv(m) == F{1, 2, 5, 6});
  // axis 1 (and -1) of [[0, 1, 2], [3, 4, 5]] with [F, T, T] -> [[1, 2], [4, 5]]
  const Tensor a = reshape(arange(6), {2, 3});
  const Tensor cols = constant<bool>({false, true, true}, {3});
  CHECK(fv(boolean_mask(a, cols, 1)) == F{1, 2, 4, 5});
  CHECK(fv(boolean_mask(a, cols, -1)) == F{1, 2, 4, 5});
  // a 2-D mask over the first two axes of c[i,j,k] = 12 i + 4 j + k: (0,1) and (1,2) -> rows 4.. and 20..
  const Tensor c = reshape(arange(24), {2, 3, 4});
  const Tensor m2 = constant<bool>({false, true, false, false, false, true}, {2, 3});
  const Tensor r = boolean_mask(c, m2);
  CHECK(r.shape() == Shape{2, 4});
  CHECK(fv(r) == F{4, 5, 6, 7, 20, 21, 22, 23});
  // non-contiguous input: transpose(a) = [[0,3],[1,4],[2,5]], rows 1 and 2
  CHECK(fv(boolean_mask(transpose(a), cols)) == F{1, 4, 2, 5});
  // nothing selected, and an empty tensor
  CHECK(boolean_mask(x, constant<bool>({false, false, false}, {3})).shape() == Shape{0, 2});
  CHECK(boolean_mask(zeros({0, 2}), constant<bool>(std::vector<bool>{}, {0})).shape() == Shape{0, 2});
  check_error<ShapeError>([&] { boolean_mask(x, constant<bool>({true, false}, {2})); }, {"boolean_mask", "[2]", "[3,2]"});
  CHECK_THROWS_AS(boolean_mask(x, constant<float>({1, 0, 1}, {3})), DTypeError);
  CHECK_THROWS_AS(boolean_mask(x, constant<bool>({true}, {1}), 2), ValueError);
  CHECK_THROWS_AS(boolean_mask(x, constant<bool>({true, false, true, false, true, true, true}, {7})), ShapeError);
}

TEST_CASE("boolean_mask passes a gradient check", "[indexing][gradient]") {
  const Tensor mask = constant<bool>({true, false, true, true}, {4});
  check_gradients([&](const V& xs) { return boolean_mask(xs[0], mask, 1); }, {wavy({2, 4, 3})});
}

TEST_CASE("where(condition) lists the coordinates of the true elements", "[indexing][where]") {
  // [[T, F], [F, T]] -> [[0, 0], [1, 1]]
  const Tensor w = where(constant<bool>({true, false, false, true}, {2, 2}));
  CHECK(w.dtype() == DType::int64);
  CHECK(w.shape() == Shape{2, 2});
  CHECK(w.to_vector<std::int64_t>() == I{0, 0, 1, 1});
  // numeric: non-zero is true: [0, 3, 0, -1] -> [[1], [3]]
  CHECK(where(constant<float>({0, 3, 0, -1}, {4})).to_vector<std::int64_t>() == I{1, 3});
  // rank 3: the true elements of [2,1,3] at flat positions 2 and 3 are (0,0,2) and (1,0,0)
  const Tensor r3 = where(constant<bool>({false, false, true, true, false, false}, {2, 1, 3}));
  CHECK(r3.shape() == Shape{2, 3});
  CHECK(r3.to_vector<std::int64_t>() == I{0, 0, 2, 1, 0, 0});
  // none true, an empty condition, a scalar
  CHECK(where(zeros({2, 3})).shape() == Shape{0, 2});
  CHECK(where(zeros({0})).shape() == Shape{0, 1});
  CHECK(where(constant(1.0)).shape() == Shape{1, 0});
  // a non-contiguous condition: transpose([[1,0,0],[0,0,2]]) = [[1,0],[0,0],[0,2]] -> (0,0), (2,1)
  CHECK(where(transpose(constant<float>({1, 0, 0, 0, 0, 2}, {2, 3}))).to_vector<std::int64_t>() == I{0, 0, 2, 1});
}

TEST_CASE("Variable::scatter_nd_update and scatter_nd_add write in place", "[indexing][variable]") {
  Variable v(constant<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8}), "v");
  const Tensor storage_before = v.peek();
  v.scatter_nd_update(idx({4, 3, 1, 7}, {4, 1}), constant<float>({9, 10, 11, 12}, {4}));
  CHECK(fv(v.peek()) == F{1, 11, 3, 10, 9, 6, 7, 12});
  v.scatter_nd_add(idx({0, 0, -1}, {3, 1}), constant<float>({1, 2, 3}, {3}));  // 1 + 1 + 2, 12 + 3
  CHECK(fv(v.peek()) == F{4, 11, 3, 10, 9, 6, 7, 15});
  CHECK(v.peek().impl()->storage == storage_before.impl()->storage);
  // A bad index leaves the value as it was.
  check_error<ValueError>([&] { v.scatter_nd_update(idx({1, 8}, {2, 1}), constant<float>({0, 0}, {2})); },
                          {"Variable.scatter_nd_update", "indices[1,0] = 8", "[-8, 8)"});
  CHECK(fv(v.peek()) == F{4, 11, 3, 10, 9, 6, 7, 15});
  CHECK_THROWS_AS(v.scatter_nd_add(idx({1}, {1, 1}), constant<double>({1}, {1})), DTypeError);
  CHECK_THROWS_AS(v.scatter_nd_add(idx({1}, {1, 1}), constant<float>({1, 2}, {2})), ShapeError);
  // rows of a 2-D variable
  Variable m(zeros({3, 2}), "m");
  m.scatter_nd_update(idx({2}, {1, 1}), constant<float>({5, 6}, {1, 2}));
  CHECK(fv(m.peek()) == F{0, 0, 0, 0, 5, 6});
  // the version bump: a tape that saved the value refuses to use it afterwards
  Variable w(constant<double>({1, 2}, {2}), "w");
  GradientTape tape;
  const Tensor y = reduce_sum(square(w.value()));
  w.scatter_nd_add(idx({0}, {1, 1}), constant<double>({1}, {1}));
  CHECK_THROWS_AS(tape.gradient(y, w), Error);
}

TEST_CASE("traced functions replay the indexing kernels and check indices on every call", "[indexing][function]") {
  const auto body = [](const Tensor& x, const Tensor& i) {
    const Tensor s = x.slice({range(keel::end, keel::end, -1), range(1, keel::end, 2)});  // [4,2], reversed rows
    const Tensor g = gather_nd(x, i);                                                      // [2]
    const Tensor t = tensor_scatter_nd_add(s, i, g * 10.0);
    return reduce_sum(repeat(pad(t, {{1, 1}, {0, 0}}, "REFLECT"), 2, 1) * 0.5) + reduce_sum(roll(s, 1, 0) * s);
  };
  auto f = keel::function(body);
  const Tensor i = idx({0, 1, -1, 0}, {2, 2});
  for (int call = 0; call < 3; ++call) {
    const Tensor x = random::normal({4, 4});
    CHECK(f(x, i).item<float>() == Approx(body(x, i).item<float>()).epsilon(1e-5));
  }
  CHECK(f.trace_count() == 1);
  CHECK_THROWS_AS(f(random::normal({4, 4}), idx({0, 1, 4, 0}, {2, 2})), ValueError);
}
