// PNG and JPEG files: small files written out byte by byte with their known pixels, encode ->
// decode round trips, corrupt and truncated inputs (IOError, never a crash), and
// image_dataset_from_directory on a directory tree made for the test.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "scratch.hpp"

using namespace keel;
using i64 = std::int64_t;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<int> pixels(const Tensor& t) {
  const auto v = t.to_vector<std::int64_t>();
  return {v.begin(), v.end()};
}

// The PNG files below were assembled field by field (signature, IHDR, IDAT = zlib of the
// filter-0 rows, IEND, CRC-32 of each chunk) from the pixels their names and comments give.
// 3 x 2 RGB, 8 bits: row 0 = red, green, blue; row 1 = (10,20,30) (40,50,60) (70,80,90).
const std::string kRgb = from_hex(
    "89504e470d0a1a0a0000000d49484452000000030000000208020000001216f14d0000001749444154789c63f8cfc0c000c15c22721a463"
    "66e015100335904c0e42498cb0000000049454e44ae426082");
// 2 x 1 gray + alpha: (100, 255), (200, 0).
const std::string kGrayAlpha = from_hex(
    "89504e470d0a1a0a0000000d49484452000000020000000108040000005e2bb7010000000d49444154789c6348f97f8201000622022c0a3"
    "284530000000049454e44ae426082");
// 2 x 2 palette, 2-bit indices [[0, 1], [1, 0]], PLTE red and blue, tRNS alpha 255 and 128.
const std::string kPalette = from_hex(
    "89504e470d0a1a0a0000000d49484452000000020000000202030000000fd8e5b700000006504c5445ff00000000ff6ca1fd8e000000027"
    "4524e53ff80080fb36a0000000c49444154789c631060700000007400515ef05eea0000000049454e44ae426082");
// 2 x 1 gray, 16 bits: 0x1234, 0xffff (reduced to their high bytes 0x12, 0xff).
const std::string kGray16 = from_hex(
    "89504e470d0a1a0a0000000d494844520000000200000001100000000081d9fc150000000d49444154789c631032f9ff1f0003e602452e4"
    "296750000000049454e44ae426082");
// 8 x 1 gray, 1 bit: 0b10110000 (bits expand to 0 or 255).
const std::string kGray1 = from_hex(
    "89504e470d0a1a0a0000000d4948445200000008000000010100000000cb7bd2ee0000000a49444154789c63d8000000b200b1550ae82a0"
    "000000049454e44ae426082");

Tensor ramp(i64 h, i64 w, i64 c, int mul = 7) {  // distinct, deterministic uint8 pixels
  std::vector<std::uint8_t> v;
  for (i64 i = 0; i < h * w * c; ++i) v.push_back(static_cast<std::uint8_t>((i * mul + 3) % 256));
  return constant(v, Shape{h, w, c});
}

std::uint32_t crc32(const std::string& s) {  // the PNG chunk CRC (reflected, polynomial 0xedb88320)
  std::uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}
std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

}  // namespace

