// Dataset::cache(filename): a small streaming binary format for sequences of tensor elements.
//
// Layout (all integers little-endian):
//   header, 32 bytes: "KEELCACH" | u32 version (1) | u32 tensors per element |
//                     u64 element count | u64 total file size in bytes
//   then, for each element, its tensors in order, each:
//     u8 dtype (keel::DType's value) | u8 rank | 6 zero bytes | rank x i64 dims | raw C-order data
//
// The writer streams records into a temporary file beside the target (so a cache larger than
// memory works), then fills in the header, fsyncs and renames: like io::atomic_write, but
// without holding the whole file in memory, and with the same temporary names (io/atomic_file.hpp),
// so that a later cache of the path removes what a killed one left. The count and total size in
// the header let the reader tell a complete file from anything else before it trusts a record.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "io/atomic_file.hpp"
#include "keel/data/dataset.hpp"

namespace keel::data::detail {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the cache format stores tensor data in the host byte order, assumed little-endian");

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'C', 'A', 'C', 'H'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderSize = 32;
constexpr std::size_t kRecordHeader = 8;
constexpr std::uint64_t kMaxRank = 32;
constexpr auto kMaxDim = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::size_t kFlushAt = std::size_t{4} << 20;

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint64_t get_le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// ---- writer -------------------------------------------------------------------------------

struct CacheWriter::Impl {
  std::string path, tmp;
  int fd = -1;
  std::size_t leaves = 0;
  std::uint64_t count = 0, size = kHeaderSize;
  std::string buffer;
  bool committed = false;

  void write_all(const char* data, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, data, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw IOError(fmt::format("Dataset.cache: cannot write {}: {}", tmp, errno_text()));
      }
      data += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  void flush() {
    write_all(buffer.data(), buffer.size());
    buffer.clear();
  }
  void discard() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!tmp.empty()) ::unlink(tmp.c_str());
  }
};

CacheWriter::CacheWriter(std::string path, std::size_t leaves) : impl_(std::make_unique<Impl>()) {
  impl_->path = std::move(path);
  impl_->leaves = leaves;
  // What earlier, killed caches of this path left behind goes first.
  io::detail::remove_stale_temporaries(impl_->path);
  impl_->tmp = io::detail::temp_name(impl_->path, "tmp");
  impl_->fd = ::open(impl_->tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (impl_->fd < 0) {
    const std::string err = errno_text();
    impl_->tmp.clear();  // nothing of ours to delete
    throw IOError(fmt::format("Dataset.cache: cannot create a cache file beside {}: {}", impl_->path, err));
  }
  impl_->buffer.assign(kHeaderSize, '\0');  // filled in by commit()
}

CacheWriter::~CacheWriter() {
  if (!impl_->committed) impl_->discard();
}

void CacheWriter::append(const std::vector<Tensor>& element) {
  Impl& s = *impl_;
  if (s.committed) return;
  if (element.size() != s.leaves)
    throw ValueError(fmt::format("Dataset.cache: element of {} tensors, expected {}", element.size(), s.leaves));
  for (const Tensor& t : element) {
    keel::detail::check_defined(t, "Dataset.cache");
    const Tensor c = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
    const std::size_t nbytes = static_cast<std::size_t>(c.size()) * itemsize(c.dtype());
    s.buffer.push_back(static_cast<char>(c.dtype()));
    s.buffer.push_back(static_cast<char>(c.rank()));
    s.buffer.append(6, '\0');
    for (auto d : c.shape().dims()) put_u64(s.buffer, static_cast<std::uint64_t>(d));
    s.size += kRecordHeader + 8 * static_cast<std::uint64_t>(c.rank()) + nbytes;
    if (nbytes >= kFlushAt) {
      s.flush();
      s.write_all(static_cast<const char*>(c.raw_data()), nbytes);
    } else {
      s.buffer.append(static_cast<const char*>(c.raw_data()), nbytes);
      if (s.buffer.size() >= kFlushAt) s.flush();
    }
  }
  ++s.count;
}

void CacheWriter::commit() {
  Impl& s = *impl_;
  if (s.committed) return;
  try {
    s.flush();
    std::string header(kMagic, sizeof kMagic);
    put_u32(header, kVersion);
    put_u32(header, static_cast<std::uint32_t>(s.leaves));
    put_u64(header, s.count);
    put_u64(header, s.size);
    if (::pwrite(s.fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
      throw IOError(fmt::format("Dataset.cache: cannot write the header of {}: {}", s.tmp, errno_text()));
    if (::fsync(s.fd) != 0 || ::close(s.fd) != 0) {
      s.fd = -1;
      throw IOError(fmt::format("Dataset.cache: cannot flush {}: {}", s.tmp, errno_text()));
    }
    s.fd = -1;
    if (::rename(s.tmp.c_str(), s.path.c_str()) != 0)
      throw IOError(fmt::format("Dataset.cache: cannot rename {} to {}: {}", s.tmp, s.path, errno_text()));
    s.committed = true;
  } catch (...) {
    s.discard();
    s.committed = true;  // nothing left to clean up or retry
    throw;
  }
}

// ---- reader -------------------------------------------------------------------------------

struct CacheReader::Impl {
  std::string path;
  int fd = -1;
  std::size_t leaves = 0;
  std::uint64_t size = 0, count = 0, done = 0, offset = kHeaderSize;

  [[noreturn]] void fail(std::uint64_t at, const std::string& what) const {
    throw IOError(fmt::format("Dataset.cache: {}: byte offset {}: {}", path, at, what));
  }
  void read_at(void* dst, std::uint64_t n, std::uint64_t at, const char* what) const {
    if (n > size || at > size - n)
      fail(at, fmt::format("{} needs {} bytes but the file has {} (truncated?)", what, n, size));
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail(at, fmt::format("cannot read {}: {}", what, r < 0 ? errno_text() : "unexpected end of file"));
      p += r;
      at += static_cast<std::uint64_t>(r);
      n -= static_cast<std::uint64_t>(r);
    }
  }
};

CacheReader::CacheReader(std::string path, std::size_t leaves) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.path = std::move(path);
  s.leaves = leaves;
  s.fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (s.fd < 0) throw IOError(fmt::format("Dataset.cache: cannot open {}: {}", s.path, errno_text()));
  struct stat st {};
  if (::fstat(s.fd, &st) != 0) s.fail(0, "cannot read the file size");
  s.size = static_cast<std::uint64_t>(st.st_size);
  unsigned char h[kHeaderSize];
  if (s.size < kHeaderSize)
    s.fail(0, fmt::format("{} bytes is too short for the {}-byte header; not a keel cache file (delete it to rebuild)",
                          s.size, kHeaderSize));
  s.read_at(h, kHeaderSize, 0, "the header");
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) s.fail(0, "not a keel cache file (bad magic); delete it to rebuild");
  if (const auto v = get_le(h + 8, 4); v != kVersion) s.fail(8, fmt::format("unsupported cache version {}", v));
  if (const auto k = get_le(h + 12, 4); k != leaves)
    s.fail(12, fmt::format("written for elements of {} tensors, this dataset's have {}", k, leaves));
  s.count = get_le(h + 16, 8);
  if (const auto total = get_le(h + 24, 8); total != s.size)
    s.fail(24, fmt::format("the header records {} bytes but the file has {} (incomplete or damaged)", total, s.size));
  // Every tensor record takes at least kRecordHeader bytes: bounds the count before any use.
  if (leaves > 0 && s.count > (s.size - kHeaderSize) / (kRecordHeader * leaves))
    s.fail(16, fmt::format("element count {} cannot fit in {} bytes", s.count, s.size));
}

