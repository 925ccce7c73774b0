#pragma once
// fmt support: fmt::format("{}", tensor) prints what operator<< prints. Only <fmt/core.h> is
// included (compile time), so the formatters take no format spec. They copy the text into the
// output themselves: fmt::format_to, or the string formatter's format(), would need symbols that
// Debian's libfmt 9 does not export under the name clang gives them (format_to) or at all (the
// string formatter lives in <fmt/format.h>).
#include <fmt/core.h>

#include <string>

#include "keel/core/tensor.hpp"

namespace keel::detail {
template <class FormatContext>
auto write_text(const std::string& text, FormatContext& ctx) {
  auto out = ctx.out();
  for (char c : text) *out++ = c;
  return out;
}
}  // namespace keel::detail

template <>
struct fmt::formatter<keel::Tensor> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const keel::Tensor& t, FormatContext& ctx) const {
    return keel::detail::write_text(t.to_string(), ctx);
  }
};

template <>
struct fmt::formatter<keel::Shape> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const keel::Shape& s, FormatContext& ctx) const {
    return keel::detail::write_text(s.to_string(), ctx);
  }
};

template <>
struct fmt::formatter<keel::DType> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const keel::DType& d, FormatContext& ctx) const {
    return keel::detail::write_text(std::string(keel::name(d)), ctx);
  }
};
