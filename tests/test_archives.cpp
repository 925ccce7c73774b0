// The zip reader behind .npz and .keel files checks the whole central directory against the end
// record and every local header (counts, names, methods, sizes, CRC-32, offsets, overlaps), as
// Python's zipfile does; and the .npy / safetensors readers take legal zero-size shapes with huge
// dimensions while refusing shapes whose element count overflows, naming the field or offset.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "scratch.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/zip.hpp"

using namespace keel;
using keel_test::Scratch;
using keel_test::read_all;
using keel_test::write_all;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::uint64_t get(const std::string& b, std::size_t at, int n) { return io::zip::read_le(b, at, n); }
void set(std::string& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

// The offsets of a keel-written archive (no comment): the end record, and each central entry.
struct Layout {
  std::size_t eocd, cd;
  std::vector<std::size_t> entries;  // central directory entries
  std::vector<std::size_t> locals;   // their local headers
};
Layout layout(const std::string& zip) {
  Layout l;
  l.eocd = zip.size() - 22;
  REQUIRE(get(zip, l.eocd, 4) == 0x06054b50);
  l.cd = get(zip, l.eocd + 16, 4);
  for (std::size_t p = l.cd; p < l.eocd;) {
    REQUIRE(get(zip, p, 4) == 0x02014b50);
    l.entries.push_back(p);
    l.locals.push_back(get(zip, p + 42, 4));
    p += 46 + get(zip, p + 28, 2) + get(zip, p + 30, 2) + get(zip, p + 32, 2);
  }
  return l;
}

std::string two_array_npz(const Scratch& s, bool compressed = false) {
  const std::string path = s / "two.npz";
  io::save_npz(path, {{"a", arange(4)}, {"b", arange(6)}}, compressed);
  return read_all(path);
}

// The 8-byte length, the JSON header and the data of a safetensors file.
std::string safetensors_file(const std::string& json, const std::string& data = "") {
  return le(json.size(), 8) + json + data;
}

// A .npy file as NumPy lays it out.
std::string npy_file(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  return std::string("\x93NUMPY\x01\x00", 8) + le(header.size(), 2) + header + data;
}

}  // namespace

TEST_CASE("an end record that undercounts or overcounts the central directory is an IOError naming the member",
          "[io][zip][npz]") {
  Scratch s("count");
  const std::string good = two_array_npz(s);
  const std::string path = s / "edited.npz";
  REQUIRE(io::load_npz(s / "two.npz").size() == 2);
  const Layout l = layout(good);
  for (std::uint64_t count : {0u, 1u, 3u}) {
    INFO("entry count set to " << count);
    std::string bad = good;
    set(bad, l.eocd + 8, count, 2);   // entries on this disk
    set(bad, l.eocd + 10, count, 2);  // entries in all
    write_all(path, bad);
    CHECK_THROWS_AS(io::load_npz(path), IOError);
    if (count < 2)
      CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("byte offset") &&
                                                Contains(count == 0 ? "'a.npy'" : "'b.npy'") && Contains("counts"));
    else
      CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("3 entries"));
  }
  // Only one of the two counts edited.
  std::string bad = good;
  set(bad, l.eocd + 10, 1, 2);
  write_all(path, bad);
  CHECK_THROWS_WITH(io::load_npz(path), Contains("'b.npy'"));
  // A directory size that stops short of the end record hides the second entry too.
  bad = good;
  set(bad, l.eocd + 12, l.entries[1] - l.cd, 4);
  write_all(path, bad);
  CHECK_THROWS_WITH(io::load_npz(path), Contains("central directory") && Contains("end record"));
}

