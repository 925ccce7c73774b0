#pragma once
// Keras' auto names share one process-wide counter per base name, so a test can only check the
// pattern: `base` or `base_<n>`.
#include <cctype>
#include <string>

namespace keel_test {

inline bool is_auto_name(const std::string& name, const std::string& base) {
  if (name == base) return true;
  if (name.size() <= base.size() + 1 || name.compare(0, base.size() + 1, base + "_") != 0) return false;
  for (std::size_t i = base.size() + 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

}  // namespace keel_test
