// Dataset file loaders and NumPy files: every file here is written byte by byte by the test, the
// way the reference tools lay them out (CIFAR-10 binary batches, IDX plain and gzip, CSV, .npy as
// NumPy writes it, zip archives), then loaded; truncated or corrupt copies must give an IOError
// naming the file and the byte offset.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace keel;
using Catch::Matchers::Contains;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    std::string tmpl = std::string(base) + "/keel_loaders_XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}
std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// CRC-32 (IEEE, reflected), bit by bit: an implementation independent of the library's zlib.
std::uint32_t crc32_of(const std::string& s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A gzip member (RFC 1952) whose deflate stream uses stored blocks (RFC 1951, BTYPE 00).
std::string gzip_stored(const std::string& data) {
  std::string out = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, data.size() - pos);
    out.push_back(pos + n == data.size() ? 1 : 0);  // BFINAL
    out += le(n, 2) + le(~n & 0xFFFF, 2) + data.substr(pos, n);
    pos += n;
  } while (pos < data.size());
  return out + le(crc32_of(data), 4) + le(data.size(), 4);
}

// A gzip member whose deflate stream is one fixed-Huffman block (RFC 1951, 3.2.6): `prefix` as
// literals, then `zeros` zero bytes as a literal 0 and <length 258, distance 1> copies of it, 13
// bits per 258 bytes. A gzip bomb: 64 MiB of zeros take 400 KiB. The trailer's CRC-32 is not
// computed (0): a reader that stops at the size the data declares never gets to it.
std::string gzip_zero_bomb(const std::string& prefix, std::uint64_t zeros) {
  std::string out = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};
  std::uint32_t acc = 0;
  int nbits = 0;
  const auto bits = [&](std::uint32_t v, int n) {  // header fields: least significant bit first
    for (int i = 0; i < n; ++i) {
      acc |= ((v >> i) & 1u) << nbits;
      if (++nbits == 8) {
        out.push_back(static_cast<char>(acc));
        acc = 0;
        nbits = 0;
      }
    }
  };
  const auto code = [&](std::uint32_t c, int n) {  // Huffman codes: most significant bit first
    for (int i = n - 1; i >= 0; --i) bits((c >> i) & 1u, 1);
  };
  const auto literal = [&](unsigned char v) {
    if (v < 144) code(0x30 + v, 8);
    else code(0x190 + (v - 144u), 9);
  };
  bits(1, 1);  // BFINAL
  bits(1, 2);  // BTYPE 01: fixed Huffman codes
  for (unsigned char c : prefix) literal(c);
  std::uint64_t left = zeros;
  if (left > 0) {
    literal(0);
    --left;
  }
  for (; left >= 258; left -= 258) {
    code(0xC5, 8);  // length symbol 285: 258 bytes
    code(0, 5);     // distance code 0: distance 1
  }
  for (; left > 0; --left) literal(0);
  code(0, 7);  // end of block (symbol 256)
  if (nbits) out.push_back(static_cast<char>(acc));
  return out + le(0, 4) + le((prefix.size() + zeros) & 0xFFFFFFFFu, 4);
}

std::string idx_file(std::uint8_t type, const std::vector<std::uint32_t>& dims, const std::string& data) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (auto d : dims) s += be32(d);
  return s + data;
}

// n images of rows x cols with pixel (i, r, c) = (7i + 3r + c) mod 256, labels i mod 10.
std::string idx_images(std::uint32_t n, std::uint32_t rows, std::uint32_t cols) {
  std::string data;
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t r = 0; r < rows; ++r)
      for (std::uint32_t c = 0; c < cols; ++c) data.push_back(static_cast<char>((7 * i + 3 * r + c) % 256));
  return idx_file(0x08, {n, rows, cols}, data);
}
std::string idx_labels(std::uint32_t n) {
  std::string data;
  for (std::uint32_t i = 0; i < n; ++i) data.push_back(static_cast<char>(i % 10));
  return idx_file(0x08, {n}, data);
}