TEST_CASE("decode_png: known files give their pixels", "[image_files]") {
  Tensor rgb = data::decode_png(kRgb);
  CHECK(rgb.dtype() == DType::uint8);
  CHECK(rgb.shape() == Shape{2, 3, 3});
  CHECK(pixels(rgb) == std::vector<int>{255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30, 40, 50, 60, 70, 80, 90});
  // channels = 4 adds an opaque alpha to every pixel.
  CHECK(pixels(data::decode_png(kRgb, 4)) == std::vector<int>{255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255,
                                                              10, 20, 30, 255, 40, 50, 60, 255, 70, 80, 90, 255});
  // channels = 1: libpng's default weights (6968, 23434, 2366) / 32768 give red 54.2, green
  // 182.4, blue 18.4 (libpng rounds; allow one unit).
  const auto gray = pixels(data::decode_png(kRgb, 1));
  REQUIRE(gray.size() == 6);
  CHECK(std::abs(gray[0] - 54) <= 1);
  CHECK(std::abs(gray[1] - 182) <= 1);
  CHECK(std::abs(gray[2] - 18) <= 1);

  Tensor ga = data::decode_png(kGrayAlpha);
  CHECK(ga.shape() == Shape{1, 2, 2});
  CHECK(pixels(ga) == std::vector<int>{100, 255, 200, 0});
  CHECK(pixels(data::decode_png(kGrayAlpha, 3)) == std::vector<int>{100, 100, 100, 200, 200, 200});
  CHECK(pixels(data::decode_png(kGrayAlpha, 1)) == std::vector<int>{100, 200});

  Tensor pal = data::decode_png(kPalette);  // palette with tRNS -> RGBA
  CHECK(pal.shape() == Shape{2, 2, 4});
  CHECK(pixels(pal) == std::vector<int>{255, 0, 0, 255, 0, 0, 255, 128, 0, 0, 255, 128, 255, 0, 0, 255});
  CHECK(pixels(data::decode_png(kPalette, 3)) == std::vector<int>{255, 0, 0, 0, 0, 255, 0, 0, 255, 255, 0, 0});

  CHECK(pixels(data::decode_png(kGray16)) == std::vector<int>{0x12, 0xff});
  CHECK(pixels(data::decode_png(kGray1)) == std::vector<int>{255, 0, 255, 255, 0, 0, 0, 0});
  CHECK(pixels(data::decode_image(kGray1)) == std::vector<int>{255, 0, 255, 255, 0, 0, 0, 0});
}

TEST_CASE("encode_png -> decode_png is exact for 1 to 4 channels", "[image_files]") {
  for (i64 c = 1; c <= 4; ++c) {
    INFO("channels " << c);
    const Tensor img = ramp(5, 7, c);
    const std::string bytes = data::encode_png(img);
    const Tensor back = data::decode_png(bytes);
    CHECK(back.shape() == img.shape());
    CHECK(pixels(back) == pixels(img));
    CHECK(pixels(data::decode_png(data::encode_png(img, 9))) == pixels(img));
    CHECK(pixels(data::decode_png(data::encode_png(img, 0))) == pixels(img));
  }
  // A non-contiguous view (a transpose) and a 1 x 1 image.
  const Tensor t = transpose(ramp(4, 6, 3), {1, 0, 2});
  CHECK(pixels(data::decode_png(data::encode_png(t))) == pixels(t.contiguous()));
  const Tensor one = ramp(1, 1, 1);
  CHECK(pixels(data::decode_png(data::encode_png(one))) == pixels(one));
}

TEST_CASE("encode_jpeg -> decode_jpeg", "[image_files]") {
  // A uniform block has only a DC coefficient, which quality 100 quantises with step 1: exact.
  const Tensor flat = full(Shape{16, 16, 1}, 128.0, DType::uint8);
  const std::string jpg = data::encode_jpeg(flat, 100);
  CHECK(static_cast<unsigned char>(jpg[0]) == 0xff);
  CHECK(static_cast<unsigned char>(jpg[1]) == 0xd8);
  const Tensor back = data::decode_jpeg(jpg);
  CHECK(back.shape() == Shape{16, 16, 1});
  const auto v = pixels(back);
  CHECK(std::all_of(v.begin(), v.end(), [](int p) { return p == 128; }));

  // A smooth colour image is close after a lossy round trip.
  std::vector<std::uint8_t> px;
  for (i64 y = 0; y < 24; ++y)
    for (i64 x = 0; x < 32; ++x)
      for (i64 k = 0; k < 3; ++k) px.push_back(static_cast<std::uint8_t>(k == 0 ? 4 * x : k == 1 ? 8 * y : 100));
  const Tensor img = constant(px, Shape{24, 32, 3});
  const Tensor dec = data::decode_jpeg(data::encode_jpeg(img, 95));
  REQUIRE(dec.shape() == Shape{24, 32, 3});
  const auto d = pixels(dec);
  int worst = 0;
  for (std::size_t i = 0; i < d.size(); ++i) worst = std::max(worst, std::abs(d[i] - static_cast<int>(px[i])));
  CHECK(worst <= 12);
  CHECK(data::decode_jpeg(data::encode_jpeg(img), 1).shape() == Shape{24, 32, 1});
  // decode_image tells JPEG from PNG; channels = 4 adds an opaque alpha to a JPEG.
  const Tensor rgba = data::decode_image(data::encode_jpeg(flat, 100), 4);
  CHECK(rgba.shape() == Shape{16, 16, 4});
  CHECK(pixels(rgba)[3] == 255);
  CHECK(pixels(rgba)[0] == 128);
}

