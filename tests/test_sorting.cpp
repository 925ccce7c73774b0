// Sorting and searching: sort, argsort, top_k, unique, bincount and searchsorted — values by
// hand, ties, NaNs, axes, views, dtypes, empty tensors, errors, gradients and tracing.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"

using namespace keel;

namespace {

using D = std::vector<double>;
using I = std::vector<std::int32_t>;
D dv(const Tensor& t) { return t.to_vector<double>(); }
I iv(const Tensor& t) { return t.to_vector<std::int32_t>(); }
Tensor f64(const D& v, Shape s) { return constant(v, std::move(s), DType::float64); }
Tensor f32(const std::vector<float>& v) { return constant(v); }
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Distinct float64 values for gradient checks (a sort's gradient needs no ties).
Tensor wavy(Shape s, double salt = 0.2) {
  D v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(2.7 * double(i) + salt);
  return f64(v, std::move(s));
}

// The stable argsort of one row by the definition: positions ordered by value, then position.
I reference_argsort(const std::vector<float>& row, bool descending) {
  I p(row.size());
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(), [&](std::int32_t a, std::int32_t b) {
    return descending ? row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)]
                      : row[static_cast<std::size_t>(a)] < row[static_cast<std::size_t>(b)];
  });
  return p;
}

// Rounded normals: many ties, so stability is exercised.
std::vector<float> tied_values(std::size_t n, unsigned seed) {
  random::set_seed(seed);
  std::vector<float> v = (random::normal({static_cast<std::int64_t>(n)}) * 4.0).to_vector<float>();
  for (auto& x : v) x = std::round(x);
  return v;
}

}  // namespace

// ---- sort and argsort ---------------------------------------------------------------------------

TEST_CASE("sort and argsort of a vector, both directions", "[sorting][sort]") {
  const Tensor x = f64({3, 1, 2}, {3});
  CHECK(dv(sort(x)) == D{1, 2, 3});
  CHECK(dv(sort(x, -1, "DESCENDING")) == D{3, 2, 1});
  CHECK(iv(argsort(x)) == I{1, 2, 0});                 // x[1] = 1, x[2] = 2, x[0] = 3
  CHECK(iv(argsort(x, 0, "DESCENDING")) == I{0, 2, 1});
  CHECK(argsort(x).dtype() == DType::int32);
  CHECK(sort(x).dtype() == DType::float64);
}

TEST_CASE("argsort is stable: equal values keep their order in both directions", "[sorting][sort]") {
  const Tensor x = f64({2, 1, 2, 1}, {4});
  CHECK(iv(argsort(x)) == I{1, 3, 0, 2});                 // the 1s (positions 1, 3), then the 2s (0, 2)
  CHECK(iv(argsort(x, -1, "DESCENDING")) == I{0, 2, 1, 3});  // the 2s first, still in position order
  // -0 and +0 are equal: their order is kept
  CHECK(iv(argsort(f64({0.0, -0.0, 0.0}, {3}))) == I{0, 1, 2});
  // long rows (radix path, n >= 256) with many ties, against std::stable_sort
  for (std::size_t n : {300u, 1023u, 1024u, 5000u}) {
    const auto v = tied_values(n, static_cast<unsigned>(n));
    const Tensor t = f32(v);
    INFO("n = " << n);
    CHECK(iv(argsort(t)) == reference_argsort(v, false));
    CHECK(iv(argsort(t, 0, "DESCENDING")) == reference_argsort(v, true));
    std::vector<float> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sort(t).to_vector<float>() == sorted);
  }
}

