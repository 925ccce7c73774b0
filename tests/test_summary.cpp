// summary::* (tf.summary): the event files are read back with TensorBoard's protos (the same
// schemas keel writes with) after checking every TFRecord frame's masked CRC-32C; each field of
// the scalar, histogram, text and image summaries is compared with what was written, worked by
// hand. (tests/python/check_tensorboard_events.py reads the same kind of file independently.)
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <keel/summary/summary.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "event_files.hpp"
#include "scratch.hpp"
#include "summary/record_writer.hpp"

using namespace keel;

using keel_test::read_events;

TEST_CASE("CRC-32C matches its published check value", "[summary]") {
  // The CRC-32C of "123456789" is 0xE3069283 (RFC 3720, appendix B.4).
  CHECK(summary::detail::crc32c("123456789", 9) == 0xE3069283u);
}

TEST_CASE("a FileWriter starts with the file version and writes scalars", "[summary]") {
  keel_test::Scratch dir("summary_scalar");
  std::string path;
  {
    summary::FileWriter w(dir.dir + "/run/train");
    path = w.path();
    CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
    summary::scalar(w, "loss", 0.25, 7);
    summary::scalar(w, "lr", 1e-3, 8);
  }
  const auto events = read_events(path);
  REQUIRE(events.size() == 3);
  CHECK(events[0].file_version() == "brain.Event:2");
  CHECK(events[1].step() == 7);
  REQUIRE(events[1].summary().value_size() == 1);
  CHECK(events[1].summary().value(0).tag() == "loss");
  CHECK(events[1].summary().value(0).simple_value() == 0.25f);
  CHECK(events[2].summary().value(0).simple_value() == Approx(1e-3));
  CHECK(events[2].wall_time() >= events[1].wall_time());
}

TEST_CASE("histogram writes TensorBoard's HistogramProto with equal-width buckets", "[summary]") {
  keel_test::Scratch dir("summary_histogram");
  std::string path;
  {
    summary::FileWriter w(dir.dir);
    path = w.path();
    // [1, 2, 2, 3, 10] in 3 buckets over [1, 10], width 3: [1,4) holds 1,2,2,3; [4,7) none;
    // [7,10] holds 10. min 1, max 10, num 5, sum 18, sum of squares 1+4+4+9+100 = 118.
    summary::histogram(w, "w", constant<float>({1, 2, 2, 3, 10}, {5}), 2, 3);
    // All equal: one bucket ending at the value.
    summary::histogram(w, "c", constant<double>({4, 4}, {2}), 3);
    CHECK_THROWS_AS(summary::histogram(w, "bad", constant<double>({1, std::nan("")}, {2}), 3), ValueError);
    CHECK_THROWS_AS(summary::histogram(w, "bad", constant<double>({1}, {1}), 3, 0), ValueError);
  }
  const auto events = read_events(path);
  REQUIRE(events.size() == 3);
  const auto& h = events[1].summary().value(0).histo();
  CHECK(events[1].summary().value(0).tag() == "w");
  CHECK(h.min() == 1);
  CHECK(h.max() == 10);
  CHECK(h.num() == 5);
  CHECK(h.sum() == 18);
  CHECK(h.sum_squares() == 118);
  REQUIRE(h.bucket_limit_size() == 3);
  CHECK(h.bucket_limit(0) == 4);
  CHECK(h.bucket_limit(1) == 7);
  CHECK(h.bucket_limit(2) == 10);
  CHECK(h.bucket(0) == 4);
  CHECK(h.bucket(1) == 0);
  CHECK(h.bucket(2) == 1);
  const auto& c = events[2].summary().value(0).histo();
  REQUIRE(c.bucket_size() == 1);
  CHECK(c.bucket(0) == 2);
  CHECK(c.bucket_limit(0) == 4);
}

TEST_CASE("text is a string tensor for the text plugin", "[summary]") {
  keel_test::Scratch dir("summary_text");
  std::string path;
  {
    summary::FileWriter w(dir.dir);
    path = w.path();
    summary::text(w, "notes", "learning rate halved", 11);
  }
  const auto events = read_events(path);
  REQUIRE(events.size() == 2);
  const auto& v = events[1].summary().value(0);
  CHECK(v.tag() == "notes");
  CHECK(v.metadata().plugin_data().plugin_name() == "text");
  CHECK(v.tensor().dtype() == tensorboard::DT_STRING);
  REQUIRE(v.tensor().string_val_size() == 1);
  CHECK(v.tensor().string_val(0) == "learning rate halved");
}

TEST_CASE("image writes PNGs of float [0, 1] and uint8 images", "[summary]") {
  keel_test::Scratch dir("summary_image");
  std::string path;
  {
    summary::FileWriter w(dir.dir);
    path = w.path();
    // Two 1x2 grey images; floats clip to [0, 1] and scale by 255 with half-to-even rounding:
    // 0 -> 0, 0.5 -> 127.5 -> 128, 1 -> 255, 2 -> 255, -1 -> 0, 0.2 -> 51.
    summary::image(w, "img", constant<float>({0.f, 0.5f, 1.f, 2.f, -1.f, 0.2f}, {3, 1, 2, 1}), 1, 2);
    summary::image(w, "u8", constant<std::uint8_t>({1, 2, 3}, {1, 1, 3}), 2, 1);  // one RGB pixel
    CHECK_THROWS_AS(summary::image(w, "bad", zeros({2, 2, 2, 2}), 3), ShapeError);
  }
  const auto events = read_events(path);
  REQUIRE(events.size() == 3);
  const auto& s = events[1].summary();
  REQUIRE(s.value_size() == 2);  // max_outputs = 2 of 3 images
  CHECK(s.value(0).tag() == "img/image/0");
  CHECK(s.value(1).tag() == "img/image/1");
  const auto& img = s.value(0).image();
  CHECK(img.height() == 1);
  CHECK(img.width() == 2);
  CHECK(img.colorspace() == 1);
  const std::string& png0 = img.encoded_image_string();
  const Tensor decoded0 = data::decode_png(png0);
  CHECK(decoded0.to_vector<std::uint8_t>() == std::vector<std::uint8_t>{0, 128});
  const std::string& png1 = s.value(1).image().encoded_image_string();
  CHECK(data::decode_png(png1).to_vector<std::uint8_t>() ==
        std::vector<std::uint8_t>{255, 255});
  const auto& rgb = events[2].summary().value(0);
  CHECK(rgb.tag() == "u8/image");
  const std::string& png2 = rgb.image().encoded_image_string();
  CHECK(data::decode_png(png2).to_vector<std::uint8_t>() ==
        std::vector<std::uint8_t>{1, 2, 3});
}

TEST_CASE("a FileWriter whose directory cannot be made is an IOError", "[summary][errors]") {
  keel_test::Scratch dir("summary_errors");
  const std::string file = dir.dir + "/plain_file";
  std::ofstream(file) << "x";
  CHECK_THROWS_AS(summary::FileWriter(file + "/sub"), IOError);
}
