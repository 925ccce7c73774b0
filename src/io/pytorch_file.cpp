// io::load_pytorch / io::save_pytorch: the zip container of torch.save (PyTorch >= 1.6,
// torch/serialization.py's _save with caffe2/serialize/inline_container.cc's PyTorchStreamWriter):
//   <archive>/data.pkl        the pickle of the state_dict (src/io/pytorch_pickle_*.cpp)
//   <archive>/byteorder       "little" (PyTorch >= 2.1; absent before: little-endian)
//   <archive>/data/<key>      the bytes of each storage, numel * itemsize
//   <archive>/version         "3\n", the format version
// Every member is stored (not compressed) and its data starts at a multiple of 64 bytes of the
// file: the writer pads each local header's extra field with a "FB" block (kFieldAlignment in
// inline_container.cc), so that the storages can be mapped in place.
#include "keel/io/pytorch.hpp"

#include <zlib.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "io/pytorch_pickle.hpp"
#include "io/read_file.hpp"
#include "io/zip.hpp"
#include "keel/io/safetensors.hpp"

namespace keel::io {

namespace {

using detail::pytorch::pickle_state_dict;
using detail::pytorch::unpickle_state_dict;

constexpr std::uint64_t kAlignment = 64;  // inline_container.cc: kFieldAlignment

struct Stored {
  std::string name;
  std::string_view data;
};

// A zip of stored members whose data are 64-byte aligned (see the top of the file). No zip64:
// an IOError past 4 GiB, as torch's own small-file path writes.
std::string write_aligned_zip(const std::vector<Stored>& members, const std::string& path) {
  using zip::put_le;
  std::string out, central;
  for (const auto& m : members) {
    if (out.size() > 0xFFFFFFFFull || m.data.size() > 0xFFFFFFFFull || m.name.size() > 0xFFFF)
      throw IOError(fmt::format("save_pytorch: {}: member '{}' past the 4 GiB of a zip without zip64", path, m.name));
    const std::uint64_t header = out.size();
    const auto crc = static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    // The extra field: "FB", its 2-byte length, then zeros up to the next multiple of 64.
    const std::uint64_t after_name = header + 30 + m.name.size();
    const std::uint64_t pad = (kAlignment - (after_name + 4) % kAlignment) % kAlignment;
    auto fields = [&](std::string& s) {  // the fields the local header and the central entry share
      put_le(s, 20, 2);      // version needed to extract: 2.0
      put_le(s, 0, 2);       // flags
      put_le(s, 0, 2);       // method: stored
      put_le(s, 0, 2);       // time
      put_le(s, 0x21, 2);    // date: 1980-01-01, fixed so that the same tensors give the same bytes
      put_le(s, crc, 4);
      put_le(s, m.data.size(), 4);  // compressed size
      put_le(s, m.data.size(), 4);  // uncompressed size
      put_le(s, m.name.size(), 2);
    };
    put_le(out, 0x04034b50, 4);
    fields(out);
    put_le(out, 4 + pad, 2);
    out += m.name;
    out += "FB";
    put_le(out, pad, 2);
    out.append(static_cast<std::size_t>(pad), '\0');
    out.append(m.data);
    put_le(central, 0x02014b50, 4);
    put_le(central, 20, 2);  // version made by
    fields(central);
    put_le(central, 0, 2);  // extra length
    put_le(central, 0, 2);  // comment length
    put_le(central, 0, 2);  // disk number
    put_le(central, 0, 2);  // internal attributes
    put_le(central, 0, 4);  // external attributes
    put_le(central, header, 4);
    central += m.name;
  }
  if (out.size() > 0xFFFFFFFFull || members.size() > 0xFFFF)
    throw IOError(fmt::format("save_pytorch: {}: the archive is past the 4 GiB or 65535 members of a zip", path));
  const std::uint64_t cd_at = out.size();
  out += central;
  put_le(out, 0x06054b50, 4);  // end of central directory
  put_le(out, 0, 2);
  put_le(out, 0, 2);
  put_le(out, members.size(), 2);
  put_le(out, members.size(), 2);
  put_le(out, central.size(), 4);
  put_le(out, cd_at, 4);
  put_le(out, 0, 2);
  return out;
}

}  // namespace

std::map<std::string, Tensor> load_pytorch(const std::string& path) {
  const char* op = "load_pytorch";
  const std::string bytes = detail::read_file(path, op);
  // Member contents by name. Stored members point into `bytes`; deflated ones (not written by
  // torch, but a re-zipped file may have them) are copied, as their bytes live only for the visit.
  std::map<std::string, std::string_view> members;
  std::vector<std::unique_ptr<std::string>> copies;
  std::map<std::string, std::uint64_t> bases;
  const char* begin = bytes.data();
  zip::read_archive(bytes, op, path, [&](const zip::Entry& e) {
    std::string_view data = e.data;
    if (data.size() && (data.data() < begin || data.data() + data.size() > begin + bytes.size())) {
      copies.push_back(std::make_unique<std::string>(data));
      data = *copies.back();
    }
    members[e.name] = data;
    bases[e.name] = e.base;
  });
  // The archive folder: torch names it after the file (1.x) or "archive" (2.x); torch's reader
  // takes it from the member names, and so does this one, from the one "<folder>/data.pkl".
  std::string prefix;
  for (const auto& [name, data] : members) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (!prefix.empty())
        throw IOError(fmt::format("{}: {}: two pickles, '{}data.pkl' and '{}'", op, path, prefix, name));
      prefix = name.substr(0, slash + 1);
    }
  }
  if (prefix.empty())
    throw IOError(fmt::format("{}: {}: no '<archive>/data.pkl' member: not a torch.save file of PyTorch >= 1.6 "
                              "(the legacy format of torch.save(..., _use_new_zipfile_serialization=False) is not read)",
                              op, path));
  bool big_endian = false;
  if (const auto it = members.find(prefix + "byteorder"); it != members.end()) {
    if (it->second == "big") big_endian = true;
    else if (it->second != "little")
      throw IOError(fmt::format("{}: {}: member '{}byteorder' at byte offset {} says '{}', not 'little' or 'big'", op,
                                path, prefix, bases[it->first], std::string(it->second.substr(0, 16))));
  }
  const std::string pkl_name = prefix + "data.pkl";
  detail::pytorch::UnpickleOptions options;
  options.op = op;
  options.label = fmt::format("{}: member '{}'", path, pkl_name);
  options.big_endian = big_endian;
  // Views with zero strides may repeat a storage's elements; beyond 1024 bytes out for each
  // byte of the file (plus 64 MiB) the file is refused as a decompression bomb.
  options.max_bytes = 1024ull * bytes.size() + (64ull << 20);
  const auto storages = [&](const std::string& key, std::uint64_t nbytes, std::uint64_t at) -> std::string_view {
    const auto it = members.find(prefix + "data/" + key);
    if (it == members.end())
      throw IOError(fmt::format("{}: {} byte offset {}: storage '{}' has no member '{}data/{}'", op, options.label, at,
                                key, prefix, key));
    if (it->second.size() < nbytes)
      throw IOError(fmt::format("{}: {} byte offset {}: storage '{}' needs {} bytes but member '{}' holds {}", op,
                                options.label, at, key, nbytes, it->first, it->second.size()));
    return it->second;
  };
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : unpickle_state_dict(members.at(pkl_name), storages, options)) out[name] = std::move(t);
  return out;
}

void save_pytorch(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::vector<std::pair<std::string, Tensor>> host;
  for (const auto& [name, t] : tensors) {
    keel::detail::check_defined(t, "save_pytorch");
    host.emplace_back(name, (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous());
  }
  const std::string pkl = pickle_state_dict(host);
  std::vector<Stored> members;
  members.push_back({"archive/data.pkl", pkl});
  members.push_back({"archive/byteorder", "little"});
  for (std::size_t i = 0; i < host.size(); ++i) {
    const Tensor& c = host[i].second;
    members.push_back({"archive/data/" + std::to_string(i),
                       std::string_view(static_cast<const char*>(c.raw_data()),
                                        static_cast<std::size_t>(c.size()) * itemsize(c.dtype()))});
  }
  members.push_back({"archive/version", "3\n"});
  atomic_write(path, write_aligned_zip(members, path));
}

}  // namespace keel::io
