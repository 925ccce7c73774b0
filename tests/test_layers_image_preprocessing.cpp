// Image preprocessing layers: Resizing and CenterCrop values worked out by hand (tf.image.resize's
// half-pixel rule), rotations and zooms by exact angles / factors, contrast and brightness
// formulas, identity at factor 0, seeded determinism, inference passthrough, gradients, configs
// and errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;
using i64 = std::int64_t;

namespace {

// Value 10 * row + col (+ channel / 10) at every pixel of an [n, h, w, c] batch.
Tensor labelled(i64 n, i64 h, i64 w, i64 c, DType dt = DType::float32) {
  std::vector<double> v;
  for (i64 a = 0; a < n; ++a)
    for (i64 r = 0; r < h; ++r)
      for (i64 q = 0; q < w; ++q)
        for (i64 k = 0; k < c; ++k) v.push_back(static_cast<double>(a * 100 + r * 10 + q) + static_cast<double>(k) / 10);
  return constant(v, Shape{n, h, w, c}).astype(dt);
}

void check_values(const Tensor& y, const std::vector<double>& expected, double eps = 1e-4) {
  const auto got = y.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(eps));
  }
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

Tensor rebuilt_output(const layers::Layer& l, const Tensor& x, bool training) {
  auto copy = layers::from_config(l.class_name(), l.get_config());
  return (*copy)(x, training);
}

}  // namespace

TEST_CASE("Resizing: bilinear and nearest by hand", "[image_preprocessing]") {
  // [[0, 1], [2, 3]] to 4 x 4. Half-pixel source of output i: (i + 0.5) / 2 - 0.5 =
  // -0.25, 0.25, 0.75, 1.25; clamped to the image the row weights of pixel 1 are
  // r = 0, 0.25, 0.75, 1 (the same for columns), so out[i][j] = 2 r[i] + r[j].
  const Tensor x = constant({0.f, 1.f, 2.f, 3.f}, Shape{1, 2, 2, 1});
  const double r[4] = {0, 0.25, 0.75, 1};
  std::vector<double> up;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) up.push_back(2 * r[i] + r[j]);
  const Tensor y = layers::Resizing(4, 4)(x);
  CHECK(y.shape() == Shape{1, 4, 4, 1});
  check_values(y, up);
  // Matches data::image::resize (tf.image.resize) on the same input.
  check_values(y, data::image::resize(x, {4, 4}).to_vector<double>());
  // 4 x 4 (value 4 r + c) to 2 x 2: sources (i + 0.5) * 2 - 0.5 = 0.5, 2.5, the mean of two rows
  // and two columns: 4 * 0.5 + 0.5 = 2.5, 4.5, 10.5, 12.5.
  std::vector<float> v16;
  for (int i = 0; i < 16; ++i) v16.push_back(static_cast<float>(i));
  check_values(layers::Resizing(2, 2)(constant(v16, Shape{4, 4, 1})), {2.5, 4.5, 10.5, 12.5});
  // nearest: floor((i + 0.5) / 2) = 0, 0, 1, 1.
  check_values(layers::Resizing(4, 4, {.interpolation = "nearest"})(x),
               {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3});
  // crop_to_aspect_ratio: 2 x 4 to 2 x 2 keeps the centred 2 x 2 window (columns 1 and 2).
  const Tensor wide = labelled(1, 2, 4, 1);
  check_values(layers::Resizing(2, 2, {.crop_to_aspect_ratio = true})(wide), {1, 2, 11, 12});
  // pad_to_aspect_ratio: 1 x 2 to 2 x 2: a 2 x 2 canvas, the image in row (2 - 1) / 2 = 0, fill below.
  check_values(layers::Resizing(2, 2, {.pad_to_aspect_ratio = true, .fill_value = 9})(labelled(1, 1, 2, 1)),
               {0, 1, 9, 9});
  // Unbatched, integer and channels_first inputs.
  CHECK(layers::Resizing(3, 5)(labelled(1, 4, 4, 3)[0]).shape() == Shape{3, 5, 3});
  CHECK(layers::Resizing(3, 5)(labelled(1, 4, 4, 3, DType::uint8)).dtype() == DType::float32);
  const Tensor cf = layers::Resizing(4, 4, {.data_format = "channels_first"})(transpose(x, {0, 3, 1, 2}));
  CHECK(cf.shape() == Shape{1, 1, 4, 4});
  check_values(cf, up);
  // A non-contiguous input (a transpose) and an empty batch.
  check_values(layers::Resizing(4, 4)(transpose(transpose(x, {0, 2, 1, 3}), {0, 2, 1, 3})), up);
  CHECK(layers::Resizing(3, 3)(zeros(Shape{0, 2, 2, 1})).shape() == Shape{0, 3, 3, 1});
}

