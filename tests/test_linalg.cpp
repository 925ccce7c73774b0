// matmul: values against a naive triple loop, transposes, batching and batch broadcasting,
// views, errors, int32, and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

// c[m,n] = sum_k a[m,k] b[k,n], row-major, accumulated in double.
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b,
                                 std::int64_t m, std::int64_t k, std::int64_t n) {
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += a[static_cast<std::size_t>(i * k + p)] * b[static_cast<std::size_t>(p * n + j)];
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  return c;
}

std::vector<double> transpose2d(const std::vector<double>& a, std::int64_t rows,
                                std::int64_t cols) {
  std::vector<double> t(a.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      t[static_cast<std::size_t>(j * rows + i)] = a[static_cast<std::size_t>(i * cols + j)];
  return t;
}

// Small integers in [-3, 3]: every product and sum of a 7x5x3 product is exact in float32.
std::vector<double> small_ints(std::int64_t n, int salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = double((i * 5 + salt) % 7) - 3;
  return v;
}

// Irrational-looking values for float64: sin(1.3 i + salt).
std::vector<double> wavy(std::int64_t n, double salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(1.3 * double(i) + salt);
  return v;
}

std::vector<double> slice_of(const std::vector<double>& v, std::int64_t start, std::int64_t len) {
  return {v.begin() + start, v.begin() + start + len};
}

void check_close(const Tensor& t, const std::vector<double>& expected, double eps) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).epsilon(eps).margin(eps));
  }
}

Tensor f64(const std::vector<double>& v, Shape s) { return constant(v, std::move(s), DType::float64); }

}  // namespace

TEST_CASE("matmul of odd-sized 7x5 by 5x3 matrices equals the naive loop", "[linalg][matmul]") {
  SECTION("float32 with small integers: exact") {
    const auto av = small_ints(35, 1), bv = small_ints(15, 4);
    const Tensor a = constant(av, {7, 5}, DType::float32);
    const Tensor b = constant(bv, {5, 3}, DType::float32);
    const Tensor c = matmul(a, b);
    CHECK(c.dtype() == DType::float32);
    CHECK(c.shape() == Shape{7, 3});
    CHECK(c.to_vector<double>() == naive_matmul(av, bv, 7, 5, 3));
  }
  SECTION("float64") {
    const auto av = wavy(35, 0.1), bv = wavy(15, 0.7);
    const Tensor c = matmul(f64(av, {7, 5}), f64(bv, {5, 3}));
    CHECK(c.dtype() == DType::float64);
    CHECK(c.shape() == Shape{7, 3});
    check_close(c, naive_matmul(av, bv, 7, 5, 3), 1e-13);
  }
  SECTION("float32 with fractional values") {
    const auto av = wavy(35, 0.1), bv = wavy(15, 0.7);
    const Tensor c = matmul(constant(av, {7, 5}, DType::float32), constant(bv, {5, 3}, DType::float32));
    // the reference from the float-rounded inputs
    const auto ar = constant(av, {7, 5}, DType::float32).to_vector<double>();
    const auto br = constant(bv, {5, 3}, DType::float32).to_vector<double>();
    check_close(c, naive_matmul(ar, br, 7, 5, 3), 1e-5);
  }
  SECTION("a hand-computed 2x2") {
    // [[1,2],[3,4]] x [[5,6],[7,8]] = [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]] = [[19,22],[43,50]]
    const Tensor a = constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
    const Tensor b = constant({5.f, 6.f, 7.f, 8.f}, {2, 2});
    CHECK(matmul(a, b).to_vector<float>() == std::vector<float>{19, 22, 43, 50});
  }
  SECTION("larger than a cache block: 67x129 by 129x33") {
    const auto av = small_ints(67 * 129, 2), bv = small_ints(129 * 33, 3);
    const Tensor c = matmul(constant(av, {67, 129}, DType::float32), constant(bv, {129, 33}, DType::float32));
    CHECK(c.to_vector<double>() == naive_matmul(av, bv, 67, 129, 33));  // sums of <= 129*9: exact
  }
}

TEST_CASE("matmul transpose_a and transpose_b transpose the last two axes", "[linalg][matmul]") {
  const auto av = wavy(35, 0.2), bv = wavy(15, 0.9);  // a [7,5], b [5,3]
  const auto expected = naive_matmul(av, bv, 7, 5, 3);
  const Tensor a = f64(av, {7, 5}), b = f64(bv, {5, 3});
  const Tensor at = f64(transpose2d(av, 7, 5), {5, 7});  // a^T stored contiguously
  const Tensor bt = f64(transpose2d(bv, 5, 3), {3, 5});
  check_close(matmul(at, b, true, false), expected, 1e-13);
  check_close(matmul(a, bt, false, true), expected, 1e-13);
  check_close(matmul(at, bt, true, true), expected, 1e-13);
  CHECK(matmul(at, bt, true, true).shape() == Shape{7, 3});
}