// CIFAR-10 records: label, then the R, G and B planes of 32x32 row-major pixels.
int cifar_pixel(int record, int p, int channel) { return (record * 5 + p * (channel + 1)) % 256; }
std::string cifar_file(int first_record, int records) {
  std::string s;
  for (int r = first_record; r < first_record + records; ++r) {
    s.push_back(static_cast<char>(r % 10));
    for (int ch = 0; ch < 3; ++ch)
      for (int p = 0; p < 1024; ++p) s.push_back(static_cast<char>(cifar_pixel(r, p, ch)));
  }
  return s;
}

std::string float_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// The .npy layout NumPy writes: magic, version, header length, the dict padded with spaces to a
// 64-byte boundary and ended by '\n', then the data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  const std::size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' + le(header.size(), major == 1 ? 2 : 4) + header + data;
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.astype(DType::float64).to_vector<double>() == b.astype(DType::float64).to_vector<double>();
}

}  // namespace

// ---- CIFAR-10 -------------------------------------------------------------------------------

TEST_CASE("load_cifar10 reads channel-planar records into NHWC uint8 and int64 labels", "[loaders][cifar]") {
  TempDir dir;
  for (int b = 1; b <= 5; ++b) write_file(dir / ("data_batch_" + std::to_string(b) + ".bin"), cifar_file((b - 1) * 2, 2));
  write_file(dir / "test_batch.bin", cifar_file(100, 3));
  auto [x, y] = data::load_cifar10(dir.path, true);
  CHECK(x.shape() == Shape{10, 32, 32, 3});
  CHECK(x.dtype() == DType::uint8);
  CHECK(y.dtype() == DType::int64);
  CHECK(y.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const auto px = x.to_vector<std::int32_t>();
  for (int i : {0, 3, 9})
    for (int p : {0, 1, 33, 1023})
      for (int ch = 0; ch < 3; ++ch) CHECK(px[static_cast<std::size_t>((i * 1024 + p) * 3 + ch)] == cifar_pixel(i, p, ch));
  auto [xt, yt] = data::load_cifar10(dir.path, false);
  CHECK(xt.shape() == Shape{3, 32, 32, 3});
  CHECK(yt.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2});
  CHECK(xt.to_vector<std::int32_t>()[3 * 40 + 2] == cifar_pixel(100, 40, 2));
}

TEST_CASE("load_cifar10 accepts the folder that holds cifar-10-batches-bin", "[loaders][cifar]") {
  TempDir dir;
  std::filesystem::create_directory(dir / "cifar-10-batches-bin");
  write_file(dir / "cifar-10-batches-bin/test_batch.bin", cifar_file(0, 1));
  CHECK(data::load_cifar10(dir.path, false).first.shape() == Shape{1, 32, 32, 3});
}

TEST_CASE("load_cifar10 rejects missing, truncated and mislabelled files naming file and offset", "[loaders][cifar]") {
  TempDir dir;
  const std::string test = dir / "test_batch.bin";
  CHECK_THROWS_WITH(data::load_cifar10(dir.path, false), Contains("test_batch.bin"));
  CHECK_THROWS_WITH(data::load_cifar10(dir.path, true), Contains("data_batch_1.bin"));

  std::string two = cifar_file(0, 2);
  write_file(test, two.substr(0, two.size() - 100));
  CHECK_THROWS_AS(data::load_cifar10(dir.path, false), IOError);
  CHECK_THROWS_WITH(data::load_cifar10(dir.path, false), Contains(test) && Contains("byte offset 3073"));

  two[3073] = 12;  // the second record's label
  write_file(test, two);
  CHECK_THROWS_WITH(data::load_cifar10(dir.path, false), Contains(test) && Contains("byte offset 3073") && Contains("label 12"));
  write_file(test, "");
  CHECK_THROWS_WITH(data::load_cifar10(dir.path, false), Contains("empty"));
}

// ---- IDX ------------------------------------------------------------------------------------