TEST_CASE("sort puts NaNs last ascending and first descending", "[sorting][sort][nan]") {
  // keel orders NaN above +inf (XLA's order for tf.sort); ties among NaNs keep their order
  const Tensor x = f64({kNaN, 1, -kInf, kNaN, 0}, {5});
  CHECK(iv(argsort(x)) == I{2, 4, 1, 0, 3});
  CHECK(iv(argsort(x, -1, "DESCENDING")) == I{0, 3, 1, 4, 2});
  const D up = dv(sort(x));
  CHECK(up[0] == -kInf);
  CHECK(up[1] == 0);
  CHECK(up[2] == 1);
  CHECK(std::isnan(up[3]));
  CHECK(std::isnan(up[4]));
  // the same on the radix path, in float32: 3000 values with NaNs at every 7th position
  std::vector<float> v(3000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 0 ? std::nanf("") : std::cos(float(i));
  const auto s = sort(f32(v)).to_vector<float>();
  const std::size_t nans = (v.size() + 6) / 7;
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(std::isnan(s[i]) == (i >= v.size() - nans));
  CHECK(std::is_sorted(s.begin(), s.end() - static_cast<std::ptrdiff_t>(nans)));
}

TEST_CASE("sort along any axis, negative axes, and non-contiguous inputs", "[sorting][sort]") {
  // x = [[3, 1, 2],
  //      [0, 5, 4]]
  const Tensor x = f64({3, 1, 2, 0, 5, 4}, {2, 3});
  CHECK(dv(sort(x)) == D{1, 2, 3, 0, 4, 5});          // each row
  CHECK(dv(sort(x, 0)) == D{0, 1, 2, 3, 5, 4});       // each column: (3,0) (1,5) (2,4)
  CHECK(iv(argsort(x, -2)) == I{1, 0, 0, 0, 1, 1});  // columns (3,0) (1,5) (2,4)
  CHECK(iv(argsort(x, 1, "DESCENDING")) == I{0, 2, 1, 1, 2, 0});
  // the transposed view [[3, 0], [1, 5], [2, 4]] sorted along its rows
  const Tensor t = transpose(x);
  REQUIRE_FALSE(t.is_contiguous());
  CHECK(dv(sort(t)) == D{0, 3, 1, 5, 2, 4});
  CHECK(dv(sort(t, 0)) == D{1, 0, 2, 4, 3, 5});
  // a middle axis of a 3-d tensor, against sorting each (o, :, i) line by hand
  constexpr int L = 1500;  // the radix path
  const Tensor c = reshape(f32(tied_values(4 * L * 3, 7)), {4, L, 3});
  const auto cv = c.to_vector<float>();
  const auto got = argsort(c, 1).to_vector<std::int32_t>();
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 3; ++i) {
      std::vector<float> line(L);
      for (int j = 0; j < L; ++j) line[static_cast<std::size_t>(j)] = cv[static_cast<std::size_t>((o * L + j) * 3 + i)];
      const I want = reference_argsort(line, false);
      I column(L);
      for (int j = 0; j < L; ++j) column[static_cast<std::size_t>(j)] = got[static_cast<std::size_t>((o * L + j) * 3 + i)];
      CHECK(column == want);
    }
}

TEST_CASE("sort of many rows (parallel) matches row-by-row sorting", "[sorting][sort]") {
  const auto v = tied_values(200 * 100, 11);
  const Tensor x = reshape(f32(v), {200, 100});
  const auto got = argsort(x, -1, "DESCENDING").to_vector<std::int32_t>();
  for (std::size_t r = 0; r < 200; ++r) {
    const std::vector<float> row(v.begin() + static_cast<std::ptrdiff_t>(r * 100), v.begin() + static_cast<std::ptrdiff_t>(r * 100 + 100));
    const I want = reference_argsort(row, true);
    CHECK(I(got.begin() + static_cast<std::ptrdiff_t>(r * 100), got.begin() + static_cast<std::ptrdiff_t>(r * 100 + 100)) == want);
  }
}

