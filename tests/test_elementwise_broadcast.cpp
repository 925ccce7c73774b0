// How binary ops read broadcast operands: views with stride-0 axes narrowed to the values they
// repeat or copied out, and smaller operands laid out over short trailing runs; every element the
// bits of the op on a contiguous copy.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "simd_levels.hpp"

using namespace keel;

namespace {

// Binary ops of a whole operand with a smaller one that broadcasts (positive, so that pow and mod
// stay finite), each order, against the same ops on the smaller one's full copy: bit for bit.
void check_against_full_copy(const Tensor& big, const Tensor& small) {
  const Tensor full = broadcast_to(small, big.shape()).contiguous();
  CHECK(sub(big, small).to_vector<double>() == sub(big, full).to_vector<double>());
  CHECK(sub(small, big).to_vector<double>() == sub(full, big).to_vector<double>());
  CHECK(div(big, small).to_vector<double>() == div(big, full).to_vector<double>());
  CHECK(div(small, big).to_vector<double>() == div(full, big).to_vector<double>());
  CHECK(mul(big, small).to_vector<double>() == mul(big, full).to_vector<double>());
  CHECK(pow(small, big).to_vector<double>() == pow(full, big).to_vector<double>());
  CHECK(maximum(small, big).to_vector<double>() == maximum(full, big).to_vector<double>());
  CHECK(minimum(big, small).to_vector<double>() == minimum(big, full).to_vector<double>());
  CHECK(mod(big, small).to_vector<double>() == mod(big, full).to_vector<double>());
}

}  // namespace

TEST_CASE("binary ops read broadcast views (a sum's gradient) as the values they repeat",
          "[elementwise][views][broadcast]") {
  // A broadcast_to view has stride 0 along its repeated axes. The kernels narrow it to the values
  // it repeats (a scalar, a row, a column of rows of at least 16) or copy it out (short rows);
  // either way every element must equal the op on a contiguous copy, bit for bit: the same
  // rounding of the same two operands.
  random::set_seed(7);
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor m = cast(random::normal(Shape{64, 40}, 0.0, 1.0, DType::float64), dt);
    const Tensor col = cast(random::normal(Shape{64, 1}, 0.0, 1.0, DType::float64), dt);
    const Tensor row = cast(random::normal(Shape{1, 40}, 0.0, 1.0, DType::float64), dt);
    const Tensor short_col = cast(random::normal(Shape{64, 1}, 0.0, 1.0, DType::float64), dt);
    const Tensor mt = transpose(cast(random::normal(Shape{40, 5}, 0.0, 1.0, DType::float64), dt));  // [5, 40]
    const Tensor scalar = broadcast_to(reshape(reduce_sum(m), {1, 1}), {64, 40});
    const std::vector<Tensor> views = {scalar, broadcast_to(col, {64, 40}), broadcast_to(row, {64, 40})};
    for (const Tensor& v : views) {
      REQUIRE_FALSE(v.is_contiguous());
      const Tensor c = v.contiguous();
      CHECK(mul(v, m).to_vector<double>() == mul(c, m).to_vector<double>());
      CHECK(sub(m, v).to_vector<double>() == sub(m, c).to_vector<double>());
      CHECK(div(v, views[1]).to_vector<double>() == div(c, views[1].contiguous()).to_vector<double>());
    }
    // Rows of 3: copied out instead.
    const Tensor s3 = broadcast_to(short_col, {64, 3});
    const Tensor m3 = slice(m, {0, 0}, {64, 3}).contiguous();
    CHECK(add(s3, m3).to_vector<double>() == add(s3.contiguous(), m3).to_vector<double>());
    // A repeated transposed tensor: narrowed to [1, 5, 40], still strided, so copied (5 x 40).
    const Tensor rt = broadcast_to(expand_dims(mt, 0), {3, 5, 40});
    const Tensor other = cast(random::normal(Shape{3, 5, 40}, 0.0, 1.0, DType::float64), dt);
    CHECK(mul(rt, other).to_vector<double>() == mul(rt.contiguous(), other).to_vector<double>());
    // The copy of a repeated value: every element the value.
    const std::vector<double> filled = broadcast_to(reshape(col, {64, 1}), {64, 40}).contiguous().to_vector<double>();
    const std::vector<double> c = col.to_vector<double>();
    for (std::size_t i = 0; i < filled.size(); ++i) REQUIRE(filled[i] == c[i / 40]);
  }
  // The copy of repeated integers and half floats (other element sizes) too.
  CHECK(broadcast_to(constant<std::int32_t>({-3}, {1}), {5}).contiguous().to_vector<std::int32_t>() ==
        std::vector<std::int32_t>(5, -3));
  CHECK(broadcast_to(constant<std::int64_t>({1, 2}, {2, 1}), {2, 3}).contiguous().to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 1, 1, 2, 2, 2});
  CHECK(broadcast_to(cast(constant<float>({1.5f}, {1}), DType::float16), {4}).contiguous()
            .to_vector<float>() == std::vector<float>(4, 1.5f));
}

