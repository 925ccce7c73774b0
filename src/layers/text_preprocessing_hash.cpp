// The hashes of Keras' Hashing layer and of the lookups' OOV buckets: FarmHash's Fingerprint64
// (farmhashna::Hash64, what tf.strings.to_hash_bucket_fast uses) and SipHash-2-4
// (tf.strings.to_hash_bucket_strong), written from the published algorithms; and the layer.
#include <fmt/core.h>

#include <cstring>
#include <utility>

#include "keel/layers/text_preprocessing.hpp"
#include "keel/ops/creation.hpp"

namespace keel::layers {

namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

// FarmHash's three multipliers.
constexpr u64 k0 = 0xc3a5c85c97cb3127ULL;
constexpr u64 k1 = 0xb492b66be98d7b9dULL;
constexpr u64 k2 = 0x9ae16a3b2f90404fULL;

// Little-endian loads, whatever the host (the fingerprint is defined on little-endian words).
u64 fetch64(const unsigned char* p) {
  u64 v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
u32 fetch32(const unsigned char* p) {
  u32 v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
u64 rotr(u64 v, int s) { return s == 0 ? v : (v >> s) | (v << (64 - s)); }
u64 shift_mix(u64 v) { return v ^ (v >> 47); }

u64 hash_len16(u64 u, u64 v, u64 mul) {
  u64 a = (u ^ v) * mul;
  a ^= a >> 47;
  u64 b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

u64 hash_len0to16(const unsigned char* s, std::size_t len) {
  if (len >= 8) {
    const u64 mul = k2 + len * 2;
    const u64 a = fetch64(s) + k2;
    const u64 b = fetch64(s + len - 8);
    const u64 c = rotr(b, 37) * mul + a;
    const u64 d = (rotr(a, 25) + b) * mul;
    return hash_len16(c, d, mul);
  }
  if (len >= 4) {
    const u64 mul = k2 + len * 2;
    const u64 a = fetch32(s);
    return hash_len16(len + (a << 3), fetch32(s + len - 4), mul);
  }
  if (len > 0) {
    const u32 y = static_cast<u32>(s[0]) + (static_cast<u32>(s[len >> 1]) << 8);
    const u32 z = static_cast<u32>(len) + (static_cast<u32>(s[len - 1]) << 2);
    return shift_mix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

u64 hash_len17to32(const unsigned char* s, std::size_t len) {
  const u64 mul = k2 + len * 2;
  const u64 a = fetch64(s) * k1;
  const u64 b = fetch64(s + 8);
  const u64 c = fetch64(s + len - 8) * mul;
  const u64 d = fetch64(s + len - 16) * k2;
  return hash_len16(rotr(a + b, 43) + rotr(c, 30) + d, a + rotr(b + k2, 18) + c, mul);
}

u64 hash_len33to64(const unsigned char* s, std::size_t len) {
  const u64 mul = k2 + len * 2;
  const u64 a = fetch64(s) * k2;
  const u64 b = fetch64(s + 8);
  const u64 c = fetch64(s + len - 8) * mul;
  const u64 d = fetch64(s + len - 16) * k2;
  const u64 y = rotr(a + b, 43) + rotr(c, 30) + d;
  const u64 z = hash_len16(y, a + rotr(b + k2, 18) + c, mul);
  const u64 e = fetch64(s + 16) * mul;
  const u64 f = fetch64(s + 24);
  const u64 g = (y + fetch64(s + len - 32)) * mul;
  const u64 h = (z + fetch64(s + len - 24)) * mul;
  return hash_len16(rotr(e + f, 43) + rotr(g, 30) + h, e + rotr(f + a, 18) + g, mul);
}

// A weak 32-byte mix with two seeds: returns the pair the 64-byte loop carries.
std::pair<u64, u64> weak_hash32(const unsigned char* s, u64 a, u64 b) {
  const u64 w = fetch64(s), x = fetch64(s + 8), y = fetch64(s + 16), z = fetch64(s + 24);
  a += w;
  b = rotr(b + a + z, 21);
  const u64 c = a;
  a += x;
  a += y;
  b += rotr(a, 44);
  return {a + z, b + c};
}

u64 sip_rotl(u64 v, int s) { return (v << s) | (v >> (64 - s)); }

struct SipState {
  u64 v0, v1, v2, v3;
  void round() {
    v0 += v1; v1 = sip_rotl(v1, 13); v1 ^= v0; v0 = sip_rotl(v0, 32);
    v2 += v3; v3 = sip_rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = sip_rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = sip_rotl(v1, 17); v1 ^= v2; v2 = sip_rotl(v2, 32);
  }
  void absorb(u64 m) {  // 2 compression rounds per 8-byte word
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

}  // namespace

std::uint64_t farmhash_fingerprint64(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t len = bytes.size();
  if (len <= 16) return hash_len0to16(s, len);
  if (len <= 32) return hash_len17to32(s, len);
  if (len <= 64) return hash_len33to64(s, len);

  // Longer inputs: 64-byte blocks mixed into seven words of state, seeded with 81, then the
  // last 64 bytes (which may overlap the last block) with a multiplier taken from the state.
  const u64 seed = 81;
  u64 x = seed;
  u64 y = seed * k1 + 113;
  u64 z = shift_mix(y * k2 + 113) * k2;
  std::pair<u64, u64> v{0, 0}, w{0, 0};
  x = x * k2 + fetch64(s);
  const unsigned char* end = s + ((len - 1) / 64) * 64;
  const unsigned char* last64 = end + ((len - 1) & 63) - 63;
  do {
    x = rotr(x + y + v.first + fetch64(s + 8), 37) * k1;
    y = rotr(y + v.second + fetch64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + fetch64(s + 40);
    z = rotr(z + w.first, 33) * k1;
    v = weak_hash32(s, v.second * k1, x + w.first);
    w = weak_hash32(s + 32, z + w.second, y + fetch64(s + 16));
    std::swap(z, x);
    s += 64;
  } while (s != end);
  const u64 mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.first += ((len - 1) & 63);
  v.first += w.first;
  w.first += v.first;
  x = rotr(x + y + v.first + fetch64(s + 8), 37) * mul;
  y = rotr(y + v.second + fetch64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + fetch64(s + 40);
  z = rotr(z + w.first, 33) * mul;
  v = weak_hash32(s, v.second * mul, x + w.first);
  w = weak_hash32(s + 32, z + w.second, y + fetch64(s + 16));
  std::swap(z, x);
  return hash_len16(hash_len16(v.first, w.first, mul) + shift_mix(y) * k0 + z,
                    hash_len16(v.second, w.second, mul) + x, mul);
}

std::uint64_t siphash64(std::string_view bytes, std::uint64_t key0, std::uint64_t key1) {
  SipState st{key0 ^ 0x736f6d6570736575ULL, key1 ^ 0x646f72616e646f6dULL, key0 ^ 0x6c7967656e657261ULL,
              key1 ^ 0x7465646279746573ULL};
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t len = bytes.size();
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) st.absorb(fetch64(s + i));
  // The final word: the remaining bytes, little-endian, and the length's low byte on top.
  u64 last = static_cast<u64>(len & 0xff) << 56;
  for (std::size_t j = 0; i + j < len; ++j) last |= static_cast<u64>(s[i + j]) << (8 * j);
  st.absorb(last);
  st.v2 ^= 0xff;
  for (int r = 0; r < 4; ++r) st.round();
  return st.v0 ^ st.v1 ^ st.v2 ^ st.v3;
}

// ---- Hashing ---------------------------------------------------------------------------------

Hashing::Hashing(int num_bins, HashingOptions options)
    : Layer(options.name), num_bins_(num_bins), options_(std::move(options)) {
  if (num_bins_ < 1) throw ValueError(fmt::format("Hashing: num_bins must be at least 1, got {}", num_bins_));
  if (!options_.salt.empty() && options_.salt.size() != 2)
    throw ValueError(fmt::format("Hashing: salt must be one integer or a pair of integers, got {} values",
                                 options_.salt.size()));
  const std::string& m = options_.output_mode;
  if (m != "int" && m != "one_hot" && m != "multi_hot" && m != "count")
    throw ValueError(fmt::format("Hashing: output_mode must be \"int\", \"one_hot\", \"multi_hot\" or \"count\", got \"{}\"", m));
}

std::int64_t Hashing::bin(std::string_view value) const {
  // Keras: with a mask value (and more than one bin) bin 0 is the mask's, the others hash into
  // bins 1..num_bins-1.
  const bool masked = options_.mask_value.has_value() && num_bins_ > 1;
  if (masked && value == *options_.mask_value) return 0;
  const u64 bins = static_cast<u64>(masked ? num_bins_ - 1 : num_bins_);
  const u64 h = options_.salt.empty() ? farmhash_fingerprint64(value)
                                      : siphash64(value, options_.salt[0], options_.salt[1]);
  return static_cast<std::int64_t>(h % bins) + (masked ? 1 : 0);
}

Tensor Hashing::finish(Tensor bins) const {
  if (options_.output_mode == "int") return bins;
  return detail::encode_categorical(bins, num_bins_, options_.output_mode, "Hashing");
}

Tensor Hashing::operator()(const std::vector<std::string>& values) const {
  std::vector<std::int64_t> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(bin(v));
  return finish(constant(out, Shape{static_cast<std::int64_t>(out.size())}));
}

void Hashing::build(const Shape& input_shape) { set_built(input_shape); }

Tensor Hashing::call(const Tensor& inputs, bool) {
  const DType dt = inputs.dtype();
  if (dt != DType::int32 && dt != DType::int64 && dt != DType::uint8)
    throw DTypeError(fmt::format("Hashing: tensor inputs must be integers (strings go through operator()(std::vector<std::string>)), "
                                 "got a {} tensor of shape {}", keel::name(dt), inputs.shape().to_string()));
  // Keras hashes integers by their decimal string (tf.strings.as_string).
  const std::vector<std::int64_t> values = inputs.to_vector<std::int64_t>();
  std::vector<std::int64_t> out;
  out.reserve(values.size());
  for (auto v : values) out.push_back(bin(std::to_string(v)));
  return finish(constant(out, inputs.shape()));
}

}  // namespace keel::layers
