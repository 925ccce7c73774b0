// The HDF5 wrapper of hdf5_file.hpp over HDF5's C API (1.10: H5F/H5G/H5D/H5A/H5T/H5S).
#include "io/hdf5_file.hpp"

#include <hdf5.h>

#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <new>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/core/error.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel::io::hdf5 {

namespace {

// One lock for every HDF5 call of the process (see the header).
std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}

// HDF5 prints its error stack to stderr by default; keel reports errors as exceptions instead.
void silence() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

herr_t walk_one(unsigned n, const H5E_error2_t* e, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (n == 0 && e && e->desc) *s = e->desc;  // the innermost (where the failure started)
  return 0;
}

// Closes an HDF5 id of any kind when it goes out of scope.
struct Handle {
  hid_t id = -1;
  explicit Handle(hid_t i = -1) : id(i) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id >= 0) H5Oclose(id);
  }
  operator hid_t() const { return id; }  // NOLINT
};

// Closes type, space and property ids (H5Oclose is for objects only).
struct TypeHandle {
  hid_t id = -1;
  explicit TypeHandle(hid_t i = -1) : id(i) {}
  TypeHandle(const TypeHandle&) = delete;
  TypeHandle& operator=(const TypeHandle&) = delete;
  ~TypeHandle() {
    if (id >= 0) H5Tclose(id);
  }
  operator hid_t() const { return id; }  // NOLINT
};
struct SpaceHandle {
  hid_t id = -1;
  explicit SpaceHandle(hid_t i = -1) : id(i) {}
  SpaceHandle(const SpaceHandle&) = delete;
  SpaceHandle& operator=(const SpaceHandle&) = delete;
  ~SpaceHandle() {
    if (id >= 0) H5Sclose(id);
  }
  operator hid_t() const { return id; }  // NOLINT
};
struct AttrHandle {
  hid_t id = -1;
  explicit AttrHandle(hid_t i = -1) : id(i) {}
  AttrHandle(const AttrHandle&) = delete;
  AttrHandle& operator=(const AttrHandle&) = delete;
  ~AttrHandle() {
    if (id >= 0) H5Aclose(id);
  }
  operator hid_t() const { return id; }  // NOLINT
};
struct PlistHandle {
  hid_t id = -1;
  explicit PlistHandle(hid_t i = -1) : id(i) {}
  PlistHandle(const PlistHandle&) = delete;
  PlistHandle& operator=(const PlistHandle&) = delete;
  ~PlistHandle() {
    if (id >= 0) H5Pclose(id);
  }
  operator hid_t() const { return id; }  // NOLINT
};

// IEEE half precision as h5py defines it (sign bit 15, exponent bits 10..14 with bias 15,
// mantissa bits 0..9), little-endian.
hid_t make_half_type() {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  if (t < 0) return t;
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

constexpr int kMaxRank = 8;
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 32;

}  // namespace

std::string last_error() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_one, &s);
  return s;
}

// ---- File ------------------------------------------------------------------------------------

struct File::Lock {
  std::unique_lock<std::recursive_mutex> lock{hdf5_mutex()};
};

File::File(std::int64_t id, const char* op, std::string label) : id_(id), op_(op), label_(std::move(label)) {}

namespace {

[[noreturn]] void open_fail(const char* op, const std::string& label, const char* what) {
  const std::string why = last_error();
  throw IOError(fmt::format("{}: {}: {}{}", op, label, what, why.empty() ? "" : ": " + why));
}

}  // namespace

std::unique_ptr<File> File::open_read(const std::string& path, const char* op) {
  auto lock = std::make_unique<Lock>();
  silence();
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    const std::string why = last_error();
    throw IOError(fmt::format("{}: {}: not an HDF5 file{}", op, path, why.empty() ? "" : " (" + why + ")"));
  }
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) open_fail(op, path, "cannot open as HDF5");
  std::unique_ptr<File> f(new File(id, op, path));
  f->lock_ = std::move(lock);
  return f;
}

std::unique_ptr<File> File::create(const std::string& path, const char* op) {
  auto lock = std::make_unique<Lock>();
  silence();
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) open_fail(op, path, "cannot create the HDF5 file");
  std::unique_ptr<File> f(new File(id, op, path));
  f->lock_ = std::move(lock);
  return f;
}

