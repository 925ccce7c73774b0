// Rearranging ops: reverse, roll, repeat, meshgrid and pad's REFLECT / SYMMETRIC modes, with
// values from TensorFlow's definitions, negative axes, errors and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"

using namespace keel;

namespace {

using F = std::vector<float>;
using V = std::vector<Tensor>;
F fv(const Tensor& t) { return t.to_vector<float>(); }
Tensor f64(const std::vector<double>& v, Shape s) { return constant(v, std::move(s), DType::float64); }
Tensor wavy(Shape s, double salt = 0.3) {
  std::vector<double> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.1 * double(i) + salt);
  return f64(v, std::move(s));
}
// x = [[0, 1, 2],
//      [3, 4, 5]]
Tensor x23() { return reshape(arange(6), {2, 3}); }

}  // namespace

TEST_CASE("reverse flips the given axes", "[indexing][reverse]") {
  CHECK(fv(reverse(x23(), {1})) == F{2, 1, 0, 5, 4, 3});
  CHECK(fv(reverse(x23(), {0})) == F{3, 4, 5, 0, 1, 2});
  CHECK(fv(reverse(x23(), {0, -1})) == F{5, 4, 3, 2, 1, 0});
  CHECK(fv(reverse(x23(), {})) == F{0, 1, 2, 3, 4, 5});
  // transpose(x) = [[0,3],[1,4],[2,5]] reversed along axis 0: [[2,5],[1,4],[0,3]]
  CHECK(fv(reverse(transpose(x23()), {0})) == F{2, 5, 1, 4, 0, 3});
  // a strided view: x[:, ::2] = [[0,2],[3,5]] reversed along axis 1: [[2,0],[5,3]]
  CHECK(fv(reverse(x23().slice({keel::all, range(0, keel::end, 2)}), {1})) == F{2, 0, 5, 3});
  CHECK(reverse(constant<std::int32_t>({1, 2, 3}, {3}), {0}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{3, 2, 1});
  CHECK(reverse(zeros({0, 3}), {0, 1}).shape() == Shape{0, 3});
  check_error<ValueError>([] { reverse(x23(), {1, -1}); }, {"reverse", "more than once"});
  CHECK_THROWS_AS(reverse(x23(), {2}), ValueError);
}

TEST_CASE("reverse along the last axis of long rows keeps every element of each size", "[indexing][reverse]") {
  // Rows of 1027 (bytes go eight at a time, then one by one): y[r, j] = x[r, 1026 - j].
  constexpr std::int64_t rows = 3, n = 1027;
  std::vector<std::int64_t> v(static_cast<std::size_t>(rows * n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i * 7919 % 251);
  const Tensor x64 = constant(v, {rows, n});
  for (const DType dt : {DType::uint8, DType::float16, DType::float32, DType::int64, DType::float64}) {
    INFO(name(dt));
    const auto y = reverse(x64.astype(dt), {1}).astype(DType::int64).to_vector<std::int64_t>();
    bool all = true;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < n; ++j)
        all = all && y[static_cast<std::size_t>(r * n + j)] == v[static_cast<std::size_t>(r * n + n - 1 - j)];
    CHECK(all);
  }
}

TEST_CASE("roll shifts elements cyclically", "[indexing][roll]") {
  const Tensor x = arange(5);  // [0, 1, 2, 3, 4]
  // y[i] = x[i - shift]: tf.roll([0,1,2,3,4], 2, 0) = [3, 4, 0, 1, 2]
  CHECK(fv(roll(x, 2, 0)) == F{3, 4, 0, 1, 2});
  CHECK(fv(roll(x, -2, 0)) == F{2, 3, 4, 0, 1});
  CHECK(fv(roll(x, 7, -1)) == F{3, 4, 0, 1, 2});  // 7 = 2 (mod 5)
  CHECK(fv(roll(x, {2, 3}, {0, 0})) == F{0, 1, 2, 3, 4});  // shifts of one axis add: 5 = 0
  // TF's 2-D example: [[0..4], [5..9]] by [1, -2] on axes [0, 1]: [[7,8,9,5,6], [2,3,4,0,1]]
  const Tensor m = reshape(arange(10), {2, 5});
  CHECK(fv(roll(m, {1, -2}, {0, 1})) == F{7, 8, 9, 5, 6, 2, 3, 4, 0, 1});
  // non-contiguous: transpose(x23) = [[0,3],[1,4],[2,5]] rolled by 1 on axis 0: [[2,5],[0,3],[1,4]]
  CHECK(fv(roll(transpose(x23()), 1, 0)) == F{2, 5, 0, 3, 1, 4});
  CHECK(roll(zeros({0, 2}), 3, 0).shape() == Shape{0, 2});
  check_error<ValueError>([&] { roll(m, {1, 2}, {0}); }, {"roll", "2 shifts", "1 axes"});
  CHECK_THROWS_AS(roll(m, 1, 2), ValueError);
}

TEST_CASE("repeat repeats elements along an axis, or of the flattened tensor", "[indexing][repeat]") {
  // tf.repeat(['a','b','c'], repeats=[3, 0, 2], axis=0) = ['a','a','a','c','c'], with 1, 2, 3
  CHECK(fv(repeat(constant<float>({1, 2, 3}, {3}), {3, 0, 2}, 0)) == F{1, 1, 1, 3, 3});
  // tf.repeat([[1,2],[3,4]], repeats=[2,3], axis=0) = [[1,2],[1,2],[3,4],[3,4],[3,4]]
  const Tensor x = constant<float>({1, 2, 3, 4}, {2, 2});
  const Tensor r0 = repeat(x, {2, 3}, 0);
  CHECK(r0.shape() == Shape{5, 2});
  CHECK(fv(r0) == F{1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  // axis 1 (= -1): [[1,1,2,2,2],[3,3,4,4,4]]
  CHECK(fv(repeat(x, {2, 3}, -1)) == F{1, 1, 2, 2, 2, 3, 3, 4, 4, 4});
  // tf.repeat(3, repeats=4) = [3, 3, 3, 3]; tf.repeat([[1,2],[3,4]], repeats=2) = [1,1,2,2,3,3,4,4]
  CHECK(fv(repeat(constant(3.0), 4)) == F{3, 3, 3, 3});
  CHECK(fv(repeat(x, 2)) == F{1, 1, 2, 2, 3, 3, 4, 4});
  // repeats as a tensor (int32), and a non-contiguous x: transpose(x) = [[1,3],[2,4]]
  CHECK(fv(repeat(transpose(x), constant<std::int32_t>({1, 2}, {2}), 0)) == F{1, 3, 2, 4, 2, 4});
  CHECK(repeat(x, 0, 1).shape() == Shape{2, 0});
  CHECK(repeat(zeros({0, 2}), 3, 0).shape() == Shape{0, 2});
  check_error<ValueError>([&] { repeat(x, {1, 2, 3}, 0); }, {"repeat", "3 repeats", "size 2"});
  CHECK_THROWS_AS(repeat(x, -1, 0), ValueError);
  CHECK_THROWS_AS(repeat(x, 2, 2), ValueError);
  CHECK_THROWS_AS(repeat(x, constant<float>({1, 2}, {2}), 0), DTypeError);
}

TEST_CASE("meshgrid builds coordinate grids, Cartesian or matrix indexed", "[indexing][meshgrid]") {
  const Tensor x = constant<float>({1, 2, 3}, {3}), y = constant<float>({4, 5}, {2});
  // tf.meshgrid(x, y): X = [[1,2,3],[1,2,3]], Y = [[4,4,4],[5,5,5]]
  const auto xy = meshgrid({x, y});
  REQUIRE(xy.size() == 2);
  CHECK(xy[0].shape() == Shape{2, 3});
  CHECK(fv(xy[0]) == F{1, 2, 3, 1, 2, 3});
  CHECK(fv(xy[1]) == F{4, 4, 4, 5, 5, 5});
  // indexing="ij": X = [[1,1],[2,2],[3,3]], Y = [[4,5],[4,5],[4,5]]
  const auto ij = meshgrid({x, y}, "ij");
  CHECK(ij[0].shape() == Shape{3, 2});
  CHECK(fv(ij[0]) == F{1, 1, 2, 2, 3, 3});
  CHECK(fv(ij[1]) == F{4, 5, 4, 5, 4, 5});
  // three inputs, "xy": shape [n1, n0, n2]
  CHECK(meshgrid({x, y, constant<float>({7, 8, 9, 10}, {4})})[2].shape() == Shape{2, 3, 4});
  CHECK(meshgrid({x})[0].shape() == Shape{3});
  CHECK(meshgrid({}).empty());
  CHECK_THROWS_AS(meshgrid({x, y}, "xz"), ValueError);
  CHECK_THROWS_AS(meshgrid({x, constant<double>({1}, {1})}), DTypeError);
}

TEST_CASE("pad's REFLECT and SYMMETRIC modes follow tf.pad", "[indexing][pad]") {
  // TF's documentation: t = [[1, 2, 3], [4, 5, 6]], paddings [[1, 1], [2, 2]]
  const Tensor t = constant<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<std::array<std::int64_t, 2>> p{{1, 1}, {2, 2}};
  CHECK(fv(pad(t, p, "CONSTANT")) == F{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 4, 5, 6, 0, 0,
                                       0, 0, 0, 0, 0, 0, 0});
  CHECK(fv(pad(t, p, "REFLECT")) == F{6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4,
                                      3, 2, 1, 2, 3, 2, 1});
  CHECK(fv(pad(t, p, "SYMMETRIC")) == F{2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5, 6, 6, 5,
                                        5, 4, 4, 5, 6, 6, 5});
  // any case; CONSTANT takes the value; the value-only overload still works
  CHECK(fv(pad(constant<float>({1, 2}, {2}), {{1, 0}}, "constant", 7)) == F{7, 1, 2});
  CHECK(fv(pad(constant<float>({1, 2}, {2}), {{0, 1}}, 9.0)) == F{1, 2, 9});
  CHECK(fv(pad(constant<float>({1, 2, 3}, {3}), {{2, 1}}, "reflect")) == F{3, 2, 1, 2, 3, 2});
  // SYMMETRIC may pad by the whole axis, REFLECT by one element less
  CHECK(fv(pad(constant<float>({1, 2, 3}, {3}), {{3, 0}}, "SYMMETRIC")) == F{3, 2, 1, 1, 2, 3});
  check_error<ValueError>([&] { pad(constant<float>({1, 2, 3}, {3}), {{3, 0}}, "REFLECT"); },
                          {"pad", "REFLECT", "3", "less than"});
  check_error<ValueError>([&] { pad(constant<float>({1, 2, 3}, {3}), {{0, 4}}, "SYMMETRIC"); },
                          {"pad", "SYMMETRIC", "4", "at most"});
  CHECK_THROWS_AS(pad(t, p, "WRAP"), ValueError);
  CHECK_THROWS_AS(pad(t, {{1, 1}}, "REFLECT"), ShapeError);
  CHECK_THROWS_AS(pad(t, {{-1, 0}, {0, 0}}, "SYMMETRIC"), ValueError);
  // empty axes pad by zero; a non-contiguous input
  CHECK(pad(zeros({0, 2}), {{0, 0}, {1, 1}}, "REFLECT").shape() == Shape{0, 4});
  // transpose(t) = [[1,4],[2,5],[3,6]], SYMMETRIC by [[0,0],[1,0]]: [[1,1,4],[2,2,5],[3,3,6]]
  CHECK(fv(pad(transpose(t), {{0, 0}, {1, 0}}, "SYMMETRIC")) == F{1, 1, 4, 2, 2, 5, 3, 3, 6});
}

TEST_CASE("mirror padding folds the gradient back onto the mirrored elements", "[indexing][pad][gradient]") {
  // REFLECT [a, b, c] by (1, 2) = [b, a, b, c, b, a]: a appears 2 times, b 3, c 1.
  // SYMMETRIC by (1, 2) = [a, a, b, c, c, b]: each appears twice.
  const Tensor x = f64({1, 2, 3}, {3});
  const std::vector<std::pair<const char*, std::vector<double>>> cases{{"REFLECT", {2, 3, 1}},
                                                                       {"SYMMETRIC", {2, 2, 2}}};
  for (const auto& [mode, expected] : cases) {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(pad(x, {{1, 2}}, mode)), x);
    CHECK(g.to_vector<double>() == expected);
  }
}

TEST_CASE("reverse, roll, repeat, meshgrid and mirror pads pass gradient checks", "[indexing][gradient]") {
  const Tensor x = wavy({3, 4});
  check_gradients([](const V& xs) { return reverse(xs[0], {0, -1}); }, {x});
  check_gradients([](const V& xs) { return reverse(transpose(xs[0]), {1}); }, {x});
  check_gradients([](const V& xs) { return roll(xs[0], {1, -3}, {0, 1}); }, {x});
  check_gradients([](const V& xs) { return repeat(xs[0], {2, 0, 1, 3}, 1); }, {x});
  check_gradients([](const V& xs) { return repeat(xs[0], 2); }, {x});
  check_gradients([](const V& xs) {
    const auto g = meshgrid({xs[0], xs[1]});
    return g[0] * g[1];
  }, {wavy({3}), wavy({2}, 1.3)});
  check_gradients([](const V& xs) { return pad(xs[0], {{2, 1}, {3, 3}}, "REFLECT"); }, {x});
  check_gradients([](const V& xs) { return pad(xs[0], {{3, 0}, {1, 4}}, "SYMMETRIC"); }, {x});
}
