// PNG (libpng) and JPEG (libjpeg-turbo) decoding and encoding.
//
// Both libraries report errors by calling a handler that must not return: we longjmp back to a
// setjmp in a small C-style function. Such a function (and the callbacks the libraries call)
// holds only plain C data, so the jump skips no C++ destructor, and no exception ever crosses a
// C frame; the C++ caller turns the message it left behind into an IOError. Buffers the C code
// fills (the output tensor, the row pointers) are allocated by the C++ caller before the call.
#include "keel/data/image_files.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/core.h>
#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <jerror.h>

#include "core/tensor_util.hpp"
#include "io/read_file.hpp"
#include "keel/io/safetensors.hpp"

namespace keel::data {

namespace {

constexpr std::size_t kMessageSize = 256;

void check_channels(int channels, bool allow_four, const char* op) {
  if (channels == 0 || channels == 1 || channels == 3 || (allow_four && channels == 4)) return;
  throw ValueError(fmt::format("{}: channels must be 0, 1, 3{}, got {}", op, allow_four ? " or 4" : "", channels));
}

// width * height * channels, checked against overflow and kMaxImageBytes.
bool fits(std::uint64_t width, std::uint64_t height, std::uint64_t channels) {
  const auto max = static_cast<std::uint64_t>(kMaxImageBytes);
  if (width == 0 || height == 0) return true;
  if (width > max || height > max / width) return false;
  return channels <= max / (width * height);
}

[[noreturn]] void decode_failed(const char* op, const std::string& what, const char* message, std::size_t offset) {
  throw IOError(fmt::format("{}: {}: {} (at byte offset {})", op, what, message, offset));
}

// ---- PNG decoding ---------------------------------------------------------------------------

struct PngRead {  // plain data: it lives across the longjmp
  const unsigned char* data;
  std::size_t size, pos;
  int want;  // requested channels (0 = as stored)
  png_uint_32 width, height;
  int channels;
  char message[kMessageSize];
};

void png_error_handler(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngRead*>(png_get_error_ptr(png));
  std::snprintf(r->message, kMessageSize, "%s", msg);
  png_longjmp(png, 1);
}
void png_warning_handler(png_structp, png_const_charp) {}  // warnings do not stop decoding

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngRead*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "truncated data");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// Reads the header and sets up the conversions to r->want channels.
bool png_start(png_structp png, png_infop info, PngRead* r) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, r, png_read_bytes);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const bool trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  const bool colour = (color & PNG_COLOR_MASK_COLOR) != 0;
  const bool alpha = (color & PNG_COLOR_MASK_ALPHA) != 0 || trns;
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (trns) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_strip_16(png);
  const int stored = (colour ? 3 : 1) + (alpha ? 1 : 0);
  const int want = r->want == 0 ? stored : r->want;
  if (want == 1 && colour) png_set_rgb_to_gray_fixed(png, 1, -1, -1);  // libpng's default weights, as TF
  if (want >= 3 && !colour) png_set_gray_to_rgb(png);
  if (alpha && (want == 1 || want == 3)) png_set_strip_alpha(png);
  if (!alpha && want == 4) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  r->width = png_get_image_width(png, info);
  r->height = png_get_image_height(png, info);
  r->channels = png_get_channels(png, info);
  if (png_get_rowbytes(png, info) != static_cast<std::size_t>(r->width) * static_cast<std::size_t>(r->channels)) {
    std::snprintf(r->message, kMessageSize, "unexpected row size after conversion");
    return false;
  }
  return true;
}

bool png_finish(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);
  return true;
}

struct PngReadGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReadGuard() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

// ---- JPEG decoding --------------------------------------------------------------------------

struct JpegFailure {
  jpeg_error_mgr mgr;  // first member: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_handler(j_common_ptr cinfo) {
  auto* f = reinterpret_cast<JpegFailure*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, f->message);
  std::longjmp(f->jump, 1);
}
// libjpeg pads a file that ends early with a fake end marker and only warns; like
// tf.io.decode_jpeg (without try_recover_truncated), a truncated file is an error.
void jpeg_message_handler(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_error_handler(cinfo);
}

struct JpegRead {
  jpeg_decompress_struct cinfo;
  JpegFailure failure;
  bool created;
  int want;
  bool too_large;
};