TEST_CASE("sort of integer and half dtypes", "[sorting][sort]") {
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  const Tensor i32 = constant(std::vector<std::int32_t>{5, lo, -1, hi, 0}, {5});
  CHECK(sort(i32).to_vector<std::int32_t>() == std::vector<std::int32_t>{lo, -1, 0, 5, hi});
  CHECK(sort(i32).dtype() == DType::int32);
  const std::int64_t big = std::int64_t{1} << 40;
  const Tensor i64 = constant(std::vector<std::int64_t>{big, -big, 3}, {3});
  CHECK(sort(i64, 0, "DESCENDING").to_vector<std::int64_t>() == std::vector<std::int64_t>{big, 3, -big});
  const Tensor u8 = constant(std::vector<std::uint8_t>{200, 3, 255, 0}, {4});
  CHECK(iv(argsort(u8)) == I{3, 1, 0, 2});
  // float64 values that differ only in low mantissa bits (all 8 key bytes matter), radix path
  D d(2000);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = 1.0 + double((i * 7919) % 2000) * 1e-15 - (i % 2 ? 3.0 : 0.0);
  D sorted = d;
  std::sort(sorted.begin(), sorted.end());
  CHECK(dv(sort(f64(d, {2000}))) == sorted);
  const Tensor h = f32({2.5f, -1, 0.5f}).astype(DType::bfloat16);
  CHECK(sort(h).dtype() == DType::bfloat16);
  CHECK(sort(h).to_vector<float>() == std::vector<float>{-1, 0.5f, 2.5f});
}

TEST_CASE("sort of empty tensors and size-1 axes", "[sorting][sort]") {
  CHECK(sort(zeros({0})).shape() == Shape{0});
  CHECK(argsort(zeros({3, 0})).shape() == Shape{3, 0});
  CHECK(sort(zeros({0, 3}), -1, "DESCENDING").shape() == Shape{0, 3});
  CHECK(iv(argsort(f64({4, 2}, {2, 1}))) == I{0, 0});
}

TEST_CASE("sort and argsort reject bad directions, axes and dtypes", "[sorting][errors]") {
  const Tensor x = zeros({2, 3});
  check_error<ValueError>([&] { sort(x, -1, "UP"); }, {"sort", "\"UP\"", "ASCENDING", "DESCENDING"});
  check_error<ValueError>([&] { argsort(x, -1, "ascending"); }, {"argsort", "\"ascending\""});
  check_error<ValueError>([&] { sort(x, 2); }, {"sort", "axis 2"});
  check_error<ValueError>([&] { argsort(x, -3); }, {"argsort", "axis -3"});
  check_error<ValueError>([&] { sort(constant(1.0)); }, {"sort", "rank 0"});
  check_error<DTypeError>([&] { sort(constant(std::vector<bool>{true}, {1})); }, {"sort", "bool"});
}

TEST_CASE("sort gradients scatter g back to the source positions (float64)", "[sorting][sort][gradients]") {
  for (int axis : {0, 1, -1})
    for (const char* dir : {"ASCENDING", "DESCENDING"}) {
      INFO("axis " << axis << " " << dir);
      check_gradients([=](const std::vector<Tensor>& in) { return sort(in[0], axis, dir); }, {wavy({3, 5})});
    }
  check_gradients([](const std::vector<Tensor>& in) { return sort(in[0], 1); }, {wavy({2, 4, 3})});
  check_gradients([](const std::vector<Tensor>& in) { return sort(transpose(in[0])); }, {wavy({4, 3})});
  // by hand: x = [3, 1, 2], y = sort(x) = [x1, x2, x0]; L = 1 y0 + 10 y1 + 100 y2
  // so dL/dx = [100, 1, 10]
  GradientTape tape;
  const Tensor x = f64({3, 1, 2}, {3});
  tape.watch(x);
  const Tensor loss = reduce_sum(sort(x) * f64({1, 10, 100}, {3}));
  CHECK(dv(tape.gradient(loss, x)) == D{100, 1, 10});
}

// ---- top_k -----------------------------------------------------------------------------------------

TEST_CASE("top_k by hand: descending, ties to the lower index, unsorted in position order", "[sorting][top_k]") {
  const Tensor x = f64({1, 3, 2, 3}, {4});
  const TopK a = top_k(x, 2);
  CHECK(dv(a.values) == D{3, 3});
  CHECK(iv(a.indices) == I{1, 3});  // the two 3s, the lower index first
  const TopK b = top_k(x, 3);
  CHECK(dv(b.values) == D{3, 3, 2});
  CHECK(iv(b.indices) == I{1, 3, 2});
  // sorted = false: the same k elements, in the order of their positions
  const TopK c = top_k(x, 3, false);
  CHECK(iv(c.indices) == I{1, 2, 3});
  CHECK(dv(c.values) == D{3, 2, 3});
  // the default k = 1; indices are int32
  CHECK(iv(top_k(x).indices) == I{1});
  CHECK(top_k(x).indices.dtype() == DType::int32);
  // each row of a matrix: [[5, 1, 4], [0, 9, 9]] -> [[5, 4], [9, 9]] at [[0, 2], [1, 2]]
  const TopK m = top_k(f64({5, 1, 4, 0, 9, 9}, {2, 3}), 2);
  CHECK(m.values.shape() == Shape{2, 2});
  CHECK(dv(m.values) == D{5, 4, 9, 9});
  CHECK(iv(m.indices) == I{0, 2, 1, 2});
}