TEST_CASE("CenterCrop: the centred window, or a smart resize when smaller", "[image_preprocessing]") {
  // 4 x 5 to 2 x 3: offsets (4 - 2) / 2 = 1 and (5 - 3) / 2 = 1.
  check_values(layers::CenterCrop(2, 3)(labelled(1, 4, 5, 1)), {11, 12, 13, 21, 22, 23});
  // Odd differences round down: 5 x 5 to 2 x 2 starts at (1, 1).
  check_values(layers::CenterCrop(2, 2)(labelled(1, 5, 5, 1)), {11, 12, 21, 22});
  // 2 x 2 to 4 x 4: same aspect ratio, so a plain resize (the values of the Resizing case).
  const Tensor x = constant({0.f, 1.f, 2.f, 3.f}, Shape{2, 2, 1});
  check_values(layers::CenterCrop(4, 4)(x), layers::Resizing(4, 4)(x).to_vector<double>());
  // Applied at inference too.
  CHECK(layers::CenterCrop(2, 3)(labelled(1, 4, 5, 1), false).shape() == Shape{1, 2, 3, 1});
}

TEST_CASE("RandomRotation by exact angles", "[image_preprocessing]") {
  const Tensor x = labelled(1, 3, 3, 1);
  // factor (0.25, 0.25): angle pi / 2. x_in = -y + 2, y_in = x (offsets ((W-1) + (H-1)) / 2 = 2
  // and 0), so out[i][j] = in[j][2 - i]: the right column becomes the top row (counter-clockwise).
  check_values(layers::RandomRotation({0.25, 0.25}, {.seed = 1})(x, true), {2, 12, 22, 1, 11, 21, 0, 10, 20});
  // factor (0.5, 0.5): a half turn, out[i][j] = in[2 - i][2 - j].
  check_values(layers::RandomRotation({0.5, 0.5})(x, true), {22, 21, 20, 12, 11, 10, 2, 1, 0});
  // Factor 0 and inference leave the image as it is.
  CHECK(same_values(layers::RandomRotation(0.0)(x, true), x));
  CHECK(same_values(layers::RandomRotation(0.3)(x, false), x));
  // A quarter turn of a 1 x 3 strip with constant fill: only the centre pixel stays inside.
  // (x_off = (2 + 0) / 2 = 1, y_off = (0 - 2) / 2 = -1: out(0, j) reads (row j - 1, col 1).)
  check_values(layers::RandomRotation({0.25, 0.25}, {.fill_mode = "constant", .fill_value = -5})(labelled(1, 1, 3, 1), true),
               {-5, 1, -5});
}

TEST_CASE("RandomZoom by exact factors and fill modes", "[image_preprocessing]") {
  const Tensor x = labelled(1, 1, 5, 1);  // 0 1 2 3 4
  // height_factor -0.5 (no width_factor: the same zoom 0.5 on both axes): x_in = 0.5 x + 1 =
  // 1, 1.5, 2, 2.5, 3 (rows: y_in = 0.5 y + 0 = 0).
  check_values(layers::RandomZoom(layers::ImageFactor{-0.5, -0.5})(x, true), {1, 1.5, 2, 2.5, 3});
  // Zoom 2 on the width only: x_in = 2 x + (5 - 1) / 2 * (1 - 2) = 2 x - 2 = -2, 0, 2, 4, 6.
  //   constant 7: -2 and 6 are outside                     -> 7 0 2 4 7
  //   reflect (d c b a | a b c d | d c b a): -2 -> 1, 6 -> 3 -> 1 0 2 4 3
  //   nearest (a a | a b c d | d d): -2 -> 0, 6 -> 4        -> 0 0 2 4 4
  //   wrap (a b c d | a b c d): -2 -> 3, 6 -> 1             -> 3 0 2 4 1
  const auto zoom2 = [&](const std::string& mode) {
    return layers::RandomZoom(0.0, layers::ImageFactor{1.0, 1.0}, {.fill_mode = mode, .fill_value = 7})(x, true);
  };
  check_values(zoom2("constant"), {7, 0, 2, 4, 7});
  check_values(zoom2("reflect"), {1, 0, 2, 4, 3});
  check_values(zoom2("nearest"), {0, 0, 2, 4, 4});
  check_values(zoom2("wrap"), {3, 0, 2, 4, 1});
  // nearest interpolation rounds the source: 0.5 x + 1 -> 1, round(1.5) = 2, 2, round(2.5) = 3, 3.
  check_values(layers::RandomZoom(layers::ImageFactor{-0.5, -0.5}, std::nullopt, {.interpolation = "nearest"})(x, true), {1, 2, 2, 3, 3});
  CHECK(same_values(layers::RandomZoom(0.0)(x, true), x));
  CHECK(same_values(layers::RandomZoom(0.4)(x, false), x));
}

