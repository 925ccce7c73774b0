#pragma once
// Order-preserving unsigned keys of sortable values: a < b in keel's order exactly when
// key(a) < key(b), so that sorting, selection and searching compare integers. keel's order of
// floating values is the one XLA's sort uses: -0 equals +0, and every NaN equals every other NaN
// and lies above +inf (so an ascending sort puts NaNs last). Equal values get equal keys.
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace keel::cpu::sort_keys {

template <class T>
using Key = std::conditional_t<(sizeof(T) > 4), std::uint64_t, std::uint32_t>;

template <class T>
inline Key<T> key(T v) {
  using K = Key<T>;
  if constexpr (std::is_floating_point_v<T>) {
    constexpr K sign = K{1} << (sizeof(K) * 8 - 1);
    if (v != v) return ~K{0};  // NaN: above +inf, whose key is below all ones
    if (v == T(0)) v = T(0);   // -0 -> +0
    K bits;
    std::memcpy(&bits, &v, sizeof bits);
    // Negative: flip all bits (larger magnitude sorts lower); positive: set the sign bit.
    return (bits & sign) ? ~bits : (bits | sign);
  } else if constexpr (std::is_signed_v<T>) {
    constexpr K sign = K{1} << (sizeof(T) * 8 - 1);
    using U = std::make_unsigned_t<T>;
    return static_cast<K>(static_cast<U>(v) ^ static_cast<U>(sign));
  } else {
    return static_cast<K>(v);
  }
}

}  // namespace keel::cpu::sort_keys