TEST_CASE("a smaller operand repeated along short trailing runs gives the bits of its full copy",
          "[elementwise][broadcast]") {
  // [6, 1, 1, 8, 1] over [6, 7, 9, 8, 8] (GroupNormalization's statistics over its groups): runs of
  // 8 elements, so the operand is laid out over the output's trailing axes first ([6, 1, 9, 8, 8]).
  // [16] over [40, 30, 16] (a bias over few channels): laid out as [30, 16]. [5, 1] over [5, 8]
  // and [300] over [2, 300]: left as they are (a copy would be the output's size; runs already
  // long). Either way every element is the op on the same two values.
  random::set_seed(17);
  const std::vector<std::pair<Shape, Shape>> cases{
      {{6, 7, 9, 8, 8}, {6, 1, 1, 8, 1}}, {{40, 30, 16}, {16}}, {{5, 8}, {5, 1}}, {{2, 300}, {300}},
      {{3, 4, 5}, {4, 1}}};
  for (DType dt : {DType::float32, DType::float64})
    for (const auto& [big_shape, small_shape] : cases) {
      INFO(big_shape.to_string() << " with " << small_shape.to_string() << ", " << name(dt));
      const Tensor big = random::normal(big_shape, 0.0, 1.0, dt);
      check_against_full_copy(big, random::uniform(small_shape, 0.5, 2.0, dt));
    }
}

TEST_CASE("a row or a column repeated over a whole operand gives the bits of its full copy at every SIMD level",
          "[elementwise][broadcast][simd]") {
  // One operand whole, the other a row over its leading axes ([C] over [N, C], [1, H, C] over
  // [N, H, C]) or a column of one value per row ([N, 1] over [N, C], [N, 1, 1] over [N, H, C]):
  // one kernel call per part over whole rows, large outputs written with streaming stores (8 MB
  // here: at 1 and 2 threads each part streams). Rows shorter than a batch (5, 3: columns laid
  // out in tiles of 256 rows, so 600 rows take three), with a partial last batch (33, 300) and of
  // whole batches (32, 2048); each order of the operands; every element the op on the same two
  // values.
  random::set_seed(23);
  const std::vector<std::pair<Shape, Shape>> cases{
      {{7, 5}, {5}},          {{40, 33}, {1, 33}},      {{3, 4, 300}, {4, 300}}, {{1024, 2048}, {2048}},
      {{9, 2, 16}, {1, 1, 16}}, {{7, 5}, {7, 1}},       {{600, 3}, {600, 1}},    {{2, 50, 33}, {2, 50, 1}},
      {{6, 4, 8}, {6, 1, 1}}, {{1024, 2048}, {1024, 1}}, {{524288, 4}, {524288, 1}}};
  const int threads = config::num_threads();
  for (int t : {1, 2}) {
    config::set_num_threads(t);
    testing::at_every_simd_level([&](const std::string&) {
      for (DType dt : {DType::float32, DType::float64})
        for (const auto& [big_shape, small_shape] : cases) {
          INFO(big_shape.to_string() << " with " << small_shape.to_string() << ", " << name(dt) << ", threads " << t);
          const Tensor big = random::normal(big_shape, 0.0, 1.0, dt);
          check_against_full_copy(big, random::uniform(small_shape, 0.5, 2.0, dt));
        }
      // Against values by hand: [[1, 2, 3], [4, 5, 6]] - [10, 20, 30], the row first, and a column.
      const Tensor m = constant<float>({1, 2, 3, 4, 5, 6}, {2, 3});
      const Tensor r = constant<float>({10, 20, 30}, {3});
      const Tensor c = constant<float>({10, 20}, {2, 1});
      CHECK(sub(m, r).to_vector<float>() == std::vector<float>{-9, -18, -27, -6, -15, -24});
      CHECK(sub(r, m).to_vector<float>() == std::vector<float>{9, 18, 27, 6, 15, 24});
      CHECK(sub(m, c).to_vector<float>() == std::vector<float>{-9, -8, -7, -16, -15, -14});
      CHECK(div(c, m).to_vector<float>() == std::vector<float>{10, 5, 10.0f / 3, 5, 4, 20.0f / 6});
    });
  }
  config::set_num_threads(threads);
}