CacheReader::~CacheReader() {
  if (impl_->fd >= 0) ::close(impl_->fd);
}

bool CacheReader::next(std::vector<Tensor>& element) {
  Impl& s = *impl_;
  element.clear();
  if (s.done >= s.count) {
    if (s.offset != s.size)
      s.fail(s.offset, fmt::format("{} trailing bytes after the last of {} elements", s.size - s.offset, s.count));
    return false;
  }
  for (std::size_t j = 0; j < s.leaves; ++j) {
    const std::uint64_t at = s.offset;
    unsigned char rh[kRecordHeader];
    s.read_at(rh, kRecordHeader, at, "a tensor record header");
    if (rh[0] > static_cast<unsigned char>(DType::bool_)) s.fail(at, fmt::format("invalid dtype code {}", rh[0]));
    const auto dtype = static_cast<DType>(rh[0]);
    const std::uint64_t rank = rh[1];
    if (rank > kMaxRank) s.fail(at + 1, fmt::format("rank {} is larger than {}", rank, kMaxRank));
    for (std::size_t i = 2; i < kRecordHeader; ++i)
      if (rh[i] != 0) s.fail(at + i, "reserved bytes are not zero");
    std::uint64_t pos = at + kRecordHeader;
    std::vector<unsigned char> dim_bytes(static_cast<std::size_t>(8 * rank));
    if (rank > 0) s.read_at(dim_bytes.data(), 8 * rank, pos, "the dimensions");
    // Overflow-safe products: a zero dimension empties the tensor whatever the others are (as a
    // cached [0, 2^62] tensor is), but the others' product, which the strides reach, must fit int64.
    std::vector<std::int64_t> dims;
    std::uint64_t elements = 1, span = 1;
    for (std::uint64_t i = 0; i < rank; ++i) {
      const std::uint64_t d = get_le(dim_bytes.data() + 8 * i, 8);
      if (d > kMaxDim) s.fail(pos + 8 * i, fmt::format("dimension {} does not fit int64", d));
      if (d > 1 && span > kMaxDim / d) s.fail(pos + 8 * i, "the shape has more elements than int64 counts");
      span *= std::max<std::uint64_t>(d, 1);
      elements = d == 0 ? 0 : elements * d;
      dims.push_back(static_cast<std::int64_t>(d));
    }
    pos += 8 * rank;
    const std::uint64_t left = s.size - std::min(pos, s.size);
    if (elements > left / itemsize(dtype))  // compared as elements: the byte count may not fit 64 bits
      s.fail(pos, fmt::format("tensor data of {} elements of {} bytes (shape {}, {}) runs past the end of the file ({} "
                              "bytes)", elements, itemsize(dtype), Shape(dims).to_string(), name(dtype), s.size));
    const std::uint64_t nbytes = elements * itemsize(dtype);
    Tensor t = keel::detail::empty_tensor(Shape(dims), dtype, Device::cpu());
    if (nbytes > 0) s.read_at(t.raw_data(), nbytes, pos, "tensor data");
    s.offset = pos + nbytes;
    element.push_back(std::move(t));
  }
  ++s.done;
  return true;
}

}  // namespace keel::data::detail
