// NumPy .npy / .npz reading and writing (the format of numpy.lib.format, and zip archives of it).
#include "keel/io/npy.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "io/read_file.hpp"
#include "io/zip.hpp"
#include "keel/io/safetensors.hpp"  // io::atomic_write
#include "keel/ops/shape.hpp"

namespace keel::io {

namespace {

static_assert(std::endian::native == std::endian::little, "keel's tensors are little-endian in memory");

// Every dimension, and the product of the non-zero ones (the largest stride), must fit int64.
constexpr auto kMaxDim = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

// Errors report offsets in the file: `base` is where these bytes start in it (0 for a .npy;
// a stored .npz member's data offset). Decompressed bytes say so in `label`.
struct Where {
  std::string label;
  std::uint64_t base = 0;
};

[[noreturn]] void fail_at(const char* op, const Where& w, std::uint64_t at, const std::string& what) {
  throw IOError(fmt::format("{}: {}: byte offset {}: {}", op, w.label, w.base + at, what));
}

using detail::read_file;

using zip::put_le;
std::uint64_t le(std::string_view b, std::size_t at, int n) { return zip::read_le(b, at, n); }

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

  [[noreturn]] void error(std::size_t at, const std::string& what) const { fail_at(op_, w_, base_ + at, what); }

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
      const auto digit = static_cast<std::uint64_t>(s_[i_++] - '0');
      if (v > (kMaxDim - digit) / 10) error(at, "a dimension of the shape does not fit int64");
      v = v * 10 + digit;
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

// The element count of a shape, with overflow-safe products. A zero dimension makes the array
// empty however large the others are ((0, 2**62) is legal and holds no bytes); the others' product
// must still fit int64, since the strides reach it.
template <class Fail>
std::uint64_t element_count(const std::vector<std::int64_t>& dims, Fail&& fail_with) {
  std::uint64_t count = 1, span = 1;
  for (auto d : dims) {
    const auto v = static_cast<std::uint64_t>(d);
    if (v > 1 && span > kMaxDim / v)
      fail_with(fmt::format("the shape {} describes more elements than int64 counts", Shape(dims).to_string()));
    span *= std::max<std::uint64_t>(v, 1);
    count = v == 0 ? 0 : count * v;
  }
  return count;
}

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
    fail_at(op, w, 0, fmt::format("{} bytes is too short for a .npy preamble", b.size()));
  if (b.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen)) fail_at(op, w, 0, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(b[6]), minor = static_cast<unsigned char>(b[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail_at(op, w, 6, fmt::format("unsupported .npy format version {}.{}", major, minor));
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_size) fail_at(op, w, 8, "the file ends inside the header length");
  const std::uint64_t hlen = le(b, 8, static_cast<int>(len_size));
  const std::size_t hstart = 8 + len_size;
  if (hlen > b.size() - hstart)
    fail_at(op, w, 8, fmt::format("header length {} runs past the end of the file ({} bytes)", hlen, b.size()));
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
    fail_at(op, w, hstart, "the header dict must have the keys 'descr', 'fortran_order' and 'shape'");
  if (descr->kind != PyValue::string) parser.error(descr->at, "'descr' must be a string");
  if (fortran->kind != PyValue::boolean) parser.error(fortran->at, "'fortran_order' must be True or False");
  if (shape->kind != PyValue::tuple) parser.error(shape->at, "'shape' must be a tuple of integers");
  DType dt{};
  bool swap = false;
  if (!parse_descr(descr->text, dt, swap))
    parser.error(descr->at, fmt::format("unsupported dtype '{}' (supported: <f4 <f8 <f2 <i4 <i8 |u1 |b1)", descr->text));
  const std::uint64_t count = element_count(shape->items, [&](const std::string& what) { parser.error(shape->at, what); });
  const std::uint64_t item = itemsize(dt), have = b.size() - data_start;
  if (count > have / item)  // compared as elements: count * item may not fit 64 bits
    fail_at(op, w, b.size(), fmt::format("truncated: shape {} of {} needs {} elements of {} bytes from offset {}, the file "
                                      "has {} data bytes", Shape(shape->items).to_string(), name(dt), count, item,
                                      w.base + data_start, have));
  const std::uint64_t need = count * item;
  if (have > need)
    fail_at(op, w, data_start + need, fmt::format("{} unexpected bytes after the data", have - need));

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

}  // namespace

void save_npy(const std::string& path, const Tensor& array) { atomic_write(path, npy_bytes(array, "save_npy")); }

Tensor load_npy(const std::string& path) {
  const std::string bytes = read_file(path, "load_npy");
  return parse_npy(bytes, "load_npy", Where{path, 0});
}

void save_npz(const std::string& path, const std::map<std::string, Tensor>& arrays, bool compressed) {
  const char* op = "save_npz";
  std::vector<std::string> raw;  // the members' .npy bytes, alive while the archive is written
  raw.reserve(arrays.size());
  std::vector<zip::Member> members;
  for (const auto& [key, t] : arrays) {
    if (key.empty() || key.find('\0') != std::string::npos)
      throw ValueError(fmt::format("{}: array names must be non-empty text, got '{}'", op, key));
    raw.push_back(npy_bytes(t, op));
    members.push_back({key + ".npy", raw.back(), compressed});
  }
  atomic_write(path, zip::write_archive(members, op, path));
}

std::map<std::string, Tensor> load_npz(const std::string& path) {
  const char* op = "load_npz";
  const std::string bytes = read_file(path, op);
  std::map<std::string, Tensor> out;
  zip::read_archive(bytes, op, path, [&](const zip::Entry& e) {
    // As np.load: members that are not .npy arrays are not arrays; skip them.
    if (e.data.size() < kMagicLen || e.data.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen)) return;
    const std::string& name = e.name;
    std::string key = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0 ? name.substr(0, name.size() - 4) : name;
    if (out.count(key)) zip::fail(op, e.label, e.base, fmt::format("duplicate member '{}'", name));
    out.emplace(std::move(key), parse_npy(e.data, op, Where{e.label, e.base}));
  });
  return out;
}

}  // namespace keel::io