TEST_CASE("top_k of long rows, small and large k, against a stable sort", "[sorting][top_k]") {
  const auto v = tied_values(3 * 2000, 5);
  const Tensor x = reshape(f32(v), {3, 2000});
  // k * 16 <= n keeps the k best as they come: up to 32 in a sorted array, more in a heap
  for (int k : {1, 5, 32, 33, 100, 124, 126, 1000, 2000}) {
    const TopK r = top_k(x, k);
    const auto vals = r.values.to_vector<float>();
    const auto idx = iv(r.indices);
    for (std::size_t row = 0; row < 3; ++row) {
      const std::vector<float> line(v.begin() + static_cast<std::ptrdiff_t>(row * 2000),
                                    v.begin() + static_cast<std::ptrdiff_t>(row * 2000 + 2000));
      const I want = reference_argsort(line, true);
      INFO("k = " << k << " row " << row);
      for (int j = 0; j < k; ++j) {
        CHECK(idx[row * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)] == want[static_cast<std::size_t>(j)]);
        CHECK(vals[row * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)] == line[static_cast<std::size_t>(want[static_cast<std::size_t>(j)])]);
      }
    }
    // unsorted: the same set, in increasing position
    const auto u = iv(top_k(x, k, false).indices);
    for (std::size_t row = 0; row < 3; ++row) {
      I got(u.begin() + static_cast<std::ptrdiff_t>(row * static_cast<std::size_t>(k)),
            u.begin() + static_cast<std::ptrdiff_t>((row + 1) * static_cast<std::size_t>(k)));
      I sorted_idx(idx.begin() + static_cast<std::ptrdiff_t>(row * static_cast<std::size_t>(k)),
                   idx.begin() + static_cast<std::ptrdiff_t>((row + 1) * static_cast<std::size_t>(k)));
      std::sort(sorted_idx.begin(), sorted_idx.end());
      CHECK(got == sorted_idx);
    }
  }
}

TEST_CASE("top_k counts NaN as the largest value; integer dtypes; views", "[sorting][top_k][nan]") {
  const TopK n = top_k(f64({1, kNaN, 3, -kInf}, {4}), 2);
  CHECK(iv(n.indices) == I{1, 2});
  CHECK(std::isnan(dv(n.values)[0]));
  // the heap path (k * 16 <= n) with NaNs in it: 20 NaNs among 1000 values, k = 30 -> the NaNs
  // in position order, then the 10 largest numbers (stable descending order of the rest)
  std::vector<float> w(1000), rest;
  I want, rest_pos;
  for (std::size_t j = 0; j < w.size(); ++j) {
    w[j] = j % 50 == 7 ? std::nanf("") : std::round(std::cos(float(j)) * 20.f);
    if (j % 50 == 7) want.push_back(static_cast<std::int32_t>(j)); else { rest.push_back(w[j]); rest_pos.push_back(static_cast<std::int32_t>(j)); }
  }
  for (std::int32_t p : reference_argsort(rest, true)) want.push_back(rest_pos[static_cast<std::size_t>(p)]);
  want.resize(30);
  CHECK(iv(top_k(f32(w), 30).indices) == want);
  const TopK i = top_k(constant(std::vector<std::int64_t>{-5, 7, 7, 2}, {4}), 3);
  CHECK(i.values.to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 7, 2});
  CHECK(iv(i.indices) == I{1, 2, 3});
  // float16 is selected as float32 and stored back exactly
  const TopK h = top_k(f32({1, 3, 2}).astype(DType::float16), 2);
  CHECK(h.values.dtype() == DType::float16);
  CHECK(h.values.to_vector<float>() == std::vector<float>{3, 2});
  CHECK(iv(h.indices) == I{1, 2});
  // the transposed view [[3, 0], [1, 5], [2, 4]]
  const TopK t = top_k(transpose(f64({3, 1, 2, 0, 5, 4}, {2, 3})), 1);
  CHECK(dv(t.values) == D{3, 5, 4});
  CHECK(iv(t.indices) == I{0, 1, 1});
}