TEST_CASE("load_idx reads MNIST-style images and labels from plain IDX files", "[loaders][idx]") {
  TempDir dir;
  write_file(dir / "img", idx_images(5, 3, 4));
  write_file(dir / "lab", idx_labels(5));
  auto [x, y] = data::load_idx(dir / "img", dir / "lab");
  CHECK(x.shape() == Shape{5, 3, 4});
  CHECK(x.dtype() == DType::uint8);
  CHECK(y.dtype() == DType::int64);
  CHECK(y.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  const auto px = x.to_vector<std::int32_t>();
  CHECK(px[static_cast<std::size_t>(4 * 12 + 2 * 4 + 3)] == (7 * 4 + 3 * 2 + 3));
}

TEST_CASE("load_idx reads gzip-compressed IDX files, including multi-member gzip", "[loaders][idx]") {
  TempDir dir;
  const std::string images = idx_images(300, 28, 28);  // > 64 KiB: several stored blocks
  write_file(dir / "img.gz", gzip_stored(images));
  const std::string labels = idx_labels(300);
  write_file(dir / "lab.gz", gzip_stored(labels.substr(0, 100)) + gzip_stored(labels.substr(100)));
  auto [x, y] = data::load_idx(dir / "img.gz", dir / "lab.gz");
  CHECK(x.shape() == Shape{300, 28, 28});
  CHECK(y.to_vector<std::int64_t>()[299] == 9);
  write_file(dir / "img", images);
  write_file(dir / "lab", labels);
  auto [xp, yp] = data::load_idx(dir / "img", dir / "lab");
  CHECK(same(x, xp));
  CHECK(same(y, yp));
}

TEST_CASE("load_idx rejects bad magic, truncation and count mismatches naming file and offset", "[loaders][idx]") {
  TempDir dir;
  const std::string img = dir / "img", lab = dir / "lab";
  const std::string images = idx_images(4, 2, 2);
  write_file(lab, idx_labels(4));

  write_file(img, images.substr(0, images.size() - 3));
  CHECK_THROWS_AS(data::load_idx(img, lab), IOError);
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(img) && Contains("byte offset 29") && Contains("truncated"));

  write_file(img, images + "xx");
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(img) && Contains("byte offset 32"));

  write_file(img, idx_labels(4));  // a labels file where images belong
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(img) && Contains("0x00000803"));

  std::string bad = images;
  bad[0] = 1;
  write_file(img, bad);
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains("byte offset 0") && Contains("magic"));

  write_file(img, images.substr(0, 10));  // ends inside the dimensions
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(img) && Contains("byte offset 10"));

  write_file(img, images);
  write_file(lab, idx_labels(3));
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(lab) && Contains("byte offset 4") && Contains("3 labels"));
  CHECK_THROWS_WITH(data::load_idx(img, dir / "missing"), Contains(dir / "missing"));
}

TEST_CASE("load_idx rejects truncated and corrupt gzip streams", "[loaders][idx]") {
  TempDir dir;
  const std::string img = dir / "img.gz", lab = dir / "lab";
  write_file(lab, idx_labels(4));
  const std::string gz = gzip_stored(idx_images(4, 2, 2));
  write_file(img, gz.substr(0, gz.size() - 12));
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(img) && Contains("truncated"));
  std::string corrupt = gz;
  corrupt[corrupt.size() - 10] ^= 0x55;  // inside the data: the CRC-32 no longer matches
  write_file(img, corrupt);
  CHECK_THROWS_WITH(data::load_idx(img, lab), Contains(img) && Contains("byte offset"));
}