TEST_CASE("RandomContrast and RandomBrightness formulas", "[image_preprocessing]") {
  // Image [50, 60, 70, 80] (one channel): mean 65, output 65 + (x - 65) c for one c per image
  // (inside [0, 255] for every c in range, so the clip does not act).
  const Tensor x = constant({50.f, 60.f, 70.f, 80.f, 100.f, 100.f, 100.f, 200.f}, Shape{2, 2, 2, 1});
  const Tensor y = layers::RandomContrast({0.4, 0.5}, {.seed = 3})(x, true);
  const auto v = y.to_vector<double>();
  const double c0 = (65 - v[0]) / 15;
  CHECK(c0 >= 1 - 0.4 - 1e-6);
  CHECK(c0 <= 1 + 0.5 + 1e-6);
  for (int k = 0; k < 4; ++k) CHECK(v[k] == Approx(65 + (10 * k - 15) * c0).margin(1e-4));
  // Image 2: mean 125, c1 from its last pixel; the factor differs per image.
  const double c1 = (v[7] - 125) / 75;
  CHECK(v[4] == Approx(125 - 25 * c1).margin(1e-4));
  CHECK(c1 != Approx(c0));
  // Factor 0 is the identity; results are clipped to value_range.
  CHECK(same_values(layers::RandomContrast(0.0)(x, true), x));
  const auto clipped = layers::RandomContrast({1.0, 1.0}, {.value_range = {0, 20}, .seed = 2})(x, true).to_vector<double>();
  for (double p : clipped) CHECK((p >= 0 && p <= 20));

  // Brightness (0.5, 0.5): delta 0.5 * (255 - 0) = 127.5, then clipped to [0, 255].
  check_values(layers::RandomBrightness({0.5, 0.5})(x, true), {177.5, 187.5, 197.5, 207.5, 227.5, 227.5, 227.5, 255});
  // value_range [0, 1] and delta -0.25 * (1 - 0): x - 0.25, clipped at 0.
  const Tensor unit = constant({0.1f, 0.5f, 0.9f, 1.0f}, Shape{2, 2, 1});
  check_values(layers::RandomBrightness({-0.25, -0.25}, {.value_range = {0, 1}})(unit, true), {0, 0.25, 0.65, 0.75});
  CHECK(same_values(layers::RandomBrightness(0.0)(x, true), x));
  CHECK(same_values(layers::RandomBrightness(0.3)(x, false), x));
  CHECK(same_values(layers::RandomContrast(0.3)(x, false), x));
  // Random deltas stay in [-f, f] * 255.
  const auto b = layers::RandomBrightness(0.1, {.seed = 9})(x, true).to_vector<double>();
  CHECK(std::abs(b[0] - 50) <= 25.5 + 1e-4);
}

TEST_CASE("seeded image layers are reproducible; calls differ", "[image_preprocessing]") {
  const Tensor x = random::uniform({3, 6, 5, 2}, 0, 255, DType::float32);
  layers::RandomRotation a(0.2, {.seed = 11}), b(0.2, {.seed = 11});
  const Tensor a1 = a(x, true), a2 = a(x, true);
  CHECK(same_values(a1, b(x, true)));
  CHECK(same_values(a2, b(x, true)));
  CHECK_FALSE(same_values(a1, a2));
  layers::RandomZoom z1(0.3, 0.2, {.seed = 4}), z2(0.3, 0.2, {.seed = 4});
  CHECK(same_values(z1(x, true), z2(x, true)));
  layers::RandomContrast c1(0.5, {.seed = 5}), c2(0.5, {.seed = 5});
  CHECK(same_values(c1(x, true), c2(x, true)));
  layers::RandomBrightness r1(0.5, {.seed = 6}), r2(0.5, {.seed = 6});
  CHECK(same_values(r1(x, true), r2(x, true)));
  // Two equal images of a batch get their own angles.
  const Tensor im = labelled(1, 5, 5, 1);
  const Tensor y = layers::RandomRotation(0.3, {.fill_mode = "constant", .seed = 2})(concat({im, im}, 0), true);
  CHECK_FALSE(same_values(y[0], y[1]));
}