TEST_CASE("corrupt and truncated files are IOError", "[image_files]") {
  // Every truncation of a PNG (past the signature) fails cleanly.
  for (std::size_t n = 0; n < kRgb.size(); ++n) {
    INFO("length " << n);
    CHECK_THROWS_AS(data::decode_png(kRgb.substr(0, n)), IOError);
  }
  std::string bad = kRgb;
  bad[45] = static_cast<char>(bad[45] ^ 0x40);  // inside IDAT: its CRC no longer matches
  CHECK_THROWS_AS(data::decode_png(bad), IOError);
  CHECK_THROWS_AS(data::decode_image("GIF89a......"), IOError);
  CHECK_THROWS_AS(data::decode_jpeg(kRgb), IOError);
  try {
    data::decode_png(kRgb.substr(0, 40), 0, "cat.png");
    FAIL("no error");
  } catch (const IOError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cat.png") && Catch::Contains("offset"));
  }

  const std::string jpg = data::encode_jpeg(ramp(16, 16, 3), 90);
  for (std::size_t n : {std::size_t{0}, std::size_t{2}, std::size_t{3}, std::size_t{20}, jpg.size() / 2, jpg.size() - 3}) {
    INFO("length " << n);
    CHECK_THROWS_AS(data::decode_jpeg(jpg.substr(0, n)), IOError);
  }
  std::string garbage = jpg.substr(0, 3) + std::string(200, '\x55');
  CHECK_THROWS_AS(data::decode_jpeg(garbage), IOError);

  // A valid header claiming 1,000,000 x 1,000,000 RGB pixels: over the size limit, no allocation.
  const std::string ihdr = std::string("IHDR") + be32(1000000) + be32(1000000) + std::string("\x08\x02\x00\x00\x00", 5);
  const std::string huge = kRgb.substr(0, 8) + be32(13) + ihdr + be32(crc32(ihdr)) + kRgb.substr(33);
  CHECK_THROWS_AS(data::decode_png(huge), IOError);
}

TEST_CASE("image file argument errors", "[image_files]") {
  CHECK_THROWS_AS(data::decode_png(kRgb, 2), ValueError);
  CHECK_THROWS_AS(data::decode_jpeg(kRgb, 4), ValueError);
  CHECK_THROWS_AS(data::encode_png(zeros(Shape{2, 2, 3})), DTypeError);  // float32
  CHECK_THROWS_AS(data::encode_png(ramp(2, 2, 1).reshape(Shape{2, 2})), ShapeError);
  CHECK_THROWS_AS(data::encode_png(ramp(2, 2, 5)), ShapeError);
  CHECK_THROWS_AS(data::encode_png(ramp(0, 2, 3)), ValueError);
  CHECK_THROWS_AS(data::encode_png(ramp(2, 2, 3), 10), ValueError);
  CHECK_THROWS_AS(data::encode_jpeg(ramp(2, 2, 2)), ShapeError);
  CHECK_THROWS_AS(data::encode_jpeg(ramp(2, 2, 3), 101), ValueError);
}

