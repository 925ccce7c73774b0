#pragma once
// Keras' initializer and regularizer classes that take arguments, each with its fields declared
// once: this list writes their configs (layer_util.cpp), reads them back (config_args.hpp) and
// names them for the round-trip test. The named initializers ("glorot_uniform", ...) have no
// fields and are written as their names.
#include <array>
#include <string_view>

namespace keel::layers::detail {

// A regularizer l1 * sum|w| + l2 * sum w^2 is written as the smallest class that holds its
// amounts; from_config gives a missing field the default of Keras' constructor.
struct RegularizerClass {
  const char* class_name;
  bool has_l1, has_l2;
  double default_l1, default_l2;
};
inline constexpr std::array<RegularizerClass, 3> kRegularizerClasses{{
    {"L1", true, false, 0.01, 0.0},
    {"L2", false, true, 0.0, 0.01},
    {"L1L2", true, true, 0.0, 0.0},
}};

inline const RegularizerClass* regularizer_class(std::string_view class_name) {
  for (const auto& c : kRegularizerClasses)
    if (class_name == c.class_name) return &c;
  return nullptr;
}

// The class a regularizer with these amounts is written as (both zero: none, nullptr).
inline const RegularizerClass* regularizer_class_of(double l1, double l2) {
  if (l1 == 0 && l2 == 0) return nullptr;
  return &kRegularizerClasses[l2 == 0 ? 0 : l1 == 0 ? 1 : 2];
}

// Initializers with an argument: keras.initializers.Constant(value).
struct InitializerClass {
  const char* class_name;  // as Keras serialises it
  const char* name;        // keel's name, Initializer::name()
  const char* field;       // the argument's config key
  double default_value;
};
inline constexpr std::array<InitializerClass, 1> kInitializerClasses{{
    {"Constant", "constant", "value", 0.0},
}};

inline const InitializerClass* initializer_class(std::string_view name) {
  for (const auto& c : kInitializerClasses)
    if (name == c.name || name == c.class_name) return &c;
  return nullptr;
}

}  // namespace keel::layers::detail