TEST_CASE("gradients flow through the image preprocessing layers", "[image_preprocessing]") {
  const Tensor x = random::normal({2, 4, 5, 2}, 0, 1, DType::float64);
  check_gradients([](const std::vector<Tensor>& in) { return layers::Resizing(3, 7)(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return layers::Resizing(6, 3, {.pad_to_aspect_ratio = true})(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return layers::CenterCrop(5, 5)(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) {
    layers::RandomRotation fresh(0.2, {.fill_mode = "constant", .seed = 1, .fill_value = 0.5});
    return fresh(in[0], true);
  }, {x});
  check_gradients([](const std::vector<Tensor>& in) {
    layers::RandomZoom fresh(0.3, std::nullopt, {.fill_mode = "reflect", .seed = 2});
    return fresh(in[0], true);
  }, {x});
  // Values well inside value_range [0, 255], so the clip is inactive; small ones, so that the
  // finite differences' rounding (relative to the values) stays far below the tolerance (around
  // 125 it came within 1e-6 in some draws).
  const Tensor inside = random::uniform({2, 3, 3, 2}, 2, 3, DType::float64);
  check_gradients([](const std::vector<Tensor>& in) {
    layers::RandomContrast fresh(0.2, {.seed = 3});
    return fresh(in[0], true);
  }, {inside});
}

TEST_CASE("image preprocessing configs round trip", "[image_preprocessing]") {
  const Tensor x = random::uniform({2, 6, 5, 3}, 0, 255, DType::float32);
  layers::Resizing rs(3, 4, {.interpolation = "nearest", .crop_to_aspect_ratio = true, .name = "rs"});
  const auto rc = rs.get_config();
  CHECK(rc["height"] == 3);
  CHECK(rc["interpolation"] == "nearest");
  CHECK(rc["crop_to_aspect_ratio"] == true);
  CHECK(same_values(rebuilt_output(rs, x, false), rs(x)));
  layers::CenterCrop cc(4, 4);
  CHECK(same_values(rebuilt_output(cc, x, false), cc(x)));
  layers::RandomRotation rr({-0.1, 0.2}, {.fill_mode = "nearest", .seed = 8, .fill_value = 1});
  CHECK(rr.get_config()["factor"] == nlohmann::json::array({-0.1, 0.2}));
  CHECK(same_values(rebuilt_output(rr, x, true), rr(x, true)));
  layers::RandomZoom rz(0.2, std::nullopt, {.seed = 8});
  CHECK(rz.get_config()["width_factor"].is_null());
  CHECK(same_values(rebuilt_output(rz, x, true), rz(x, true)));
  layers::RandomZoom rz2(0.2, 0.1, {.seed = 8});
  CHECK(same_values(rebuilt_output(rz2, x, true), rz2(x, true)));
  layers::RandomContrast ct(0.3, {.value_range = {0, 1}, .seed = 8});
  CHECK(ct.get_config()["value_range"] == nlohmann::json::array({0.0, 1.0}));
  CHECK(same_values(rebuilt_output(ct, x, true), ct(x, true)));
  layers::RandomBrightness br({-0.2, 0.1}, {.seed = 8});
  CHECK(same_values(rebuilt_output(br, x, true), br(x, true)));
  CHECK(br.class_name() == "RandomBrightness");
}

TEST_CASE("bad image preprocessing arguments are errors naming the layer", "[image_preprocessing]") {
  CHECK_THROWS_WITH(layers::Resizing(0, 4, {.name = "rz_q"}), Contains("rz_q") && Contains("height"));
  CHECK_THROWS_AS(layers::Resizing(4, 4, {.interpolation = "bicubic"}), ValueError);
  CHECK_THROWS_AS(layers::Resizing(4, 4, {.crop_to_aspect_ratio = true, .pad_to_aspect_ratio = true}), ValueError);
  CHECK_THROWS_AS(layers::CenterCrop(-1, 4), ValueError);
  CHECK_THROWS_WITH(layers::RandomRotation(1.5), Contains("factor") && Contains("1.5"));
  CHECK_THROWS_WITH(layers::RandomRotation(0.1, {.fill_mode = "mirror"}), Contains("mirror"));
  CHECK_THROWS_AS(layers::RandomZoom(0.1, layers::ImageFactor{-2.0, 0.0}), ValueError);
  CHECK_THROWS_AS(layers::RandomContrast(1.5), ValueError);
  CHECK_THROWS_AS(layers::RandomContrast(0.1, {.value_range = {1, 1}}), ValueError);
  CHECK_THROWS_AS(layers::RandomBrightness({-1.5, 0.0}), ValueError);
  CHECK_THROWS_AS(layers::Resizing(2, 2)(zeros({4, 4})), ShapeError);
  CHECK_THROWS_AS(layers::RandomRotation(0.1)(zeros({1, 1, 4, 4, 1}), true), ShapeError);
  CHECK_THROWS_AS(layers::Resizing(2, 2)(zeros({1, 0, 3, 1})), ValueError);
}
