#pragma once
// fmt support: fmt::format("{}", tensor) prints what operator<< prints. Only <fmt/core.h> is
// included (compile time), so the formatters take no format spec.
#include <fmt/core.h>

#include "keel/core/tensor.hpp"

template <>
struct fmt::formatter<keel::Tensor> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const keel::Tensor& t, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(), "{}", t.to_string());
  }
};

template <>
struct fmt::formatter<keel::Shape> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const keel::Shape& s, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(), "{}", s.to_string());
  }
};

template <>
struct fmt::formatter<keel::DType> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const keel::DType& d, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(), "{}", keel::name(d));
  }
};
