// Augmentation layers: identity outside training, flips that really flip, crop sizes and
// windows, translations by known shifts (and by seeded random ones), reproducible seeds,
// gradients, configs and errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;
using i64 = std::int64_t;

namespace {

// A batch whose every value tells where it came from: image n, row r, column c, channel k
// holds n * 1000 + r * 100 + c * 10 + k.
Tensor labelled(i64 n, i64 h, i64 w, i64 ch) {
  std::vector<float> v;
  for (i64 a = 0; a < n; ++a)
    for (i64 r = 0; r < h; ++r)
      for (i64 c = 0; c < w; ++c)
        for (i64 k = 0; k < ch; ++k) v.push_back(static_cast<float>(a * 1000 + r * 100 + c * 10 + k));
  return constant(v, Shape{n, h, w, ch});
}

void check_values(const Tensor& y, const std::vector<double>& expected, double eps = 1e-5) {
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

// Image n of a batch as a vector of its values.
std::vector<double> image(const Tensor& x, i64 n) { return x[n].to_vector<double>(); }

// The single-channel h x w image `v` flipped left-right and/or top-bottom.
std::vector<double> flipped(const std::vector<double>& v, i64 h, i64 w, bool lr, bool ud) {
  std::vector<double> out(v.size());
  for (i64 r = 0; r < h; ++r)
    for (i64 c = 0; c < w; ++c)
      out[static_cast<std::size_t>(r * w + c)] = v[static_cast<std::size_t>((ud ? h - 1 - r : r) * w + (lr ? w - 1 - c : c))];
  return out;
}

}  // namespace

TEST_CASE("augmentation layers are the identity when not training") {
  const Tensor x = labelled(3, 4, 5, 2);
  CHECK(same_values(layers::RandomFlip()(x), x));
  CHECK(same_values(layers::RandomFlip("horizontal", {.seed = 1})(x, false), x));
  CHECK(same_values(layers::RandomTranslation(0.5, 0.5, {.seed = 2})(x), x));
  // RandomCrop to the input's own size has nothing to crop or resize.
  CHECK(same_values(layers::RandomCrop(4, 5)(x), x));
  CHECK(layers::RandomCrop(4, 5)(x).shape() == x.shape());
}

TEST_CASE("RandomFlip horizontal mirrors some images left-right and leaves the others") {
  const i64 n = 32, h = 2, w = 3;
  const Tensor x = labelled(n, h, w, 1);
  const Tensor y = layers::RandomFlip("horizontal", {.seed = 7})(x, /*training=*/true);
  REQUIRE(y.shape() == x.shape());
  int flips = 0;
  for (i64 i = 0; i < n; ++i) {
    const auto in = image(x, i), out = image(y, i);
    const bool is_flip = out == flipped(in, h, w, true, false);
    INFO("image " << i);
    CHECK((is_flip || out == in));
    flips += is_flip ? 1 : 0;
  }
  // Each image flips with probability 1/2: 32 of one kind would happen once in 2^31 seeds.
  CHECK(flips > 0);
  CHECK(flips < n);
}

TEST_CASE("RandomFlip vertical mirrors top-bottom, and both modes reach all four orientations") {
  const i64 n = 64, h = 3, w = 2;
  const Tensor x = labelled(n, h, w, 1);
  const Tensor v = layers::RandomFlip("vertical", {.seed = 3})(x, true);
  int flips = 0;
  for (i64 i = 0; i < n; ++i) {
    const auto in = image(x, i), out = image(v, i);
    const bool is_flip = out == flipped(in, h, w, false, true);
    CHECK((is_flip || out == in));
    flips += is_flip ? 1 : 0;
  }
  CHECK(flips > 0);
  CHECK(flips < n);

  const Tensor both = layers::RandomFlip("horizontal_and_vertical", {.seed = 4})(x, true);
  std::set<int> seen;
  for (i64 i = 0; i < n; ++i) {
    const auto in = image(x, i), out = image(both, i);
    int kind = -1;
    for (int k = 0; k < 4; ++k)
      if (out == flipped(in, h, w, k & 1, k & 2)) kind = k;
    INFO("image " << i);
    CHECK(kind >= 0);
    seen.insert(kind);
  }
  CHECK(seen.size() == 4);
}

TEST_CASE("RandomFlip of one image, and channels_first, flip the right axes") {
  // One 2x2 image of two channels; horizontal flip always happens for some seed: try until one does.
  const Tensor x = labelled(1, 2, 2, 2)[0];  // [2, 2, 2]
  bool saw_flip = false;
  layers::RandomFlip flip("horizontal", {.seed = 11});
  for (int t = 0; t < 20 && !saw_flip; ++t) {
    const Tensor y = flip(x, true);
    REQUIRE(y.shape() == Shape{2, 2, 2});
    if (!same_values(y, x)) {
      // (r, c, k) <- (r, 1 - c, k)
      check_values(y, {10, 11, 0, 1, 110, 111, 100, 101});
      saw_flip = true;
    }
  }
  CHECK(saw_flip);

  // channels_first [N, C, H, W]: a horizontal flip reverses the last axis.
  const Tensor xc = transpose(labelled(16, 2, 3, 2), {0, 3, 1, 2});
  const Tensor yc = layers::RandomFlip("horizontal", {.seed = 5, .data_format = "channels_first"})(xc, true);
  int flips = 0;
  for (i64 i = 0; i < 16; ++i) {
    const Tensor mirrored = gather(xc[i], constant(std::vector<i64>{2, 1, 0}), 2);
    if (same_values(yc[i], mirrored)) {
      ++flips;
    } else {
      CHECK(same_values(yc[i], xc[i]));
    }
  }
  CHECK(flips > 0);
}

TEST_CASE("the same seed gives the same augmentations; calls of one layer differ") {
  const Tensor x = labelled(32, 4, 4, 1);
  layers::RandomFlip a("horizontal_and_vertical", {.seed = 42}), b("horizontal_and_vertical", {.seed = 42});
  const Tensor a1 = a(x, true), a2 = a(x, true);
  CHECK(same_values(a1, b(x, true)));
  CHECK(same_values(a2, b(x, true)));
  CHECK_FALSE(same_values(a1, a2));  // a new draw per call

  // Without a seed, the global generator decides: random::set_seed replays it.
  layers::RandomTranslation t(0.3, 0.3);
  random::set_seed(123);
  const Tensor t1 = t(x, true);
  random::set_seed(123);
  CHECK(same_values(t1, t(x, true)));
}

TEST_CASE("RandomCrop cuts a window of the target size in training") {
  const Tensor x = labelled(3, 8, 10, 2);
  layers::RandomCrop crop(5, 6, {.seed = 9});
  std::set<std::pair<i64, i64>> offsets;
  for (int t = 0; t < 8; ++t) {
    const Tensor y = crop(x, true);
    REQUIRE(y.shape() == Shape{3, 5, 6, 2});
    // The window's top-left value tells its offset; one offset for the whole batch (Keras).
    const auto v = y.to_vector<double>();
    const i64 top = static_cast<i64>(v[0]) / 100, left = static_cast<i64>(v[0]) / 10 % 10;
    CHECK(top <= 8 - 5);
    CHECK(left <= 10 - 6);
    check_values(y, slice(x, {0, top, left, 0}, {3, 5, 6, 2}).to_vector<double>());
    offsets.insert({top, left});
  }
  CHECK(offsets.size() > 1);
  // A single image keeps its rank.
  CHECK(crop(x[0], true).shape() == Shape{5, 6, 2});
}

TEST_CASE("RandomCrop outside training takes the centred window of the target's aspect ratio") {
  SECTION("only the height differs: a centre crop") {
    // 6x6 to 4x6: the window is 4 rows (6 * 4 / 6) by 6 columns, from row (6 - 4) / 2 = 1.
    const Tensor x = labelled(2, 6, 6, 1);
    const Tensor y = layers::RandomCrop(4, 6)(x);
    CHECK(y.shape() == Shape{2, 4, 6, 1});
    check_values(y, slice(x, {0, 1, 0, 0}, {2, 4, 6, 1}).to_vector<double>());
  }
  SECTION("same aspect ratio, half the size: a bilinear resize of the whole image") {
    // 8x10 to 4x5: the window is the whole image; half-pixel bilinear resizing by exactly 2
    // samples at 2i + 0.5, the mean of each 2x2 block.
    const Tensor x = labelled(1, 8, 10, 1);
    const Tensor y = layers::RandomCrop(4, 5)(x);
    CHECK(y.shape() == Shape{1, 4, 5, 1});
    check_values(y, layers::AveragePooling2D({2, 2})(x).to_vector<double>(), 1e-3);
  }
  SECTION("a smaller image in training is resized too") {
    const Tensor x = labelled(1, 2, 2, 1);  // 0 10 / 100 110
    const Tensor y = layers::RandomCrop(4, 4)(x, true);
    CHECK(y.shape() == Shape{1, 4, 4, 1});
    // Rows sample 2 -> 4 at (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 (clamped): 0, 0.25, 0.75, 1.
    const std::vector<double> t{0, 0.25, 0.75, 1};
    std::vector<double> expected;
    for (double r : t)
      for (double c : t) expected.push_back(100 * r + 10 * c);
    check_values(y, expected, 1e-3);
  }
  SECTION("integer images come out as float32") {
    const Tensor x = constant(std::vector<std::uint8_t>(2 * 6 * 6 * 3, 7), Shape{2, 6, 6, 3});
    const Tensor y = layers::RandomCrop(3, 3)(x);
    CHECK(y.dtype() == DType::float32);
    CHECK(y.shape() == Shape{2, 3, 3, 3});
    check_values(y, std::vector<double>(54, 7.0));
  }
}

TEST_CASE("RandomTranslation by a known shift moves the content and fills as fill_mode says") {
  // One 4x4 image: value 100 r + 10 c. height_factor (0.25, 0.25) shifts down by exactly
  // 0.25 * 4 = 1 row; width_factor (-0.25, -0.25) left by 1 column. Output (r, c) reads the
  // input at (r - 1, c + 1).
  const Tensor x = labelled(1, 4, 4, 1);
  const auto expect = [](auto source_row, auto source_col) {
    std::vector<double> v;
    for (i64 r = 0; r < 4; ++r)
      for (i64 c = 0; c < 4; ++c) v.push_back(source_row(r) * 100.0 + source_col(c) * 10.0);
    return v;
  };
  SECTION("constant: the uncovered row and column take fill_value") {
    layers::RandomTranslation t({0.25, 0.25}, {-0.25, -0.25}, {.fill_mode = "constant", .fill_value = -1});
    const auto y = t(x, true).to_vector<double>();
    for (i64 r = 0; r < 4; ++r)
      for (i64 c = 0; c < 4; ++c) {
        INFO("r " << r << " c " << c);
        const double want = (r == 0 || c == 3) ? -1.0 : (r - 1) * 100.0 + (c + 1) * 10.0;
        CHECK(y[static_cast<std::size_t>(r * 4 + c)] == Approx(want));
      }
  }
  SECTION("reflect (the default): row -1 reads row 0, column 4 reads column 3") {
    layers::RandomTranslation t({0.25, 0.25}, {-0.25, -0.25});
    check_values(t(x, true), expect([](i64 r) { return r == 0 ? 0 : r - 1; },
                                    [](i64 c) { return c == 3 ? 3 : c + 1; }));
  }
  SECTION("wrap: row -1 reads row 3, column 4 reads column 0") {
    layers::RandomTranslation t({0.25, 0.25}, {-0.25, -0.25}, {.fill_mode = "wrap"});
    check_values(t(x, true), expect([](i64 r) { return (r + 3) % 4; }, [](i64 c) { return (c + 1) % 4; }));
  }
  SECTION("nearest: the edge pixels repeat") {
    layers::RandomTranslation t({0.5, 0.5}, 0.0, {.fill_mode = "nearest", .interpolation = "nearest"});
    // Two rows down: rows -2, -1 read row 0.
    check_values(t(x, true), expect([](i64 r) { return r < 2 ? 0 : r - 2; }, [](i64 c) { return c; }));
  }
  SECTION("a half-pixel shift interpolates bilinearly between neighbours") {
    // 0.125 * 4 = 0.5 rows down: output row r = (input r + input (r - 1)) / 2, which is the
    // value of "row r - 0.5"; row 0 averages row 0 (10 c) with the fill value 0.
    layers::RandomTranslation t({0.125, 0.125}, 0.0, {.fill_mode = "constant"});
    std::vector<double> want;
    for (i64 r = 0; r < 4; ++r)
      for (i64 c = 0; c < 4; ++c) want.push_back(r == 0 ? 5.0 * c : (r - 0.5) * 100 + 10.0 * c);
    check_values(t(x, true), want, 1e-3);
  }
}

TEST_CASE("RandomTranslation with a fixed seed shifts each image by a whole number of pixels within the factor") {
  // Nearest interpolation turns each random shift into whole pixels; with constant fill -1 the
  // output must be its input moved by some (dy, dx) with |dy| <= 0.5 * 6 and |dx| <= 0.25 * 8.
  const i64 n = 12, h = 6, w = 8;
  const Tensor x = labelled(n, h, w, 1) + 1.0;  // no pixel equals the fill value
  layers::RandomTranslation t(0.5, 0.25, {.fill_mode = "constant", .interpolation = "nearest", .seed = 2024,
                                          .fill_value = -1});
  const Tensor y = t(x, true);
  const Tensor again = layers::RandomTranslation(0.5, 0.25, {.fill_mode = "constant", .interpolation = "nearest",
                                                             .seed = 2024, .fill_value = -1})(x, true);
  CHECK(same_values(y, again));
  std::set<std::pair<i64, i64>> shifts;
  for (i64 i = 0; i < n; ++i) {
    const auto in = image(x, i), out = image(y, i);
    bool found = false;
    for (i64 dy = -3; dy <= 3 && !found; ++dy)
      for (i64 dx = -2; dx <= 2 && !found; ++dx) {
        bool match = true;
        for (i64 r = 0; r < h && match; ++r)
          for (i64 c = 0; c < w && match; ++c) {
            const i64 sr = r - dy, sc = c - dx;
            const double want = (sr < 0 || sr >= h || sc < 0 || sc >= w) ? -1.0 : in[sr * w + sc];
            match = out[r * w + c] == want;
          }
        if (match) {
          found = true;
          shifts.insert({dy, dx});
        }
      }
    INFO("image " << i);
    CHECK(found);
  }
  CHECK(shifts.size() > 1);
}

TEST_CASE("gradients flow through the augmentation layers") {
  const Tensor x = random::normal({2, 4, 5, 2}, 0, 1, DType::float64);
  // A fresh copy of the seeded layer per evaluation, so that every evaluation draws the same shifts.
  check_gradients([&](const std::vector<Tensor>& in) {
    layers::RandomTranslation fresh({0.1, 0.3}, {-0.2, 0.2}, {.fill_mode = "constant", .seed = 1, .fill_value = 0.5});
    return fresh(in[0], true);
  }, {x});
  check_gradients([&](const std::vector<Tensor>& in) {
    layers::RandomFlip fresh("horizontal_and_vertical", {.seed = 3});
    return fresh(in[0], true);
  }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return layers::RandomCrop(3, 3)(in[0]); }, {x});
}

