// NumPy .npy / .npz reading and writing (the format of numpy.lib.format, and zip archives of it).
#include "keel/io/npy.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/io/safetensors.hpp"  // io::atomic_write
#include "keel/ops/shape.hpp"

namespace keel::io {

namespace {

static_assert(std::endian::native == std::endian::little, "keel's tensors are little-endian in memory");

constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 48;
constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

// Errors report offsets in the file: `base` is where these bytes start in it (0 for a .npy;
// a stored .npz member's data offset). Decompressed bytes say so in `label`.
struct Where {
  std::string label;
  std::uint64_t base = 0;
};

[[noreturn]] void fail(const char* op, const Where& w, std::uint64_t at, const std::string& what) {
  throw IOError(fmt::format("{}: {}: byte offset {}: {}", op, w.label, w.base + at, what));
}

std::string read_file(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open {}: {}", op, path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw IOError(fmt::format("{}: cannot read the size of {}", op, path));
  in.seekg(0);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size)) throw IOError(fmt::format("{}: cannot read {}", op, path));
  return bytes;
}

std::uint64_t le(std::string_view b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(i)]);
  return v;
}
void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// ---- .npy -----------------------------------------------------------------------------------

const char* npy_descr(DType dt) {
  switch (dt) {
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::float16: return "<f2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::uint8: return "|u1";
    case DType::bool_: return "|b1";
    case DType::bfloat16: break;
  }
  throw DTypeError("save_npy: NumPy has no bfloat16 dtype; convert with astype(DType::float32) first");
}

std::string npy_bytes(const Tensor& t, const char* op) {
  keel::detail::check_defined(t, op);
  const char* descr = npy_descr(t.dtype());
  const Tensor c = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
  std::string shape = "(";
  for (std::size_t i = 0; i < c.shape().dims().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(c.shape().dims()[i]);
  shape += c.rank() == 1 ? ",)" : ")";
  // The dict as NumPy writes it (keys sorted, trailing ", "), padded with spaces and ended by a
  // newline so that the data starts 64-byte aligned.
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  std::size_t preamble = kMagicLen + 2 + 2;
  int major = 1;
  if (header.size() + 1 + 63 > 65535) {
    major = 2;  // the 1.0 header length is a u16
    preamble = kMagicLen + 2 + 4;
  }
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  const std::size_t nbytes = static_cast<std::size_t>(c.size()) * itemsize(c.dtype());
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  put_le(out, header.size(), major == 1 ? 2 : 4);
  out.reserve(out.size() + header.size() + nbytes);
  out += header;
  out.append(static_cast<const char*>(c.raw_data()), nbytes);
  return out;
}

// A value of the header dict: a Python literal of the few kinds NumPy writes.
struct PyValue {
  enum Kind { string, boolean, tuple } kind = string;
  std::string text;
  bool flag = false;
  std::vector<std::int64_t> items;
  std::size_t at = 0;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view s, std::size_t base, const char* op, const Where& w)
      : s_(s), base_(base), op_(op), w_(w) {}

  std::vector<std::pair<std::string, PyValue>> dict() {
    std::vector<std::pair<std::string, PyValue>> out;
    skip_ws();
    expect('{', "the header must be a Python dict literal starting with '{'");
    for (;;) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const std::size_t key_at = i_;
      if (peek() != '\'' && peek() != '"') error(key_at, "expected a quoted key in the header dict");
      std::string key = quoted();
      skip_ws();
      expect(':', "expected ':' after a key of the header dict");
      skip_ws();
      PyValue v = value();
      out.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_ws();
      expect('}', "expected ',' or '}' in the header dict");
      break;
    }
    skip_ws();
    if (i_ != s_.size()) error(i_, "unexpected characters after the header dict");
    return out;
  }

  [[noreturn]] void error(std::size_t at, const std::string& what) const { fail(op_, w_, base_ + at, what); }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c, const char* what) {
    if (peek() != c) error(i_, what);
    ++i_;
  }
  std::string quoted() {
    const char q = s_[i_];
    const std::size_t open = i_++;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') error(i_, "escape sequences are not expected in a .npy header");
      out.push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) error(open, "unterminated string in the header dict");
    ++i_;
    return out;
  }
  std::int64_t integer() {
    const std::size_t at = i_;
    std::uint64_t v = 0;
    if (!std::isdigit(static_cast<unsigned char>(peek()))) error(at, "expected a non-negative integer in the shape");
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + static_cast<std::uint64_t>(s_[i_++] - '0');
      if (v > kMaxElements) error(at, "a dimension of the shape is implausibly large");
    }
    if (peek() == 'L') ++i_;  // Python 2 longs, in files written by old NumPy
    return static_cast<std::int64_t>(v);
  }
  PyValue value() {
    PyValue v;
    v.at = i_;
    if (peek() == '\'' || peek() == '"') {
      v.kind = PyValue::string;
      v.text = quoted();
    } else if (s_.substr(i_, 4) == "True") {
      v.kind = PyValue::boolean;
      v.flag = true;
      i_ += 4;
    } else if (s_.substr(i_, 5) == "False") {
      v.kind = PyValue::boolean;
      i_ += 5;
    } else if (peek() == '(' || peek() == '[') {
      v.kind = PyValue::tuple;
      const char close = peek() == '(' ? ')' : ']';
      ++i_;
      for (;;) {
        skip_ws();
        if (peek() == close) {
          ++i_;
          break;
        }
        v.items.push_back(integer());
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(close, "expected ',' or the end of the shape tuple");
        break;
      }
    } else {
      error(i_, "unsupported value in the header dict (structured dtypes are not supported)");
    }
    return v;
  }

  std::string_view s_;
  std::size_t i_ = 0, base_;
  const char* op_;
  const Where& w_;
};

