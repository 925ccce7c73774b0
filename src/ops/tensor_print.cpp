// Printing. Tensors print like TensorFlow 2's str(): "tf.Tensor(<numpy str>, shape=(2, 3),
// dtype=float32)", where the values follow NumPy's array2string defaults (precision 8,
// floatmode "maxprec", line width 75, summarised with "..." above 1000 elements, 3 edge items),
// because users compare keel's output with what TensorFlow shows them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

namespace {

constexpr int kPrecision = 8;
constexpr int kLineWidth = 75;
constexpr std::int64_t kThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;

enum class Kind { f16, bf16, f32, f64, integer, boolean };

Kind kind_of(DType dt) {
  switch (dt) {
    case DType::float16: return Kind::f16;
    case DType::bfloat16: return Kind::bf16;
    case DType::float32: return Kind::f32;
    case DType::float64: return Kind::f64;
    case DType::bool_: return Kind::boolean;
    default: return Kind::integer;
  }
}

// ±d0.d1d2... × 10^exp
struct Decimal {
  bool neg = false;
  std::string digits;
  int exp = 0;
};

Decimal parse_scientific(const char* s) {
  Decimal d;
  if (*s == '-') {
    d.neg = true;
    ++s;
  }
  for (; *s && *s != 'e'; ++s)
    if (*s != '.') d.digits += *s;
  d.exp = *s ? std::atoi(s + 1) : 0;
  while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
  return d;
}

bool same_half_value(double a, double b, Kind k) {
  if (k == Kind::f16)
    return float_to_half(static_cast<float>(a)).bits == float_to_half(static_cast<float>(b)).bits;
  return float_to_bfloat16(static_cast<float>(a)).bits == float_to_bfloat16(static_cast<float>(b)).bits;
}

// The fewest significant digits that read back as the same value of the element's own type,
// like NumPy's "unique" Dragon4 mode (so float32 0.1 prints as 0.1, not 0.10000000149).
Decimal shortest(double v, Kind k) {
  if (v == 0) return Decimal{std::signbit(v), "0", 0};
  char buf[64];
  if (k == Kind::f64 || k == Kind::f32) {
    const auto r = k == Kind::f64
                       ? std::to_chars(buf, buf + sizeof buf - 1, v, std::chars_format::scientific)
                       : std::to_chars(buf, buf + sizeof buf - 1, static_cast<float>(v),
                                       std::chars_format::scientific);
    *r.ptr = '\0';
  } else {
    // 16-bit floats have at most 5 significant decimal digits; try the shortest first.
    for (int p = 0; p < 17; ++p) {
      std::snprintf(buf, sizeof buf, "%.*e", p, v);
      if (same_half_value(std::strtod(buf, nullptr), v, k)) break;
    }
  }
  return parse_scientific(buf);
}

struct Positional {
  std::string ip;  // integer part, with the sign
  std::string fp;  // fraction digits, no trailing zeros
};

// Unique digits, cut at max_frac fraction digits (rounding the exact value) when max_frac >= 0.
// exact_units: when the unique digits stop above the units place (float16 -33792 is unique as
// "-33800"), print the exact integer instead, as NumPy's array printing does (min_digits=0).
Positional positional(double v, Kind k, int max_frac, bool exact_units = false) {
  const Decimal d = shortest(v, k);
  const int n = static_cast<int>(d.digits.size());
  if (exact_units && n < d.exp + 1) {
    // Unique digits can only end above the units place when the spacing of the type's values
    // there is >= 1, so v is an integer and %.0f is exact.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return Positional{buf, ""};
  }
  if (max_frac >= 0 && n - 1 - d.exp > max_frac) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", max_frac, v);
    const std::string s = buf;
    const auto dot = s.find('.');
    Positional p{s.substr(0, dot), dot == std::string::npos ? "" : s.substr(dot + 1)};
    while (!p.fp.empty() && p.fp.back() == '0') p.fp.pop_back();
    return p;
  }
  Positional p;
  if (d.exp >= 0) {
    p.ip = d.digits.substr(0, static_cast<std::size_t>(std::min(n, d.exp + 1)));
    if (n < d.exp + 1) p.ip.append(static_cast<std::size_t>(d.exp + 1 - n), '0');
    if (n > d.exp + 1) p.fp = d.digits.substr(static_cast<std::size_t>(d.exp + 1));
  } else {
    p.ip = "0";
    p.fp = std::string(static_cast<std::size_t>(-d.exp - 1), '0') + d.digits;
  }
  if (d.neg) p.ip.insert(0, "-");
  return p;
}

