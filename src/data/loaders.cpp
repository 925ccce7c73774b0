// Dataset file loaders: CIFAR-10 binary batches, IDX (MNIST / Fashion-MNIST, plain or gzip),
// numeric CSV columns. Each file is read whole, then every size and offset is checked against
// the bytes actually present before any is used.
#include "keel/data/loaders.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "io/read_file.hpp"

namespace keel::data {

namespace {

constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 48;

[[noreturn]] void fail(const char* op, const std::string& path, std::uint64_t offset, const std::string& what) {
  throw IOError(fmt::format("{}: {}: byte offset {}: {}", op, path, offset, what));
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

using io::detail::read_file;

std::uint32_t be32(const std::string& b, std::size_t at) {
  return (static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) << 24) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

bool is_gzip(const std::string& b) {
  return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b;
}

struct IdxHeader {
  int type;
  std::vector<std::int64_t> dims;
  std::size_t data_start;
  std::uint64_t data_bytes;  // what the dimensions and the type declare
};

std::size_t idx_itemsize(int type) {
  switch (type) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

// The magic number and the dimensions: what the data must then hold, checked before any of it
// is read (or, for gzip, decompressed).
IdxHeader parse_idx_dims(const std::string& b, const std::string& where, const char* op) {
  if (b.size() < 4) fail(op, where, 0, fmt::format("{} bytes is too short for the 4-byte IDX magic number", b.size()));
  if (b[0] != 0 || b[1] != 0)
    fail(op, where, 0, fmt::format("bad IDX magic number 0x{:08x}: the first two bytes must be zero", be32(b, 0)));
  IdxHeader h;
  h.type = static_cast<unsigned char>(b[2]);
  if (idx_itemsize(h.type) == 0) fail(op, where, 2, fmt::format("unknown IDX data type 0x{:02x}", h.type));
  const std::size_t rank = static_cast<unsigned char>(b[3]);
  if (rank == 0) fail(op, where, 3, "an IDX file needs at least one dimension");
  h.data_start = 4 + 4 * rank;
  if (b.size() < h.data_start)
    fail(op, where, b.size(), fmt::format("the file ends inside the header ({} dimensions need {} bytes, the file has {})",
                                          rank, h.data_start, b.size()));
  std::uint64_t count = 1, span = 1;  // span: the non-zero dimensions' product, which strides reach
  for (std::size_t i = 0; i < rank; ++i) {
    const std::uint32_t d = be32(b, 4 + 4 * i);
    if (d != 0 && span > kMaxElements / d) fail(op, where, 4 + 4 * i, "the dimensions describe an implausibly large array");
    span *= std::max<std::uint32_t>(d, 1);
    count = d == 0 ? 0 : count * d;  // count <= span <= 2^48: no overflow
    h.dims.push_back(d);
  }
  h.data_bytes = count * idx_itemsize(h.type);
  return h;
}

IdxHeader parse_idx_header(const std::string& b, const std::string& where, const char* op) {
  IdxHeader h = parse_idx_dims(b, where, op);
  const std::uint64_t need = h.data_bytes;
  const std::uint64_t have = b.size() - h.data_start;
  if (have < need)
    fail(op, where, b.size(), fmt::format("truncated: shape {} needs {} data bytes after the {}-byte header, the file has {}",
                                          Shape(h.dims).to_string(), need, h.data_start, have));
  if (have > need)
    fail(op, where, h.data_start + need, fmt::format("{} unexpected bytes after the data of shape {}", have - need,
                                                     Shape(h.dims).to_string()));
  return h;
}

// A gzip file (one or more concatenated members, as gzip itself accepts) decompressed on demand,
// into buffers the caller sizes: nothing is allocated that the caller did not ask for.
class Gunzip {
 public:
  Gunzip(const std::string& in, const std::string& path, const char* op) : in_(in), path_(path), op_(op) {
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) throw IOError(fmt::format("{}: {}: zlib cannot start", op, path));
  }
  ~Gunzip() { inflateEnd(&zs_); }
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // Decompresses up to n bytes into dst; fewer only where the data ends.
  std::size_t read(char* dst, std::size_t n) {
    constexpr std::size_t kChunk = std::size_t{1} << 30;  // zlib counts in 32-bit uInt
    std::size_t produced = 0;
    while (produced < n && !done_) {
      if (zs_.avail_in == 0 && fed_ < in_.size()) {
        const std::size_t k = std::min(in_.size() - fed_, kChunk);
        zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in_.data() + fed_));
        zs_.avail_in = static_cast<uInt>(k);
        fed_ += k;
      }
      zs_.next_out = reinterpret_cast<Bytef*>(dst + produced);
      zs_.avail_out = static_cast<uInt>(std::min(n - produced, kChunk));
      const uInt before = zs_.avail_out;
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      produced += before - zs_.avail_out;
      const std::size_t consumed = fed_ - zs_.avail_in;
      if (ret == Z_STREAM_END) {
        if (consumed == in_.size()) {
          done_ = true;
        } else if (in_.size() - consumed >= 2 && static_cast<unsigned char>(in_[consumed]) == 0x1f &&
                   static_cast<unsigned char>(in_[consumed + 1]) == 0x8b) {
          inflateReset(&zs_);  // another gzip member follows
        } else {
          fail(op_, path_, consumed,
               fmt::format("{} bytes of garbage after the end of the gzip stream", in_.size() - consumed));
        }
        continue;
      }
      if (ret == Z_OK) continue;
      if (ret == Z_BUF_ERROR && zs_.avail_in == 0 && fed_ == in_.size())
        fail(op_, path_, in_.size(), "the gzip stream is truncated (the file ends before the compressed data does)");
      if (ret == Z_BUF_ERROR) continue;  // more input is fed next round
      fail(op_, path_, consumed, fmt::format("corrupt gzip data ({})", zs_.msg ? zs_.msg : "zlib error"));
    }
    return produced;
  }

