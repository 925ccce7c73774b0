// data::image: flips, crops, brightness, contrast, bilinear/nearest resize (against values
// worked out by hand from TF2's half-pixel-centre rule) and per-image standardization; seeded
// calls repeat themselves, and single images and batches both work.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

using namespace keel;
namespace image = keel::data::image;
using Catch::Matchers::Contains;

namespace {

// An [H,W,C] (or [N,H,W,C]) image whose values are their own flat index.
Tensor indexed(Shape shape) { return reshape(arange(0, static_cast<double>(shape.num_elements())), shape); }

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.astype(DType::float64).to_vector<double>() ==
                                                                   b.astype(DType::float64).to_vector<double>();
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-6f) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(tol));
}

}  // namespace

TEST_CASE("flip_left_right and flip_up_down mirror the width and height axes", "[image]") {
  auto img = indexed({2, 3, 2});  // H=2, W=3, C=2
  auto lr = image::flip_left_right(img);
  CHECK(lr.shape() == Shape{2, 3, 2});
  CHECK(lr.to_vector<float>() == std::vector<float>{4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7});
  auto ud = image::flip_up_down(img);
  CHECK(ud.to_vector<float>() == std::vector<float>{6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5});
  // Any dtype: pixels move as bytes.
  auto u8 = img.astype(DType::uint8);
  CHECK(image::flip_left_right(u8).to_vector<float>() == lr.to_vector<float>());
  CHECK_THROWS_AS(image::flip_left_right(ones({3, 3})), ShapeError);
}

TEST_CASE("random flips decide per image, and the same seed repeats the decisions", "[image]") {
  auto batch = indexed({64, 2, 2, 1});
  auto a = image::random_flip_left_right(batch, 42);
  auto b = image::random_flip_left_right(batch, 42);
  CHECK(same(a, b));
  int flipped = 0;
  for (std::int64_t i = 0; i < 64; ++i) {
    const bool kept = same(a[i], batch[i]);
    const bool mirrored = same(a[i], image::flip_left_right(batch[i]));
    CHECK(kept != mirrored);
    flipped += mirrored;
  }
  CHECK(flipped > 10);
  CHECK(flipped < 54);
  auto c = image::random_flip_up_down(batch, 42);
  int ud = 0;
  for (std::int64_t i = 0; i < 64; ++i) ud += same(c[i], image::flip_up_down(batch[i]));
  CHECK(ud > 10);
  CHECK(ud < 54);
  // Without a seed, set_seed makes them reproducible.
  random::set_seed(5);
  auto d1 = image::random_flip_left_right(batch);
  random::set_seed(5);
  auto d2 = image::random_flip_left_right(batch);
  CHECK(same(d1, d2));
}

TEST_CASE("random_crop takes a window of the requested size at a seeded offset", "[image]") {
  auto img = indexed({8, 10, 3});
  auto crop = image::random_crop(img, {4, 5, 3}, 9);
  CHECK(crop.shape() == Shape{4, 5, 3});
  CHECK(same(crop, image::random_crop(img, {4, 5, 3}, 9)));
  // The window's first value locates it; every other value must match that window.
  const auto first = static_cast<std::int64_t>(crop.to_vector<float>()[0]);
  const std::int64_t y0 = first / 30, x0 = first % 30 / 3;
  CHECK(first % 3 == 0);
  CHECK(same(crop, slice(img, {y0, x0, 0}, {4, 5, 3})));
  // {h, w} keeps the channels (and the batch).
  auto batch = indexed({2, 8, 10, 3}).astype(DType::uint8);
  auto bc = image::random_crop(batch, {6, 6}, 1);
  CHECK(bc.shape() == Shape{2, 6, 6, 3});
  CHECK(bc.dtype() == DType::uint8);
  // Offsets vary with the seed.
  std::set<float> firsts;
  for (std::uint64_t s = 0; s < 20; ++s) firsts.insert(image::random_crop(img, {4, 5, 3}, s).to_vector<float>()[0]);
  CHECK(firsts.size() > 3);
  CHECK_THROWS_AS(image::random_crop(img, {9, 5, 3}, 1), ValueError);
  CHECK_THROWS_AS(image::random_crop(img, {4}, 1), ShapeError);
}