TEST_CASE("a .keel whose end record hides the optimizer member is an IOError, not a model without its state",
          "[io][zip][saving]") {
  Scratch s("keel_count");
  auto model = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{3}), std::make_shared<layers::Dense>(2)});
  model->compile({.optimizer = optimizers::SGD(0.1, {.momentum = 0.9}), .loss = "mse"});
  model->fit(random::normal({8, 3}), random::normal({8, 2}), {.batch_size = 4, .epochs = 1, .verbose = 0});
  const std::string path = s / "m.keel";
  model->save(path);
  std::string bytes = read_all(path);
  const Layout l = layout(bytes);
  REQUIRE(l.entries.size() == 4);
  REQUIRE(std::string(bytes, l.entries[3] + 46, get(bytes, l.entries[3] + 28, 2)) == "optimizer.safetensors");
  set(bytes, l.eocd + 8, 3, 2);
  set(bytes, l.eocd + 10, 3, 2);
  write_all(path, bytes);
  CHECK_THROWS_AS(models::load_model(path), IOError);
  CHECK_THROWS_WITH(models::load_model(path), Contains(path) && Contains("'optimizer.safetensors'"));
}

TEST_CASE("a central directory name that differs from its local header is an IOError naming both", "[io][zip][npz]") {
  Scratch s("names");
  std::string bytes = two_array_npz(s);
  const Layout l = layout(bytes);
  bytes[l.entries[0] + 46] = 'z';  // the central directory now says "z.npy"; the local header "a.npy"
  const std::string path = s / "renamed.npz";
  write_all(path, bytes);
  CHECK_THROWS_AS(io::load_npz(path), IOError);
  CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("'z.npy'") && Contains("'a.npy'") &&
                                            Contains(fmt::format("byte offset {}", l.locals[0] + 30)));
}

TEST_CASE("local headers must agree with the central directory on sizes, CRC-32 and method", "[io][zip][npz]") {
  Scratch s("local");
  const std::string path = s / "bad.npz";
  for (bool compressed : {false, true}) {
    INFO((compressed ? "deflated" : "stored"));
    const std::string good = two_array_npz(s, compressed);
    const Layout l = layout(good);
    const std::size_t h = l.locals[1];  // b.npy's local header
    std::string bad = good;
    set(bad, h + 14, get(bad, h + 14, 4) ^ 1, 4);
    write_all(path, bad);
    CHECK_THROWS_WITH(io::load_npz(path), Contains("'b.npy'") && Contains("CRC-32") &&
                                              Contains(fmt::format("byte offset {}", h + 14)));
    bad = good;
    set(bad, h + 22, get(bad, h + 22, 4) + 1, 4);  // uncompressed size
    write_all(path, bad);
    CHECK_THROWS_WITH(io::load_npz(path), Contains("'b.npy'") && Contains("sizes"));
    bad = good;
    set(bad, h + 8, compressed ? 0 : 8, 2);  // method
    write_all(path, bad);
    CHECK_THROWS_WITH(io::load_npz(path), Contains("'b.npy'") && Contains("method"));
    // The central directory's CRC-32 differs from the data's (and the local header's).
    bad = good;
    set(bad, l.entries[1] + 16, get(bad, l.entries[1] + 16, 4) ^ 1, 4);
    write_all(path, bad);
    CHECK_THROWS_WITH(io::load_npz(path), Contains("'b.npy'") && Contains("CRC-32"));
    // A local offset that points at the other member's header.
    bad = good;
    set(bad, l.entries[1] + 42, l.locals[0], 4);
    write_all(path, bad);
    CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("'b.npy'"));
  }
}