TEST_CASE("matmul accepts transposed and sliced views", "[linalg][matmul][views]") {
  const auto av = wavy(35, 0.3), bv = wavy(15, 1.1);
  const auto expected = naive_matmul(av, bv, 7, 5, 3);
  // a as a transposed view of a^T, b as a transposed view of b^T
  const Tensor a_view = transpose(f64(transpose2d(av, 7, 5), {5, 7}));
  const Tensor b_view = transpose(f64(transpose2d(bv, 5, 3), {3, 5}));
  REQUIRE_FALSE(a_view.is_contiguous());
  check_close(matmul(a_view, b_view), expected, 1e-13);
  check_close(matmul(a_view, f64(bv, {5, 3})), expected, 1e-13);
  // a view with transpose_a: transpose(a) is [5,7], its transpose again is a
  check_close(matmul(transpose(f64(av, {7, 5})), f64(bv, {5, 3}), true), expected, 1e-13);
  // a column slice: rows of a [7,5] padded to [7,6] and sliced back
  std::vector<double> padded;
  for (int i = 0; i < 7; ++i) {
    const auto row = slice_of(av, i * 5, 5);
    padded.insert(padded.end(), row.begin(), row.end());
    padded.push_back(99.0);
  }
  const Tensor a_slice = slice(f64(padded, {7, 6}), {0, 0}, {7, 5});
  check_close(matmul(a_slice, f64(bv, {5, 3})), expected, 1e-13);
}

TEST_CASE("batched matmul multiplies matching batches and broadcasts batch axes",
          "[linalg][matmul][batched]") {
  const auto av = wavy(2 * 3 * 4, 0.4), bv = wavy(2 * 4 * 5, 1.7);
  SECTION("[2,3,4] x [2,4,5]") {
    const Tensor c = matmul(f64(av, {2, 3, 4}), f64(bv, {2, 4, 5}));
    CHECK(c.shape() == Shape{2, 3, 5});
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i) {
      auto ci = naive_matmul(slice_of(av, i * 12, 12), slice_of(bv, i * 20, 20), 3, 4, 5);
      expected.insert(expected.end(), ci.begin(), ci.end());
    }
    check_close(c, expected, 1e-13);
  }
  SECTION("[2,3,4] x [4,5]: the matrix is shared by every batch") {
    const auto b2 = slice_of(bv, 0, 20);
    const Tensor c = matmul(f64(av, {2, 3, 4}), f64(b2, {4, 5}));
    CHECK(c.shape() == Shape{2, 3, 5});
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i) {
      auto ci = naive_matmul(slice_of(av, i * 12, 12), b2, 3, 4, 5);
      expected.insert(expected.end(), ci.begin(), ci.end());
    }
    check_close(c, expected, 1e-13);
  }
  SECTION("[3,4] x [2,4,5]") {
    const auto a2 = slice_of(av, 0, 12);
    const Tensor c = matmul(f64(a2, {3, 4}), f64(bv, {2, 4, 5}));
    CHECK(c.shape() == Shape{2, 3, 5});
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i) {
      auto ci = naive_matmul(a2, slice_of(bv, i * 20, 20), 3, 4, 5);
      expected.insert(expected.end(), ci.begin(), ci.end());
    }
    check_close(c, expected, 1e-13);
  }
  SECTION("[2,1,3,4] x [3,4,5] -> [2,3,3,5]") {
    const auto a4 = wavy(2 * 3 * 4, 0.4);
    const auto b3 = wavy(3 * 4 * 5, 2.1);
    const Tensor c = matmul(f64(a4, {2, 1, 3, 4}), f64(b3, {3, 4, 5}));
    CHECK(c.shape() == Shape{2, 3, 3, 5});
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        auto cij = naive_matmul(slice_of(a4, i * 12, 12), slice_of(b3, j * 20, 20), 3, 4, 5);
        expected.insert(expected.end(), cij.begin(), cij.end());
      }
    check_close(c, expected, 1e-13);
  }
  SECTION("batched with transpose_b") {
    // b^T batches [2,5,4]
    std::vector<double> bt;
    for (int i = 0; i < 2; ++i) {
      auto t = transpose2d(slice_of(bv, i * 20, 20), 4, 5);
      bt.insert(bt.end(), t.begin(), t.end());
    }
    const Tensor c1 = matmul(f64(av, {2, 3, 4}), f64(bv, {2, 4, 5}));
    const Tensor c2 = matmul(f64(av, {2, 3, 4}), f64(bt, {2, 5, 4}), false, true);
    check_close(c2, c1.to_vector<double>(), 1e-13);
  }
}

