#include "ops/padding.hpp"

#include <cctype>
#include <string>

#include <fmt/core.h>

#include "keel/core/error.hpp"

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