// The dtype of a descr; `swap` when its byte order is big-endian.
bool parse_descr(const std::string& d, DType& dt, bool& swap) {
  if (d.size() != 3) return false;
  const char order = d[0];
  const std::string kind = d.substr(1);
  static const std::pair<const char*, DType> table[] = {{"f4", DType::float32}, {"f8", DType::float64},
                                                        {"f2", DType::float16}, {"i4", DType::int32},
                                                        {"i8", DType::int64},   {"u1", DType::uint8},
                                                        {"b1", DType::bool_}};
  const auto* it = std::find_if(std::begin(table), std::end(table), [&](const auto& e) { return kind == e.first; });
  if (it == std::end(table)) return false;
  dt = it->second;
  const bool one_byte = itemsize(dt) == 1;
  if (order == '|') return one_byte;  // "not applicable" is only valid for single bytes
  if (order != '<' && order != '>' && order != '=') return false;
  swap = order == '>' && !one_byte;
  return true;
}

Tensor parse_npy(std::string_view b, const char* op, const Where& w) {
  if (b.size() < kMagicLen + 4)
    fail(op, w, 0, fmt::format("{} bytes is too short for a .npy preamble", b.size()));
  if (b.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen)) fail(op, w, 0, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(b[6]), minor = static_cast<unsigned char>(b[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(op, w, 6, fmt::format("unsupported .npy format version {}.{}", major, minor));
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_size) fail(op, w, 8, "the file ends inside the header length");
  const std::uint64_t hlen = le(b, 8, static_cast<int>(len_size));
  const std::size_t hstart = 8 + len_size;
  if (hlen > b.size() - hstart)
    fail(op, w, 8, fmt::format("header length {} runs past the end of the file ({} bytes)", hlen, b.size()));
  const std::size_t data_start = hstart + static_cast<std::size_t>(hlen);
  HeaderParser parser(b.substr(hstart, static_cast<std::size_t>(hlen)), hstart, op, w);
  const auto entries = parser.dict();

  const PyValue *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (const auto& [key, v] : entries) {
    const PyValue** slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran : key == "shape" ? &shape : nullptr;
    if (!slot) parser.error(v.at, fmt::format("unexpected key '{}' in the header dict", key));
    if (*slot) parser.error(v.at, fmt::format("duplicate key '{}' in the header dict", key));
    *slot = &v;
  }
  if (!descr || !fortran || !shape)
    fail(op, w, hstart, "the header dict must have the keys 'descr', 'fortran_order' and 'shape'");
  if (descr->kind != PyValue::string) parser.error(descr->at, "'descr' must be a string");
  if (fortran->kind != PyValue::boolean) parser.error(fortran->at, "'fortran_order' must be True or False");
  if (shape->kind != PyValue::tuple) parser.error(shape->at, "'shape' must be a tuple of integers");
  DType dt{};
  bool swap = false;
  if (!parse_descr(descr->text, dt, swap))
    parser.error(descr->at, fmt::format("unsupported dtype '{}' (supported: <f4 <f8 <f2 <i4 <i8 |u1 |b1)", descr->text));
  std::uint64_t count = 1;
  for (auto d : shape->items) {
    count *= static_cast<std::uint64_t>(d);
    if (count > kMaxElements) parser.error(shape->at, "the shape describes an implausibly large array");
  }
  const std::uint64_t need = count * itemsize(dt), have = b.size() - data_start;
  if (have < need)
    fail(op, w, b.size(), fmt::format("truncated: shape {} of {} needs {} data bytes from offset {}, the file has {}",
                                      Shape(shape->items).to_string(), name(dt), need, w.base + data_start, have));
  if (have > need)
    fail(op, w, data_start + need, fmt::format("{} unexpected bytes after the data", have - need));

  // Fortran order is C order of the reversed shape; transposing it back gives the array.
  std::vector<std::int64_t> dims = shape->items;
  if (fortran->flag) std::reverse(dims.begin(), dims.end());
  Tensor t = keel::detail::empty_tensor(Shape(dims), dt, Device::cpu());
  auto* out = static_cast<unsigned char*>(t.raw_data());
  if (need > 0) std::memcpy(out, b.data() + data_start, static_cast<std::size_t>(need));
  if (swap) {
    const std::size_t k = itemsize(dt);
    for (std::size_t i = 0; i < need; i += k) std::reverse(out + i, out + i + k);
  }
  if (dt == DType::bool_)  // keel's bools are 0/1 bytes; NumPy reads any non-zero byte as True
    for (std::size_t i = 0; i < need; ++i) out[i] = out[i] != 0;
  if (fortran->flag && t.rank() > 1) t = transpose(t).contiguous();
  return t;
}

// ---- zip (.npz) -----------------------------------------------------------------------------

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr std::uint64_t kMax32 = 0xFFFFFFFFu;

std::string deflate_raw(const std::string& in) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IOError("save_npz: zlib cannot start");
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int ret = deflate(&zs, Z_FINISH);
  const std::size_t n = zs.total_out;
  deflateEnd(&zs);
  if (ret != Z_STREAM_END) throw IOError("save_npz: zlib failed to compress");
  out.resize(n);
  return out;
}