bool jpeg_start(JpegRead* r, const unsigned char* data, std::size_t size) {
  if (setjmp(r->failure.jump)) return false;
  jpeg_create_decompress(&r->cinfo);
  r->created = true;
  // Working memory of libjpeg (progressive files keep all coefficients) is bounded too.
  r->cinfo.mem->max_memory_to_use = static_cast<long>(kMaxImageBytes) * 2;
  jpeg_mem_src(&r->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&r->cinfo, TRUE);
  if (r->cinfo.jpeg_color_space == JCS_CMYK || r->cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(r->failure.message, JMSG_LENGTH_MAX, "CMYK JPEG files are not supported");
    return false;
  }
  const int stored = r->cinfo.num_components == 1 ? 1 : 3;
  const int want = r->want == 0 ? stored : r->want;
  r->cinfo.out_color_space = want == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_calc_output_dimensions(&r->cinfo);
  if (!fits(r->cinfo.output_width, r->cinfo.output_height, static_cast<std::uint64_t>(r->cinfo.output_components))) {
    r->too_large = true;
    return false;
  }
  jpeg_start_decompress(&r->cinfo);
  return true;
}

bool jpeg_finish(JpegRead* r, unsigned char* out) {
  if (setjmp(r->failure.jump)) return false;
  const std::size_t row = static_cast<std::size_t>(r->cinfo.output_width) * static_cast<std::size_t>(r->cinfo.output_components);
  while (r->cinfo.output_scanline < r->cinfo.output_height) {
    JSAMPROW p = out + static_cast<std::size_t>(r->cinfo.output_scanline) * row;
    jpeg_read_scanlines(&r->cinfo, &p, 1);
  }
  jpeg_finish_decompress(&r->cinfo);
  return true;
}

std::size_t jpeg_offset(const JpegRead& r, std::size_t size) {
  return r.cinfo.src ? size - r.cinfo.src->bytes_in_buffer : 0;
}

// ---- encoding -------------------------------------------------------------------------------

// The host bytes of an image, checked: uint8 [height, width, channels].
Tensor host_image(const Tensor& image, const char* op) {
  keel::detail::check_defined(image, op);
  if (image.dtype() != DType::uint8)
    throw DTypeError(fmt::format("{}: expected a uint8 image, got {}", op, name(image.dtype())));
  if (image.rank() != 3)
    throw ShapeError(fmt::format("{}: expected an image [height, width, channels], got shape {}", op,
                                 image.shape().to_string()));
  return (image.device().is_cpu() ? image : image.to(Device::cpu())).contiguous();
}

struct PngWrite {
  unsigned char* buf;
  std::size_t size, cap;
  char message[kMessageSize];
};

void png_write_bytes(png_structp png, png_bytep data, png_size_t n) {
  auto* w = static_cast<PngWrite*>(png_get_io_ptr(png));
  if (n > w->cap - w->size) {
    std::size_t cap = w->cap ? w->cap : 4096;
    while (cap - w->size < n) cap *= 2;
    auto* grown = static_cast<unsigned char*>(std::realloc(w->buf, cap));
    if (!grown) png_error(png, "out of memory");
    w->buf = grown;
    w->cap = cap;
  }
  std::memcpy(w->buf + w->size, data, n);
  w->size += n;
}
void png_flush_bytes(png_structp) {}

void png_write_error_handler(png_structp png, png_const_charp msg) {
  auto* w = static_cast<PngWrite*>(png_get_error_ptr(png));
  std::snprintf(w->message, kMessageSize, "%s", msg);
  png_longjmp(png, 1);
}

bool png_encode(png_structp png, png_infop info, PngWrite* w, png_bytepp rows, png_uint_32 width,
                png_uint_32 height, int color, int level) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, w, png_write_bytes, png_flush_bytes);
  if (level >= 0) png_set_compression_level(png, level);
  png_set_IHDR(png, info, width, height, 8, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

struct JpegWrite {
  jpeg_compress_struct cinfo;
  JpegFailure failure;
  bool created;
  unsigned char* buf;
  unsigned long size;
};

bool jpeg_encode(JpegWrite* w, const unsigned char* pixels, JDIMENSION width, JDIMENSION height, int channels,
                 int quality) {
  if (setjmp(w->failure.jump)) return false;
  jpeg_create_compress(&w->cinfo);
  w->created = true;
  jpeg_mem_dest(&w->cinfo, &w->buf, &w->size);
  w->cinfo.image_width = width;
  w->cinfo.image_height = height;
  w->cinfo.input_components = channels;
  w->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&w->cinfo);
  jpeg_set_quality(&w->cinfo, quality, TRUE);
  jpeg_start_compress(&w->cinfo, TRUE);
  const std::size_t row = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  while (w->cinfo.next_scanline < w->cinfo.image_height) {
    // libjpeg's row type is non-const; it only reads the rows.
    JSAMPROW p = const_cast<unsigned char*>(pixels) + static_cast<std::size_t>(w->cinfo.next_scanline) * row;
    jpeg_write_scanlines(&w->cinfo, &p, 1);
  }
  jpeg_finish_compress(&w->cinfo);
  return true;
}