std::unique_ptr<File> File::open_image(const std::string& bytes, const char* op, const std::string& label) {
  auto lock = std::make_unique<Lock>();
  silence();
  // The core driver reads the image from memory: HDF5 copies it, no backing file.
  PlistHandle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (fapl < 0 || H5Pset_fapl_core(fapl, 64 * 1024, 0) < 0) open_fail(op, label, "cannot set up the in-memory driver");
  if (bytes.size() < 8 || std::memcmp(bytes.data(), "\x89HDF\r\n\x1a\n", 8) != 0)
    throw IOError(fmt::format("{}: {}: not an HDF5 file (no HDF5 signature at byte offset 0)", op, label));
  if (H5Pset_file_image(fapl, const_cast<char*>(bytes.data()), bytes.size()) < 0)
    open_fail(op, label, "cannot hand the file image to HDF5");
  const std::string name = "keel_image_" + std::to_string(reinterpret_cast<std::uintptr_t>(bytes.data()));
  const hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl);
  if (id < 0) open_fail(op, label, "cannot open as HDF5");
  std::unique_ptr<File> f(new File(id, op, label));
  f->lock_ = std::move(lock);
  return f;
}

std::unique_ptr<File> File::create_in_memory(const char* op, const std::string& label) {
  auto lock = std::make_unique<Lock>();
  silence();
  PlistHandle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (fapl < 0 || H5Pset_fapl_core(fapl, 64 * 1024, 0) < 0) open_fail(op, label, "cannot set up the in-memory driver");
  static std::uint64_t counter = 0;
  const std::string name = "keel_memory_" + std::to_string(++counter);
  const hid_t id = H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (id < 0) open_fail(op, label, "cannot create an in-memory HDF5 file");
  std::unique_ptr<File> f(new File(id, op, label));
  f->lock_ = std::move(lock);
  return f;
}

File::~File() {
  if (id_ >= 0) H5Fclose(id_);
}

void File::close() {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = -1;
  if (H5Fclose(id) < 0) open_fail(op_, label_, "closing the file");
}

std::string File::image() {
  if (H5Fflush(id_, H5F_SCOPE_GLOBAL) < 0) open_fail(op_, label_, "flushing the in-memory file");
  const ssize_t n = H5Fget_file_image(id_, nullptr, 0);
  if (n < 0) open_fail(op_, label_, "reading the in-memory file's size");
  std::string out(static_cast<std::size_t>(n), '\0');
  if (H5Fget_file_image(id_, out.data(), out.size()) < 0) open_fail(op_, label_, "reading the in-memory file");
  return out;
}

Group File::root() const {
  const hid_t g = H5Gopen2(id_, "/", H5P_DEFAULT);
  if (g < 0) open_fail(op_, label_, "opening the root group");
  return Group(this, g, "/");
}

// ---- Group -----------------------------------------------------------------------------------

Group::Group(Group&& o) noexcept : file_(o.file_), id_(o.id_), path_(std::move(o.path_)) { o.id_ = -1; }
Group& Group::operator=(Group&& o) noexcept {
  if (this != &o) {
    if (id_ >= 0) H5Gclose(id_);
    file_ = o.file_;
    id_ = o.id_;
    path_ = std::move(o.path_);
    o.id_ = -1;
  }
  return *this;
}
Group::~Group() {
  if (id_ >= 0) H5Gclose(id_);
}

std::string Group::child_path(const std::string& name) const {
  return path_ == "/" ? "/" + name : path_ + "/" + name;
}

void Group::fail(const std::string& object, const std::string& what) const {
  const std::string why = last_error();
  throw IOError(fmt::format("{}: {}: {}: {}{}", file_->op(), file_->label(), object, what, why.empty() ? "" : ": " + why));
}