TEST_CASE("augmentation get_config carries Keras' options") {
  const auto f = layers::RandomFlip("vertical", {.seed = 5}).get_config();
  CHECK(f["mode"] == "vertical");
  CHECK(f["seed"] == 5);
  CHECK(layers::RandomFlip().get_config()["seed"].is_null());
  CHECK(layers::RandomFlip().get_config()["mode"] == "horizontal_and_vertical");
  const auto c = layers::RandomCrop(24, 20).get_config();
  CHECK(c["height"] == 24);
  CHECK(c["width"] == 20);
  const auto t = layers::RandomTranslation({-0.2, 0.3}, 0.1).get_config();
  CHECK(t["height_factor"] == nlohmann::json::array({-0.2, 0.3}));
  CHECK(t["width_factor"].get<double>() == Approx(0.1));
  CHECK(t["fill_mode"] == "reflect");
  CHECK(t["interpolation"] == "bilinear");
  CHECK(t["fill_value"].get<double>() == 0.0);
  CHECK(layers::RandomTranslation(0.1, 0.1).class_name() == "RandomTranslation");
}

TEST_CASE("bad augmentation arguments and inputs are errors naming the layer") {
  CHECK_THROWS_WITH(layers::RandomFlip("diagonal", {.name = "flip_q"}), Contains("flip_q") && Contains("diagonal"));
  CHECK_THROWS_AS(layers::RandomFlip("diagonal"), ValueError);
  CHECK_THROWS_WITH(layers::RandomCrop(0, 5), Contains("RandomCrop") && Contains("height"));
  CHECK_THROWS_AS(layers::RandomCrop(5, -1), ValueError);
  CHECK_THROWS_WITH(layers::RandomTranslation(1.5, 0.0), Contains("height_factor") && Contains("1.5"));
  CHECK_THROWS_AS(layers::RandomTranslation(0.1, {-2.0, 0.0}), ValueError);
  CHECK_THROWS_WITH(layers::RandomTranslation(0.1, 0.1, {.fill_mode = "mirror"}), Contains("mirror"));
  CHECK_THROWS_WITH(layers::RandomTranslation(0.1, 0.1, {.interpolation = "bicubic"}), Contains("bicubic"));
  CHECK_THROWS_AS(layers::RandomCrop(3, 3, {.data_format = "hwc"}), ValueError);
  CHECK_THROWS_WITH(layers::RandomFlip("horizontal", {.name = "flip_r"})(zeros({4, 4})),
                    Contains("flip_r") && Contains("[4,4]"));
  CHECK_THROWS_AS(layers::RandomCrop(2, 2)(zeros({1, 1, 4, 4, 1})), ShapeError);
}