 private:
  const std::string& in_;
  const std::string& path_;
  const char* op_;
  z_stream zs_{};
  std::size_t fed_ = 0;
  bool done_ = false;
};

// Appends up to n decompressed bytes to out.
void read_more(Gunzip& z, std::string& out, std::size_t n) {
  const std::size_t had = out.size();
  out.resize(had + n);
  out.resize(had + z.read(out.data() + had, n));
}

// A gzipped IDX file, decompressed against the size its header declares: the header first, then
// exactly the data it announces, and an IOError at the first byte past that. A small file that
// inflates to gigabytes (a gzip bomb) costs no more memory than its header claims, and a header
// claiming more than the compressed bytes can hold allocates nothing.
std::string gunzip_idx(const std::string& in, const std::string& path, const std::string& where, const char* op) {
  Gunzip z(in, path, op);
  std::string out;
  read_more(z, out, 4);
  if (out.size() < 4 || out[0] != 0 || out[1] != 0) return out;  // parse_idx_header says what is wrong
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(static_cast<unsigned char>(out[3]));
  read_more(z, out, header - 4);
  if (out.size() < header) return out;
  const IdxHeader h = parse_idx_dims(out, where, op);
  // Deflate expands at most 1032:1 (and each gzip member has a header of its own).
  const std::uint64_t limit = static_cast<std::uint64_t>(in.size()) * 1032 + (1 << 16);
  if (h.data_bytes > limit)
    fail(op, where, 4, fmt::format("the header declares {} data bytes (shape {}), more than the {} compressed bytes of "
                                   "{} can inflate to", h.data_bytes, Shape(h.dims).to_string(), in.size(), path));
  try {
    out.reserve(header + static_cast<std::size_t>(h.data_bytes));
  } catch (const std::bad_alloc&) {
    throw ResourceExhaustedError(fmt::format("{}: {}: cannot allocate the {} bytes its header declares", op, where,
                                             header + h.data_bytes));
  }
  read_more(z, out, static_cast<std::size_t>(h.data_bytes));
  char spare = 0;
  if (out.size() == header + h.data_bytes && z.read(&spare, 1) != 0)
    fail(op, where, out.size(), fmt::format("the data runs past the {} bytes that shape {} declares",
                                            h.data_bytes, Shape(h.dims).to_string()));
  return out;  // shorter than declared: parse_idx_header reports the truncation
}

// A file's bytes, decompressed when it is gzip; `where` describes whose offsets errors use.
std::string read_maybe_gzip(const std::string& path, const char* op, std::string& where) {
  std::string bytes = read_file(path, op);
  if (!is_gzip(bytes)) {
    where = path;
    return bytes;
  }
  where = path + " (decompressed)";
  return gunzip_idx(bytes, path, where, op);
}

template <class Out, class In, int Bytes>
void convert_be(const std::string& b, std::size_t start, Out* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t v = 0;
    for (int k = 0; k < Bytes; ++k) v = (v << 8) | static_cast<unsigned char>(b[start + i * Bytes + static_cast<std::size_t>(k)]);
    if constexpr (std::is_floating_point_v<In>) {
      using Bits = std::conditional_t<sizeof(In) == 4, std::uint32_t, std::uint64_t>;
      const auto bits = static_cast<Bits>(v);
      In f;
      std::memcpy(&f, &bits, sizeof f);
      out[i] = static_cast<Out>(f);
    } else {
      using U = std::make_unsigned_t<In>;
      out[i] = static_cast<Out>(static_cast<In>(static_cast<U>(v)));
    }
  }
}