// Unique digits, cut at max_frac digits after the mantissa's point when max_frac >= 0.
Decimal scientific(double v, Kind k, int max_frac) {
  Decimal d = shortest(v, k);
  if (max_frac >= 0 && static_cast<int>(d.digits.size()) - 1 > max_frac) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", max_frac, v);
    d = parse_scientific(buf);
  }
  return d;
}

std::string exponent_str(int e, int min_digits) {
  std::string digits = std::to_string(e < 0 ? -e : e);
  if (static_cast<int>(digits.size()) < min_digits)
    digits.insert(0, static_cast<std::size_t>(min_digits) - digits.size(), '0');
  return (e < 0 ? "-" : "+") + digits;
}

std::string pad_left(std::string s, int width) {
  if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), ' ');
  return s;
}

const char* non_finite_str(double v) { return std::isnan(v) ? "nan" : v < 0 ? "-inf" : "inf"; }

// NumPy's FloatingFormat: one layout (positional or scientific, widths) for the whole array,
// chosen from the values that are shown.
class FloatFormat {
 public:
  FloatFormat(Kind kind, const std::vector<double>& shown) : kind_(kind) {
    double max_abs = 0, min_abs = std::numeric_limits<double>::infinity();
    bool any_nonzero = false, any_nonfinite = false, neg_inf = false, any_finite = false;
    for (double v : shown) {
      if (!std::isfinite(v)) {
        any_nonfinite = true;
        neg_inf = neg_inf || (std::isinf(v) && v < 0);
        continue;
      }
      any_finite = true;
      if (v != 0) {
        any_nonzero = true;
        max_abs = std::max(max_abs, std::fabs(v));
        min_abs = std::min(min_abs, std::fabs(v));
      }
    }
    if (any_nonzero)
      exp_ = max_abs >= 1e8 || min_abs < 1e-4 || max_abs / min_abs > 1000.0;
    if (any_finite && exp_) {
      int exp_digits = 2;
      for (double v : shown) {
        if (!std::isfinite(v)) continue;
        const Decimal d = scientific(v, kind_, kPrecision);
        precision_ = std::max(precision_, static_cast<int>(d.digits.size()) - 1);
        exp_digits = std::max(exp_digits, static_cast<int>(std::to_string(std::abs(d.exp)).size()));
        pad_left_ = std::max(pad_left_, d.neg ? 2 : 1);
      }
      exp_size_ = exp_digits;
      pad_right_ = exp_size_ + 2 + precision_;
    } else if (any_finite) {
      for (double v : shown) {
        if (!std::isfinite(v)) continue;
        const Positional p = positional(v, kind_, kPrecision);
        pad_left_ = std::max(pad_left_, static_cast<int>(p.ip.size()));
        pad_right_ = std::max(pad_right_, static_cast<int>(p.fp.size()));
      }
    }
    if (any_nonfinite) {
      const int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, (neg_inf ? 4 : 3) - offset});
    }
  }

  std::string operator()(double v) const {
    if (!std::isfinite(v)) return pad_left(non_finite_str(v), pad_left_ + pad_right_ + 1);
    if (exp_) {
      // NumPy asks Dragon4 for at least `precision_` digits here, and digits past the unique
      // ones are the exact value's (not zeros): that is printf's correctly rounded %.*e.
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.*e", precision_, v);
      const char* e = std::strchr(buf, 'e');
      const char* dot = std::strchr(buf, '.');
      const char* ip_end = dot ? dot : e;
      const std::string ip(buf, static_cast<std::size_t>(ip_end - buf));
      const std::string frac = dot ? std::string(dot + 1, static_cast<std::size_t>(e - dot - 1)) : std::string();
      return pad_left(ip, pad_left_) + "." + frac + "e" + exponent_str(std::atoi(e + 1), exp_size_);
    }
    const Positional p = positional(v, kind_, kPrecision, true);
    std::string fp = p.fp;
    fp.append(static_cast<std::size_t>(std::max(0, pad_right_ - static_cast<int>(fp.size()))), ' ');
    return pad_left(p.ip, pad_left_) + "." + fp;
  }

 private:
  Kind kind_;
  bool exp_ = false;
  int pad_left_ = 0, pad_right_ = 0, precision_ = 0, exp_size_ = 2;
};