TEST_CASE("matmul of int32 matrices is exact int32", "[linalg][matmul][dtype]") {
  const Tensor a = constant({1, 2, 3, 4}, {2, 2});
  const Tensor b = constant({5, 6, 7, 8}, {2, 2});
  const Tensor c = matmul(a, b);
  CHECK(c.dtype() == DType::int32);
  CHECK(c.to_vector<int>() == std::vector<int>{19, 22, 43, 50});  // see the float 2x2 above
  // 3x2 x 2x1: [[1,-2],[0,5],[7,7]] x [[3],[4]] = [[3-8],[0+20],[21+28]]
  CHECK(matmul(constant({1, -2, 0, 5, 7, 7}, {3, 2}), constant({3, 4}, {2, 1})).to_vector<int>() ==
        std::vector<int>{-5, 20, 49});
}

TEST_CASE("matmul with an empty inner dimension gives zeros", "[linalg][matmul]") {
  const Tensor c = matmul(zeros({2, 0}), zeros({0, 3}));
  CHECK(c.shape() == Shape{2, 3});
  CHECK(c.to_vector<float>() == std::vector<float>(6, 0.f));
}

TEST_CASE("matmul shape and dtype errors name the op and both shapes", "[linalg][errors]") {
  CHECK_THROWS_AS(matmul(zeros({64, 10}), zeros({11, 1})), ShapeError);
  CHECK_THROWS_WITH(matmul(zeros({64, 10}), zeros({11, 1})),
                    Contains("matmul") && Contains("[64,10]") && Contains("[11,1]"));
  // with transpose_b the inner dimension of b is its last one: [2,3] x [4,3]^T is fine,
  // [2,3] x [3,4]^T is not
  CHECK(matmul(zeros({2, 3}), zeros({4, 3}), false, true).shape() == Shape{2, 4});
  CHECK_THROWS_AS(matmul(zeros({2, 3}), zeros({3, 4}), false, true), ShapeError);
  // rank < 2
  CHECK_THROWS_AS(matmul(zeros({3}), zeros({3, 2})), ShapeError);
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({3, 2})), Contains("matmul") && Contains("[3]"));
  CHECK_THROWS_AS(matmul(zeros({2, 3}), zeros({3})), ShapeError);
  CHECK_THROWS_AS(matmul(constant(1.0), constant(1.0)), ShapeError);
  // batch axes that do not broadcast: 2 vs 3
  CHECK_THROWS_AS(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), ShapeError);
  CHECK_THROWS_WITH(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})),
                    Contains("[2,3,4]") && Contains("[3,4,5]"));
  // dtypes
  CHECK_THROWS_AS(matmul(zeros({2, 2}), zeros({2, 2}, DType::float64)), DTypeError);
  CHECK_THROWS_WITH(matmul(zeros({2, 2}), zeros({2, 2}, DType::float64)),
                    Contains("matmul") && Contains("float32") && Contains("float64"));
}

// ---- gradients ------------------------------------------------------------------------------

TEST_CASE("matmul passes gradient checks in 2-D and with transposes", "[linalg][gradient]") {
  const Tensor a = f64(wavy(35, 0.5), {7, 5});
  const Tensor b = f64(wavy(15, 1.5), {5, 3});
  auto mm = [](bool ta, bool tb) {
    return [ta, tb](const std::vector<Tensor>& xs) { return matmul(xs[0], xs[1], ta, tb); };
  };
  check_gradients(mm(false, false), {a, b});
  check_gradients(mm(true, false), {f64(wavy(35, 0.5), {5, 7}), b});
  check_gradients(mm(false, true), {a, f64(wavy(15, 1.5), {3, 5})});
  check_gradients(mm(true, true), {f64(wavy(35, 0.5), {5, 7}), f64(wavy(15, 1.5), {3, 5})});
  // a matrix-vector product and a vector-vector outer product
  check_gradients(mm(false, false), {a, f64(wavy(5, 2.0), {5, 1})});
  check_gradients(mm(false, false), {f64(wavy(4, 0.2), {4, 1}), f64(wavy(3, 0.3), {1, 3})});
  // the same matrix on both sides: x^T x
  check_gradients([](const std::vector<Tensor>& xs) { return matmul(xs[0], xs[0], true, false); },
                  {a});
}