TEST_CASE("random_brightness adds one delta within max_delta", "[image]") {
  auto img = random::uniform({4, 4, 3});
  auto out = image::random_brightness(img, 0.2, 3);
  CHECK(same(out, image::random_brightness(img, 0.2, 3)));
  const auto diff = (out - img).to_vector<float>();
  for (float d : diff) CHECK(d == Approx(diff[0]).margin(1e-6));
  CHECK(std::abs(diff[0]) <= 0.2f);
  CHECK_THROWS_AS(image::random_brightness(img.astype(DType::uint8), 0.2, 3), DTypeError);
  CHECK_THROWS_AS(image::random_brightness(img, -0.1, 3), ValueError);
}

TEST_CASE("random_contrast scales each channel's deviation from its mean by one factor", "[image]") {
  auto img = random::uniform({2, 5, 5, 3}, 0, 1, DType::float64);
  auto out = image::random_contrast(img, 0.5, 1.5, 4);
  CHECK(same(out, image::random_contrast(img, 0.5, 1.5, 4)));
  auto mean_in = reduce_mean(img, {1, 2}, true), mean_out = reduce_mean(out, {1, 2}, true);
  check_close(mean_out.astype(DType::float32).to_vector<float>(), mean_in.astype(DType::float32).to_vector<float>(), 1e-6f);
  const auto dev_in = (img - mean_in).to_vector<double>(), dev_out = (out - mean_out).to_vector<double>();
  const double factor = dev_out[0] / dev_in[0];
  CHECK(factor >= 0.5);
  CHECK(factor < 1.5);
  for (std::size_t i = 0; i < dev_in.size(); ++i) CHECK(dev_out[i] == Approx(dev_in[i] * factor).margin(1e-9));
  CHECK_THROWS_AS(image::random_contrast(img, 1.5, 0.5, 4), ValueError);
  CHECK_THROWS_AS(image::random_contrast(img, -1, 0.5, 4), ValueError);
}

TEST_CASE("resize bilinear upsamples with TF2's half-pixel centres", "[image]") {
  auto img = constant<float>({0, 1, 2, 3}, {2, 2, 1});
  auto up = image::resize(img, {4, 4});
  CHECK(up.shape() == Shape{4, 4, 1});
  CHECK(up.dtype() == DType::float32);
  check_close(up.to_vector<float>(), {0, 0.25f, 0.75f, 1, 0.5f, 0.75f, 1.25f, 1.5f, 1.5f, 1.75f, 2.25f, 2.5f, 2, 2.25f, 2.75f, 3});
}

TEST_CASE("resize bilinear downsamples by averaging the two nearest rows and columns", "[image]") {
  auto img = indexed({1, 4, 4, 1});
  auto down = image::resize(img, {2, 2});
  CHECK(down.shape() == Shape{1, 2, 2, 1});
  check_close(down.to_vector<float>(), {2.5f, 4.5f, 10.5f, 12.5f});
  // Same size is the identity; uint8 input gives float32.
  auto u8 = indexed({3, 5, 2}).astype(DType::uint8);
  auto same_size = image::resize(u8, {3, 5});
  CHECK(same_size.dtype() == DType::float32);
  CHECK(same_size.to_vector<float>() == u8.to_vector<float>());
  // Non-integer scale along one axis: 3 -> 2 columns samples 0.25 and 1.75.
  auto row = constant<float>({0, 10, 20}, {1, 3, 1});
  check_close(image::resize(row, {1, 2}).to_vector<float>(), {2.5f, 17.5f});
}

// The composite resize_bilinear's fused passes replace: per axis, gathers of the lower and upper
// rows and a + (b - a) * w (TF's half-pixel rule), in float64 for the weights like the op.
Tensor composite_resize(const Tensor& x, std::int64_t out_h, std::int64_t out_w) {
  Tensor y = x;
  const std::int64_t outs[] = {out_h, out_w};
  for (int axis = 1; axis <= 2; ++axis) {
    const std::int64_t in = y.shape()[axis], out = outs[axis - 1];
    if (in == out) continue;
    std::vector<std::int64_t> lo, hi, wshape(4, 1);
    std::vector<double> w;
    for (std::int64_t o = 0; o < out; ++o) {
      const double src = (static_cast<double>(o) + 0.5) * (static_cast<double>(in) / static_cast<double>(out)) - 0.5;
      lo.push_back(std::max<std::int64_t>(static_cast<std::int64_t>(std::floor(src)), 0));
      hi.push_back(std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(src)), in - 1));
      w.push_back(src - std::floor(src));
    }
    wshape[static_cast<std::size_t>(axis)] = out;
    const Tensor a = gather(y, constant(lo, {out}), axis), b = gather(y, constant(hi, {out}), axis);
    y = a + (b - a) * constant(w, Shape(wshape), y.dtype());
  }
  return y;
}