// How NumPy prints a 0-d array (str of a scalar): Python-style shortest repr, positional between
// 1e-4 and 1e16, else scientific.
std::string scalar_float_str(double v, Kind k) {
  if (!std::isfinite(v)) return non_finite_str(v);
  const double a = std::fabs(v);
  if (v == 0 || (a >= 1e-4 && a < 1e16)) {
    const Positional p = positional(v, k, -1);
    return p.ip + "." + (p.fp.empty() ? "0" : p.fp);
  }
  const Decimal d = scientific(v, k, -1);
  std::string s = (d.neg ? "-" : "") + d.digits.substr(0, 1);
  if (d.digits.size() > 1) s += "." + d.digits.substr(1);
  return s + "e" + exponent_str(d.exp, 2);
}

// Element access through strides, so non-contiguous views print without a copy.
struct Reader {
  const char* base;
  DType dtype;
  std::int64_t item;

  const char* at(std::int64_t off) const { return base + off * item; }
  double real(std::int64_t off) const {
    const char* p = at(off);
    switch (dtype) {
      case DType::float16: { float16_t h; std::memcpy(&h, p, 2); return half_to_float(h); }
      case DType::bfloat16: { bfloat16_t h; std::memcpy(&h, p, 2); return bfloat16_to_float(h); }
      case DType::float32: { float f; std::memcpy(&f, p, 4); return f; }
      case DType::float64: { double f; std::memcpy(&f, p, 8); return f; }
      default: return static_cast<double>(integer(off));
    }
  }
  std::int64_t integer(std::int64_t off) const {
    const char* p = at(off);
    switch (dtype) {
      case DType::int32: { std::int32_t i; std::memcpy(&i, p, 4); return i; }
      case DType::int64: { std::int64_t i; std::memcpy(&i, p, 8); return i; }
      case DType::uint8: return static_cast<unsigned char>(*p);
      case DType::bool_: return *p != 0;
      default: return static_cast<std::int64_t>(real(off));
    }
  }
};

class ArrayPrinter {
 public:
  explicit ArrayPrinter(const Tensor& t)
      : dims_(t.shape().dims()),
        strides_(t.strides()),
        reader_{static_cast<const char*>(t.raw_data()), t.dtype(),
                static_cast<std::int64_t>(itemsize(t.dtype()))},
        kind_(kind_of(t.dtype())),
        summarise_(t.size() > kThreshold) {}

  std::string str() {
    if (dims_.empty()) return scalar_str();
    for (auto d : dims_)
      if (d == 0) return "[]";
    make_format();
    return recurse(0, 0, " ", kLineWidth);
  }

 private:
  std::string scalar_str() const {
    switch (kind_) {
      case Kind::boolean: return reader_.integer(0) ? "True" : "False";
      case Kind::integer: return std::to_string(reader_.integer(0));
      default: return scalar_float_str(reader_.real(0), kind_);
    }
  }

  bool summarised_axis(std::size_t axis) const {
    return summarise_ && 2 * kEdgeItems < dims_[axis];
  }

  // The elements that will be printed (leading and trailing edges when summarised): the
  // column widths come from them only, as in NumPy.
  void collect(std::size_t axis, std::int64_t off, const std::function<void(std::int64_t)>& f) const {
    if (axis == dims_.size()) {
      f(off);
      return;
    }
    const std::int64_t n = dims_[axis], st = strides_[axis];
    if (summarised_axis(axis)) {
      for (std::int64_t i = 0; i < kEdgeItems; ++i) collect(axis + 1, off + i * st, f);
      for (std::int64_t i = n - kEdgeItems; i < n; ++i) collect(axis + 1, off + i * st, f);
    } else {
      for (std::int64_t i = 0; i < n; ++i) collect(axis + 1, off + i * st, f);
    }
  }

