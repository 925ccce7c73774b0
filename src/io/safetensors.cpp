#include "keel/io/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "io/read_file.hpp"
#include "io/safetensors_file.hpp"

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

[[noreturn]] void fail_file(const std::string& path, const std::string& what) {
  throw IOError(fmt::format("load_safetensors: {}: {}", path, what));
}

using detail::read_file;

struct Parsed {
  nlohmann::json header;
  std::size_t data_start = 0;
};

Parsed parse_header(const std::string& path, std::string_view bytes) {
  if (bytes.size() < 8) fail_file(path, fmt::format("file of {} bytes is too short for the 8-byte header length", bytes.size()));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > bytes.size() - 8)
    fail_file(path, fmt::format("header length {} at offset 0 runs past the end of the file ({} bytes)", n, bytes.size()));
  Parsed p;
  p.data_start = 8 + static_cast<std::size_t>(n);
  try {
    p.header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<std::ptrdiff_t>(p.data_start));
  } catch (const nlohmann::json::exception& e) {
    fail_file(path, fmt::format("the JSON header (bytes 8..{}) does not parse: {}", p.data_start, e.what()));
  }
  if (!p.header.is_object()) fail_file(path, "the JSON header is not an object");
  return p;
}

std::map<std::string, std::string> metadata_of(const Parsed& p, const std::string& path) {
  std::map<std::string, std::string> out;
  auto m = p.header.find("__metadata__");
  if (m == p.header.end()) return out;
  if (!m->is_object()) fail_file(path, "__metadata__ is not an object");
  for (const auto& [k, v] : m->items()) {
    if (!v.is_string()) fail_file(path, fmt::format("__metadata__ value '{}' is not a string", k));
    out[k] = v.get<std::string>();
  }
  return out;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// The element count of a shape, checked with overflow-safe products. A zero dimension makes the
// tensor empty however large the others are ([0, 2^62] is legal and holds no bytes), but the
// strides still span the product of the non-zero dimensions, which must fit int64.
std::uint64_t checked_count(const nlohmann::json& shape, const std::string& path, const std::string& name,
                            std::vector<std::int64_t>& dims) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t count = 1, span = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto& d = shape[i];
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
      fail_file(path, fmt::format("tensor '{}': shape[{}]: shape entries must be non-negative integers, got {}", name, i,
                             d.dump()));
    const auto v = d.get<std::uint64_t>();
    if (v > kMax) fail_file(path, fmt::format("tensor '{}': shape[{}]: dimension {} does not fit int64", name, i, v));
    if (v > 1 && span > kMax / v)
      fail_file(path, fmt::format("tensor '{}': shape {}: the product of the dimensions overflows int64", name, shape.dump()));
    span *= std::max<std::uint64_t>(v, 1);
    count = v == 0 ? 0 : count * v;  // count <= span: cannot overflow
    dims.push_back(static_cast<std::int64_t>(v));
  }
  return count;
}

Entry parse_entry(const std::string& name, const nlohmann::json& info, std::uint64_t data_size, const std::string& path) {
  if (!info.is_object()) fail_file(path, fmt::format("tensor '{}': entry is not an object", name));
  if (!info.contains("dtype") || !info["dtype"].is_string()) fail_file(path, fmt::format("tensor '{}': missing dtype", name));
  Entry e;
  e.name = name;
  if (!parse_dtype(info["dtype"].get<std::string>(), e.dtype))
    fail_file(path, fmt::format("tensor '{}': unsupported dtype '{}'", name, info["dtype"].get<std::string>()));
  if (!info.contains("shape") || !info["shape"].is_array()) fail_file(path, fmt::format("tensor '{}': missing shape", name));
  std::vector<std::int64_t> dims;
  const std::uint64_t count = checked_count(info["shape"], path, name, dims);
  e.shape = Shape(dims);
  const auto& off = info.contains("data_offsets") ? info["data_offsets"] : nlohmann::json();
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail_file(path, fmt::format("tensor '{}': data_offsets must be two non-negative integers", name));
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    fail_file(path, fmt::format("tensor '{}': data_offsets [{}, {}] outside the {} data bytes", name, e.begin, e.end, data_size));
  const std::uint64_t item = itemsize(e.dtype);
  if (count > std::numeric_limits<std::uint64_t>::max() / item)
    fail_file(path, fmt::format("tensor '{}': shape {} of {} needs more bytes than 64 bits count", name, e.shape.to_string(),
                           keel::name(e.dtype)));
  if (e.end - e.begin != count * item)
    fail_file(path, fmt::format("tensor '{}': {} bytes in data_offsets, but dtype {} and shape {} need {}", name,
                           e.end - e.begin, keel::name(e.dtype), e.shape.to_string(), count * item));
  return e;
}

// The tensors must tile the data exactly: sorted by offset, no gaps, no overlaps.
void check_tiling(const std::vector<Entry>& entries, std::uint64_t data_size, const std::string& path) {
  std::vector<const Entry*> sorted;
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expect = 0;
  for (const Entry* e : sorted) {
    if (e->begin != expect)
      fail_file(path, fmt::format("tensor '{}': data_offsets start at {} but the previous tensor ended at {} ({})", e->name,
                             e->begin, expect, e->begin < expect ? "overlap" : "gap"));
    expect = e->end;
  }
  if (expect != data_size) fail_file(path, fmt::format("the tensors cover {} of the {} data bytes", expect, data_size));
}

Tensor tensor_of(const Entry& e, const char* data) {
  DeviceScope cpu(Device::cpu());
  Tensor t = keel::detail::empty_tensor(e.shape, e.dtype, Device::cpu());
  if (e.end > e.begin) std::memcpy(t.raw_data(), data + e.begin, e.end - e.begin);
  if (e.dtype == DType::bool_) {  // keel's bools are 0/1 bytes; a file may hold any non-zero byte
    auto* b = static_cast<std::uint8_t*>(t.raw_data());
    for (std::int64_t i = 0; i < t.size(); ++i) b[i] = b[i] != 0;
  }
  return t;
}

}  // namespace

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

namespace detail {

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& label) {
  const Parsed p = parse_header(label, bytes);
  const std::uint64_t data_size = bytes.size() - p.data_start;
  SafetensorsFile out;
  out.metadata = metadata_of(p, label);
  std::vector<Entry> entries;
  for (const auto& [name, info] : p.header.items())
    if (name != "__metadata__") entries.push_back(parse_entry(name, info, data_size, label));
  check_tiling(entries, data_size, label);
  // Every size is known good now: allocating them all needs no more memory than the file holds.
  for (const auto& e : entries) out.tensors.emplace(e.name, tensor_of(e, bytes.data() + p.data_start));
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path, "load_safetensors"), path);
}

}  // namespace detail

std::map<std::string, Tensor> load_safetensors(const std::string& path) { return detail::read_safetensors(path).tensors; }

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  const std::string bytes = read_file(path, "load_safetensors");
  return metadata_of(parse_header(path, bytes), path);
}

}  // namespace keel::io
