// Scans: cumsum and cumprod (tf.math.cumsum / cumprod) — values by hand and against a direct
// loop, exclusive / reverse, axes, views, dtypes, empty tensors, errors and gradients.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"
#include "threads_guard.hpp"

using namespace keel;

namespace {

using D = std::vector<double>;
D dv(const Tensor& t) { return t.to_vector<double>(); }
Tensor f64(const D& v, Shape s) { return constant(v, std::move(s), DType::float64); }

// sin(1.3 i + salt) + 1.2: distinct values away from zero (cumprod's products stay moderate)
Tensor wavy(Shape s, double salt = 0.4) {
  D v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.3 * double(i) + salt) + 1.2;
  return f64(v, std::move(s));
}

// The scan straight from its definition, on [outer, n, inner] row-major data:
// y[o, j, i] = combine of x[o, t, i] over t <= j (t < j when exclusive; t >= j / t > j when reverse).
D reference_scan(const D& x, std::int64_t outer, std::int64_t n, std::int64_t inner, bool product, bool exclusive,
                 bool reverse) {
  D y(x.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = product ? 1 : 0;
        for (std::int64_t t = 0; t < n; ++t) {
          const bool in = reverse ? (exclusive ? t > j : t >= j) : (exclusive ? t < j : t <= j);
          if (!in) continue;
          const double v = x[static_cast<std::size_t>((o * n + t) * inner + i)];
          acc = product ? acc * v : acc + v;
        }
        y[static_cast<std::size_t>((o * n + j) * inner + i)] = acc;
      }
  return y;
}

void check_close(const D& got, const D& want, double tol = 1e-9) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

}  // namespace

TEST_CASE("cumsum of a vector: inclusive, exclusive, reverse and both", "[scans][cumsum]") {
  const Tensor x = f64({1, 2, 3, 4}, {4});
  // running sums 1, 1+2, 1+2+3, 1+2+3+4
  CHECK(dv(cumsum(x)) == D{1, 3, 6, 10});
  // exclusive: each sum leaves out its own element, so it starts at 0
  CHECK(dv(cumsum(x, 0, true)) == D{0, 1, 3, 6});
  // reverse: sums of the suffixes 1+2+3+4, 2+3+4, 3+4, 4
  CHECK(dv(cumsum(x, 0, false, true)) == D{10, 9, 7, 4});
  // exclusive and reverse: the suffixes after each element
  CHECK(dv(cumsum(x, 0, true, true)) == D{9, 7, 4, 0});
}

TEST_CASE("cumprod of a vector: inclusive, exclusive, reverse and both", "[scans][cumprod]") {
  const Tensor x = f64({1, 2, 3, 4}, {4});
  CHECK(dv(cumprod(x)) == D{1, 2, 6, 24});                // 1, 1*2, 1*2*3, 1*2*3*4
  CHECK(dv(cumprod(x, 0, true)) == D{1, 1, 2, 6});        // the empty product first
  CHECK(dv(cumprod(x, 0, false, true)) == D{24, 24, 12, 4});  // 1*2*3*4, 2*3*4, 3*4, 4
  CHECK(dv(cumprod(x, 0, true, true)) == D{24, 12, 4, 1});
  // a zero stops every later product
  CHECK(dv(cumprod(f64({2, 0, 3}, {3}))) == D{2, 0, 0});
}

TEST_CASE("cumsum along each axis of a matrix, negative axes counting from the end", "[scans][cumsum]") {
  // x = [[1, 2, 3],
  //      [4, 5, 6]]
  const Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  // axis 0: the second row becomes 1+4, 2+5, 3+6
  CHECK(dv(cumsum(x, 0)) == D{1, 2, 3, 5, 7, 9});
  CHECK(dv(cumsum(x, -2)) == D{1, 2, 3, 5, 7, 9});
  // axis 1: each row's running sums 1, 3, 6 and 4, 9, 15
  CHECK(dv(cumsum(x, 1)) == D{1, 3, 6, 4, 9, 15});
  CHECK(dv(cumsum(x, -1)) == D{1, 3, 6, 4, 9, 15});
  // axis 1 reversed: 6, 5, 3 and 15, 11, 6
  CHECK(dv(cumsum(x, -1, false, true)) == D{6, 5, 3, 15, 11, 6});
  CHECK(cumsum(x, 1).shape() == Shape{2, 3});
}