TEST_CASE("a gzipped IDX file is inflated against the size its header declares, so gzip bombs are an IOError",
          "[loaders][idx]") {
  TempDir dir;
  const std::string path = dir / "bomb-idx1-ubyte.gz";
  // A labels header declaring 10 bytes, then 64 MiB of zeros from a 400 KiB file: stopped at byte
  // 18 of the decompressed data, the first past what the header declares.
  const std::string header = idx_file(0x08, {10}, "");
  const std::string bomb = gzip_zero_bomb(header, std::uint64_t{64} << 20);
  CHECK(bomb.size() < (std::size_t{1} << 20));
  write_file(path, bomb);
  CHECK_THROWS_AS(data::read_idx(path), IOError);
  CHECK_THROWS_WITH(data::read_idx(path), Contains(path + " (decompressed)") && Contains("byte offset 18") &&
                                              Contains("runs past"));
  // The honest prefix of the same stream reads (only its trailer is fake, so it must be cut at the
  // declared size to get here: a stream of exactly 10 zeros with a correct trailer).
  write_file(path, gzip_stored(header + std::string(10, '\0')));
  CHECK(data::read_idx(path).to_vector<std::int32_t>() == std::vector<std::int32_t>(10, 0));
  // A header that declares more than its compressed bytes could ever inflate to (60 GB from a
  // 40-byte file) allocates nothing.
  write_file(path, gzip_stored(idx_file(0x08, {60000, 1000, 1000}, "")));
  CHECK_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("byte offset 4") && Contains("60000000000"));
  // Images and labels alike.
  write_file(dir / "lab", idx_labels(10));
  write_file(dir / "img.gz", gzip_zero_bomb(idx_file(0x08, {10, 2, 2}, ""), std::uint64_t{16} << 20));
  CHECK_THROWS_WITH(data::load_idx(dir / "img.gz", dir / "lab"), Contains("img.gz (decompressed)") &&
                                                                     Contains("byte offset 56"));
  // The bomb generator itself is sound: a bomb of exactly the declared size is only wrong in its
  // (uncomputed) CRC-32.
  write_file(path, gzip_zero_bomb(header, 10));
  CHECK_THROWS_WITH(data::read_idx(path), Contains(path) && Contains("corrupt gzip data"));
}

TEST_CASE("read_idx converts the big-endian IDX element types", "[loaders][idx]") {
  TempDir dir;
  write_file(dir / "i16", idx_file(0x0B, {3}, std::string("\x00\x01\xff\xfe\x01\x00", 6)));
  CHECK(data::read_idx(dir / "i16").to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 256});
  write_file(dir / "f32", idx_file(0x0D, {1, 2}, std::string("\x3f\x80\x00\x00\xc0\x00\x00\x00", 8)));
  auto f = data::read_idx(dir / "f32");
  CHECK(f.shape() == Shape{1, 2});
  CHECK(f.to_vector<float>() == std::vector<float>{1.0f, -2.0f});
  write_file(dir / "bad", idx_file(0x0A, {1}, "x"));
  CHECK_THROWS_WITH(data::read_idx(dir / "bad"), Contains("byte offset 2"));
}

TEST_CASE("load_fashion_mnist reads the Debian package's files, or says how to get them", "[loaders][idx]") {
  const std::string pkg = "/usr/share/datasets/fashion-mnist";
  if (std::filesystem::exists(pkg + "/t10k-images-idx3-ubyte.gz")) {
    auto [x, y] = data::load_fashion_mnist(false);
    CHECK(x.shape() == Shape{10000, 28, 28});
    CHECK(x.dtype() == DType::uint8);
    std::vector<int> per_class(10);
    for (auto l : y.to_vector<std::int64_t>()) {
      REQUIRE(l >= 0);
      REQUIRE(l < 10);
      ++per_class[static_cast<std::size_t>(l)];
    }
    CHECK(per_class == std::vector<int>(10, 1000));
    auto [xtr, ytr] = data::load_fashion_mnist(true);
    CHECK(xtr.shape() == Shape{60000, 28, 28});
    CHECK(ytr.shape() == Shape{60000});
  } else {
    CHECK_THROWS_WITH(data::load_fashion_mnist(false), Contains("dataset-fashion-mnist"));
  }
  TempDir empty;
  CHECK_THROWS_AS(data::load_fashion_mnist(true, empty.path), IOError);
  CHECK_THROWS_WITH(data::load_fashion_mnist(true, empty.path),
                    Contains("train-images-idx3-ubyte") && Contains("dataset-fashion-mnist"));
}

// ---- CSV ------------------------------------------------------------------------------------