TEST_CASE("write_png / write_jpeg / read_image", "[image_files]") {
  keel_test::Scratch dir("image_files_rw");
  const Tensor img = ramp(3, 4, 3);
  data::write_png(dir / "a.png", img);
  CHECK(pixels(data::read_image(dir / "a.png")) == pixels(img));
  data::write_png(dir / "a.png", ramp(2, 2, 1));  // replaced in place
  CHECK(data::read_image(dir / "a.png").shape() == Shape{2, 2, 1});
  data::write_jpeg(dir / "b.jpg", full(Shape{8, 8, 3}, 40.0, DType::uint8), 100);
  CHECK(data::read_image(dir / "b.jpg").shape() == Shape{8, 8, 3});
  CHECK_THROWS_AS(data::read_image(dir / "missing.png"), IOError);
  // No temporary files are left next to the written ones.
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.dir)) files += e.is_regular_file() ? 1 : 0;
  CHECK(files == 2);
}

namespace {

// root/cats/{c1, c2, c3}.png, root/dogs/{d1.png, sub/d2.jpg}, plus files that must be ignored.
// Image k of the tree is uniform with value 10 * k, so a resize keeps that value.
struct Tree {
  keel_test::Scratch dir{"image_dataset_tree"};
  Tree() {
    namespace fs = std::filesystem;
    fs::create_directories(dir / "cats");
    fs::create_directories(dir / "dogs/sub");
    fs::create_directories(dir / ".hidden");
    const auto img = [](double v, i64 h, i64 w) { return full(Shape{h, w, 3}, v, DType::uint8); };
    data::write_png(dir / "cats/c2.png", img(20, 5, 7));
    data::write_png(dir / "cats/c1.png", img(10, 4, 4));
    data::write_png(dir / "cats/C3.PNG", img(30, 6, 3));
    data::write_png(dir / "dogs/d1.png", img(40, 4, 4));
    data::write_jpeg(dir / "dogs/sub/d2.jpg", img(50, 8, 8), 100);
    data::write_png(dir / ".hidden/h.png", img(60, 2, 2));
    data::write_png(dir / "top.png", img(70, 2, 2));
    keel_test::write_all(dir / "cats/notes.txt", "not an image");
  }
};

std::vector<std::string> names(const std::vector<std::string>& paths, const std::string& root) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(std::filesystem::relative(p, root).generic_string());
  return out;
}

}  // namespace

TEST_CASE("image_dataset_from_directory: classes, order, labels", "[image_files][dataset]") {
  Tree t;
  auto r = data::image_dataset_from_directory(t.dir.dir, {.batch_size = 2, .image_size = {3, 3}, .shuffle = false});
  CHECK(r.class_names == std::vector<std::string>{"cats", "dogs"});
  // Alphanumeric (byte) order: "C3.PNG" < "c1.png" < "c2.png"; directories before their subdirectories.
  CHECK(names(r.file_paths, t.dir.dir) ==
        std::vector<std::string>{"cats/C3.PNG", "cats/c1.png", "cats/c2.png", "dogs/d1.png", "dogs/sub/d2.jpg"});
  std::vector<int> labels;
  std::vector<double> values;
  std::vector<i64> batch_sizes;
  for (auto& [x, y] : r.dataset) {
    CHECK(x.dtype() == DType::float32);
    CHECK(y.dtype() == DType::int32);
    CHECK(x.shape()[1] == 3);
    CHECK(x.shape()[2] == 3);
    CHECK(x.shape()[3] == 3);
    batch_sizes.push_back(x.shape()[0]);
    for (i64 i = 0; i < x.shape()[0]; ++i) {
      labels.push_back(static_cast<int>(y[i].item<std::int64_t>()));
      values.push_back(x[i][1][1][0].item<double>());
    }
  }
  CHECK(batch_sizes == std::vector<i64>{2, 2, 1});
  CHECK(labels == std::vector<int>{0, 0, 0, 1, 1});
  CHECK(values == std::vector<double>{30, 10, 20, 40, 50});

  auto cat = data::image_dataset_from_directory(
      t.dir.dir, {.label_mode = "categorical", .color_mode = "grayscale", .batch_size = 8, .image_size = {2, 2}, .shuffle = false});
  for (auto& [x, y] : cat.dataset) {
    CHECK(x.shape() == Shape{5, 2, 2, 1});
    CHECK(y.shape() == Shape{5, 2});
    CHECK(y.to_vector<double>() == std::vector<double>{1, 0, 1, 0, 1, 0, 0, 1, 0, 1});
  }
  auto bin = data::image_dataset_from_directory(t.dir.dir, {.label_mode = "binary", .batch_size = 8, .shuffle = false});
  for (auto& [x, y] : bin.dataset) {
    CHECK(x.shape() == Shape{5, 256, 256, 3});
    CHECK(y.shape() == Shape{5, 1});
    CHECK(y.to_vector<double>() == std::vector<double>{0, 0, 0, 1, 1});
  }
  // class_names chooses the classes and their order.
  auto dogs = data::image_dataset_from_directory(t.dir.dir, {.class_names = {"dogs", "cats"}, .shuffle = false});
  CHECK(names(dogs.file_paths, t.dir.dir).front() == "dogs/d1.png");
  // Explicit labels: one per file of the whole tree (hidden folders and top-level files
  // included, as Keras' walk), directories in path order: the root's files first.
  auto expl = data::image_dataset_from_directory(
      t.dir.dir, {.labels = std::vector<i64>{0, 1, 0, 1, 0, 1, 0}, .batch_size = 7, .shuffle = false});
  CHECK(expl.class_names == std::vector<std::string>{"0", "1"});
  CHECK(names(expl.file_paths, t.dir.dir) ==
        std::vector<std::string>{"top.png", ".hidden/h.png", "cats/C3.PNG", "cats/c1.png", "cats/c2.png",
                                 "dogs/d1.png", "dogs/sub/d2.jpg"});
  for (auto& [x, y] : expl.dataset) CHECK(y.to_vector<double>() == std::vector<double>{0, 1, 0, 1, 0, 1, 0});
}