TEST_CASE("scans of a 3-d tensor match the definition for every axis and flag", "[scans]") {
  const Tensor x = wavy({3, 4, 5});
  const D xs = dv(x);
  const std::int64_t dims[3] = {3, 4, 5};
  for (int axis = 0; axis < 3; ++axis)
    for (int flags = 0; flags < 4; ++flags) {
      const bool exclusive = flags & 1, reverse = flags & 2;
      std::int64_t outer = 1, inner = 1;
      for (int d = 0; d < axis; ++d) outer *= dims[d];
      for (int d = axis + 1; d < 3; ++d) inner *= dims[d];
      INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
      check_close(dv(cumsum(x, axis, exclusive, reverse)),
                  reference_scan(xs, outer, dims[axis], inner, false, exclusive, reverse));
      check_close(dv(cumprod(x, axis - 3, exclusive, reverse)),
                  reference_scan(xs, outer, dims[axis], inner, true, exclusive, reverse));
    }
}

TEST_CASE("scans of large tensors split across threads and column blocks", "[scans]") {
  // [3, 5, 3000]: 45000 elements (parallel), 3000 columns per row (several column blocks)
  const Tensor x = random::normal({3, 5, 3000}, 0, 1, DType::float64);
  check_close(dv(cumsum(x, 1)), reference_scan(dv(x), 3, 5, 3000, false, false, false));
  check_close(dv(cumsum(x, 1, true, true)), reference_scan(dv(x), 3, 5, 3000, false, true, true));
  // one long row: [40000] along axis 0, against a running double sum
  const Tensor v = random::uniform({40000}, 0, 1, DType::float64);
  const D vs = dv(v);
  D want(vs.size());
  double s = 0;
  for (std::size_t i = 0; i < vs.size(); ++i) want[i] = s += vs[i];
  check_close(dv(cumsum(v)), want);
}

TEST_CASE("scans down the rows of one wide block match the definition at 1 and 2 threads", "[scans]") {
  // [40, 3000] along axis 0: one block whose rows (24000 bytes) two threads split into column
  // strips; [40, 300] (2400 bytes a row) stays with one thread.
  const keel_test::ThreadsGuard guard;
  for (const std::int64_t cols : {3000, 300})
    for (const int threads : {1, 2}) {
      config::set_num_threads(threads);
      INFO(cols << " columns, " << threads << " threads");
      const Tensor x = wavy({40, cols}, 0.1 * double(cols));
      const D xs = dv(x);
      for (int flags = 0; flags < 4; ++flags) {
        const bool exclusive = flags & 1, reverse = flags & 2;
        check_close(dv(cumsum(x, 0, exclusive, reverse)), reference_scan(xs, 1, 40, cols, false, exclusive, reverse));
        check_close(dv(cumprod(x, 0, exclusive, reverse)), reference_scan(xs, 1, 40, cols, true, exclusive, reverse));
      }
    }
}

// One running value per row in T, in the scan's direction: the order of additions (or
// multiplications) the kernel promises, so its result is compared bit for bit.
template <class T>
std::vector<T> running_rows(const std::vector<T>& x, std::int64_t rows, std::int64_t n, bool product, bool exclusive,
                            bool reverse) {
  std::vector<T> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    T acc = product ? T(1) : T(0);
    for (std::int64_t s = 0; s < n; ++s) {
      const auto at = static_cast<std::size_t>(r * n + (reverse ? n - 1 - s : s));
      if (exclusive) y[at] = acc;
      acc = product ? acc * x[at] : acc + x[at];
      if (!exclusive) y[at] = acc;
    }
  }
  return y;
}