TEST_CASE("resize_bilinear's fused passes give the composite's bits, and gradients of any order", "[image]") {
  random::set_seed(31);
  const Tensor x = random::normal({2, 5, 7, 3});
  for (const auto& [h, w] : {std::pair<std::int64_t, std::int64_t>{10, 14}, {3, 4}, {5, 16}, {8, 7}}) {
    INFO(h << " x " << w);
    CHECK(resize_bilinear(x, {h, w}).to_vector<float>() == composite_resize(x, h, w).to_vector<float>());
  }
  // The backward is the adjoint of the forward: <resize(x), v> = <x, resize^T(v)>, and
  // differentiating resize^T(v) = d<resize(x), v>/dx with respect to v gives resize back.
  const Tensor x64 = random::normal({2, 5, 7, 3}, 0, 1, DType::float64);
  const Tensor v = random::normal({2, 9, 4, 3}, 0, 1, DType::float64);
  const Tensor u = random::normal({2, 5, 7, 3}, 0, 1, DType::float64);
  GradientTape outer;
  outer.watch(v);
  Tensor adjoint;
  {
    GradientTape inner;
    inner.watch(x64);
    adjoint = inner.gradient(reduce_sum(resize_bilinear(x64, {9, 4}) * v), x64);
  }
  const double lhs = reduce_sum(resize_bilinear(x64, {9, 4}) * v).item<double>();
  CHECK(lhs == Approx(reduce_sum(x64 * adjoint).item<double>()).epsilon(1e-12));
  const Tensor back = outer.gradient(reduce_sum(adjoint * u), v);
  // Without an outer tape the backward is the fused kernel: the same sums.
  GradientTape single;
  single.watch(x64);
  const auto fused = single.gradient(reduce_sum(resize_bilinear(x64, {9, 4}) * v), x64).to_vector<double>();
  const auto composite = adjoint.to_vector<double>();
  REQUIRE(fused.size() == composite.size());
  for (std::size_t i = 0; i < fused.size(); ++i) CHECK(fused[i] == Approx(composite[i]).epsilon(0).margin(1e-12));
  const auto got = back.to_vector<double>(), want = resize_bilinear(u, {9, 4}).to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(0).margin(1e-12));
}

TEST_CASE("resize nearest repeats pixels and keeps the dtype", "[image]") {
  auto img = constant<float>({1, 2, 3, 4}, {2, 2, 1}).astype(DType::uint8);
  auto up = image::resize(img, {4, 4}, "nearest");
  CHECK(up.dtype() == DType::uint8);
  CHECK(up.to_vector<float>() == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  CHECK_THROWS_AS(image::resize(img, {4, 4}, "bicubic"), ValueError);
  CHECK_THROWS_AS(image::resize(img, {0, 4}), ValueError);
}

TEST_CASE("per_image_standardization gives each image zero mean and unit variance", "[image]") {
  auto batch = random::uniform({3, 4, 4, 3}, 0, 255);
  auto out = image::per_image_standardization(batch);
  CHECK(out.shape() == batch.shape());
  for (std::int64_t i = 0; i < 3; ++i) {
    CHECK(reduce_mean(out[i]).item<float>() == Approx(0).margin(1e-5));
    CHECK(reduce_std(out[i]).item<float>() == Approx(1).margin(1e-4));
  }
  // A constant image divides by 1/sqrt(N), not by zero.
  auto flat = image::per_image_standardization(full({2, 2, 1}, 7.0));
  CHECK(flat.to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  auto u8 = image::per_image_standardization(batch[0].astype(DType::uint8));
  CHECK(u8.dtype() == DType::float32);
}
