#pragma once
// A small RAII wrapper over the HDF5 C API, for Keras' weight files (.weights.h5, the
// model.weights.h5 of a .keras archive, legacy .h5). Internal to keel: not a public header, and it
// includes no HDF5 header (the handles are plain 64-bit ids here).
//
// Every HDF5 failure becomes an IOError "<op>: <file>: <object path>: <what>" with HDF5's own
// innermost message; HDF5's printing of errors to stderr is switched off. Readers check ranks,
// dimensions, element counts (overflow-safe) and types before reading a byte. The HDF5 library
// of Debian is not built thread-safe, so every File holds a process-wide lock while it lives:
// objects of one File are used by the thread that opened it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::io::hdf5 {

class File;

// An open group ("/" is the file's root). Valid while its File is.
class Group {
 public:
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  Group(Group&& o) noexcept;
  Group& operator=(Group&& o) noexcept;
  ~Group();

  const std::string& path() const { return path_; }

  bool has(const std::string& name) const;  // a link of that name (a path with '/' is walked)
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  // The names of the links directly in this group, in name order (HDF5's default index).
  std::vector<std::string> children() const;

  Group create_group(const std::string& name);  // IOError if it exists
  Group open_group(const std::string& name) const;  // IOError naming the path if absent
  // Opens the group at `name`, creating it (and the groups on the way) when absent.
  Group require_group(const std::string& name);

  // Datasets: float16/32/64, int8..64, uint8..64 and bool (uint8) tensors of any rank (rank 0
  // is a scalar dataspace). Intermediate groups of a name with '/' are created, as h5py does.
  void write_dataset(const std::string& name, const Tensor& value);
  // The dataset as a CPU tensor: float datasets as float16/float32/float64, integers as
  // uint8/int32/int64 (the narrowest keel dtype that holds every value: int8/int16/uint16 widen
  // to int32, uint32 to int64), h5py's bool enums as bool; a float32 dataset marked dtype =
  // "bfloat16" (Keras' form) as bfloat16. IOError for other types (uint64 included: it may not
  // fit), ranks above 8, or an element count past 2^32.
  Tensor read_dataset(const std::string& name) const;
  std::vector<std::int64_t> dataset_shape(const std::string& name) const;

  // Attributes. Strings are written as h5py writes numpy bytes (fixed-length, null-padded):
  // what legacy Keras writes with .encode("utf8"); `variable` writes h5py's form of a Python str
  // (variable-length UTF-8).
  bool has_attr(const std::string& name) const;
  void write_string_attr(const std::string& name, const std::string& value, bool variable = false);
  void write_string_list_attr(const std::string& name, const std::vector<std::string>& values);
  // A string attribute, fixed or variable length, scalar or a one-element array.
  std::string read_string_attr(const std::string& name) const;
  // A list of strings (a 1-D fixed or variable-length string array; a scalar string is a list
  // of one; an empty array of any type, as h5py writes an empty list, is an empty list).
  std::vector<std::string> read_string_list_attr(const std::string& name) const;

 private:
  friend class File;
  Group(const File* file, std::int64_t id, std::string path) : file_(file), id_(id), path_(std::move(path)) {}
  std::string child_path(const std::string& name) const;
  [[noreturn]] void fail(const std::string& object, const std::string& what) const;
  const File* file_ = nullptr;
  std::int64_t id_ = -1;
  std::string path_;
};

class File {
 public:
  // `op` names the operation in errors ("load_weights"), `label` the file ("w.h5", or
  // "m.keras member 'model.weights.h5'").
  static std::unique_ptr<File> open_read(const std::string& path, const char* op);
  static std::unique_ptr<File> create(const std::string& path, const char* op);  // truncates
  // A file image in memory (an archive member), read-only, and a new file kept in memory whose
  // bytes image() returns (to become an archive member).
  static std::unique_ptr<File> open_image(const std::string& bytes, const char* op, const std::string& label);
  static std::unique_ptr<File> create_in_memory(const char* op, const std::string& label);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  Group root() const;
  // Flushes and returns the bytes of a file made by create_in_memory.
  std::string image();
  // Flushes and closes, reporting errors (the destructor swallows them).
  void close();

  const std::string& label() const { return label_; }
  const char* op() const { return op_; }

 private:
  File(std::int64_t id, const char* op, std::string label);
  struct Lock;
  std::unique_ptr<Lock> lock_;
  std::int64_t id_ = -1;
  const char* op_;
  std::string label_;
};

// HDF5's message for the error on this thread's stack (innermost first), or "" when none.
std::string last_error();

}  // namespace keel::io::hdf5