Tensor idx_tensor(const std::string& b, const IdxHeader& h) {
  const Shape shape(h.dims);
  const auto n = static_cast<std::size_t>(shape.num_elements());
  const DType dt = h.type == 0x08 ? DType::uint8
                   : h.type == 0x0D ? DType::float32
                   : h.type == 0x0E ? DType::float64
                                    : DType::int32;
  Tensor t = keel::detail::empty_tensor(shape, dt, Device::cpu());
  void* out = t.raw_data();
  switch (h.type) {
    case 0x08: if (n) std::memcpy(out, b.data() + h.data_start, n); break;
    case 0x09: convert_be<std::int32_t, std::int8_t, 1>(b, h.data_start, static_cast<std::int32_t*>(out), n); break;
    case 0x0B: convert_be<std::int32_t, std::int16_t, 2>(b, h.data_start, static_cast<std::int32_t*>(out), n); break;
    case 0x0C: convert_be<std::int32_t, std::int32_t, 4>(b, h.data_start, static_cast<std::int32_t*>(out), n); break;
    case 0x0D: convert_be<float, float, 4>(b, h.data_start, static_cast<float*>(out), n); break;
    case 0x0E: convert_be<double, double, 8>(b, h.data_start, static_cast<double*>(out), n); break;
  }
  return t;
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

// ---- IDX ------------------------------------------------------------------------------------

Tensor read_idx(const std::string& path) {
  std::string where;
  const std::string b = read_maybe_gzip(path, "read_idx", where);
  return idx_tensor(b, parse_idx_header(b, where, "read_idx"));
}

std::pair<Tensor, Tensor> load_idx(const std::string& images, const std::string& labels) {
  const char* op = "load_idx";
  std::string iw, lw;
  const std::string ib = read_maybe_gzip(images, op, iw);
  const IdxHeader ih = parse_idx_header(ib, iw, op);
  if (ih.type != 0x08 || ih.dims.size() != 3)
    fail(op, iw, 0, fmt::format("expected the magic number 0x00000803 of an images file (uint8, 3 dimensions), found 0x{:08x}",
                                be32(ib, 0)));
  const std::string lb = read_maybe_gzip(labels, op, lw);
  const IdxHeader lh = parse_idx_header(lb, lw, op);
  if (lh.type != 0x08 || lh.dims.size() != 1)
    fail(op, lw, 0, fmt::format("expected the magic number 0x00000801 of a labels file (uint8, 1 dimension), found 0x{:08x}",
                                be32(lb, 0)));
  if (lh.dims[0] != ih.dims[0])
    fail(op, lw, 4, fmt::format("{} labels, but {} holds {} images", lh.dims[0], images, ih.dims[0]));
  Tensor x = idx_tensor(ib, ih);
  Tensor y = keel::detail::empty_tensor(Shape{lh.dims[0]}, DType::int64, Device::cpu());
  auto* yp = static_cast<std::int64_t*>(y.raw_data());
  for (std::int64_t i = 0; i < lh.dims[0]; ++i)
    yp[i] = static_cast<unsigned char>(lb[lh.data_start + static_cast<std::size_t>(i)]);
  return {x, y};
}

std::pair<Tensor, Tensor> load_fashion_mnist(bool train, const std::string& dir) {
  const std::string prefix = train ? "train" : "t10k";
  auto find = [&](const std::string& stem) {
    const std::string base = join(dir, prefix + stem);
    if (exists(base + ".gz")) return base + ".gz";
    if (exists(base)) return base;
    throw IOError(fmt::format(
        "load_fashion_mnist: neither {0}.gz nor {0} exists; install the Debian package dataset-fashion-mnist "
        "(apt-get install dataset-fashion-mnist) or pass the folder holding the Fashion-MNIST IDX files",
        base));
  };
  const std::string images = find("-images-idx3-ubyte");
  const std::string labels = find("-labels-idx1-ubyte");
  return load_idx(images, labels);
}

// ---- CIFAR-10 -------------------------------------------------------------------------------

std::pair<Tensor, Tensor> load_cifar10(const std::string& dir, bool train) {
  const char* op = "load_cifar10";
  constexpr std::size_t kPixels = 32 * 32, kRecord = 1 + 3 * kPixels;
  std::vector<std::string> names;
  if (train) {
    for (int i = 1; i <= 5; ++i) names.push_back(fmt::format("data_batch_{}.bin", i));
  } else {
    names.push_back("test_batch.bin");
  }
  // Accept the folder of the .bin files, or the one the archive unpacks into.
  std::string folder = dir;
  if (!exists(join(folder, names[0])) && exists(join(join(dir, "cifar-10-batches-bin"), names[0])))
    folder = join(dir, "cifar-10-batches-bin");
  std::vector<std::string> files;
  std::uint64_t total = 0;
  for (const auto& n : names) {
    const std::string path = join(folder, n);
    if (!exists(path))
      throw IOError(fmt::format("{}: {} does not exist (expected the CIFAR-10 binary version: {})", op, path,
                                train ? "data_batch_1.bin ... data_batch_5.bin" : "test_batch.bin"));
    files.push_back(path);
  }
  std::vector<std::string> contents;
  for (const auto& path : files) {
    std::string b = read_file(path, op);
    if (b.empty()) fail(op, path, 0, "the file is empty");
    if (b.size() % kRecord != 0)
      fail(op, path, b.size() / kRecord * kRecord,
           fmt::format("the file size {} is not a multiple of the {}-byte record: the last record is truncated "
                       "({} of {} bytes)", b.size(), kRecord, b.size() % kRecord, kRecord));
    for (std::size_t at = 0; at < b.size(); at += kRecord)
      if (static_cast<unsigned char>(b[at]) > 9)
        fail(op, path, at, fmt::format("label {} is out of range 0..9", static_cast<unsigned char>(b[at])));
    total += b.size() / kRecord;
    contents.push_back(std::move(b));
  }
  const auto n = static_cast<std::int64_t>(total);
  Tensor x = keel::detail::empty_tensor(Shape{n, 32, 32, 3}, DType::uint8, Device::cpu());
  Tensor y = keel::detail::empty_tensor(Shape{n}, DType::int64, Device::cpu());
  auto* xp = static_cast<unsigned char*>(x.raw_data());
  auto* yp = static_cast<std::int64_t*>(y.raw_data());
  std::size_t i = 0;
  for (const auto& b : contents) {
    for (std::size_t at = 0; at < b.size(); at += kRecord, ++i) {
      yp[i] = static_cast<unsigned char>(b[at]);
      const char* planes = b.data() + at + 1;  // R plane, G plane, B plane
      unsigned char* img = xp + i * 3 * kPixels;
      for (std::size_t p = 0; p < kPixels; ++p)
        for (std::size_t c = 0; c < 3; ++c) img[3 * p + c] = static_cast<unsigned char>(planes[c * kPixels + p]);
    }
  }
  return {x, y};
}

// ---- CSV ------------------------------------------------------------------------------------

namespace {

struct Field {
  std::string text;
  std::size_t offset;  // byte offset of the field's first character
};
struct Record {
  std::vector<Field> fields;
  std::size_t line;    // 1-based line of the record's start
  std::size_t offset;
};

// RFC 4180 records: quoted fields may hold delimiters, doubled quotes and line breaks.
std::vector<Record> parse_csv(const std::string& s, char delim, const std::string& path) {
  const char* op = "load_csv";
  std::vector<Record> records;
  std::size_t i = 0, line = 1;
  if (s.size() >= 3 && s.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 byte order mark
  while (i < s.size()) {
    // A blank line is no record.
    if (s[i] == '\n' || (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')) {
      i += s[i] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    Record rec{{}, line, i};
    for (;;) {
      Field f{{}, i};
      if (i < s.size() && s[i] == '"') {
        const std::size_t open = i++;
        for (;;) {
          if (i >= s.size())
            fail(op, path, open, fmt::format("line {}: the quoted field is never closed", line));
          if (s[i] == '"') {
            if (i + 1 < s.size() && s[i + 1] == '"') {
              f.text.push_back('"');
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (s[i] == '\n') ++line;
          f.text.push_back(s[i++]);
        }
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
        if (i < s.size() && s[i] != delim && s[i] != '\n' && s[i] != '\r')
          fail(op, path, i, fmt::format("line {}: unexpected character after a closing quote", line));
      } else {
        while (i < s.size() && s[i] != delim && s[i] != '\n' && !(s[i] == '\r' && (i + 1 == s.size() || s[i + 1] == '\n')))
          f.text.push_back(s[i++]);
      }
      rec.fields.push_back(std::move(f));
      if (i < s.size() && s[i] == delim) {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == '\r') ++i;
      if (i < s.size() && s[i] == '\n') {
        ++i;
        ++line;
      }
      break;
    }
    records.push_back(std::move(rec));
  }
  return records;
}

std::string trim(const std::string& t) {
  std::size_t a = 0, b = t.size();
  while (a < b && (t[a] == ' ' || t[a] == '\t')) ++a;
  while (b > a && (t[b - 1] == ' ' || t[b - 1] == '\t')) --b;
  return t.substr(a, b - a);
}

}  // namespace

Tensor load_csv(const std::string& path, CsvOptions options) {
  const char* op = "load_csv";
  if (options.delimiter == '"' || options.delimiter == '\n' || options.delimiter == '\r')
    throw ValueError(fmt::format("{}: the delimiter cannot be a quote or a line break", op));
  const std::string bytes = read_file(path, op);
  const std::vector<Record> records = parse_csv(bytes, options.delimiter, path);
  if (records.empty() && options.header) fail(op, path, 0, "the file is empty, but a header row was expected");
  const std::size_t width = records.empty() ? 0 : records[0].fields.size();
  for (const Record& r : records)
    if (r.fields.size() != width)
      fail(op, path, r.offset, fmt::format("line {} has {} fields, but line {} has {}", r.line, r.fields.size(),
                                           records[0].line, width));
  std::vector<std::size_t> cols;
  if (options.columns.empty()) {
    for (std::size_t j = 0; j < width; ++j) cols.push_back(j);
  }
  for (const CsvColumn& c : options.columns) {
    if (const int* index = std::get_if<int>(&c)) {
      if (*index < 0) throw ValueError(fmt::format("{}: column index {} is negative", op, *index));
      if (static_cast<std::size_t>(*index) >= width && !records.empty())
        fail(op, path, 0, fmt::format("column {} requested, but the rows have {} fields", *index, width));
      cols.push_back(static_cast<std::size_t>(*index));
    } else {
      const std::string& wanted = std::get<std::string>(c);
      if (!options.header)
        throw ValueError(fmt::format("{}: column '{}' is chosen by name, but CsvOptions.header is false", op, wanted));
      const auto& names = records[0].fields;
      const auto it = std::find_if(names.begin(), names.end(), [&](const Field& f) { return trim(f.text) == wanted; });
      if (it == names.end()) {
        std::string known;
        for (const Field& f : names) known += (known.empty() ? "" : ", ") + trim(f.text);
        fail(op, path, records[0].offset, fmt::format("no column named '{}' in the header ({})", wanted, known));
      }
      cols.push_back(static_cast<std::size_t>(it - names.begin()));
    }
  }
  const std::size_t first = options.header ? 1 : 0;
  const std::size_t rows = records.size() > first ? records.size() - first : 0;
  Tensor out = keel::detail::empty_tensor(
      Shape{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols.size())}, DType::float32, Device::cpu());
  auto* o = static_cast<float*>(out.raw_data());
  for (std::size_t r = 0; r < rows; ++r) {
    const Record& rec = records[first + r];
    for (std::size_t j = 0; j < cols.size(); ++j) {
      const Field& f = rec.fields[cols[j]];
      std::string t = trim(f.text);
      double v = std::numeric_limits<double>::quiet_NaN();
      if (!t.empty()) {
        const char* b = t.data();
        const char* e = t.data() + t.size();
        if (*b == '+') ++b;  // from_chars does not take a leading '+'
        const auto res = std::from_chars(b, e, v);
        if (res.ec == std::errc::result_out_of_range) {
          v = std::strtod(t.c_str(), nullptr);  // overflow to +-inf, underflow to 0, as strtod does
        } else if (res.ec != std::errc() || res.ptr != e) {
          fail(op, path, f.offset, fmt::format("line {}, column {}: '{}' is not a number", rec.line, cols[j] + 1, t));
        }
      }
      o[r * cols.size() + j] = static_cast<float>(v);
    }
  }
  return out;
}

}  // namespace keel::data