bool Group::has(const std::string& name) const {
  // H5Lexists checks only the last link of a path: walk it component by component.
  if (name.empty()) return false;
  std::string prefix;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    prefix += (prefix.empty() ? "" : "/") + name.substr(start, slash - start);
    if (H5Lexists(id_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash < name.size()) {
      H5O_info_t info;
      if (H5Oget_info_by_name(id_, prefix.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5O_TYPE_GROUP) return false;
    }
    start = slash + 1;
  }
  return true;
}

bool Group::has_group(const std::string& name) const {
  if (!has(name)) return false;
  H5O_info_t info;
  return H5Oget_info_by_name(id_, name.c_str(), &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_GROUP;
}

bool Group::has_dataset(const std::string& name) const {
  if (!has(name)) return false;
  H5O_info_t info;
  return H5Oget_info_by_name(id_, name.c_str(), &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_DATASET;
}

namespace {
herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> Group::children() const {
  std::vector<std::string> out;
  hsize_t idx = 0;
  if (H5Literate(id_, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &out) < 0) fail(path_, "listing the group");
  return out;
}

Group Group::create_group(const std::string& name) {
  PlistHandle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl, 1);
  const hid_t g = H5Gcreate2(id_, name.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) fail(child_path(name), "cannot create the group");
  return Group(file_, g, child_path(name));
}

Group Group::open_group(const std::string& name) const {
  if (!has_group(name)) fail(child_path(name), "no such group");
  const hid_t g = H5Gopen2(id_, name.c_str(), H5P_DEFAULT);
  if (g < 0) fail(child_path(name), "cannot open the group");
  return Group(file_, g, child_path(name));
}

Group Group::require_group(const std::string& name) { return has_group(name) ? open_group(name) : create_group(name); }

// ---- datasets --------------------------------------------------------------------------------

void Group::write_dataset(const std::string& name, const Tensor& value_in) {
  const std::string where = child_path(name);
  keel::detail::check_defined(value_in, "hdf5 write_dataset");
  Tensor value = value_in.device().is_cpu() ? value_in : value_in.to(Device::cpu());
  bool bf16 = false;
  if (value.dtype() == DType::bfloat16) {  // as Keras: float32 values with attribute dtype = "bfloat16"
    value = cast(value, DType::float32);
    bf16 = true;
  }
  value = value.contiguous();
  TypeHandle half;
  hid_t type = -1;
  switch (value.dtype()) {
    case DType::float16: half.id = make_half_type(); type = half; break;
    case DType::float32: type = H5T_IEEE_F32LE; break;
    case DType::float64: type = H5T_IEEE_F64LE; break;
    case DType::int32: type = H5T_STD_I32LE; break;
    case DType::int64: type = H5T_STD_I64LE; break;
    case DType::uint8: case DType::bool_: type = H5T_STD_U8LE; break;
    default: fail(where, fmt::format("cannot store dtype {}", keel::name(value.dtype())));
  }
  std::vector<hsize_t> dims;
  for (auto d : value.shape().dims()) dims.push_back(static_cast<hsize_t>(d));
  SpaceHandle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (space < 0) fail(where, "cannot make the dataspace");
  PlistHandle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle ds(H5Dcreate2(id_, name.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT));
  if (ds < 0) fail(where, "cannot create the dataset");
  // Memory and file types agree (little-endian machines), so the bytes are written as they are.
  if (value.size() > 0 && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value.raw_data()) < 0)
    fail(where, "cannot write the dataset");
  if (bf16) {
    TypeHandle st(H5Tcopy(H5T_C_S1));
    H5Tset_size(st, 8);
    H5Tset_strpad(st, H5T_STR_NULLPAD);
    SpaceHandle scalar(H5Screate(H5S_SCALAR));
    AttrHandle a(H5Acreate2(ds, "dtype", st, scalar, H5P_DEFAULT, H5P_DEFAULT));
    if (a < 0 || H5Awrite(a, st, "bfloat16") < 0) fail(where, "cannot write its dtype attribute");
  }
}

namespace {

// The dims of a dataspace, checked: simple (or scalar), rank <= 8, element count <= 2^32.
std::vector<std::int64_t> checked_dims(hid_t space, const std::function<void(const std::string&)>& bad) {
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_SCALAR) return {};
  if (cls != H5S_SIMPLE) bad("a null dataspace (no values)");
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > kMaxRank) bad(fmt::format("rank {} (at most {} is read)", rank, kMaxRank));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0) bad("cannot read its dimensions");
  std::vector<std::int64_t> out;
  std::uint64_t elements = 1;
  for (hsize_t d : dims) {
    if (d > kMaxElements || (d != 0 && elements > kMaxElements / d))
      bad(fmt::format("more than {} elements", kMaxElements));
    elements *= d;
    out.push_back(static_cast<std::int64_t>(d));
  }
  return out;
}

}  // namespace

std::vector<std::int64_t> Group::dataset_shape(const std::string& name) const {
  const std::string where = child_path(name);
  if (!has_dataset(name)) fail(where, "no such dataset");
  Handle ds(H5Dopen2(id_, name.c_str(), H5P_DEFAULT));
  if (ds < 0) fail(where, "cannot open the dataset");
  SpaceHandle space(H5Dget_space(ds));
  return checked_dims(space, [&](const std::string& w) { fail(where, w); });
}

