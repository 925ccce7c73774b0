// keel::interop (keel/interop/xtensor.hpp): zero-copy xtensor views over keel tensors and
// tensors from xtensor expressions. Built as C++17, the mode xtensor 0.24 needs with g++ 12, so
// this file includes only the keel headers the interop header promises to keep C++17-clean.
#include <catch2/catch.hpp>

#include <keel/interop/xtensor.hpp>
#include <keel/ops/shape.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

using keel::Tensor;

TEST_CASE("adapt views a contiguous tensor's memory with its shape", "[interop]") {
  const Tensor t = keel::constant<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto v = keel::interop::adapt<float>(t);
  REQUIRE(v.dimension() == 2);
  CHECK(v.shape()[0] == 2);
  CHECK(v.shape()[1] == 3);
  CHECK(v(1, 2) == 6.0f);
  CHECK(&v(0, 0) == t.data<float>());  // no copy: the same memory
}

TEST_CASE("adapt follows a transposed view's strides without copying", "[interop]") {
  const Tensor t = keel::constant<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor tt = keel::transpose(t);  // [3, 2]: tt(i, j) = t(j, i)
  REQUIRE_FALSE(tt.is_contiguous());
  const auto v = keel::interop::adapt<double>(tt);
  CHECK(v.shape()[0] == 3);
  CHECK(v(0, 1) == 4.0);  // t(1, 0)
  CHECK(v(2, 0) == 3.0);  // t(0, 2)
  CHECK(&v(0, 0) == t.data<double>());
  // An xtensor expression over the view: column sums of t = row sums of tt.
  const xt::xarray<double> s = xt::sum(v, {1});
  CHECK(s(0) == 5.0);  // 1 + 4
  CHECK(s(2) == 9.0);  // 3 + 6
}

TEST_CASE("adapt follows a sliced view's offset and strides", "[interop]") {
  // x = 0..11 as [3, 4]; x[1:, 1:] = [[5, 6, 7], [9, 10, 11]] with x's row stride 4.
  std::vector<std::int64_t> values(12);
  for (int i = 0; i < 12; ++i) values[static_cast<std::size_t>(i)] = i;
  const Tensor x = keel::constant(values, {3, 4});
  const Tensor s = keel::slice(x, {1, 1}, {-1, -1});
  REQUIRE_FALSE(s.is_contiguous());
  const auto v = keel::interop::adapt<std::int64_t>(s);
  CHECK(v(0, 0) == 5);
  CHECK(v(1, 2) == 11);
  CHECK(&v(0, 0) == x.data<std::int64_t>() + 5);
}

TEST_CASE("adapt refuses a wrong element type", "[interop]") {
  const Tensor t = keel::constant<float>({1, 2}, {2});
  CHECK_THROWS_AS(keel::interop::adapt<double>(t), keel::DTypeError);
  CHECK_THROWS_AS(keel::interop::adapt<float>(Tensor()), keel::ValueError);
}

TEST_CASE("adapt of an empty tensor has no elements", "[interop]") {
  const Tensor t = keel::zeros({0, 3});
  const auto v = keel::interop::adapt<float>(t);
  CHECK(v.size() == 0);
}

TEST_CASE("from_xtensor copies an expression's values, shape and dtype", "[interop]") {
  const xt::xarray<double> a = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  const Tensor t = keel::interop::from_xtensor(2.0 * a + 1.0);  // an unevaluated expression
  CHECK(t.dtype() == keel::DType::float64);
  CHECK(t.shape() == keel::Shape({2, 3}));
  CHECK(t.to_vector<double>() == std::vector<double>{3, 5, 7, 9, 11, 13});

  const xt::xtensor<std::int32_t, 1> b = {4, 5};
  const Tensor u = keel::interop::from_xtensor(b);
  CHECK(u.dtype() == keel::DType::int32);
  CHECK(u.to_vector<std::int32_t>() == std::vector<std::int32_t>{4, 5});

  // A column-major source comes out row-major: element (i, j) stays (i, j).
  xt::xarray<float, xt::layout_type::column_major> c = {{1.f, 2.f}, {3.f, 4.f}};
  CHECK(keel::interop::from_xtensor(c).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("a round trip through xtensor keeps the values of a non-contiguous view", "[interop]") {
  const Tensor t = keel::constant<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor back = keel::interop::from_xtensor(xt::exp(keel::interop::adapt<float>(keel::transpose(t))));
  REQUIRE(back.shape() == keel::Shape({3, 2}));
  const std::vector<float> got = back.to_vector<float>();
  const float expected[] = {1, 4, 2, 5, 3, 6};  // t transposed, row-major
  for (std::size_t i = 0; i < 6; ++i) CHECK(got[i] == Approx(std::exp(expected[i])));
}