bool is_png(const std::string& b) {
  return b.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(b.data()), 0, 8) == 0;
}
bool is_jpeg(const std::string& b) {
  return b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xff && static_cast<unsigned char>(b[1]) == 0xd8 &&
         static_cast<unsigned char>(b[2]) == 0xff;
}

}  // namespace

Tensor decode_png(const std::string& contents, int channels, const std::string& what) {
  const char* op = "decode_png";
  check_channels(channels, true, op);
  if (!is_png(contents)) throw IOError(fmt::format("{}: {}: not a PNG file (bad signature at byte offset 0)", op, what));
  PngRead r{};
  r.data = reinterpret_cast<const unsigned char*>(contents.data());
  r.size = contents.size();
  r.want = channels;
  PngReadGuard g;
  g.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_error_handler, png_warning_handler);
  if (g.png) g.info = png_create_info_struct(g.png);
  if (!g.png || !g.info) throw ResourceExhaustedError(fmt::format("{}: {}: cannot allocate the PNG decoder", op, what));
  if (!png_start(g.png, g.info, &r)) decode_failed(op, what, r.message, r.pos);
  if (!fits(r.width, r.height, static_cast<std::uint64_t>(r.channels)))
    throw IOError(fmt::format("{}: {}: image of {} x {} x {} exceeds the limit of {} bytes", op, what, r.height,
                              r.width, r.channels, kMaxImageBytes));
  Tensor out = keel::detail::empty_tensor(
      Shape{static_cast<std::int64_t>(r.height), static_cast<std::int64_t>(r.width), r.channels}, DType::uint8,
      Device::cpu(), op);
  auto* base = static_cast<png_bytep>(out.raw_data());
  std::vector<png_bytep> rows(r.height);
  const std::size_t row = static_cast<std::size_t>(r.width) * static_cast<std::size_t>(r.channels);
  for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = base + y * row;
  if (!png_finish(g.png, g.info, rows.data())) decode_failed(op, what, r.message, r.pos);
  return out;
}

Tensor decode_jpeg(const std::string& contents, int channels, const std::string& what) {
  const char* op = "decode_jpeg";
  check_channels(channels, false, op);
  if (!is_jpeg(contents)) throw IOError(fmt::format("{}: {}: not a JPEG file (bad signature at byte offset 0)", op, what));
  auto r = std::make_unique<JpegRead>();
  std::memset(static_cast<void*>(r.get()), 0, sizeof(JpegRead));
  r->want = channels;
  r->cinfo.err = jpeg_std_error(&r->failure.mgr);
  r->failure.mgr.error_exit = jpeg_error_handler;
  r->failure.mgr.emit_message = jpeg_message_handler;
  struct Destroy {
    JpegRead* r;
    ~Destroy() {
      if (r->created) jpeg_destroy_decompress(&r->cinfo);
    }
  } destroy{r.get()};
  const auto* data = reinterpret_cast<const unsigned char*>(contents.data());
  if (!jpeg_start(r.get(), data, contents.size())) {
    if (r->too_large)
      throw IOError(fmt::format("{}: {}: image of {} x {} x {} exceeds the limit of {} bytes", op, what,
                                r->cinfo.output_height, r->cinfo.output_width, r->cinfo.output_components,
                                kMaxImageBytes));
    decode_failed(op, what, r->failure.message, jpeg_offset(*r, contents.size()));
  }
  Tensor out = keel::detail::empty_tensor(Shape{static_cast<std::int64_t>(r->cinfo.output_height),
                                                static_cast<std::int64_t>(r->cinfo.output_width),
                                                static_cast<std::int64_t>(r->cinfo.output_components)},
                                          DType::uint8, Device::cpu(), op);
  if (!jpeg_finish(r.get(), static_cast<unsigned char*>(out.raw_data())))
    decode_failed(op, what, r->failure.message, jpeg_offset(*r, contents.size()));
  return out;
}

Tensor decode_image(const std::string& contents, int channels, const std::string& what) {
  const char* op = "decode_image";
  check_channels(channels, true, op);
  if (is_png(contents)) return decode_png(contents, channels, what);
  if (!is_jpeg(contents))
    throw IOError(fmt::format("{}: {}: unknown image format (neither a PNG nor a JPEG signature at byte offset 0)", op,
                              what));
  if (channels != 4) return decode_jpeg(contents, channels, what);
  // JPEG has no alpha: RGB plus an opaque alpha channel.
  const Tensor rgb = decode_jpeg(contents, 3, what);
  const std::int64_t h = rgb.shape()[0], w = rgb.shape()[1];
  Tensor out = keel::detail::empty_tensor(Shape{h, w, 4}, DType::uint8, Device::cpu(), op);
  const auto* s = rgb.data<std::uint8_t>();
  auto* o = static_cast<std::uint8_t*>(out.raw_data());
  for (std::int64_t i = 0; i < h * w; ++i) {
    std::memcpy(o + 4 * i, s + 3 * i, 3);
    o[4 * i + 3] = 0xff;
  }
  return out;
}

