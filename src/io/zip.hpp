#pragma once
// A small zip archive writer and validating reader, shared by .npz arrays (src/data/npy.cpp) and
// .keel model files (src/models/serialization.cpp). Internal to keel: not a public header.
//
// Written archives hold stored or deflated members, no zip64 (an IOError past 4 GiB or 65535
// members), and a fixed DOS date, so that the same members give the same bytes. The reader
// accepts stored and deflate members, data descriptors, zip64 sizes and offsets, and checks every
// structure before handing out member data, as Python's zipfile does and more: the whole central
// directory, which must end at the end record and hold exactly the entries it counts; each local
// header against its central entry (name, method, CRC-32, sizes); members that overlap each other
// or the directory, duplicate names; and each member's data against its CRC-32.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::io::zip {

// Little-endian integers of n <= 8 bytes.
std::uint64_t read_le(std::string_view bytes, std::size_t at, int n);
void put_le(std::string& out, std::uint64_t value, int n);

// Throws IOError "{op}: {label}: byte offset {offset}: {what}", the format of every archive error
// (readers of member contents use it too, so errors inside a member read alike).
[[noreturn]] void fail(const char* op, const std::string& label, std::uint64_t offset, const std::string& what);

struct Member {
  std::string name;       // non-empty; '/' separates folders
  std::string_view data;  // the uncompressed bytes
  bool deflate = false;   // compress with deflate, else store
};

// The whole archive in memory. `op` and `path` name the operation and the file in errors.
std::string write_archive(const std::vector<Member>& members, const char* op, const std::string& path);

struct Entry {
  std::string name;
  std::string_view data;  // the uncompressed bytes; valid only during the visit
  std::string label;      // "<path> member '<name>'", with " (decompressed)" for deflated data
  std::uint64_t base = 0; // the file offset of data[0] (0 for decompressed data)
};

// Validates the archive in `bytes` (read from `path`) and calls `visit` for each file member, in
// central-directory order (directory entries are skipped). IOError (see fail) on anything wrong,
// naming the member; the structure of the whole archive is checked before the first visit.
void read_archive(std::string_view bytes, const char* op, const std::string& path,
                  const std::function<void(const Entry&)>& visit);

}  // namespace keel::io::zip
