// Zip archives for .npz and .keel files (see zip.hpp): PKWARE's APPNOTE layout of local headers,
// member data, a central directory and an end record.
#include "io/zip.hpp"

#include <zlib.h>

#include <algorithm>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::io::zip {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr std::uint64_t kMax32 = 0xFFFFFFFFu;

std::string deflate_raw(std::string_view in, const char* op) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IOError(fmt::format("{}: zlib cannot start", op));
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int ret = deflate(&zs, Z_FINISH);
  const std::size_t n = zs.total_out;
  deflateEnd(&zs);
  if (ret != Z_STREAM_END) throw IOError(fmt::format("{}: zlib failed to compress", op));
  out.resize(n);
  return out;
}

std::string inflate_raw(std::string_view in, std::uint64_t expected, const char* op, const std::string& label,
                        std::uint64_t base) {
  // Deflate expands at most about 1032:1; a larger recorded size is corrupt, and must not be
  // allocated before inflating proves it wrong.
  if (expected / 1032 > in.size() + 1)
    fail(op, label, base, fmt::format("the member records {} uncompressed bytes, more than {} compressed bytes can "
                                      "inflate to", expected, in.size()));
  std::string out(static_cast<std::size_t>(expected), '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail(op, label, base, "zlib cannot start");
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
      fail(op, label, base, fmt::format("the member inflates to more than its recorded {} bytes", expected));
    }
  }
  const std::uint64_t produced = zs.total_out, consumed = zs.total_in;
  const std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (ret != Z_STREAM_END) {
    if (ret == Z_BUF_ERROR || consumed == in.size()) fail(op, label, base + consumed, "the compressed data is truncated");
    fail(op, label, base + consumed, fmt::format("corrupt deflate data ({})", msg.empty() ? "zlib error" : msg));
  }
  if (produced != expected)
    fail(op, label, base, fmt::format("the member inflates to {} bytes, the archive records {}", produced, expected));
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

std::uint64_t read_le(std::string_view b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(i)]);
  return v;
}

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void fail(const char* op, const std::string& label, std::uint64_t offset, const std::string& what) {
  throw IOError(fmt::format("{}: {}: byte offset {}: {}", op, label, offset, what));
}

