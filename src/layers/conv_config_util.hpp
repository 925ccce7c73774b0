#pragma once
// Config spellings the convolution-family layers share beyond those of fields.hpp: Keras'
// int-or-triple arguments ([a, b, c] or a single a), and the ((before, after), ...) margins of the
// padding and cropping layers.
#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <optional>

#include "layers/config_args.hpp"

namespace keel::layers::detail {

template <std::size_t R>
nlohmann::json ints_json(const std::array<int, R>& v) {
  nlohmann::json j = nlohmann::json::array();
  for (int e : v) j.push_back(e);
  return j;
}

// [a, b, c] or a for all three; def when the key is missing or null.
inline std::array<int, 3> read_triple(const Args& a, const char* key, std::array<int, 3> def) {
  const nlohmann::json* v = a.find(key);
  if (!v) return def;
  if (!v->is_array()) {
    const int all = a.int_of(key, *v);
    return {all, all, all};
  }
  if (v->size() != 3) a.bad(key, "an integer or a triple of integers", *v);
  return {a.int_of(key, (*v)[0]), a.int_of(key, (*v)[1]), a.int_of(key, (*v)[2])};
}

inline std::optional<std::array<int, 3>> read_optional_triple(const Args& a, const char* key) {
  if (!a.has(key)) return std::nullopt;
  return read_triple(a, key, {0, 0, 0});
}

// R (before, after) pairs: [[b, a], ...]; also Keras' shorter spellings: n (all), [n0, n1, ...]
// (symmetric per axis) and, for R = 1, [before, after].
template <std::size_t R>
std::array<std::array<int, 2>, R> read_margins(const Args& a, const char* key, std::array<std::array<int, 2>, R> def) {
  const nlohmann::json* v = a.find(key);
  if (!v) return def;
  std::array<std::array<int, 2>, R> out{};
  if (!v->is_array()) {
    const int all = a.int_of(key, *v);
    for (auto& p : out) p = {all, all};
    return out;
  }
  if (R == 1 && v->size() == 2 && !(*v)[0].is_array()) {
    out[0] = {a.int_of(key, (*v)[0]), a.int_of(key, (*v)[1])};
    return out;
  }
  if (v->size() != R) a.bad(key, "an integer, one integer per axis or one (before, after) pair per axis", *v);
  for (std::size_t i = 0; i < R; ++i) {
    const nlohmann::json& e = (*v)[i];
    if (e.is_array()) {
      if (e.size() != 2) a.bad(key, "(before, after) pairs", *v);
      out[i] = {a.int_of(key, e[0]), a.int_of(key, e[1])};
    } else {
      const int both = a.int_of(key, e);
      out[i] = {both, both};
    }
  }
  return out;
}

template <std::size_t R>
nlohmann::json margins_json(const std::array<std::array<int, 2>, R>& m) {
  if constexpr (R == 1) return nlohmann::json::array({m[0][0], m[0][1]});  // Keras' (left, right)
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : m) j.push_back(nlohmann::json::array({p[0], p[1]}));
  return j;
}

}  // namespace keel::layers::detail
