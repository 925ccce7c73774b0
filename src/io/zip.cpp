// Zip archives for .npz and .keel files (see zip.hpp): PKWARE's APPNOTE layout of local headers,
// member data, a central directory and an end record.
#include "io/zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <new>

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
  std::string out;
  try {
    out.resize(static_cast<std::size_t>(expected));
  } catch (const std::bad_alloc&) {
    throw ResourceExhaustedError(fmt::format("{}: {}: cannot allocate the {} bytes the member inflates to", op, label,
                                             expected));
  }
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

namespace {

// The archive being read, and the checks every structure of it goes through.
struct Source {
  std::string_view b;
  const char* op;
  const std::string& path;

  std::uint64_t size() const { return b.size(); }
  std::uint64_t le(std::uint64_t at, int n) const { return read_le(b, static_cast<std::size_t>(at), n); }
  [[noreturn]] void fail(std::uint64_t at, const std::string& what) const { zip::fail(op, path, at, what); }
  void need(std::uint64_t at, std::uint64_t n, const std::string& what) const {
    if (at > size() || n > size() - at)
      fail(at, fmt::format("{} ({} bytes) runs past the end of the file ({} bytes)", what, n, size()));
  }
};

// Where the central directory is and how many entries the end record (or zip64 end record) says
// it holds; `dir_end` is where the directory must end: at the record that follows it.
struct EndRecord {
  std::uint64_t entries = 0, disk_entries = 0, cd_size = 0, cd_offset = 0;
  std::uint64_t dir_end = 0;
  std::uint64_t count_at = 0;  // the offset of the entry count (disk_entries' is 2 or 8 bytes before), for errors
};

EndRecord find_end(const Source& s) {
  const std::uint64_t size = s.size();
  // The end-of-central-directory record: the last 22 bytes, unless an archive comment follows.
  if (size < 22) s.fail(0, fmt::format("{} bytes is too short for a zip archive", size));
  std::uint64_t eocd = size;
  for (std::uint64_t at = size - 22;; --at) {
    if (s.le(at, 4) == kEndSig && at + 22 + s.le(at + 20, 2) == size) {
      eocd = at;
      break;
    }
    if (at == 0 || size - at >= 22 + 0xFFFF) break;
  }
  if (eocd == size) s.fail(size - 22, "no zip end-of-central-directory record: not a zip archive, or truncated");
  if (s.le(eocd + 4, 2) != 0 || s.le(eocd + 6, 2) != 0) s.fail(eocd + 4, "multi-disk zip archives are not supported");
  EndRecord r;
  r.entries = s.le(eocd + 10, 2);
  r.cd_size = s.le(eocd + 12, 4);
  r.cd_offset = s.le(eocd + 16, 4);
  r.dir_end = eocd;
  r.count_at = eocd + 10;
  r.disk_entries = s.le(eocd + 8, 2);
  // zip64: a locator just before the end record points at the zip64 end record, whose values
  // win (as Python's zipfile reads them) even when the plain record holds them too, as the
  // writer of torch.save always adds both.
  const bool has_locator = eocd >= 20 && s.le(eocd - 20, 4) == kZip64LocatorSig;
  if (r.entries == 0xFFFF || r.cd_size == kMax32 || r.cd_offset == kMax32 || has_locator) {
    if (!has_locator) s.fail(eocd, "the end record defers to zip64, but no zip64 locator precedes it");
    const std::uint64_t z64 = s.le(eocd - 20 + 8, 8);
    if (z64 > eocd - 20 || eocd - 20 - z64 < 56)
      s.fail(eocd - 20 + 8, fmt::format("the zip64 locator points at offset {}, which leaves no room for the zip64 end "
                                        "record before the locator at {}", z64, eocd - 20));
    if (s.le(z64, 4) != kZip64EndSig) s.fail(z64, "bad zip64 end-of-central-directory signature");
    r.disk_entries = s.le(z64 + 24, 8);
    r.entries = s.le(z64 + 32, 8);
    r.cd_size = s.le(z64 + 40, 8);
    r.cd_offset = s.le(z64 + 48, 8);
    r.dir_end = z64;
    r.count_at = z64 + 32;
  }
  s.need(r.cd_offset, r.cd_size, "the central directory");
  // Nothing may hide between the directory and the record after it (as Python's zipfile, which
  // treats such a gap as a prefix it does not expect here).
  if (r.cd_offset + r.cd_size != r.dir_end)
    s.fail(r.dir_end, fmt::format("the central directory ({} bytes at offset {}) does not end where the end record "
                                  "begins", r.cd_size, r.cd_offset));
  if (r.entries > r.cd_size / 46)
    s.fail(r.count_at, fmt::format("{} entries cannot fit in a {}-byte central directory", r.entries, r.cd_size));
  return r;
}

// One member as the central directory records it, and (once check_local has run) where its
// data lies.
struct CentralEntry {
  std::string name;
  std::uint64_t at = 0;  // the central directory entry's offset
  std::uint64_t flags = 0, method = 0, crc = 0, csize = 0, usize = 0, local = 0;
  std::uint64_t data = 0;  // the member data's offset
  std::uint64_t end = 0;   // past the data and its data descriptor
};

// The zip64 extended information field (id 1) of the extra fields in [from, to): the 64-bit
// values of the fields saturated at 0xFFFFFFFF, in APPNOTE's order. A local header's field
// holds both sizes whenever it is present (`both_sizes`).
void read_zip64_extra(const Source& s, std::uint64_t from, std::uint64_t to, std::uint64_t& usize, std::uint64_t& csize,
                      std::uint64_t* local, bool both_sizes) {
  for (std::uint64_t x = from; x + 4 <= to;) {
    const std::uint64_t id = s.le(x, 2), len = s.le(x + 2, 2);
    if (x + 4 + len > to) s.fail(x, "an extra field runs past its header");
    if (id == 0x0001) {
      std::uint64_t q = x + 4;
      const std::uint64_t field_end = x + 4 + len;
      auto take = [&](std::uint64_t& field, bool present) {
        if (!present) return;
        if (q + 8 > field_end) s.fail(x, "the zip64 extra field is too short");
        if (field == kMax32) field = s.le(q, 8);
        q += 8;
      };
      const bool both = both_sizes && len >= 16;
      take(usize, both || usize == kMax32);
      take(csize, both || csize == kMax32);
      if (local) take(*local, *local == kMax32);
    }
    x += 4 + len;
  }
}

// Every entry of the central directory, which must hold exactly the end record's count of them
// and nothing else.
std::vector<CentralEntry> read_directory(const Source& s, const EndRecord& r) {
  std::vector<CentralEntry> out;
  const std::uint64_t cd_end = r.cd_offset + r.cd_size;
  std::uint64_t p = r.cd_offset;
  while (p < cd_end) {
    if (cd_end - p < 46) s.fail(p, "the central directory ends inside an entry");
    if (s.le(p, 4) != kCentralSig) s.fail(p, "bad central directory entry signature");
    CentralEntry e;
    e.at = p;
    e.flags = s.le(p + 8, 2);
    e.method = s.le(p + 10, 2);
    e.crc = s.le(p + 16, 4);
    e.csize = s.le(p + 20, 4);
    e.usize = s.le(p + 24, 4);
    const std::uint64_t name_len = s.le(p + 28, 2), extra_len = s.le(p + 30, 2), comment_len = s.le(p + 32, 2);
    const std::uint64_t disk = s.le(p + 34, 2);
    e.local = s.le(p + 42, 4);
    if (46 + name_len + extra_len + comment_len > cd_end - p)
      s.fail(p, "a central directory entry runs past the directory");
    e.name.assign(s.b.substr(static_cast<std::size_t>(p + 46), static_cast<std::size_t>(name_len)));
    read_zip64_extra(s, p + 46 + name_len, p + 46 + name_len + extra_len, e.usize, e.csize, &e.local, false);
    if (disk != 0 && disk != 0xFFFF) s.fail(p + 34, fmt::format("member '{}' is on disk {}: multi-disk zip archives are not supported", e.name, disk));
    if (e.name.empty()) s.fail(p + 28, "a central directory entry has an empty name");
    if (e.flags & 0x2041) s.fail(p + 8, fmt::format("member '{}' is encrypted", e.name));  // bits 0, 6, 13
    if (e.method != 0 && e.method != 8)
      s.fail(p + 10, fmt::format("member '{}' uses compression method {} (only stored and deflate are supported)",
                                 e.name, e.method));
    if (e.method == 0 && e.csize != e.usize)
      s.fail(p + 20, fmt::format("stored member '{}' has different compressed ({}) and uncompressed ({}) sizes", e.name,
                                 e.csize, e.usize));
    // An end record that undercounts would hide this member (and a .keel's optimizer state with it).
    if (out.size() >= std::min(r.entries, r.disk_entries))
      s.fail(p, fmt::format("member '{}' is entry {} of the central directory, but the end record (offset {}) counts "
                            "{} entries", e.name, out.size() + 1, r.count_at, std::min(r.entries, r.disk_entries)));
    out.push_back(std::move(e));
    p += 46 + name_len + extra_len + comment_len;
  }
  if (out.size() != r.entries || out.size() != r.disk_entries) {
    std::string names;
    for (const auto& e : out) names += (names.empty() ? "'" : ", '") + e.name + "'";
    s.fail(r.count_at, fmt::format("the end record counts {} entries, but the central directory holds {}{}{}",
                                   std::max(r.entries, r.disk_entries), out.size(), out.empty() ? "" : ": ", names));
  }
  return out;
}

// The member's local header must agree with its central directory entry: the same name, method
// and (unless a data descriptor follows the data) CRC-32 and sizes, as the central directory is
// what the reader trusts and the local header is what other tools read.
void check_local(const Source& s, CentralEntry& e) {
  const std::uint64_t h = e.local;
  s.need(h, 30, fmt::format("the local header of member '{}'", e.name));
  if (s.le(h, 4) != kLocalSig) s.fail(h, fmt::format("bad local header signature for member '{}'", e.name));
  const std::uint64_t flags = s.le(h + 6, 2), method = s.le(h + 8, 2);
  std::uint64_t crc = s.le(h + 14, 4), csize = s.le(h + 18, 4), usize = s.le(h + 22, 4);
  const std::uint64_t name_len = s.le(h + 26, 2), extra_len = s.le(h + 28, 2);
  s.need(h + 30, name_len + extra_len, fmt::format("the local header of member '{}'", e.name));
  const std::string_view name = s.b.substr(static_cast<std::size_t>(h + 30), static_cast<std::size_t>(name_len));
  if (name != e.name)
    s.fail(h + 30, fmt::format("the central directory names member '{}', its local header '{}'", e.name, name));
  if (method != e.method)
    s.fail(h + 8, fmt::format("member '{}': compression method {} in the local header, {} in the central directory",
                              e.name, method, e.method));
  if ((flags & 0x0008) != (e.flags & 0x0008))
    s.fail(h + 6, fmt::format("member '{}': the local header and the central directory disagree on a data descriptor",
                              e.name));
  read_zip64_extra(s, h + 30 + name_len, h + 30 + name_len + extra_len, usize, csize, nullptr, true);
  e.data = h + 30 + name_len + extra_len;
  s.need(e.data, e.csize, fmt::format("the data of member '{}'", e.name));
  e.end = e.data + e.csize;
  const bool descriptor = (flags & 0x0008) != 0;
  if (!descriptor || crc != 0 || csize != 0 || usize != 0) {  // a descriptor's local fields may be 0
    if (crc != e.crc)
      s.fail(h + 14, fmt::format("member '{}': CRC-32 {:08x} in the local header, {:08x} in the central directory", e.name,
                                 crc, e.crc));
    if (csize != e.csize || usize != e.usize)
      s.fail(h + 18, fmt::format("member '{}': sizes {}/{} (compressed/uncompressed) in the local header, {}/{} in the "
                                 "central directory", e.name, csize, usize, e.csize, e.usize));
  }
  if (!descriptor) return;
  // The data descriptor: an optional signature, the CRC-32, then both sizes (8 bytes each for zip64).
  std::uint64_t d = e.end;
  if (d + 4 <= s.size() && s.le(d, 4) == 0x08074b50) d += 4;
  const bool wide = e.csize >= kMax32 || e.usize >= kMax32;
  const int n = wide ? 8 : 4;
  s.need(d, 4 + 2 * static_cast<std::uint64_t>(n), fmt::format("the data descriptor of member '{}'", e.name));
  if (s.le(d, 4) != e.crc || s.le(d + 4, n) != e.csize || s.le(d + 4 + n, n) != e.usize)
    s.fail(d, fmt::format("member '{}': its data descriptor does not match the central directory", e.name));
  e.end = d + 4 + 2 * static_cast<std::uint64_t>(n);
}

// Members may not share bytes with each other or with the central directory (overlapping
// members are how zip bombs multiply their data), and each name appears once.
void check_layout(const Source& s, const std::vector<CentralEntry>& entries, std::uint64_t cd_offset) {
  std::vector<const CentralEntry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const CentralEntry* a, const CentralEntry* b) { return a->local < b->local; });
  for (std::size_t i = 0; i < by_offset.size(); ++i) {
    const CentralEntry& e = *by_offset[i];
    const std::uint64_t next = i + 1 < by_offset.size() ? by_offset[i + 1]->local : cd_offset;
    if (e.end > next)
      s.fail(e.local, fmt::format("member '{}' (bytes {}..{}) overlaps {}", e.name, e.local, e.end,
                                  i + 1 < by_offset.size() ? "member '" + by_offset[i + 1]->name + "'"
                                                           : std::string("the central directory")));
  }
  std::vector<const CentralEntry*> by_name(by_offset);
  std::sort(by_name.begin(), by_name.end(), [](const CentralEntry* a, const CentralEntry* b) {
    return a->name != b->name ? a->name < b->name : a->at < b->at;
  });
  for (std::size_t i = 1; i < by_name.size(); ++i)
    if (by_name[i]->name == by_name[i - 1]->name)
      s.fail(by_name[i]->at, fmt::format("duplicate member '{}' (also at central directory offset {})", by_name[i]->name,
                                         by_name[i - 1]->at));
}

}  // namespace