TEST_CASE("members that overlap each other or the central directory are an IOError", "[io][zip][npz]") {
  Scratch s("overlap");
  const std::string path = s / "bomb.npz";
  // Two central entries for one local member (the overlapping-member zip bomb), under one name.
  const std::string member = read_all([&] {
    io::save_npy(s / "x.npy", arange(3));
    return s / "x.npy";
  }());
  std::string one = io::zip::write_archive({{"x.npy", member, false}}, "test", path);
  const Layout l = layout(one);
  const std::string entry = one.substr(l.cd, l.eocd - l.cd);
  std::string twice = one.substr(0, l.cd) + entry + entry;
  twice += le(0x06054b50, 4) + le(0, 4) + le(2, 2) + le(2, 2) + le(2 * entry.size(), 4) + le(l.cd, 4) + le(0, 2);
  write_all(path, twice);
  CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("'x.npy'") && Contains("overlaps"));
  // A member whose data runs into the central directory.
  std::string into = one;
  const std::size_t size_field = l.entries[0] + 20;
  set(into, size_field, get(into, size_field, 4) + 10, 4);
  set(into, size_field + 4, get(into, size_field + 4, 4) + 10, 4);
  set(into, l.locals[0] + 18, get(into, l.locals[0] + 18, 4) + 10, 4);
  set(into, l.locals[0] + 22, get(into, l.locals[0] + 22, 4) + 10, 4);
  write_all(path, into);
  CHECK_THROWS_WITH(io::load_npz(path), Contains("'x.npy'") && Contains("central directory"));
  // Two members of the same name.
  write_all(path, io::zip::write_archive({{"x.npy", member, false}, {"x.npy", member, true}}, "test", path));
  CHECK_THROWS_WITH(io::load_npz(path), Contains("duplicate member 'x.npy'"));
}

TEST_CASE("a member with a data descriptor reads back and one that disagrees is an IOError; an empty archive is empty", "[io][zip][npz]") {
  Scratch s("good");
  const std::string path = s / "ok.npz";
  const std::string member = [&] {
    io::save_npy(s / "x.npy", arange(5));
    return read_all(s / "x.npy");
  }();
  // A stored member written as streaming writers do: zeros in the local header, a data
  // descriptor (with its signature) after the data.
  const std::uint32_t crc = [&] {
    const std::string z = io::zip::write_archive({{"x.npy", member, false}}, "test", path);
    return static_cast<std::uint32_t>(get(z, 14, 4));
  }();
  const std::string name = "x.npy";
  std::string zip = le(0x04034b50, 4) + le(20, 2) + le(8, 2) + le(0, 2) + le(0, 4) + le(0, 4) + le(0, 4) + le(0, 4) +
                    le(name.size(), 2) + le(0, 2) + name + member + le(0x08074b50, 4) + le(crc, 4) +
                    le(member.size(), 4) + le(member.size(), 4);
  const std::size_t cd = zip.size();
  const std::string central = le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(8, 2) + le(0, 2) + le(0, 4) + le(crc, 4) +
                              le(member.size(), 4) + le(member.size(), 4) + le(name.size(), 2) + le(0, 2) + le(0, 2) +
                              le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + name;
  zip += central + le(0x06054b50, 4) + le(0, 4) + le(1, 2) + le(1, 2) + le(central.size(), 4) + le(cd, 4) + le(0, 2);
  write_all(path, zip);
  CHECK(io::load_npz(path).at("x").to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  // The same with a descriptor that disagrees.
  std::string bad = zip;
  set(bad, 30 + name.size() + member.size() + 4, crc ^ 1, 4);
  write_all(path, bad);
  CHECK_THROWS_WITH(io::load_npz(path), Contains("'x.npy'") && Contains("data descriptor"));
  // An empty archive is an empty map.
  write_all(path, io::zip::write_archive({}, "test", path));
  CHECK(io::load_npz(path).empty());
}

TEST_CASE("safetensors and .npy take a legal zero-size shape with a huge dimension", "[io][safetensors][npy]") {
  Scratch s("zero_size");
  const std::string st = s / "zero.safetensors";
  write_all(st, safetensors_file(R"({"e":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]},)"
                                 R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                 std::string(4, '\0')));
  const auto t = io::load_safetensors(st);
  CHECK(t.at("e").shape() == Shape{0, std::int64_t{1} << 62});
  CHECK(t.at("e").size() == 0);
  CHECK(t.at("e").to_vector<float>().empty());
  CHECK(t.at("w").to_vector<float>() == std::vector<float>{0.f});

  const std::string npy = s / "zero.npy";
  write_all(npy, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904), }", ""));
  const Tensor a = io::load_npy(npy);
  CHECK(a.shape() == Shape{0, std::int64_t{1} << 62});
  CHECK(a.to_vector<float>().empty());
  write_all(npy, npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (4611686018427387904, 0), }", ""));
  CHECK(io::load_npy(npy).shape() == Shape{std::int64_t{1} << 62, 0});
  // Saved again, they read back.
  io::save_npy(s / "again.npy", a);
  CHECK(io::load_npy(s / "again.npy").shape() == a.shape());
  io::save_safetensors(s / "again.safetensors", {{"e", t.at("e")}});
  CHECK(io::load_safetensors(s / "again.safetensors").at("e").shape() == a.shape());
}