std::string inflate_raw(std::string_view in, std::uint64_t expected, const char* op, const Where& w) {
  std::string out(static_cast<std::size_t>(expected), '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail(op, w, 0, "zlib cannot start");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  // One spare byte detects members that inflate to more than their recorded size.
  char spare = 0;
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int ret = inflate(&zs, Z_FINISH);
  if (ret != Z_STREAM_END && zs.avail_out == 0 && ret != Z_DATA_ERROR) {
    zs.next_out = reinterpret_cast<Bytef*>(&spare);
    zs.avail_out = 1;
    ret = inflate(&zs, Z_FINISH);
    if (zs.avail_out == 0) {
      inflateEnd(&zs);
      fail(op, w, 0, fmt::format("the member inflates to more than its recorded {} bytes", expected));
    }
  }
  const std::uint64_t produced = zs.total_out, consumed = zs.total_in;
  const std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (ret != Z_STREAM_END) {
    if (ret == Z_BUF_ERROR || consumed == in.size())
      fail(op, w, consumed, "the compressed data is truncated");
    fail(op, w, consumed, fmt::format("corrupt deflate data ({})", msg.empty() ? "zlib error" : msg));
  }
  if (produced != expected)
    fail(op, w, 0, fmt::format("the member inflates to {} bytes, the archive records {}", produced, expected));
  return out;
}

std::uint32_t crc_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  std::size_t done = 0;
  while (done < data.size()) {  // zlib takes 32-bit lengths
    const std::size_t n = std::min<std::size_t>(data.size() - done, std::size_t{1} << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace

void save_npy(const std::string& path, const Tensor& array) { atomic_write(path, npy_bytes(array, "save_npy")); }

Tensor load_npy(const std::string& path) {
  const std::string bytes = read_file(path, "load_npy");
  return parse_npy(bytes, "load_npy", Where{path, 0});
}

void save_npz(const std::string& path, const std::map<std::string, Tensor>& arrays, bool compressed) {
  const char* op = "save_npz";
  std::string zip, central;
  std::uint64_t count = 0;
  for (const auto& [key, t] : arrays) {
    if (key.empty() || key.find('\0') != std::string::npos)
      throw ValueError(fmt::format("{}: array names must be non-empty text, got '{}'", op, key));
    const std::string name = key + ".npy";
    const std::string raw = npy_bytes(t, op);
    const std::string packed = compressed ? deflate_raw(raw) : std::string();
    const std::string& data = compressed ? packed : raw;
    const std::uint64_t offset = zip.size();
    if (raw.size() >= kMax32 || data.size() >= kMax32 || offset >= kMax32 || name.size() > 0xFFFF)
      throw IOError(fmt::format("{}: {}: array '{}' does not fit a zip without zip64 extensions (4 GiB); "
                                "use save_npy or save_safetensors", op, path, key));
    const std::uint32_t crc = crc_of(raw);
    const std::uint16_t method = compressed ? 8 : 0;
    const bool utf8 = std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    const std::uint16_t flags = utf8 ? 0x0800 : 0;  // bit 11: the name is UTF-8
    // The DOS date 1980-01-01 00:00 keeps the archive byte-for-byte reproducible.
    constexpr std::uint16_t kTime = 0, kDate = (0 << 9) | (1 << 5) | 1;
    put_le(zip, kLocalSig, 4);
    put_le(zip, 20, 2);  // version needed: 2.0
    put_le(zip, flags, 2);
    put_le(zip, method, 2);
    put_le(zip, kTime, 2);
    put_le(zip, kDate, 2);
    put_le(zip, crc, 4);
    put_le(zip, data.size(), 4);
    put_le(zip, raw.size(), 4);
    put_le(zip, name.size(), 2);
    put_le(zip, 0, 2);  // extra field length
    zip += name;
    zip += data;

    put_le(central, kCentralSig, 4);
    put_le(central, (3 << 8) | 20, 2);  // made by: Unix, 2.0
    put_le(central, 20, 2);
    put_le(central, flags, 2);
    put_le(central, method, 2);
    put_le(central, kTime, 2);
    put_le(central, kDate, 2);
    put_le(central, crc, 4);
    put_le(central, data.size(), 4);
    put_le(central, raw.size(), 4);
    put_le(central, name.size(), 2);
    put_le(central, 0, 2);  // extra
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk number
    put_le(central, 0, 2);  // internal attributes
    put_le(central, std::uint64_t{0100644} << 16, 4);  // external attributes: a regular file, rw-r--r--
    put_le(central, offset, 4);
    central += name;
    ++count;
  }
  const std::uint64_t cd_offset = zip.size();
  if (count >= 0xFFFF || cd_offset >= kMax32 || central.size() >= kMax32)
    throw IOError(fmt::format("{}: {}: the archive needs zip64 extensions, which save_npz does not write", op, path));
  zip += central;
  put_le(zip, kEndSig, 4);
  put_le(zip, 0, 2);
  put_le(zip, 0, 2);
  put_le(zip, count, 2);
  put_le(zip, count, 2);
  put_le(zip, central.size(), 4);
  put_le(zip, cd_offset, 4);
  put_le(zip, 0, 2);  // comment length
  atomic_write(path, zip);
}

std::map<std::string, Tensor> load_npz(const std::string& path) {
  const char* op = "load_npz";
  const std::string bytes = read_file(path, op);
  const std::string_view b(bytes);
  const Where file{path, 0};
  const std::uint64_t size = b.size();
  auto need = [&](std::uint64_t at, std::uint64_t n, const char* what) {
    if (at > size || n > size - at)
      fail(op, file, at, fmt::format("{} ({} bytes) runs past the end of the file ({} bytes)", what, n, size));
  };

  // The end-of-central-directory record: the last 22 bytes, unless an archive comment follows.
  if (size < 22) fail(op, file, 0, fmt::format("{} bytes is too short for a zip archive", size));
  std::uint64_t eocd = size;
  for (std::uint64_t at = size - 22;; --at) {
    if (le(b, at, 4) == kEndSig && at + 22 + le(b, at + 20, 2) == size) {
      eocd = at;
      break;
    }
    if (at == 0 || size - at >= 22 + 0xFFFF) break;
  }
  if (eocd == size) fail(op, file, size - 22, "no zip end-of-central-directory record: not a .npz (zip) file, or truncated");
  if (le(b, eocd + 4, 2) != 0 || le(b, eocd + 6, 2) != 0) fail(op, file, eocd + 4, "multi-disk zip archives are not supported");
  std::uint64_t entries = le(b, eocd + 10, 2), cd_size = le(b, eocd + 12, 4), cd_offset = le(b, eocd + 16, 4);
  if (entries == 0xFFFF || cd_size == kMax32 || cd_offset == kMax32) {
    // zip64: a locator just before the end record points at the zip64 end record.
    if (eocd < 20 || le(b, eocd - 20, 4) != kZip64LocatorSig)
      fail(op, file, eocd, "the end record defers to zip64, but no zip64 locator precedes it");
    const std::uint64_t z64 = le(b, eocd - 20 + 8, 8);
    need(z64, 56, "the zip64 end-of-central-directory record");
    if (le(b, z64, 4) != kZip64EndSig) fail(op, file, z64, "bad zip64 end-of-central-directory signature");
    entries = le(b, z64 + 32, 8);
    cd_size = le(b, z64 + 40, 8);
    cd_offset = le(b, z64 + 48, 8);
  }
  need(cd_offset, cd_size, "the central directory");
  if (entries > cd_size / 46) fail(op, file, eocd + 10, fmt::format("{} entries cannot fit in a {}-byte central directory", entries, cd_size));

  std::map<std::string, Tensor> out;
  std::set<std::string> seen;
  std::uint64_t p = cd_offset;
  const std::uint64_t cd_end = cd_offset + cd_size;
  for (std::uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > cd_end) fail(op, file, p, "the central directory ends inside an entry");
    if (le(b, p, 4) != kCentralSig) fail(op, file, p, "bad central directory entry signature");
    const std::uint64_t flags = le(b, p + 8, 2), method = le(b, p + 10, 2), crc = le(b, p + 16, 4);
    std::uint64_t csize = le(b, p + 20, 4), usize = le(b, p + 24, 4);
    const std::uint64_t name_len = le(b, p + 28, 2), extra_len = le(b, p + 30, 2), comment_len = le(b, p + 32, 2);
    std::uint64_t local = le(b, p + 42, 4);
    if (p + 46 + name_len + extra_len + comment_len > cd_end) fail(op, file, p, "a central directory entry runs past the directory");
    const std::string name(b.substr(static_cast<std::size_t>(p + 46), static_cast<std::size_t>(name_len)));
    // zip64 extended information: the 64-bit values of the fields saturated at 0xFFFFFFFF.
    for (std::uint64_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const std::uint64_t id = le(b, x, 2), len = le(b, x + 2, 2);
      if (x + 4 + len > p + 46 + name_len + extra_len) fail(op, file, x, "an extra field runs past its entry");
      if (id == 0x0001) {
        std::uint64_t q = x + 4;
        auto take = [&](std::uint64_t& field) {
          if (field != kMax32) return;
          if (q + 8 > x + 4 + len) fail(op, file, x, "the zip64 extra field is too short");
          field = le(b, q, 8);
          q += 8;
        };
        take(usize);
        take(csize);
        take(local);
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;

    if (flags & 1) fail(op, file, p, fmt::format("member '{}' is encrypted", name));
    if (method != 0 && method != 8)
      fail(op, file, p, fmt::format("member '{}' uses compression method {} (only stored and deflate are supported)", name, method));
    need(local, 30, "a local file header");
    if (le(b, local, 4) != kLocalSig) fail(op, file, local, fmt::format("bad local header signature for member '{}'", name));
    const std::uint64_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
    need(data, csize, "member data");
    if (!name.empty() && name.back() == '/') continue;  // a directory entry
    const std::string_view packed = b.substr(static_cast<std::size_t>(data), static_cast<std::size_t>(csize));
    std::string inflated;
    std::string_view raw = packed;
    Where where{fmt::format("{} member '{}'", path, name), data};
    if (method == 8) {
      inflated = inflate_raw(packed, usize, op, where);
      raw = inflated;
      where = Where{fmt::format("{} member '{}' (decompressed)", path, name), 0};
    } else if (csize != usize) {
      fail(op, file, p, fmt::format("stored member '{}' has different compressed ({}) and uncompressed ({}) sizes", name, csize, usize));
    }
    if (crc_of(raw) != crc) fail(op, file, data, fmt::format("CRC-32 mismatch in member '{}': the data is corrupt", name));
    // As np.load: members that are not .npy arrays are not arrays; skip them.
    if (raw.size() < kMagicLen || raw.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen)) continue;
    std::string key = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0 ? name.substr(0, name.size() - 4) : name;
    if (!seen.insert(key).second) fail(op, file, data, fmt::format("duplicate member '{}'", name));
    out.emplace(std::move(key), parse_npy(raw, op, where));
  }
  return out;
}

}  // namespace keel::io
