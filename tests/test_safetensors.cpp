// safetensors: round trips, files written by an independent reference writer, and rejection of
// truncated or corrupt files with keel::IOError; crash-safe writes.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "killed_child.hpp"
#include "scratch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace keel;
using keel_test::read_all;
using keel_test::write_all;
using Catch::Matchers::Contains;

namespace {

std::string temp_path(const std::string& name) {
  return (std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp")) + "/keel_st_" +
         std::to_string(::getpid()) + "_" + name;
}

// The published layout, written by hand: u64 little-endian header size, JSON, data.
std::string reference_file(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + json + data;
}

std::string float_bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) {
    char b[4];
    std::memcpy(b, &v, 4);
    s.append(b, 4);
  }
  return s;
}

}  // namespace

TEST_CASE("safetensors round trips every dtype and rank, including 0-d and empty tensors", "[io][safetensors]") {
  const std::string path = temp_path("roundtrip.safetensors");
  std::map<std::string, Tensor> in{
      {"f32", random::normal({2, 3})},
      {"f64", constant({1.5, -2.25}, {2}, DType::float64)},
      {"f16", constant({1.5f, 0.25f, -8.f}, {3}).astype(DType::float16)},
      {"bf16", constant({1.5f, 0.25f}, {1, 2}).astype(DType::bfloat16)},
      {"i32", constant({1, -2, 3, 4}, {2, 2})},
      {"i64", constant(std::vector<std::int64_t>{7, 8, 9}, {3})},
      {"u8", constant(std::vector<std::uint8_t>{0, 255}, {2})},
      {"bool", constant({true, false, true}, {3})},
      {"scalar", constant(3.5)},
      {"empty", zeros({0, 4})},
      {"view", transpose(reshape(arange(6), {2, 3}))},
  };
  io::save_safetensors(path, in, {{"note", "hello"}});
  const auto out = io::load_safetensors(path);
  REQUIRE(out.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    const Tensor& u = out.at(name);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.shape() == t.shape());
    CHECK(u.to_vector<double>() == t.to_vector<double>());
  }
  CHECK(io::load_safetensors_metadata(path).at("note") == "hello");
  std::remove(path.c_str());
}

TEST_CASE("safetensors written here follow the published byte layout", "[io][safetensors]") {
  const std::string path = temp_path("layout.safetensors");
  io::save_safetensors(path, {{"a", constant({1.f, 2.f}, {2})}});
  const std::string bytes = read_all(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  REQUIRE(bytes.size() == 8 + n + 8);
  const std::string header = bytes.substr(8, n);
  CHECK_THAT(header, Contains("\"a\"") && Contains("\"F32\"") && Contains("\"data_offsets\":[0,8]"));
  CHECK(bytes.substr(8 + n) == float_bytes({1.f, 2.f}));
  CHECK((8 + n) % 8 == 0);  // data 8-byte aligned
  std::remove(path.c_str());
}

TEST_CASE("safetensors files from an independent writer load", "[io][safetensors]") {
  const std::string path = temp_path("reference.safetensors");
  write_all(path, reference_file(
                      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                      float_bytes({1, 2, 3, 4}) + float_bytes({5, 6})));
  const auto t = io::load_safetensors(path);
  CHECK(t.at("w").to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(t.at("w").shape() == Shape{2, 2});
  CHECK(t.at("b").to_vector<float>() == std::vector<float>{5, 6});
  std::remove(path.c_str());
}

TEST_CASE("truncated and corrupt safetensors files throw IOError naming the file and field", "[io][safetensors][errors]") {
  const std::string path = temp_path("bad.safetensors");
  const std::string good_json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string good = reference_file(good_json, float_bytes({1, 2}));
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  const Case cases[] = {
      {"too short", good.substr(0, 5), "too short"},
      {"header past the end", good.substr(0, 20), "header length"},
      {"data truncated", good.substr(0, good.size() - 3), "data_offsets"},
      {"not JSON", reference_file("{not json", ""), "JSON"},
      {"bad dtype", reference_file(R"({"w":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", float_bytes({1, 2})), "dtype"},
      {"size mismatch", reference_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", float_bytes({1, 2})), "need"},
      {"negative shape", reference_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", float_bytes({1, 2})), "shape"},
      {"offsets out of range", reference_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", float_bytes({1, 2})), "outside"},
      {"overlap", reference_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", float_bytes({1, 2})), "overlap"},
      {"gap", reference_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", float_bytes({1, 2})), "gap"},
      {"extra bytes", reference_file(good_json, float_bytes({1, 2, 3})), "cover"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    write_all(path, c.bytes);
    CHECK_THROWS_AS(io::load_safetensors(path), IOError);
    CHECK_THROWS_WITH(io::load_safetensors(path), Contains(path) && Contains(c.expect));
  }
  CHECK_THROWS_AS(io::load_safetensors(temp_path("missing.safetensors")), IOError);
  std::remove(path.c_str());
}

TEST_CASE("a save killed midway leaves the previous file intact", "[io][safetensors]") {
  const std::string path = temp_path("crash.safetensors");
  io::save_safetensors(path, {{"w", constant({1.f, 2.f, 3.f}, {3})}});
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A large save that the parent kills while it is being written. One thread: the parent's
    // OpenMP workers do not exist in a forked child.
    config::set_num_threads(1);
    const Tensor big = zeros({64, 1024, 1024});
    for (;;) io::save_safetensors(path, {{"w", big}});
  }
  ::usleep(300 * 1000);
  keel_test::kill_and_reap(child);
  const auto t = io::load_safetensors(path);  // either the old or a complete new file
  const Tensor w = t.at("w");
  if (w.size() == 3) {
    CHECK(w.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f});
  } else {
    CHECK(w.shape() == Shape{64, 1024, 1024});
  }
  std::remove(path.c_str());
  // Temporary files of the killed writer may stay behind; they never replace the target.
  std::system(("rm -f " + path + ".tmp-*").c_str());
}

TEST_CASE("a BOOL tensor whose bytes are neither 0 nor 1 loads as true", "[io][safetensors]") {
  const std::string path = temp_path("bool.safetensors");
  write_all(path, reference_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\0\066\1", 3)));
  const Tensor m = io::load_safetensors(path).at("m");
  CHECK(m.to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(m.to_vector<float>() == std::vector<float>{0.f, 1.f, 1.f});
  std::remove(path.c_str());
}