Tensor Group::read_dataset(const std::string& name) const {
  const std::string where = child_path(name);
  if (!has_dataset(name)) fail(where, "no such dataset");
  Handle ds(H5Dopen2(id_, name.c_str(), H5P_DEFAULT));
  if (ds < 0) fail(where, "cannot open the dataset");
  SpaceHandle space(H5Dget_space(ds));
  if (space < 0) fail(where, "cannot read its dataspace");
  const auto dims = checked_dims(space, [&](const std::string& w) { fail(where, w); });
  TypeHandle ftype(H5Dget_type(ds));
  if (ftype < 0) fail(where, "cannot read its type");
  const H5T_class_t cls = H5Tget_class(ftype);
  const std::size_t size = H5Tget_size(ftype);
  TypeHandle half;
  hid_t mem = -1;
  DType dtype = DType::float32;
  if (cls == H5T_FLOAT) {
    if (size == 2) {
      half.id = make_half_type();
      mem = half;
      dtype = DType::float16;
    } else if (size == 4) {
      mem = H5T_NATIVE_FLOAT;
    } else if (size == 8) {
      mem = H5T_NATIVE_DOUBLE;
      dtype = DType::float64;
    } else {
      fail(where, fmt::format("a {}-byte float type (2, 4 or 8 bytes are read)", size));
    }
  } else if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(ftype) == H5T_SGN_2;
    if (!is_signed && size == 1) {
      mem = H5T_NATIVE_UINT8;
      dtype = DType::uint8;
    } else if ((is_signed && size <= 4) || (!is_signed && size <= 2)) {
      mem = H5T_NATIVE_INT32;
      dtype = DType::int32;
    } else if ((is_signed && size == 8) || (!is_signed && size == 4)) {
      mem = H5T_NATIVE_INT64;
      dtype = DType::int64;
    } else {
      fail(where, fmt::format("a {}-byte {} integer type (not read: it may not fit int64)", size, is_signed ? "signed" : "unsigned"));
    }
  } else if (cls == H5T_ENUM && size == 1) {  // h5py's numpy bool: enum {FALSE = 0, TRUE = 1} of int8
    mem = H5T_NATIVE_UINT8;
    dtype = DType::bool_;
  } else {
    fail(where, "not a numeric dataset (float, integer or bool)");
  }
  Tensor t;
  try {
    DeviceScope cpu(Device::cpu());
    t = keel::detail::empty_tensor(Shape(dims), dtype, Device::cpu(), "hdf5 read_dataset");
  } catch (const std::bad_alloc&) {
    fail(where, fmt::format("no memory for {} values", Shape(dims).to_string()));
  }
  if (t.size() > 0) {
    if (dtype == DType::bool_) {
      // HDF5 converts enums only to enums (by member name): read the enum's own one-byte values.
      if (H5Dread(ds, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw_data()) < 0) fail(where, "cannot read the dataset");
      auto* b = static_cast<std::uint8_t*>(t.raw_data());
      for (std::int64_t i = 0; i < t.size(); ++i) b[i] = b[i] != 0;
    } else if (H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw_data()) < 0) {
      fail(where, "cannot read the dataset");
    }
  }
  // Keras stores bfloat16 variables as float32 values marked with attribute dtype = "bfloat16".
  if (dtype == DType::float32 && H5Aexists(ds, "dtype") > 0) {
    AttrHandle a(H5Aopen(ds, "dtype", H5P_DEFAULT));
    TypeHandle at(H5Aget_type(a));
    if (a >= 0 && at >= 0 && H5Tget_class(at) == H5T_STRING && !H5Tis_variable_str(at) && H5Tget_size(at) <= 64) {
      std::string s(H5Tget_size(at), '\0');
      if (H5Aread(a, at, s.data()) >= 0 && s.substr(0, s.find('\0')) == "bfloat16") t = cast(t, DType::bfloat16);
    }
  }
  return t;
}

// ---- attributes ------------------------------------------------------------------------------

bool Group::has_attr(const std::string& name) const { return H5Aexists(id_, name.c_str()) > 0; }