TEST_CASE("matmul passes gradient checks when batched and batch-broadcast",
          "[linalg][gradient][batched]") {
  auto mm = [](bool ta, bool tb) {
    return [ta, tb](const std::vector<Tensor>& xs) { return matmul(xs[0], xs[1], ta, tb); };
  };
  const Tensor a = f64(wavy(24, 0.1), {2, 3, 4});
  check_gradients(mm(false, false), {a, f64(wavy(40, 0.8), {2, 4, 5})});
  // b [4,5] is shared by both batches: its gradient sums over them
  check_gradients(mm(false, false), {a, f64(wavy(20, 0.8), {4, 5})});
  // a [3,4] shared
  check_gradients(mm(false, false), {f64(wavy(12, 0.1), {3, 4}), f64(wavy(40, 0.8), {2, 4, 5})});
  // [2,1,3,4] x [3,4,5]
  check_gradients(mm(false, false), {f64(wavy(24, 0.1), {2, 1, 3, 4}), f64(wavy(60, 0.8), {3, 4, 5})});
  // batched with transposes: a^T [2,4,3], b^T [5,4] broadcast
  check_gradients(mm(true, true), {f64(wavy(24, 0.1), {2, 4, 3}), f64(wavy(20, 0.8), {5, 4})});
}

TEST_CASE("matmul passes gradient checks on transposed and sliced views", "[linalg][gradient][views]") {
  // inputs that are views
  check_gradients([](const std::vector<Tensor>& xs) { return matmul(xs[0], xs[1]); },
                  {transpose(f64(wavy(35, 0.5), {5, 7})), transpose(f64(wavy(15, 1.5), {3, 5}))});
  // views made inside f
  check_gradients(
      [](const std::vector<Tensor>& xs) {
        return matmul(transpose(xs[0]), slice(xs[1], {1, 0}, {5, 3}));
      },
      {f64(wavy(35, 0.5), {5, 7}), f64(wavy(21, 1.5), {7, 3})});
  check_gradients(
      [](const std::vector<Tensor>& xs) { return matmul(transpose(xs[0], {0, 2, 1}), xs[1]); },
      {f64(wavy(24, 0.1), {2, 4, 3}), f64(wavy(20, 0.8), {4, 5})});
}

// ---- half precision ----------------------------------------------------------------------------

TEST_CASE("matmul of float16 and bfloat16 is the float32 product rounded once", "[linalg][matmul][dtype]") {
  for (const DType dt : {DType::float16, DType::bfloat16}) {
    INFO(name(dt));
    // a batch of two [3,4] matrices times one broadcast [4,5]
    const Tensor a = f64(wavy(24, 0.3), {2, 3, 4}).astype(dt);
    const Tensor b = f64(wavy(20, 2.1), {4, 5}).astype(dt);
    const Tensor c = matmul(a, b);
    CHECK(c.dtype() == dt);
    CHECK(c.shape() == Shape{2, 3, 5});
    const Tensor want = matmul(a.astype(DType::float32), b.astype(DType::float32)).astype(dt);
    CHECK(c.to_vector<float>() == want.to_vector<float>());
    // and within the half type's rounding of the exact product of the rounded inputs
    const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    const auto c0 = naive_matmul(slice_of(av, 0, 12), bv, 3, 4, 5);
    const auto cv = c.to_vector<double>();
    for (std::size_t i = 0; i < c0.size(); ++i) {
      INFO("element " << i);
      CHECK(cv[i] == Approx(c0[i]).epsilon(dt == DType::float16 ? 2e-3 : 1e-2).margin(1e-2));
    }
    // transposes take the same path
    const Tensor ct = matmul(b, a, true, true);
    CHECK(ct.to_vector<float>() ==
          matmul(b.astype(DType::float32), a.astype(DType::float32), true, true).astype(dt).to_vector<float>());
  }
}

TEST_CASE("matmul gradients of float16 operands are the float32 gradients rounded", "[linalg][gradient][dtype]") {
  const Tensor a = f64(wavy(12, 0.7), {3, 4}).astype(DType::float16);
  const Tensor b = f64(wavy(8, 1.9), {4, 2}).astype(DType::float16);
  const Tensor w = f64(small_ints(6, 1), {3, 2});  // exact in float16
  GradientTape tape;
  tape.watch(a);
  tape.watch(b);
  const Tensor loss = reduce_sum(matmul(a, b).astype(DType::float64) * w);
  const auto grads = tape.gradient(loss, std::vector<Tensor>{a, b});
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].dtype() == DType::float16);
  CHECK(grads[1].dtype() == DType::float16);
  const Tensor a32 = a.astype(DType::float32), b32 = b.astype(DType::float32), w32 = w.astype(DType::float32);
  CHECK(grads[0].to_vector<float>() == matmul(w32, b32, false, true).astype(DType::float16).to_vector<float>());
  CHECK(grads[1].to_vector<float>() == matmul(a32, w32, true, false).astype(DType::float16).to_vector<float>());
}