TEMPLATE_TEST_CASE("scans along the last axis of many rows give the bits of one running value per row", "[scans]",
                   float, double) {
  // 7 rows: a group of four rows run together and three on their own; rows of 65 (just past the
  // leads of the grouped rows), 70 and 1024 elements (rows 4 KiB apart in float32).
  const keel_test::ThreadsGuard guard;
  const DType dtype = std::is_same_v<TestType, float> ? DType::float32 : DType::float64;
  for (const std::int64_t n : {65, 70, 1024})
    for (const int threads : {1, 2}) {
      config::set_num_threads(threads);
      INFO(n << " columns, " << threads << " threads");
      const Tensor x = (wavy({7, n}, 0.3 * double(n)) * 0.9).astype(dtype);
      const auto xs = x.to_vector<TestType>();
      for (int flags = 0; flags < 4; ++flags) {
        const bool exclusive = flags & 1, reverse = flags & 2;
        INFO("exclusive " << exclusive << ", reverse " << reverse);
        CHECK(cumsum(x, 1, exclusive, reverse).to_vector<TestType>() ==
              running_rows<TestType>(xs, 7, n, false, exclusive, reverse));
        CHECK(cumprod(x, 1, exclusive, reverse).to_vector<TestType>() ==
              running_rows<TestType>(xs, 7, n, true, exclusive, reverse));
      }
    }
}

TEST_CASE("scans read non-contiguous inputs in their logical order", "[scans]") {
  // x = [[1, 2, 3], [4, 5, 6]], transpose = [[1, 4], [2, 5], [3, 6]]
  const Tensor t = transpose(f64({1, 2, 3, 4, 5, 6}, {2, 3}));
  REQUIRE_FALSE(t.is_contiguous());
  CHECK(dv(cumsum(t, 0)) == D{1, 4, 3, 9, 6, 15});   // columns 1, 1+2, 1+2+3 and 4, 4+5, 4+5+6
  CHECK(dv(cumprod(t, 1)) == D{1, 4, 2, 10, 3, 18});  // rows 1, 1*4; 2, 2*5; 3, 3*6
  // every other element of [1..8]: [1, 3, 5, 7]
  const Tensor strided = reshape(f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}), {4, 2});
  const Tensor column = transpose(strided)[0];
  REQUIRE_FALSE(column.is_contiguous());
  CHECK(dv(cumsum(column)) == D{1, 4, 9, 16});
}

TEST_CASE("scans keep integer dtypes, and integer overflow wraps", "[scans]") {
  const Tensor i32 = constant(std::vector<std::int32_t>{3, -1, 4, -1}, {4});
  CHECK(cumsum(i32).dtype() == DType::int32);
  CHECK(cumsum(i32).to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 2, 6, 5});
  const Tensor i64 = constant(std::vector<std::int64_t>{2, 3, 4}, {3});
  CHECK(cumprod(i64, 0, true).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 6});
  const Tensor u8 = constant(std::vector<std::uint8_t>{1, 2, 3}, {3});
  CHECK(cumsum(u8, 0, false, true).to_vector<std::int64_t>() == std::vector<std::int64_t>{6, 5, 3});
  // INT32_MAX + 1 wraps to INT32_MIN (two's complement), as TensorFlow's kernels give
  const Tensor big = constant(std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::max(), 1}, {2});
  CHECK(cumsum(big).to_vector<std::int32_t>()[1] == std::numeric_limits<std::int32_t>::min());
  // float16 is computed in float32 and rounded: small integers are exact
  const Tensor h = constant(std::vector<float>{1, 2, 3}, {3}).astype(DType::float16);
  CHECK(cumsum(h).dtype() == DType::float16);
  CHECK(cumsum(h).to_vector<float>() == std::vector<float>{1, 3, 6});
}

TEST_CASE("scans of empty tensors and size-1 axes", "[scans]") {
  CHECK(cumsum(zeros({0})).shape() == Shape{0});
  CHECK(cumprod(zeros({2, 0, 3}), 1, true, true).shape() == Shape{2, 0, 3});
  CHECK(cumsum(zeros({2, 3, 0}), -1).shape() == Shape{2, 3, 0});
  // a size-1 axis: inclusive is the input, exclusive the identity
  const Tensor x = f64({5, 7}, {2, 1});
  CHECK(dv(cumsum(x, 1)) == D{5, 7});
  CHECK(dv(cumsum(x, 1, true)) == D{0, 0});
  CHECK(dv(cumprod(x, -1, true, true)) == D{1, 1});
}

