#pragma once
// The field-list readers and writers of the configs that are flat JSON objects of plain values:
// the losses', the metrics' and the learning-rate schedules'. Each family declares its options
// once, as `fields(v, XOptions&)` calling v("key", o.field) per field; the same list then writes
// get_config and reads from_config, so a default lives only in the options struct (a key a
// config lacks, or holds null for, keeps it, as Keras' from_config is cls(**config)).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace keel::config_fields {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// Writes each field into a config: an unset optional and an empty list are null (Keras' None);
// other types through nlohmann's to_json (found by ADL for a family's own value types).
struct Writer {
  nlohmann::json& config;

  template <class T>
  void operator()(const char* key, const T& value) const {
    config[key] = json_of(value);
  }

  template <class T>
  static nlohmann::json json_of(const T& value) {
    if constexpr (is_optional<T>::value) {
      return value ? json_of(*value) : nlohmann::json(nullptr);
    } else if constexpr (is_vector<T>::value) {
      return value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
    } else {
      return nlohmann::json(value);
    }
  }
};

// Reads each field a config holds; `wrong(key, value)` throws for a value of the wrong type.
// A family's own value types are read by an ADL-found read_field(json, key, wrong, T*).
template <class Wrong>
struct Reader {
  const nlohmann::json& config;
  Wrong wrong;

  template <class T>
  void operator()(const char* key, T& value) const {
    if (!config.is_object()) return;
    const auto it = config.find(key);
    if (it == config.end() || it->is_null()) return;
    value = read<T>(key, *it);
  }

  template <class T>
  T read(const char* key, const nlohmann::json& v) const {
    if constexpr (is_optional<T>::value) {
      return read<typename T::value_type>(key, v);
    } else if constexpr (is_vector<T>::value) {
      if (!v.is_array()) wrong(key, v);
      T out;
      for (const auto& e : v) {
        if (e.is_null()) wrong(key, v);
        out.push_back(read<typename T::value_type>(key, e));
      }
      return out;
    } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string> || std::is_arithmetic_v<T>) {
      const bool ok = std::is_same_v<T, bool>          ? v.is_boolean()
                      : std::is_same_v<T, std::string> ? v.is_string()
                      : std::is_integral_v<T>          ? v.is_number_integer()
                                                       : v.is_number();
      if (!ok) wrong(key, v);
      return v.get<T>();
    } else {
      return read_field(v, key, wrong, static_cast<T*>(nullptr));
    }
  }
};

template <class Wrong>
Reader(const nlohmann::json&, Wrong) -> Reader<Wrong>;

// Every field of `options` added to `config` (fields() takes the options by reference for
// reading, so the writer walks a copy).
template <class O>
nlohmann::json with_fields(nlohmann::json config, O options) {
  fields(Writer{config}, options);
  return config;
}

// The class names a family's registry (a map from class name to factory) holds, in order.
template <class Map>
std::vector<std::string> names_of(const Map& registry) {
  std::vector<std::string> names;
  for (const auto& entry : registry) names.push_back(entry.first);
  return names;
}

}  // namespace keel::config_fields