std::string encode_png(const Tensor& image, int compression) {
  const char* op = "encode_png";
  const Tensor x = host_image(image, op);
  const std::int64_t h = x.shape()[0], w = x.shape()[1], c = x.shape()[2];
  if (c < 1 || c > 4) throw ShapeError(fmt::format("{}: expected 1 to 4 channels, got shape {}", op, x.shape().to_string()));
  if (h <= 0 || w <= 0 || h > 0x7fffffff || w > 0x7fffffff)
    throw ValueError(fmt::format("{}: PNG needs a height and width in [1, 2^31), got shape {}", op, x.shape().to_string()));
  if (compression < -1 || compression > 9)
    throw ValueError(fmt::format("{}: compression must be in [-1, 9], got {}", op, compression));
  static constexpr int kColor[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                   PNG_COLOR_TYPE_RGB_ALPHA};
  PngWrite w_{};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w_, png_write_error_handler, png_warning_handler);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  struct Destroy {
    png_structp& png;
    png_infop& info;
    PngWrite& w;
    ~Destroy() {
      png_destroy_write_struct(&png, info ? &info : nullptr);
      std::free(w.buf);
    }
  } destroy{png, info, w_};
  if (!png || !info) throw ResourceExhaustedError(fmt::format("{}: cannot allocate the PNG encoder", op));
  std::vector<png_bytep> rows(static_cast<std::size_t>(h));
  auto* base = static_cast<png_bytep>(x.raw_data());
  for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = base + y * static_cast<std::size_t>(w * c);
  if (!png_encode(png, info, &w_, rows.data(), static_cast<png_uint_32>(w), static_cast<png_uint_32>(h),
                  kColor[c - 1], compression))
    throw IOError(fmt::format("{}: {}", op, w_.message));
  return std::string(reinterpret_cast<const char*>(w_.buf), w_.size);
}

std::string encode_jpeg(const Tensor& image, int quality) {
  const char* op = "encode_jpeg";
  const Tensor x = host_image(image, op);
  const std::int64_t h = x.shape()[0], w = x.shape()[1], c = x.shape()[2];
  if (c != 1 && c != 3) throw ShapeError(fmt::format("{}: expected 1 or 3 channels, got shape {}", op, x.shape().to_string()));
  if (h <= 0 || w <= 0 || h > JPEG_MAX_DIMENSION || w > JPEG_MAX_DIMENSION)
    throw ValueError(fmt::format("{}: JPEG needs a height and width in [1, {}], got shape {}", op, JPEG_MAX_DIMENSION,
                                 x.shape().to_string()));
  if (quality < 0 || quality > 100) throw ValueError(fmt::format("{}: quality must be in [0, 100], got {}", op, quality));
  auto wr = std::make_unique<JpegWrite>();
  std::memset(static_cast<void*>(wr.get()), 0, sizeof(JpegWrite));
  wr->cinfo.err = jpeg_std_error(&wr->failure.mgr);
  wr->failure.mgr.error_exit = jpeg_error_handler;
  struct Destroy {
    JpegWrite* w;
    ~Destroy() {
      if (w->created) jpeg_destroy_compress(&w->cinfo);
      std::free(w->buf);
    }
  } destroy{wr.get()};
  if (!jpeg_encode(wr.get(), static_cast<const unsigned char*>(x.raw_data()), static_cast<JDIMENSION>(w),
                   static_cast<JDIMENSION>(h), static_cast<int>(c), quality))
    throw IOError(fmt::format("{}: {}", op, wr->failure.message));
  return std::string(reinterpret_cast<const char*>(wr->buf), wr->size);
}

std::string read_file_bytes(const std::string& path) { return io::detail::read_file(path, "read_file_bytes"); }

Tensor read_image(const std::string& path, int channels) {
  return decode_image(io::detail::read_file(path, "read_image"), channels, path);
}

void write_png(const std::string& path, const Tensor& image, int compression) {
  io::atomic_write(path, encode_png(image, compression));
}

void write_jpeg(const std::string& path, const Tensor& image, int quality) {
  io::atomic_write(path, encode_jpeg(image, quality));
}

}  // namespace keel::data