std::string write_archive(const std::vector<Member>& members, const char* op, const std::string& path) {
  std::string zip, central;
  std::uint64_t count = 0;
  for (const Member& m : members) {
    const std::string& name = m.name;
    if (name.empty() || name.find('\0') != std::string::npos)
      throw ValueError(fmt::format("{}: member names must be non-empty text, got '{}'", op, name));
    const std::string packed = m.deflate ? deflate_raw(m.data, op) : std::string();
    const std::string_view data = m.deflate ? std::string_view(packed) : m.data;
    const std::uint64_t offset = zip.size();
    if (m.data.size() >= kMax32 || data.size() >= kMax32 || offset >= kMax32 || name.size() > 0xFFFF)
      throw IOError(fmt::format("{}: {}: member '{}' does not fit a zip without zip64 extensions (4 GiB)", op, path,
                                name));
    const std::uint32_t crc = crc_of(m.data);
    const std::uint16_t method = m.deflate ? 8 : 0;
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
    put_le(zip, m.data.size(), 4);
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
    put_le(central, m.data.size(), 4);
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
    throw IOError(fmt::format("{}: {}: the archive needs zip64 extensions, which keel does not write", op, path));
  zip += central;
  put_le(zip, kEndSig, 4);
  put_le(zip, 0, 2);
  put_le(zip, 0, 2);
  put_le(zip, count, 2);
  put_le(zip, count, 2);
  put_le(zip, central.size(), 4);
  put_le(zip, cd_offset, 4);
  put_le(zip, 0, 2);  // comment length
  return zip;
}

void read_archive(std::string_view b, const char* op, const std::string& path,
                  const std::function<void(const Entry&)>& visit) {
  const std::uint64_t size = b.size();
  const auto le = [&](std::uint64_t at, int n) { return read_le(b, static_cast<std::size_t>(at), n); };
  auto need = [&](std::uint64_t at, std::uint64_t n, const char* what) {
    if (at > size || n > size - at)
      fail(op, path, at, fmt::format("{} ({} bytes) runs past the end of the file ({} bytes)", what, n, size));
  };

  // The end-of-central-directory record: the last 22 bytes, unless an archive comment follows.
  if (size < 22) fail(op, path, 0, fmt::format("{} bytes is too short for a zip archive", size));
  std::uint64_t eocd = size;
  for (std::uint64_t at = size - 22;; --at) {
    if (le(at, 4) == kEndSig && at + 22 + le(at + 20, 2) == size) {
      eocd = at;
      break;
    }
    if (at == 0 || size - at >= 22 + 0xFFFF) break;
  }
  if (eocd == size) fail(op, path, size - 22, "no zip end-of-central-directory record: not a zip archive, or truncated");
  if (le(eocd + 4, 2) != 0 || le(eocd + 6, 2) != 0) fail(op, path, eocd + 4, "multi-disk zip archives are not supported");
  std::uint64_t entries = le(eocd + 10, 2), cd_size = le(eocd + 12, 4), cd_offset = le(eocd + 16, 4);
  if (entries == 0xFFFF || cd_size == kMax32 || cd_offset == kMax32) {
    // zip64: a locator just before the end record points at the zip64 end record.
    if (eocd < 20 || le(eocd - 20, 4) != kZip64LocatorSig)
      fail(op, path, eocd, "the end record defers to zip64, but no zip64 locator precedes it");
    const std::uint64_t z64 = le(eocd - 20 + 8, 8);
    need(z64, 56, "the zip64 end-of-central-directory record");
    if (le(z64, 4) != kZip64EndSig) fail(op, path, z64, "bad zip64 end-of-central-directory signature");
    entries = le(z64 + 32, 8);
    cd_size = le(z64 + 40, 8);
    cd_offset = le(z64 + 48, 8);
  }
  need(cd_offset, cd_size, "the central directory");
  if (entries > cd_size / 46)
    fail(op, path, eocd + 10, fmt::format("{} entries cannot fit in a {}-byte central directory", entries, cd_size));

  std::uint64_t p = cd_offset;
  const std::uint64_t cd_end = cd_offset + cd_size;
  for (std::uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > cd_end) fail(op, path, p, "the central directory ends inside an entry");
    if (le(p, 4) != kCentralSig) fail(op, path, p, "bad central directory entry signature");
    const std::uint64_t flags = le(p + 8, 2), method = le(p + 10, 2), crc = le(p + 16, 4);
    std::uint64_t csize = le(p + 20, 4), usize = le(p + 24, 4);
    const std::uint64_t name_len = le(p + 28, 2), extra_len = le(p + 30, 2), comment_len = le(p + 32, 2);
    std::uint64_t local = le(p + 42, 4);
    if (p + 46 + name_len + extra_len + comment_len > cd_end)
      fail(op, path, p, "a central directory entry runs past the directory");
    const std::string name(b.substr(static_cast<std::size_t>(p + 46), static_cast<std::size_t>(name_len)));
    // zip64 extended information: the 64-bit values of the fields saturated at 0xFFFFFFFF.
    for (std::uint64_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const std::uint64_t id = le(x, 2), len = le(x + 2, 2);
      if (x + 4 + len > p + 46 + name_len + extra_len) fail(op, path, x, "an extra field runs past its entry");
      if (id == 0x0001) {
        std::uint64_t q = x + 4;
        auto take = [&](std::uint64_t& field) {
          if (field != kMax32) return;
          if (q + 8 > x + 4 + len) fail(op, path, x, "the zip64 extra field is too short");
          field = le(q, 8);
          q += 8;
        };
        take(usize);
        take(csize);
        take(local);
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;

    if (flags & 1) fail(op, path, p, fmt::format("member '{}' is encrypted", name));
    if (method != 0 && method != 8)
      fail(op, path, p,
           fmt::format("member '{}' uses compression method {} (only stored and deflate are supported)", name, method));
    need(local, 30, "a local file header");
    if (le(local, 4) != kLocalSig) fail(op, path, local, fmt::format("bad local header signature for member '{}'", name));
    const std::uint64_t data = local + 30 + le(local + 26, 2) + le(local + 28, 2);
    need(data, csize, "member data");
    if (!name.empty() && name.back() == '/') continue;  // a directory entry
    const std::string_view packed = b.substr(static_cast<std::size_t>(data), static_cast<std::size_t>(csize));
    Entry entry;
    entry.name = name;
    entry.label = fmt::format("{} member '{}'", path, name);
    entry.base = data;
    entry.data = packed;
    std::string inflated;
    if (method == 8) {
      inflated = inflate_raw(packed, usize, op, entry.label, data);
      entry.data = inflated;
      entry.label += " (decompressed)";
      entry.base = 0;
    } else if (csize != usize) {
      fail(op, path, p,
           fmt::format("stored member '{}' has different compressed ({}) and uncompressed ({}) sizes", name, csize, usize));
    }
    if (crc_of(entry.data) != crc)
      fail(op, path, data, fmt::format("CRC-32 mismatch in member '{}': the data is corrupt", name));
    visit(entry);
  }
}

}  // namespace keel::io::zip
