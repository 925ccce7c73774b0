// The padding arguments of the window ops, and tf.pad's REFLECT and SYMMETRIC modes.
#include "ops/padding.hpp"

#include <cctype>
#include <string>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/core/error.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/shape.hpp"

namespace keel::detail {

kernel::Padding parse_padding(std::string_view padding, const char* op, bool allow_causal) {
  std::string lower(padding);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "valid") return kernel::Padding::valid;
  if (lower == "same") return kernel::Padding::same;
  if (allow_causal && lower == "causal") return kernel::Padding::causal;
  throw ValueError(fmt::format("{}: padding must be \"valid\"{} or \"same\", got \"{}\"", op,
                               allow_causal ? ", \"causal\"" : "", padding));
}

}  // namespace keel::detail

namespace keel {

namespace {

std::string pads_str(const std::vector<std::array<std::int64_t, 2>>& paddings) {
  std::string s = "[";
  for (std::size_t i = 0; i < paddings.size(); ++i)
    s += fmt::format("{}[{},{}]", i ? "," : "", paddings[i][0], paddings[i][1]);
  return s + "]";
}

}  // namespace

// Mirror padding from differentiable pieces, axis by axis: the mirrored slices are reversed
// slices of x, so the gradient folds each mirrored part back onto the elements it copied.
Tensor pad(const Tensor& x, const std::vector<std::array<std::int64_t, 2>>& paddings, const std::string& mode,
           double value) {
  std::string upper = mode;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "CONSTANT") return pad(x, paddings, value);
  if (upper != "REFLECT" && upper != "SYMMETRIC")
    throw ValueError(fmt::format("pad: mode must be \"CONSTANT\", \"REFLECT\" or \"SYMMETRIC\", got \"{}\"", mode));
  detail::check_defined(x, "pad");
  const bool reflect = upper == "REFLECT";
  const std::int64_t r = x.rank();
  if (static_cast<std::int64_t>(paddings.size()) != r)
    throw ShapeError(fmt::format("pad: paddings {} need one pair per axis of shape {}", pads_str(paddings),
                                 detail::shape_str(x)));
  for (std::size_t i = 0; i < paddings.size(); ++i) {
    const std::int64_t n = x.shape().dims()[i];
    for (const std::int64_t p : paddings[i]) {
      if (p < 0)
        throw ValueError(fmt::format("pad: paddings {} must be >= 0 (shape {})", pads_str(paddings),
                                     detail::shape_str(x)));
      // REFLECT leaves the edge element out, so it has one element fewer to mirror.
      if (reflect ? p >= n && p > 0 : p > n)
        throw ValueError(fmt::format("pad: {} padding {} of axis {} must be {} the axis size {} (paddings {}, shape {})",
                                     upper, p, i, reflect ? "less than" : "at most", n, pads_str(paddings),
                                     detail::shape_str(x)));
    }
  }
  Tensor y = x;
  for (std::size_t i = 0; i < paddings.size(); ++i) {
    const auto [before, after] = paddings[i];
    if (before == 0 && after == 0) continue;
    const auto ax = static_cast<int>(i);
    const std::int64_t n = y.shape().dims()[i], skip = reflect ? 1 : 0;
    auto part = [&](std::int64_t from, std::int64_t size) {
      std::vector<std::int64_t> begin(static_cast<std::size_t>(r), 0), sizes = y.shape().dims();
      begin[i] = from;
      sizes[i] = size;
      return reverse(slice(y, begin, sizes), {ax});
    };
    std::vector<Tensor> pieces;
    if (before > 0) pieces.push_back(part(skip, before));
    pieces.push_back(y);
    if (after > 0) pieces.push_back(part(n - skip - after, after));
    y = concat(pieces, ax);
  }
  return y;
}

}  // namespace keel