  void make_format() {
    if (kind_ == Kind::boolean) {
      // " True" keeps True and False the same width in arrays.
      format_ = [this](std::int64_t off) { return std::string(reader_.integer(off) ? " True" : "False"); };
    } else if (kind_ == Kind::integer) {
      std::size_t width = 0;
      collect(0, 0, [&](std::int64_t off) { width = std::max(width, std::to_string(reader_.integer(off)).size()); });
      format_ = [this, width](std::int64_t off) {
        return pad_left(std::to_string(reader_.integer(off)), static_cast<int>(width));
      };
    } else {
      std::vector<double> shown;
      collect(0, 0, [&](std::int64_t off) { shown.push_back(reader_.real(off)); });
      float_format_ = std::make_unique<FloatFormat>(kind_, shown);
      format_ = [this](std::int64_t off) { return (*float_format_)(reader_.real(off)); };
    }
  }

  // NumPy's _extendLine: wrap before a word that would pass the width, unless the line holds
  // nothing but its indent (wrapping would not help).
  static void extend_line(std::string& s, std::string& line, const std::string& word, int width,
                          const std::string& indent) {
    bool wrap = static_cast<int>(line.size() + word.size()) > width;
    if (line.size() <= indent.size()) wrap = false;
    if (wrap) {
      const auto end = line.find_last_not_of(' ');
      s += line.substr(0, end == std::string::npos ? 0 : end + 1) + "\n";
      line = indent;
    }
    line += word;
  }

  // NumPy's _formatArray recursion with separator ' '.
  std::string recurse(std::size_t axis, std::int64_t off, const std::string& indent, int width) {
    if (axis == dims_.size()) return format_(off);
    const std::string next_indent = indent + " ";
    const int next_width = width - 1;  // room for the closing ']'
    const std::int64_t n = dims_[axis], st = strides_[axis];
    const bool summary = summarised_axis(axis);
    const std::int64_t leading = summary ? kEdgeItems : 0;
    const std::int64_t trailing = summary ? kEdgeItems : n;
    const std::size_t axes_left = dims_.size() - axis;
    std::string s;
    if (axes_left == 1) {
      const int elem_width = width - 1;
      std::string line = indent;
      for (std::int64_t i = 0; i < leading; ++i) {
        extend_line(s, line, recurse(axis + 1, off + i * st, next_indent, next_width), elem_width, indent);
        line += " ";
      }
      if (summary) {
        extend_line(s, line, "...", elem_width, indent);
        line += " ";
      }
      for (std::int64_t i = trailing; i > 1; --i) {
        extend_line(s, line, recurse(axis + 1, off + (n - i) * st, next_indent, next_width), elem_width,
                    indent);
        line += " ";
      }
      extend_line(s, line, recurse(axis + 1, off + (n - 1) * st, next_indent, next_width), elem_width,
                  indent);
      s += line;
    } else {
      const std::string line_sep(axes_left - 1, '\n');
      for (std::int64_t i = 0; i < leading; ++i)
        s += indent + recurse(axis + 1, off + i * st, next_indent, next_width) + line_sep;
      if (summary) s += indent + "..." + line_sep;
      for (std::int64_t i = trailing; i > 1; --i)
        s += indent + recurse(axis + 1, off + (n - i) * st, next_indent, next_width) + line_sep;
      s += indent + recurse(axis + 1, off + (n - 1) * st, next_indent, next_width);
    }
    return "[" + s.substr(indent.size()) + "]";
  }

  std::vector<std::int64_t> dims_, strides_;
  Reader reader_;
  Kind kind_;
  bool summarise_;
  std::unique_ptr<FloatFormat> float_format_;
  std::function<std::string(std::int64_t)> format_;
};

// TensorShape's str: (), (3,), (2, 3).
std::string shape_tuple(const Shape& s) {
  std::string out = "(";
  for (std::int64_t i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.rank() == 1 ? ",)" : ")");
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tf.Tensor(<undefined>)";
  const Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  std::string values = ArrayPrinter(host).str();
  // TensorFlow starts the values on their own line whenever NumPy's text spans several lines.
  if (values.find('\n') != std::string::npos) values.insert(0, "\n");
  return "tf.Tensor(" + values + ", shape=" + shape_tuple(host.shape()) +
         ", dtype=" + std::string(name(host.dtype())) + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }
std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }
std::ostream& operator<<(std::ostream& os, DType dt) { return os << name(dt); }
std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.to_string(); }

}  // namespace keel