TEST_CASE("shapes whose element count overflows are an IOError naming the field or offset", "[io][safetensors][npy]") {
  Scratch s("overflow");
  const std::string st = s / "big.safetensors";
  write_all(st, safetensors_file(R"({"x":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})"));
  CHECK_THROWS_AS(io::load_safetensors(st), IOError);
  CHECK_THROWS_WITH(io::load_safetensors(st), Contains(st) && Contains("tensor 'x'") && Contains("shape") &&
                                                  Contains("overflows"));
  // Beyond int64, and a count that fits 64 bits only until it is multiplied by the item size.
  write_all(st, safetensors_file(R"({"x":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}})"));
  CHECK_THROWS_WITH(io::load_safetensors(st), Contains("tensor 'x'") && Contains("shape[1]"));
  write_all(st, safetensors_file(R"({"x":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})",
                                 std::string(8, '\0')));
  CHECK_THROWS_WITH(io::load_safetensors(st), Contains("tensor 'x'"));

  const std::string npy = s / "big.npy";
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }";
  write_all(npy, npy_file(dict, ""));
  CHECK_THROWS_AS(io::load_npy(npy), IOError);
  // The offset of the shape tuple in the file: 10 bytes of preamble, then the dict.
  const std::size_t shape_at = 10 + dict.find('(');
  CHECK_THROWS_WITH(io::load_npy(npy), Contains(npy) && Contains(fmt::format("byte offset {}", shape_at)));
  write_all(npy, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""));
  CHECK_THROWS_WITH(io::load_npy(npy), Contains("does not fit int64"));
  write_all(npy, npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", ""));
  CHECK_THROWS_WITH(io::load_npy(npy), Contains("truncated"));
}

TEST_CASE("the fuzz corpus entries of the reader defects are rejected, or read, as the fixes say", "[io][fuzz]") {
  // tests/fuzz/corpus/, found from this file's path (the tests run from the build folder).
  const fs::path corpus = fs::path(__FILE__).parent_path() / "fuzz" / "corpus";
  REQUIRE(fs::is_directory(corpus));
  const auto at = [&](const char* entry) { return (corpus / entry).string(); };
  for (const char* bad : {"npz/count_undercount.npz", "npz/name_mismatch.npz", "npz/local_size_mismatch.npz",
                          "npz/local_offset_to_other_member.npz", "npz/overlapping_members.npz"}) {
    INFO(bad);
    CHECK_THROWS_AS(io::load_npz(at(bad)), IOError);
  }
  CHECK_THROWS_WITH(models::load_model(at("keel/hidden_optimizer.keel")), Contains("'optimizer.safetensors'"));
  CHECK_THROWS_WITH(models::load_model(at("keel/missing_slot.keel")), Contains("kernel/momentum") && Contains("missing"));
  CHECK_NOTHROW(models::load_model(at("keel/missing_slot.keel"), false));
  CHECK_THROWS_WITH(data::read_idx(at("idx/gzip_bomb-idx1-ubyte.gz")), Contains("runs past"));
  CHECK_THROWS_WITH(data::read_idx(at("idx/declares_more_than_inflates-idx3-ubyte.gz")), Contains("inflate to"));
  CHECK(io::load_safetensors(at("safetensors/zero_size_huge_dim.safetensors")).at("e").size() == 0);
  CHECK_THROWS_WITH(io::load_safetensors(at("safetensors/overflowing_dims.safetensors")), Contains("overflows"));
  CHECK(io::load_npy(at("npy/zero_size_huge_dim.npy")).size() == 0);
  CHECK_THROWS_WITH(io::load_npy(at("npy/overflowing_dims.npy")), Contains("byte offset"));
}
