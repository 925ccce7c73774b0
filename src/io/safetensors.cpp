#include "keel/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"

namespace keel::io {

namespace {

const char* st_dtype(DType dt) {
  switch (dt) {
    case DType::float32: return "F32";
    case DType::float64: return "F64";
    case DType::float16: return "F16";
    case DType::bfloat16: return "BF16";
    case DType::int32: return "I32";
    case DType::int64: return "I64";
    case DType::uint8: return "U8";
    case DType::bool_: return "BOOL";
  }
  return "F32";
}

bool parse_dtype(const std::string& s, DType& dt) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::float32}, {"F64", DType::float64}, {"F16", DType::float16}, {"BF16", DType::bfloat16},
      {"I32", DType::int32},   {"I64", DType::int64},   {"U8", DType::uint8},    {"BOOL", DType::bool_}};
  for (const auto& [name, d] : table)
    if (s == name) {
      dt = d;
      return true;
    }
  return false;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IOError(fmt::format("load_safetensors: {}: {}", path, what));
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

struct Parsed {
  nlohmann::json header;
  std::size_t data_start = 0;
};

Parsed parse_header(const std::string& path, const std::string& bytes) {
  if (bytes.size() < 8) fail(path, fmt::format("file of {} bytes is too short for the 8-byte header length", bytes.size()));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > bytes.size() - 8)
    fail(path, fmt::format("header length {} at offset 0 runs past the end of the file ({} bytes)", n, bytes.size()));
  Parsed p;
  p.data_start = 8 + static_cast<std::size_t>(n);
  try {
    p.header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<std::ptrdiff_t>(p.data_start));
  } catch (const nlohmann::json::exception& e) {
    fail(path, fmt::format("the JSON header (bytes 8..{}) does not parse: {}", p.data_start, e.what()));
  }
  if (!p.header.is_object()) fail(path, "the JSON header is not an object");
  return p;
}

}  // namespace

void atomic_write(const std::string& path, const std::string& bytes) {
  std::random_device rd;
  const std::string tmp = fmt::format("{}.tmp-{}-{:x}", path, ::getpid(), rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IOError(fmt::format("cannot write {}: {}", tmp, err));
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("cannot flush {}: {}", tmp, err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("cannot rename {} to {}: {}", tmp, path, err));
  }
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  std::size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    keel::detail::check_defined(t, "save_safetensors");
    if (name == "__metadata__") throw ValueError("save_safetensors: '__metadata__' is reserved");
    Tensor c = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
    const std::size_t nbytes = static_cast<std::size_t>(c.size()) * itemsize(c.dtype());
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.shape().dims()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    host.push_back(c);
  }
  std::string h = header.dump();
  // Pad the header with spaces so the data starts 8-byte aligned (as the reference writer does).
  while ((8 + h.size()) % 8 != 0) h += ' ';
  std::string bytes(8, '\0');
  std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  bytes += h;
  bytes.reserve(bytes.size() + offset);
  for (const auto& c : host)
    bytes.append(static_cast<const char*>(c.raw_data()), static_cast<std::size_t>(c.size()) * itemsize(c.dtype()));
  atomic_write(path, bytes);
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  const std::string bytes = read_file(path, "load_safetensors");
  const Parsed p = parse_header(path, bytes);
  const std::size_t data_size = bytes.size() - p.data_start;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, info] : p.header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : info.items())
        if (!v.is_string()) fail(path, fmt::format("__metadata__ value '{}' is not a string", k));
      continue;
    }
    if (!info.is_object()) fail(path, fmt::format("tensor '{}': entry is not an object", name));
    if (!info.contains("dtype") || !info["dtype"].is_string()) fail(path, fmt::format("tensor '{}': missing dtype", name));
    Entry e;
    e.name = name;
    if (!parse_dtype(info["dtype"].get<std::string>(), e.dtype))
      fail(path, fmt::format("tensor '{}': unsupported dtype '{}'", name, info["dtype"].get<std::string>()));
    if (!info.contains("shape") || !info["shape"].is_array()) fail(path, fmt::format("tensor '{}': missing shape", name));
    std::vector<std::int64_t> dims;
    std::uint64_t count = 1, span = 1;  // span: the non-zero dimensions' product, which strides reach
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
        fail(path, fmt::format("tensor '{}': shape entries must be non-negative integers", name));
      const auto v = d.get<std::uint64_t>();
      if (v > (std::uint64_t{1} << 48) || (v != 0 && span > (std::uint64_t{1} << 48) / v))
        fail(path, fmt::format("tensor '{}': shape is too large", name));
      span *= std::max<std::uint64_t>(v, 1);
      count *= v;
      dims.push_back(static_cast<std::int64_t>(v));
    }
    e.shape = Shape(dims);
    const auto& off = info.contains("data_offsets") ? info["data_offsets"] : nlohmann::json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, fmt::format("tensor '{}': data_offsets must be two non-negative integers", name));
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      fail(path, fmt::format("tensor '{}': data_offsets [{}, {}] outside the {} data bytes", name, e.begin, e.end, data_size));
    if (count > std::numeric_limits<std::uint64_t>::max() / itemsize(e.dtype) || e.end - e.begin != count * itemsize(e.dtype))
      fail(path, fmt::format("tensor '{}': {} bytes in data_offsets, but dtype {} and shape {} need {}", name,
                             e.end - e.begin, keel::name(e.dtype), e.shape.to_string(), count * itemsize(e.dtype)));
    entries.push_back(std::move(e));
  }
  // The tensors must tile the data exactly: sorted by offset, no gaps, no overlaps.
  std::vector<const Entry*> sorted;
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expect = 0;
  for (const Entry* e : sorted) {
    if (e->begin != expect)
      fail(path, fmt::format("tensor '{}': data_offsets start at {} but the previous tensor ended at {} ({})", e->name,
                             e->begin, expect, e->begin < expect ? "overlap" : "gap"));
    expect = e->end;
  }
  if (expect != data_size)
    fail(path, fmt::format("the tensors cover {} of the {} data bytes", expect, data_size));
  std::map<std::string, Tensor> out;
  for (const auto& e : entries) {
    DeviceScope cpu(Device::cpu());
    Tensor t = keel::detail::empty_tensor(e.shape, e.dtype, Device::cpu());
    if (e.end > e.begin) std::memcpy(t.raw_data(), bytes.data() + p.data_start + e.begin, e.end - e.begin);
    if (e.dtype == DType::bool_) {  // keel's bools are 0/1 bytes; a file may hold any non-zero byte
      auto* b = static_cast<std::uint8_t*>(t.raw_data());
      for (std::int64_t i = 0; i < t.size(); ++i) b[i] = b[i] != 0;
    }
    out.emplace(e.name, t);
  }
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  const std::string bytes = read_file(path, "load_safetensors");
  const Parsed p = parse_header(path, bytes);
  std::map<std::string, std::string> out;
  if (p.header.contains("__metadata__")) {
    const auto& m = p.header["__metadata__"];
    if (!m.is_object()) fail(path, "__metadata__ is not an object");
    for (const auto& [k, v] : m.items()) {
      if (!v.is_string()) fail(path, fmt::format("__metadata__ value '{}' is not a string", k));
      out[k] = v.get<std::string>();
    }
  }
  return out;
}

}  // namespace keel::io