void Group::write_string_attr(const std::string& name, const std::string& value, bool variable) {
  if (has_attr(name) && H5Adelete(id_, name.c_str()) < 0) fail(path_, "cannot replace attribute '" + name + "'");
  TypeHandle st(H5Tcopy(H5T_C_S1));
  if (variable) {
    H5Tset_size(st, H5T_VARIABLE);
    H5Tset_cset(st, H5T_CSET_UTF8);
  } else {
    H5Tset_size(st, value.empty() ? 1 : value.size());
    H5Tset_strpad(st, H5T_STR_NULLPAD);
  }
  SpaceHandle scalar(H5Screate(H5S_SCALAR));
  AttrHandle a(H5Acreate2(id_, name.c_str(), st, scalar, H5P_DEFAULT, H5P_DEFAULT));
  if (a < 0) fail(path_, "cannot create attribute '" + name + "'");
  herr_t rc;
  if (variable) {
    const char* p = value.c_str();
    rc = H5Awrite(a, st, &p);
  } else {
    std::string padded = value.empty() ? std::string(1, '\0') : value;
    rc = H5Awrite(a, st, padded.data());
  }
  if (rc < 0) fail(path_, "cannot write attribute '" + name + "'");
}

void Group::write_string_list_attr(const std::string& name, const std::vector<std::string>& values) {
  if (has_attr(name) && H5Adelete(id_, name.c_str()) < 0) fail(path_, "cannot replace attribute '" + name + "'");
  // numpy's array of bytes: fixed-length strings as long as the longest, null-padded. HDF5 keeps
  // attributes in the object header (64 KiB at most): longer lists are an error here, where
  // Keras would split them into name0, name1, ... (which the reader accepts).
  std::size_t width = 1;
  for (const auto& v : values) width = std::max(width, v.size());
  std::string buf(values.size() * width, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) std::memcpy(buf.data() + i * width, values[i].data(), values[i].size());
  if (buf.size() > 60000) fail(path_, fmt::format("attribute '{}' would take {} bytes (an HDF5 header holds 64 KiB)", name, buf.size()));
  TypeHandle st(H5Tcopy(H5T_C_S1));
  H5Tset_size(st, width);
  H5Tset_strpad(st, H5T_STR_NULLPAD);
  const hsize_t n = values.size();
  SpaceHandle space(H5Screate_simple(1, &n, nullptr));
  AttrHandle a(H5Acreate2(id_, name.c_str(), st, space, H5P_DEFAULT, H5P_DEFAULT));
  if (a < 0) fail(path_, "cannot create attribute '" + name + "'");
  if (n > 0 && H5Awrite(a, st, buf.data()) < 0) fail(path_, "cannot write attribute '" + name + "'");
}

std::vector<std::string> Group::read_string_list_attr(const std::string& name) const {
  const std::string where = fmt::format("{} attribute '{}'", path_, name);
  if (!has_attr(name)) fail(where, "missing");
  AttrHandle a(H5Aopen(id_, name.c_str(), H5P_DEFAULT));
  if (a < 0) fail(where, "cannot open it");
  SpaceHandle space(H5Aget_space(a));
  const auto dims = checked_dims(space, [&](const std::string& w) { fail(where, w); });
  if (dims.size() > 1) fail(where, fmt::format("a {}-D array (a string or a list of strings is read)", dims.size()));
  const std::size_t n = dims.empty() ? 1 : static_cast<std::size_t>(dims[0]);
  TypeHandle type(H5Aget_type(a));
  if (type < 0) fail(where, "cannot read its type");
  if (n == 0) return {};  // h5py writes an empty list as an empty float64 array
  if (H5Tget_class(type) != H5T_STRING) fail(where, "not a string attribute");
  std::vector<std::string> out;
  if (H5Tis_variable_str(type) > 0) {
    TypeHandle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    std::vector<char*> ptrs(n, nullptr);
    if (H5Aread(a, mem, ptrs.data()) < 0) fail(where, "cannot read it");
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, ptrs.data());
  } else {
    const std::size_t width = H5Tget_size(type);
    if (width == 0 || width > (std::size_t{1} << 28) / n) fail(where, fmt::format("implausible string size {}", width));
    std::string buf(n * width, '\0');
    if (H5Aread(a, type, buf.data()) < 0) fail(where, "cannot read it");
    for (std::size_t i = 0; i < n; ++i) {
      std::string s = buf.substr(i * width, width);
      if (auto z = s.find('\0'); z != std::string::npos) s.resize(z);
      // space-padded strings (H5T_STR_SPACEPAD, as Fortran writes them) lose their padding too
      if (H5Tget_strpad(type) == H5T_STR_SPACEPAD)
        while (!s.empty() && s.back() == ' ') s.pop_back();
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::string Group::read_string_attr(const std::string& name) const {
  auto list = read_string_list_attr(name);
  if (list.size() != 1)
    fail(fmt::format("{} attribute '{}'", path_, name), fmt::format("expected one string, found {}", list.size()));
  return list[0];
}

}  // namespace keel::io::hdf5