TEST_CASE("image_dataset_from_directory: shuffle, splits, errors", "[image_files][dataset]") {
  Tree t;
  const auto both = data::image_dataset_from_directory(
      t.dir.dir, {.batch_size = 1, .image_size = {2, 2}, .seed = 7, .validation_split = 0.4, .subset = "both"});
  // 5 files: int(0.4 * 5) = 2 for validation, 3 for training, disjoint, together all files.
  CHECK(both.file_paths.size() == 3);
  CHECK(both.validation_file_paths.size() == 2);
  std::set<std::string> all(both.file_paths.begin(), both.file_paths.end());
  all.insert(both.validation_file_paths.begin(), both.validation_file_paths.end());
  CHECK(all.size() == 5);
  // The same seed gives the same split through "training" and "validation".
  const auto tr = data::image_dataset_from_directory(
      t.dir.dir, {.image_size = {2, 2}, .seed = 7, .validation_split = 0.4, .subset = "training"});
  const auto va = data::image_dataset_from_directory(
      t.dir.dir, {.image_size = {2, 2}, .seed = 7, .validation_split = 0.4, .subset = "validation"});
  CHECK(tr.file_paths == both.file_paths);
  CHECK(va.file_paths == both.validation_file_paths);
  i64 count = 0;
  for (auto& [x, y] : both.validation) count += x.shape()[0];
  CHECK(count == 2);
  // Labels follow their files through the shuffle.
  for (auto& [x, y] : both.dataset) {
    const double v = x[0][0][0][0].item<double>();
    CHECK(y[0].item<std::int64_t>() == (v >= 40 ? 1 : 0));
  }

  using O = data::ImageDatasetOptions;
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.validation_split = 0.2, .subset = "training"}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.seed = 1, .validation_split = 0.2}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.seed = 1, .validation_split = 1.5, .subset = "both"}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.color_mode = "cmyk"}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.label_mode = "sparse"}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.class_names = {"birds"}}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.labels = std::vector<i64>{0, 1}}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir.dir, O{.image_size = {0, 4}}), ValueError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir / "nowhere"), IOError);
  CHECK_THROWS_AS(data::image_dataset_from_directory(t.dir / "cats"), ValueError);  // no class subdirectories
}