TEST_CASE("top_k of empty tensors, k = 0 and k = n", "[sorting][top_k]") {
  CHECK(top_k(zeros({0, 4}), 2).values.shape() == Shape{0, 2});
  CHECK(top_k(zeros({3, 0}), 0).indices.shape() == Shape{3, 0});
  CHECK(top_k(zeros({3, 4}), 0).values.shape() == Shape{3, 0});
  CHECK(iv(top_k(f64({1, 2, 3}, {3}), 3).indices) == I{2, 1, 0});
}

TEST_CASE("top_k rejects k beyond the last axis, negative k and scalars", "[sorting][top_k][errors]") {
  const Tensor x = zeros({2, 3});
  check_error<ValueError>([&] { top_k(x, 4); }, {"top_k", "k = 4", "3", "[2,3]"});
  check_error<ValueError>([&] { top_k(x, -1); }, {"top_k", "-1"});
  check_error<ShapeError>([&] { top_k(constant(1.0)); }, {"top_k", "[]"});
  CHECK_THROWS_AS(top_k(constant(std::vector<bool>{true, false}, {2})), DTypeError);
}

TEST_CASE("top_k gradients scatter g back to the chosen positions (float64)", "[sorting][top_k][gradients]") {
  for (int k : {1, 2, 6})
    for (bool sorted : {true, false}) {
      INFO("k = " << k << " sorted " << sorted);
      check_gradients([=](const std::vector<Tensor>& in) { return top_k(in[0], k, sorted).values; }, {wavy({3, 6})});
    }
  check_gradients([](const std::vector<Tensor>& in) { return top_k(transpose(in[0]), 2).values; }, {wavy({5, 3})});
  // by hand: x = [1, 3, 2], top 2 = [x1, x2]; L = 10 v0 + v1: dL/dx = [0, 10, 1]
  GradientTape tape;
  const Tensor x = f64({1, 3, 2}, {3});
  tape.watch(x);
  const Tensor loss = reduce_sum(top_k(x, 2).values * f64({10, 1}, {2}));
  CHECK(dv(tape.gradient(loss, x)) == D{0, 10, 1});
}

// ---- unique, bincount, searchsorted ----------------------------------------------------------------

TEST_CASE("unique keeps first-occurrence order and maps every element", "[sorting][unique]") {
  // tf.unique's documented example
  const Unique u = unique(constant(std::vector<std::int32_t>{1, 1, 2, 4, 4, 4, 7, 8, 8}, {9}));
  CHECK(u.y.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 4, 7, 8});
  CHECK(iv(u.idx) == I{0, 0, 1, 2, 2, 2, 3, 4, 4});
  CHECK(u.idx.dtype() == DType::int32);
  // not sorted: y follows first occurrences, 3 then 1 then 2
  const Unique v = unique(f64({3, 1, 3, 2, 1}, {5}));
  CHECK(dv(v.y) == D{3, 1, 2});
  CHECK(iv(v.idx) == I{0, 1, 0, 2, 1});
  // x == gather(y, idx)
  CHECK(dv(gather(v.y, v.idx)) == D{3, 1, 3, 2, 1});
  // -0 equals +0 (the first one is kept); every NaN is distinct, as TensorFlow's hash map has it
  const Unique z = unique(f64({0.0, -0.0, kNaN, 1, kNaN}, {5}));
  CHECK(z.y.shape() == Shape{4});
  CHECK(iv(z.idx) == I{0, 0, 1, 2, 3});
  CHECK_FALSE(std::signbit(dv(z.y)[0]));
  // bool and uint8
  CHECK(unique(constant(std::vector<bool>{true, true, false}, {3})).y.to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, 0});
  CHECK(iv(unique(constant(std::vector<std::uint8_t>{9, 9, 9}, {3})).idx) == I{0, 0, 0});
  // a strided view: column 0 of [[5, 1], [5, 2], [6, 3]] = [5, 5, 6]
  const Tensor col = transpose(f64({5, 1, 5, 2, 6, 3}, {3, 2}))[0];
  REQUIRE_FALSE(col.is_contiguous());
  CHECK(dv(unique(col).y) == D{5, 6});
  // empty
  const Unique e = unique(zeros({0}));
  CHECK(e.y.shape() == Shape{0});
  CHECK(e.idx.shape() == Shape{0});
  check_error<ShapeError>([] { unique(zeros({2, 2})); }, {"unique", "1-D", "[2,2]"});
}