TEST_CASE("scans reject bad axes and dtypes", "[scans][errors]") {
  const Tensor x = zeros({2, 3});
  check_error<ValueError>([&] { cumsum(x, 2); }, {"cumsum", "axis 2", "rank 2"});
  check_error<ValueError>([&] { cumprod(x, -3); }, {"cumprod", "axis -3"});
  check_error<ValueError>([&] { cumsum(constant(1.0)); }, {"cumsum", "rank 0"});
  check_error<DTypeError>([&] { cumsum(constant(std::vector<bool>{true, false}, {2})); }, {"cumsum", "bool"});
  CHECK_THROWS_AS(cumsum(Tensor()), ValueError);
}

TEST_CASE("cumsum gradients: the scan of g run the other way (float64 finite differences)", "[scans][gradients]") {
  for (int axis : {0, 1, -1})
    for (int flags = 0; flags < 4; ++flags) {
      const bool exclusive = flags & 1, reverse = flags & 2;
      INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
      check_gradients([=](const std::vector<Tensor>& in) { return cumsum(in[0], axis, exclusive, reverse); },
                      {wavy({3, 4})});
    }
  // through a transposed view
  check_gradients([](const std::vector<Tensor>& in) { return cumsum(transpose(in[0]), 1, true); }, {wavy({3, 4})});
  // by hand: L = sum(cumsum([a, b, c])) = 3a + 2b + c
  GradientTape tape;
  const Tensor x = f64({1, 2, 3}, {3});
  tape.watch(x);
  const Tensor g = tape.gradient(reduce_sum(cumsum(x)), x);
  CHECK(dv(g) == D{3, 2, 1});
}

TEST_CASE("cumprod gradients, also at zero entries (float64 finite differences)", "[scans][gradients]") {
  for (int axis : {0, -1})
    for (int flags = 0; flags < 4; ++flags) {
      const bool exclusive = flags & 1, reverse = flags & 2;
      INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
      check_gradients([=](const std::vector<Tensor>& in) { return cumprod(in[0], axis, exclusive, reverse); },
                      {wavy({3, 4})});
      // one zero per row at different places, and a row with two zeros
      const Tensor z = f64({0.5, 0, 1.5, 2, 1.2, -0.7, 0.9, 0, 0, 1.1, 0, 1.3}, {3, 4});
      check_gradients([=](const std::vector<Tensor>& in) { return cumprod(in[0], axis, exclusive, reverse); }, {z});
    }
  // by hand: x = [2, 0, 3], y = [x0, x0 x1, x0 x1 x2], L = sum(y):
  //   dL/dx0 = 1 + x1 + x1 x2 = 1, dL/dx1 = x0 + x0 x2 = 8, dL/dx2 = x0 x1 = 0
  // (TensorFlow's rule, a division by x, would give 0 or NaN for the zero entry instead of 8)
  GradientTape tape;
  const Tensor x = f64({2, 0, 3}, {3});
  tape.watch(x);
  const Tensor g = tape.gradient(reduce_sum(cumprod(x)), x);
  CHECK(dv(g) == D{1, 8, 0});
}

TEST_CASE("cumprod second derivatives by nested tapes", "[scans][gradients]") {
  // y = cumprod([a, b]) = [a, ab]; L = sum(y) = a + ab; dL/da = 1 + b, d2L/da db = 1
  const Tensor x = f64({2, 3}, {2});
  GradientTape outer;
  outer.watch(x);
  Tensor first;
  {
    GradientTape inner;
    inner.watch(x);
    first = inner.gradient(reduce_sum(cumprod(x)), x);  // [1 + b, a] = [4, 2]
  }
  CHECK(dv(first) == D{4, 2});
  // d/dx of sum(first) = d/dx (1 + b + a) = [1, 1]
  const Tensor second = outer.gradient(reduce_sum(first), x);
  CHECK(dv(second) == D{1, 1});
}