void read_archive(std::string_view b, const char* op, const std::string& path,
                  const std::function<void(const Entry&)>& visit) {
  const Source s{b, op, path};
  const EndRecord end = find_end(s);
  std::vector<CentralEntry> entries = read_directory(s, end);
  for (CentralEntry& e : entries) check_local(s, e);
  check_layout(s, entries, end.cd_offset);
  // The structure is sound; now each member's data, checked against its CRC-32 before use.
  for (const CentralEntry& c : entries) {
    if (c.name.back() == '/') continue;  // a directory entry
    const std::string_view packed = b.substr(static_cast<std::size_t>(c.data), static_cast<std::size_t>(c.csize));
    Entry entry;
    entry.name = c.name;
    entry.label = fmt::format("{} member '{}'", path, c.name);
    entry.base = c.data;
    entry.data = packed;
    std::string inflated;
    if (c.method == 8) {
      inflated = inflate_raw(packed, c.usize, op, entry.label, c.data);
      entry.data = inflated;
      entry.label += " (decompressed)";
      entry.base = 0;
    }
    if (crc_of(entry.data) != c.crc)
      s.fail(c.data, fmt::format("CRC-32 mismatch in member '{}': the data is corrupt", c.name));
    visit(entry);
  }
}

}  // namespace keel::io::zip