TEST_CASE("bincount counts non-negative integers, with minlength and weights", "[sorting][bincount]") {
  // tf.math.bincount's example: values [1, 1, 2, 3, 2, 4, 4, 5] -> counts of 0..5 = [0, 2, 2, 1, 2, 1]
  const Tensor x = constant(std::vector<std::int32_t>{1, 1, 2, 3, 2, 4, 4, 5}, {8});
  const Tensor c = bincount(x);
  CHECK(c.dtype() == DType::int32);
  CHECK(iv(c) == I{0, 2, 2, 1, 2, 1});
  // minlength pads with zero counts; a smaller minlength changes nothing
  CHECK(iv(bincount(x, 8)) == I{0, 2, 2, 1, 2, 1, 0, 0});
  CHECK(iv(bincount(x, 3)) == I{0, 2, 2, 1, 2, 1});
  // weights: bin 1 = 1 + 5, bin 2 = 0 + 0, bin 3 = 1, bin 4 = 5 + 4, bin 5 = 5
  const Tensor w = f64({1, 5, 0, 1, 0, 5, 4, 5}, {8});
  const Tensor s = bincount(x, w);
  CHECK(s.dtype() == DType::float64);
  CHECK(dv(s) == D{0, 6, 0, 1, 9, 5});
  // any shape is flattened; int64 values
  const Tensor m = constant(std::vector<std::int64_t>{0, 2, 2, 0, 0, 1}, {2, 3});
  CHECK(iv(bincount(m)) == I{3, 1, 2});
  CHECK(iv(bincount(transpose(m))) == I{3, 1, 2});
  // empty input: length minlength
  CHECK(bincount(constant(std::vector<std::int32_t>{}, {0})).shape() == Shape{0});
  CHECK(iv(bincount(constant(std::vector<std::int32_t>{}, {0}), 3)) == I{0, 0, 0});
  check_error<ValueError>([] { bincount(constant(std::vector<std::int32_t>{1, -2}, {2})); },
                          {"bincount", "-2", "position 1"});
  check_error<DTypeError>([] { bincount(zeros({3})); }, {"bincount", "float32"});
  check_error<ShapeError>([&] { bincount(x, zeros({3})); }, {"bincount", "[3]", "[8]"});
  check_error<ValueError>([&] { bincount(x, -1); }, {"bincount", "minlength"});
}