TEST_CASE("load_csv reads the chosen numeric columns by name or position", "[loaders][csv]") {
  TempDir dir;
  const std::string path = dir / "t.csv";
  write_file(path, "date,\"price, usd\",volume,note\r\n"
                   "2020-01-01,1.5,100,\"quoted, with \"\"quotes\"\"\"\r\n"
                   "2020-01-02,+2.25, 200 ,plain\r\n"
                   "\r\n"
                   "2020-01-03,,3e2,\"multi\nline\"\r\n");
  auto t = data::load_csv(path, {.columns = {"price, usd", 2}});
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.dtype() == DType::float32);
  const auto v = t.to_vector<float>();
  CHECK(v[0] == 1.5f);
  CHECK(v[1] == 100.0f);
  CHECK(v[2] == 2.25f);
  CHECK(v[3] == 200.0f);
  CHECK(std::isnan(v[4]));  // an empty field
  CHECK(v[5] == 300.0f);
}

TEST_CASE("load_csv without a header, with another delimiter, reads every column", "[loaders][csv]") {
  TempDir dir;
  const std::string path = dir / "t.tsv";
  write_file(path, "1\t2\t3\n4\t5\t6\n");
  auto t = data::load_csv(path, {.header = false, .delimiter = '\t'});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(data::load_csv(path, {.columns = {"a"}, .header = false, .delimiter = '\t'}), ValueError);
}

TEST_CASE("load_csv names file, line and offset of a non-number or a ragged row", "[loaders][csv]") {
  TempDir dir;
  const std::string path = dir / "bad.csv";
  write_file(path, "a,b\n1,2\n3,x4\n");
  CHECK_THROWS_AS(data::load_csv(path), IOError);
  CHECK_THROWS_WITH(data::load_csv(path), Contains(path) && Contains("line 3") && Contains("byte offset 10"));
  write_file(path, "a,b\n1,2\n3\n");
  CHECK_THROWS_WITH(data::load_csv(path), Contains(path) && Contains("line 3") && Contains("byte offset 8"));
  write_file(path, "a,b\n1,2\n");
  CHECK_THROWS_WITH(data::load_csv(path, {.columns = {"c"}}), Contains("no column named 'c'"));
  write_file(path, "a,b\n\"1,2\n");
  CHECK_THROWS_WITH(data::load_csv(path), Contains("byte offset 4") && Contains("never closed"));
}

// ---- .npy -----------------------------------------------------------------------------------

TEST_CASE("save_npy and load_npy round-trip every NumPy dtype, 0-d and empty arrays", "[io][npy]") {
  TempDir dir;
  std::vector<Tensor> arrays = {
      random::normal({2, 3}),
      random::normal({4}, 0, 1, DType::float64),
      constant(1.5).astype(DType::float16),
      constant<std::int32_t>({-1, 2, -3, 4}, {2, 2}),
      constant<std::int64_t>({std::int64_t{1} << 40, -7}, {2}),
      constant<std::uint8_t>({0, 255, 7}, {3, 1}),
      constant<bool>({true, false, true}, {3}),
      constant(3.25, DType::float64),  // 0-d
      zeros({0, 3}, DType::int64),     // empty
      zeros({2, 0, 2}),
      constant(7.0, DType::uint8),
  };
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const std::string path = dir / ("a" + std::to_string(i) + ".npy");
    io::save_npy(path, arrays[i]);
    const auto bytes = read_all(path);
    CHECK(bytes.compare(0, 6, "\x93NUMPY") == 0);
    const auto header_len = static_cast<std::size_t>(static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8);
    CHECK((10 + header_len) % 64 == 0);  // data 64-byte aligned, as NumPy does
    auto back = io::load_npy(path);
    INFO("array " << i << " " << arrays[i].shape().to_string() << " " << name(arrays[i].dtype()));
    CHECK(same(back, arrays[i]));
  }
  CHECK_THROWS_AS(io::save_npy(dir / "bf.npy", ones({2}, DType::bfloat16)), DTypeError);
}

