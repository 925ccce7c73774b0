// Sizes that do not fit: element and byte counts, shape arithmetic of the shape ops, and
// allocations the host cannot satisfy raise keel errors naming the op (ValueError for a count
// past 64 bits, ResourceExhaustedError with the bytes for memory that cannot be had) instead of
// wrapping around, crashing or returning garbage; legal zero-size shapes with huge dimensions work.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <limits>

using namespace keel;
using Catch::Contains;

// Under AddressSanitizer an impossible allocation aborts the process unless the allocator may
// return null, which is what these tests check keel's handling of (a plain build ignores this).
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace {
constexpr std::int64_t kBig = std::int64_t{1} << 62;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}  // namespace

TEST_CASE("element and byte counts past 64 bits are ValueErrors naming the op", "[errors][sizes]") {
  // 2^33 x 2^33 = 2^66 elements
  CHECK_THROWS_WITH(eye(std::int64_t{1} << 33), Contains("eye") && Contains("[8589934592,8589934592]"));
  CHECK_THROWS_AS(eye(std::int64_t{1} << 33), ValueError);
  // 2^62 float32 elements need 2^64 bytes
  CHECK_THROWS_WITH(ones({kBig}), Contains("ones") && Contains("bytes"));
  CHECK_THROWS_AS(linspace(0, 1, kBig), ValueError);
  CHECK_THROWS_AS(ones({kBig + 1, 4}), ValueError);
  // 2^31 x 2^31 x 8 = 2^65 elements: a count that used to wrap to 0
  CHECK_THROWS_AS(zeros({std::int64_t{1} << 31, std::int64_t{1} << 31, 8}), ValueError);
  CHECK_THROWS_AS(Shape({std::int64_t{1} << 31, std::int64_t{1} << 31, 8}).num_elements(), ValueError);
}

TEST_CASE("shape ops check their size arithmetic", "[errors][sizes]") {
  // 4 x (2^62 + 1) overflows
  CHECK_THROWS_WITH(tile(ones({4}), {kBig + 1}), Contains("tile"));
  CHECK_THROWS_AS(tile(ones({4}), {kBig + 1}), ValueError);
  // 3 + INT64_MAX + INT64_MAX overflows
  CHECK_THROWS_WITH(pad(ones({3}), {{{kMax, kMax}}}), Contains("pad"));
  CHECK_THROWS_AS(pad(ones({3}), {{{kMax, kMax}}}), ValueError);
  // begin 2 + size INT64_MAX used to wrap past the bound check
  CHECK_THROWS_AS(slice(zeros({4}), {2}, {kMax}), ValueError);
  // a view may not claim more elements than a count holds either
  CHECK_THROWS_AS(broadcast_to(ones({1}), Shape{kBig, 4}), ValueError);
  CHECK_THROWS_AS(reshape(zeros({0}), Shape{kBig, 4, 0, -1}), ShapeError);
  CHECK_THROWS_AS(concat({broadcast_to(ones({1}), Shape{kBig}), broadcast_to(ones({1}), Shape{kBig}),
                          broadcast_to(ones({1}), Shape{kBig})}, 0),
                  ValueError);
}

TEST_CASE("allocations the host cannot satisfy are ResourceExhaustedErrors naming the op and the bytes",
          "[errors][sizes]") {
  // 2^40 x 2^20 float32 = 2^62 bytes: countable, but no host has that memory
  try {
    (void)full({std::int64_t{1} << 40, std::int64_t{1} << 20}, 1.0);
    FAIL("expected ResourceExhaustedError");
  } catch (const ResourceExhaustedError& e) {
    CHECK_THAT(e.what(), Contains("full") && Contains("4611686018427387904 bytes"));
  }
  // one_hot with depth 2^30 for 2^10 indices: 2^40 floats = 4 TiB
  CHECK_THROWS_AS(one_hot(zeros({1024}, DType::int64), 1 << 30), ResourceExhaustedError);
  // a layer whose weight cannot be allocated names itself
  layers::Dense dense(std::numeric_limits<int>::max(), {.name = "huge"});
  CHECK_THROWS_WITH(dense(ones({2, 1 << 20})), Contains("huge") && Contains("kernel"));
  CHECK_THROWS_AS(data::image::resize(zeros({1, 2, 2, 1}), {std::int64_t{1} << 40, std::int64_t{1} << 40}),
                  ValueError);  // 2^80 output pixels
  CHECK_THROWS_AS(data::image::resize(zeros({1, 2, 2, 1}), {std::int64_t{1} << 20, std::int64_t{1} << 20}),
                  ResourceExhaustedError);  // 2^40 float32 pixels: 4 TiB
  // the process keeps working afterwards
  CHECK(reduce_sum(ones({1000})).item<float>() == 1000.f);
}

TEST_CASE("zero-size shapes with huge dimensions are legal", "[sizes]") {
  const Tensor t = zeros({0, kBig});
  CHECK(t.size() == 0);
  CHECK(Shape({0, kBig, 4}).num_elements() == 0);
  CHECK(zeros({0, kBig, 4}).size() == 0);  // its strides saturate rather than wrap
  CHECK(reduce_sum(zeros({0, 4}), {0}).to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  CHECK(data::image::resize(zeros({0, 2, 2, 1}), {std::int64_t{1} << 40, std::int64_t{1} << 40}).size() == 0);
}