TEST_CASE("searchsorted finds insertion points row by row", "[sorting][searchsorted]") {
  // tf.searchsorted's example
  const Tensor seq = f64({0, 3, 9, 9, 10, 1, 2, 3, 4, 5}, {2, 5});
  const Tensor vals = f64({2, 4, 9, 0, 2, 6}, {2, 3});
  // row 0: 2 goes before 3 (1), 4 before 9 (2), 9 before the first 9 (2) / after the last (4)
  // row 1: 0 before everything (0), 2 at its own place (1) / after it (2), 6 at the end (5)
  CHECK(iv(searchsorted(seq, vals)) == I{1, 2, 2, 0, 1, 5});
  CHECK(iv(searchsorted(seq, vals, "right")) == I{1, 2, 4, 0, 2, 5});
  CHECK(searchsorted(seq, vals).dtype() == DType::int32);
  // 1-D, integers
  const Tensor s1 = constant(std::vector<std::int32_t>{1, 3, 5}, {3});
  CHECK(iv(searchsorted(s1, constant(std::vector<std::int32_t>{0, 3, 6, 5}, {4}))) == I{0, 1, 3, 2});
  // NaN sorts last, so a NaN value goes after the numbers (before / after the NaNs)
  const Tensor sn = f64({1, 2, kNaN}, {3});
  CHECK(iv(searchsorted(sn, f64({kNaN, kInf}, {2}))) == I{2, 2});
  CHECK(iv(searchsorted(sn, f64({kNaN, kInf}, {2}), "right")) == I{3, 2});
  // a transposed sequence: [[0, 1], [3, 2]]^T ... rows [0, 3] and [1, 2]... built as a view
  const Tensor tv = transpose(f64({0, 1, 3, 2}, {2, 2}));  // rows [0, 3] and [1, 2]
  REQUIRE_FALSE(tv.is_contiguous());
  CHECK(iv(searchsorted(tv, f64({1, 2}, {2, 1}))) == I{1, 1});
  // empty values, empty sequence
  CHECK(searchsorted(seq, zeros({2, 0}, DType::float64)).shape() == Shape{2, 0});
  CHECK(iv(searchsorted(zeros({0}, DType::float64), f64({1}, {1}))) == I{0});
  // many values (parallel), against std::lower_bound / upper_bound
  const auto sorted = [] {
    auto v = tied_values(1000, 3);
    std::sort(v.begin(), v.end());
    return v;
  }();
  const auto probes = tied_values(50000, 4);
  const auto left = iv(searchsorted(f32(sorted), f32(probes)));
  const auto right = iv(searchsorted(f32(sorted), f32(probes), "right"));
  bool all = true;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    all = all && left[i] == std::lower_bound(sorted.begin(), sorted.end(), probes[i]) - sorted.begin();
    all = all && right[i] == std::upper_bound(sorted.begin(), sorted.end(), probes[i]) - sorted.begin();
  }
  CHECK(all);
  check_error<ValueError>([&] { searchsorted(seq, vals, "middle"); }, {"searchsorted", "\"middle\""});
  check_error<ShapeError>([&] { searchsorted(seq, f64({1, 2, 3}, {3, 1})); }, {"searchsorted", "[2,5]", "[3,1]"});
  check_error<DTypeError>([&] { searchsorted(seq, zeros({2, 1})); }, {"searchsorted"});
  check_error<ShapeError>([] { searchsorted(constant(1.0), constant(1.0)); }, {"searchsorted"});
}

// ---- tracing -----------------------------------------------------------------------------------------

TEST_CASE("traced sorts, scans and top_k replay with new inputs; unique cannot be traced", "[sorting][function]") {
  Variable w(random::normal({4, 6}), "w");
  auto body = [&](const Tensor& x) {
    GradientTape tape;
    const Tensor h = matmul(x, w);
    const Tensor y = reduce_sum(sort(h, -1, "DESCENDING") * 0.5) + reduce_sum(top_k(h, 2).values) +
                     reduce_sum(cumsum(h, 1) * cast(argsort(h, 0), DType::float32));
    return std::vector<Tensor>{y, tape.gradient(y, w.value())};
  };
  auto traced = keel::function([&](const std::vector<Tensor>& in) { return body(in[0]); });
  for (int call = 0; call < 3; ++call) {
    const Tensor x = random::normal({3, 4});
    const auto got = traced(std::vector<Tensor>{x});
    const auto want = body(x);
    REQUIRE(got.size() == 2);
    CHECK(got[0].item<float>() == Approx(want[0].item<float>()).epsilon(1e-5));
    const auto g = got[1].to_vector<float>(), e = want[1].to_vector<float>();
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(e[i]).epsilon(1e-5).margin(1e-6));
  }
  CHECK(traced.trace_count() == 1);
  auto untraceable = keel::function([](const Tensor& x) { return unique(x).y; });
  CHECK_THROWS_AS(untraceable(constant(std::vector<float>{1, 1, 2})), Error);
}