TEST_CASE("load_npy reads a file laid out byte by byte as NumPy writes it, and save_npy writes the same bytes",
          "[io][npy]") {
  TempDir dir;
  const std::string expected =
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", float_bytes({0, 1, 2, 3, 4, 5}));
  REQUIRE(expected.size() == 128 + 24);
  CHECK(static_cast<unsigned char>(expected[8]) == 118);
  write_file(dir / "np.npy", expected);
  auto t = io::load_npy(dir / "np.npy");
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  io::save_npy(dir / "keel.npy", reshape(arange(6), {2, 3}));
  CHECK(read_all(dir / "keel.npy") == expected);
  // 1-d shapes are written "(n,)", 0-d "()".
  io::save_npy(dir / "v.npy", arange(3));
  CHECK_THAT(read_all(dir / "v.npy"), Contains("'shape': (3,), }"));
  io::save_npy(dir / "s.npy", constant(1.0));
  CHECK_THAT(read_all(dir / "s.npy"), Contains("'shape': (), }"));
}

TEST_CASE("load_npy transposes Fortran order, byte-swaps big-endian and reads version 2 headers", "[io][npy]") {
  TempDir dir;
  // [[0,1,2],[3,4,5]] stored column by column.
  write_file(dir / "f.npy", npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", float_bytes({0, 3, 1, 4, 2, 5})));
  auto f = io::load_npy(dir / "f.npy");
  CHECK(f.shape() == Shape{2, 3});
  CHECK(f.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  write_file(dir / "be.npy", npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
                                      std::string("\x00\x00\x00\x01\xff\xff\xff\xfe", 8)));
  CHECK(io::load_npy(dir / "be.npy").to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2});
  write_file(dir / "v2.npy", npy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "abc", 2));
  CHECK(io::load_npy(dir / "v2.npy").to_vector<std::int32_t>() == std::vector<std::int32_t>{97, 98, 99});
  // Keys in any order, double quotes and extra spaces are still a valid Python dict.
  write_file(dir / "odd.npy", npy_file("{\"shape\": ( 2 , ) , \"fortran_order\": False, \"descr\": \"<i8\"}",
                                       le(5, 8) + le(6, 8)));
  CHECK(io::load_npy(dir / "odd.npy").to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 6});
}

TEST_CASE("load_npy rejects corrupt headers and wrong data sizes naming file and offset", "[io][npy]") {
  TempDir dir;
  const std::string path = dir / "bad.npy";
  const std::string good = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", float_bytes({0, 1, 2, 3, 4, 5}));
  write_file(path, good.substr(0, good.size() - 4));
  CHECK_THROWS_AS(io::load_npy(path), IOError);
  CHECK_THROWS_WITH(io::load_npy(path), Contains(path) && Contains("byte offset 148") && Contains("truncated"));
  write_file(path, good + "xxxx");
  CHECK_THROWS_WITH(io::load_npy(path), Contains("byte offset 152"));
  write_file(path, "PK\x03\x04 not npy");
  CHECK_THROWS_WITH(io::load_npy(path), Contains("byte offset 0") && Contains("magic"));
  write_file(path, npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')));
  CHECK_THROWS_WITH(io::load_npy(path), Contains("byte offset 20") && Contains("<c8"));
  write_file(path, npy_file("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')));
  CHECK_THROWS_WITH(io::load_npy(path), Contains("fortran_order"));
  write_file(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1, }", std::string(4, '\0')));
  CHECK_THROWS_AS(io::load_npy(path), IOError);
  write_file(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", ""));
  CHECK_THROWS_AS(io::load_npy(path), IOError);
  std::string long_header = good;
  long_header[8] = '\xff';  // header length runs past the end
  write_file(path, long_header);
  CHECK_THROWS_WITH(io::load_npy(path), Contains("byte offset 8"));
}

// ---- .npz -----------------------------------------------------------------------------------

TEST_CASE("save_npz and load_npz round-trip stored and deflated archives", "[io][npz]") {
  TempDir dir;
  std::map<std::string, Tensor> arrays{
      {"x", random::normal({16, 8})},
      {"labels", arange(0, 16, 1, DType::int64)},
      {"mask", constant<bool>({true, false}, {2})},
      {"scalar", constant(2.5, DType::float64)},
      {"empty", zeros({0}, DType::uint8)},
      {"half", ones({3}, DType::float16)},
      {"i32", constant<std::int32_t>({1, 2}, {1, 2})},
  };
  for (bool compressed : {false, true}) {
    const std::string path = dir / (compressed ? "c.npz" : "s.npz");
    io::save_npz(path, arrays, compressed);
    CHECK(read_all(path).compare(0, 4, "PK\x03\x04") == 0);
    auto back = io::load_npz(path);
    REQUIRE(back.size() == arrays.size());
    for (const auto& [k, v] : arrays) {
      INFO(k << (compressed ? " (deflated)" : " (stored)"));
      REQUIRE(back.count(k) == 1);
      CHECK(same(back.at(k), v));
    }
  }
  // Compression pays on regular data.
  std::map<std::string, Tensor> zeros_map{{"z", zeros({10000})}};
  io::save_npz(dir / "zs.npz", zeros_map, false);
  io::save_npz(dir / "zc.npz", zeros_map, true);
  CHECK(std::filesystem::file_size(dir / "zc.npz") * 10 < std::filesystem::file_size(dir / "zs.npz"));
}

TEST_CASE("load_npz reads a zip written byte by byte with zip64 size fields, as NumPy writes large arrays",
          "[io][npz]") {
  TempDir dir;
  const std::string member = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", float_bytes({1.5f, -2}));
  const std::string name = "weights.npy";
  const std::uint32_t crc = crc32_of(member);
  // Local header: sizes saturated, the real ones in a zip64 extra field (Python's force_zip64).
  const std::string local_extra = le(1, 2) + le(16, 2) + le(member.size(), 8) + le(member.size(), 8);
  std::string zip = le(0x04034b50, 4) + le(45, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0x21, 2) + le(crc, 4) +
                    le(0xFFFFFFFFu, 4) + le(0xFFFFFFFFu, 4) + le(name.size(), 2) + le(local_extra.size(), 2) + name +
                    local_extra + member;
  const std::size_t cd_offset = zip.size();
  const std::string central_extra = le(1, 2) + le(16, 2) + le(member.size(), 8) + le(member.size(), 8);
  const std::string central = le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0x21, 2) +
                              le(crc, 4) + le(0xFFFFFFFFu, 4) + le(0xFFFFFFFFu, 4) + le(name.size(), 2) +
                              le(central_extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + name +
                              central_extra;
  zip += central;
  zip += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(1, 2) + le(1, 2) + le(central.size(), 4) + le(cd_offset, 4) + le(0, 2);
  write_file(dir / "np.npz", zip);
  auto arrays = io::load_npz(dir / "np.npz");
  REQUIRE(arrays.count("weights") == 1);
  CHECK(arrays.at("weights").to_vector<float>() == std::vector<float>{1.5f, -2});
}

TEST_CASE("load_npz rejects truncated archives and corrupt members naming file and offset", "[io][npz]") {
  TempDir dir;
  const std::string path = dir / "a.npz";
  io::save_npz(path, {{"x", arange(100)}}, false);
  const std::string good = read_all(path);
  write_file(path, good.substr(0, good.size() - 30));
  CHECK_THROWS_AS(io::load_npz(path), IOError);
  CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("byte offset"));
  std::string flipped = good;
  flipped[200] ^= 0x01;  // inside x.npy's data
  write_file(path, flipped);
  CHECK_THROWS_WITH(io::load_npz(path), Contains(path) && Contains("CRC"));
  io::save_npz(path, {{"x", arange(1000)}}, true);
  std::string deflated = read_all(path);
  deflated[60] ^= 0x40;
  write_file(path, deflated);
  CHECK_THROWS_AS(io::load_npz(path), IOError);
  write_file(path, "not a zip file at all, but long enough to search");
  CHECK_THROWS_WITH(io::load_npz(path), Contains("end-of-central-directory"));
}
