// keel::random: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11). A counter-based generator lets element i's numbers be a pure function of
// (key, base counter, i), so results do not depend on how many threads fill a tensor, and a
// call only has to reserve counter space under the lock, never generate under it.
//
// Counter layout (also what reserve() hands out to other ops): the 64-bit `counter` numbers
// 128-bit Philox blocks of four 32-bit words; block b of a reservation uses the Philox counter
// {lo32(counter + b), hi32(counter + b), stream, 0}. Word 2 ("stream") is 0 for first draws;
// truncated_normal uses it for its redraws so they need no extra reservation.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <random>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/core/config.hpp"
#include "keel/ops/creation.hpp"
#include "ops/philox.hpp"

namespace keel::random {

namespace {

using philox::Words;
using philox::block;
__extension__ using u128 = unsigned __int128;

struct Generator {
  std::mutex mutex;
  bool seeded = false;
  std::uint64_t key = 0;
  std::uint64_t counter = 0;
  std::uint64_t streams = 0;  // SeedGenerators derived since the last set_seed
};

// The stream (Philox word 2) SeedGenerator keys come from: apart from every draw's words
// ("SeGe" in ASCII).
constexpr std::uint32_t kSeedGeneratorStream = 0x53654765u;

thread_local SeedGenerator* current_stream = nullptr;

void seed_if_needed(Generator& g) {
  if (g.seeded) return;
  std::random_device rd;
  g.key = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  g.counter = 0;
  g.seeded = true;
}

Generator& generator() {
  static Generator g;
  return g;
}

// [0, 1) with 24 random bits (every value exactly representable as a float).
inline double unit24(std::uint32_t w) { return static_cast<double>(w >> 8) * 0x1.0p-24; }
// [0, 1) with 53 random bits.
inline double unit53(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}
// (0, 1): never 0, so log() stays finite in Box-Muller.
inline double open32(std::uint32_t w) { return (static_cast<double>(w) + 0.5) * 0x1.0p-32; }
inline double open53(std::uint32_t hi, std::uint32_t lo) {
  return (static_cast<double>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11) + 0.5) * 0x1.0p-53;
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Two standard normals from one Box-Muller pair of uniforms.
inline void box_muller(double u_open, double u, double& z0, double& z1) {
  const double r = std::sqrt(-2.0 * std::log(u_open));
  const double t = kTwoPi * u;
  z0 = r * std::cos(t);
  z1 = r * std::sin(t);
}

// Normals per block: float32 uses one word per uniform (4 normals), float64 two (2 normals).
template <class T>
constexpr int normals_per_block() { return sizeof(T) == 4 ? 4 : 2; }

template <class T>
inline void normal_block(const Words& w, double (&z)[4]) {
  if constexpr (sizeof(T) == 4) {
    box_muller(open32(w[0]), w[1] * 0x1.0p-32, z[0], z[1]);
    box_muller(open32(w[2]), w[3] * 0x1.0p-32, z[2], z[3]);
  } else {
    box_muller(open53(w[0], w[1]), unit53(w[2], w[3]), z[0], z[1]);
  }
}

// Runs body(b) for every block; threads only above 64K elements, where they pay for themselves.
// Each block is a pure function of its index, so the split between threads cannot change results.
template <class F>
void for_blocks(std::int64_t n_elements, std::int64_t n_blocks, F&& body) {
  [[maybe_unused]] const int nt = std::max(1, config::num_threads());
  [[maybe_unused]] const bool par = nt > 1 && n_elements > (std::int64_t{1} << 16);
#pragma omp parallel for num_threads(nt) schedule(static) if (par)
  for (std::int64_t b = 0; b < n_blocks; ++b) body(b);
}

// Words reserved for `blocks` Philox blocks.
PhiloxState reserve_blocks(std::int64_t blocks) { return reserve(static_cast<std::uint64_t>(blocks) * 4); }

}  // namespace

void set_seed(std::uint64_t seed) {
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.key = seed;
  g.counter = 0;
  g.streams = 0;
  g.seeded = true;
}

PhiloxState reserve(std::uint64_t count) {
  if (current_stream) return current_stream->reserve(count);
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  seed_if_needed(g);
  const PhiloxState s{g.key, g.counter};
  g.counter += count / 4 + (count % 4 != 0);
  return s;
}

SeedGenerator::SeedGenerator() {
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  seed_if_needed(g);
  const philox::Words w = philox::block(PhiloxState{g.key, 0}, g.streams++, kSeedGeneratorStream);
  key_ = (static_cast<std::uint64_t>(w[0]) << 32) | w[1];
}

SeedGenerator::SeedGenerator(std::uint64_t seed) { reset(seed); }

void SeedGenerator::reset(std::uint64_t seed) {
  // Not the key set_seed(seed) gives the global generator: a model's stream and the global one
  // stay apart when both come from the same number.
  const philox::Words w = philox::block(PhiloxState{seed, 0}, 0, kSeedGeneratorStream);
  key_ = (static_cast<std::uint64_t>(w[0]) << 32) | w[1];
  counter_ = 0;
}

PhiloxState SeedGenerator::reserve(std::uint64_t count) {
  const PhiloxState s{key_, counter_};
  counter_ += count / 4 + (count % 4 != 0);
  return s;
}

GeneratorScope::GeneratorScope(SeedGenerator& generator) : saved_(current_stream) { current_stream = &generator; }
GeneratorScope::~GeneratorScope() { current_stream = saved_; }

PhiloxState get_state() {
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  seed_if_needed(g);  // so the state returned is the one draws will use
  return {g.key, g.counter};
}

void set_state(PhiloxState state) {
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.key = state.key;
  g.counter = state.counter;
  g.seeded = true;
}

Tensor uniform(Shape shape, double minval, double maxval, DType dtype) {
  detail::check_finite(minval, "random.uniform", "minval");
  detail::check_finite(maxval, "random.uniform", "maxval");
  if (maxval < minval)
    throw ValueError(fmt::format("random.uniform: maxval {} is less than minval {}", maxval, minval));
  if (dtype != DType::float32 && dtype != DType::float64)
    detail::unsupported_dtype("random.uniform", dtype, "float32 or float64");
  Tensor out = detail::factory_output(shape, dtype, "random.uniform");
  const std::int64_t n = out.size();
  detail::dispatch_float(dtype, "random.uniform", [&]<class T>() {
    constexpr int per = sizeof(T) == 4 ? 4 : 2;
    const std::int64_t blocks = (n + per - 1) / per;
    const PhiloxState st = reserve_blocks(blocks);
    T* p = static_cast<T*>(out.raw_data());
    const T lo = static_cast<T>(minval), hi = static_cast<T>(maxval);
    // Rounding of lo + (hi - lo) * u can land on hi; keep the interval half-open.
    const T below_hi = lo < hi ? std::nextafter(hi, lo) : lo;
    for_blocks(n, blocks, [&](std::int64_t b) {
      const Words w = block(st, static_cast<std::uint64_t>(b));
      double u[4];
      if constexpr (per == 4) {
        for (int k = 0; k < 4; ++k) u[k] = unit24(w[k]);
      } else {
        u[0] = unit53(w[0], w[1]);
        u[1] = unit53(w[2], w[3]);
      }
      for (int k = 0; k < per; ++k) {
        const std::int64_t i = b * per + k;
        if (i >= n) break;
        const T v = static_cast<T>(minval + (maxval - minval) * u[k]);
        p[i] = v < hi ? v : below_hi;
      }
    });
  });
  return backend::place_on_default(out);
}

namespace {
// normal and truncated_normal differ only in how block b's standard normals are drawn:
// draw.template operator()<T>(state, b, z) writes normals_per_block<T>() of them to z.
template <class Draw>
Tensor scaled_normals(const char* op, const Shape& shape, double mean, double stddev, DType dtype, Draw&& draw) {
  detail::check_finite(mean, op, "mean");
  detail::check_finite(stddev, op, "stddev");
  if (stddev < 0) throw ValueError(fmt::format("{}: stddev must be >= 0, got {}", op, stddev));
  if (dtype != DType::float32 && dtype != DType::float64) detail::unsupported_dtype(op, dtype, "float32 or float64");
  Tensor out = detail::factory_output(shape, dtype, op);
  const std::int64_t n = out.size();
  detail::dispatch_float(dtype, op, [&]<class T>() {
    constexpr int per = normals_per_block<T>();
    const std::int64_t blocks = (n + per - 1) / per;
    const PhiloxState st = reserve_blocks(blocks);
    T* p = static_cast<T*>(out.raw_data());
    for_blocks(n, blocks, [&](std::int64_t b) {
      double z[4] = {0, 0, 0, 0};
      draw.template operator()<T>(st, static_cast<std::uint64_t>(b), z);
      for (int k = 0; k < per; ++k) {
        const std::int64_t i = b * per + k;
        if (i >= n) break;
        p[i] = static_cast<T>(mean + stddev * z[k]);
      }
    });
  });
  return backend::place_on_default(out);
}
}  // namespace

Tensor normal(Shape shape, double mean, double stddev, DType dtype) {
  return scaled_normals("random.normal", shape, mean, stddev, dtype,
                        []<class T>(const PhiloxState& st, std::uint64_t b, double(&z)[4]) {
                          normal_block<T>(block(st, b), z);
                        });
}

Tensor truncated_normal(Shape shape, double mean, double stddev, DType dtype) {
  return scaled_normals("random.truncated_normal", shape, mean, stddev, dtype,
                        []<class T>(const PhiloxState& st, std::uint64_t b, double(&accepted)[4]) {
                          // A rejected lane is redrawn from the same block index on the next
                          // stream, so every redraw is still a function of (key, counter, element
                          // index) alone. 4.6% of draws are rejected; 64 rounds in a row
                          // (probability ~1e-86) would fall back to the mean.
                          constexpr int per = normals_per_block<T>();
                          double z[4];
                          unsigned pending = (1u << per) - 1;
                          for (std::uint32_t stream = 0; pending != 0 && stream < 64; ++stream) {
                            normal_block<T>(block(st, b, stream), z);
                            for (int k = 0; k < per; ++k)
                              if ((pending >> k & 1u) && std::fabs(z[k]) <= 2.0) {
                                accepted[k] = z[k];
                                pending &= ~(1u << k);
                              }
                          }
                        });
}

Tensor uniform_int(Shape shape, std::int64_t minval, std::int64_t maxval, DType dtype) {
  if (minval >= maxval)
    throw ValueError(fmt::format("random.uniform_int: empty range [{}, {})", minval, maxval));
  if (dtype == DType::int32 &&
      (minval < std::numeric_limits<std::int32_t>::min() ||
       maxval > static_cast<std::int64_t>(std::numeric_limits<std::int32_t>::max()) + 1))
    throw ValueError(fmt::format("random.uniform_int: range [{}, {}) does not fit int32", minval, maxval));
  if (dtype != DType::int32 && dtype != DType::int64)
    detail::unsupported_dtype("random.uniform_int", dtype, "int32 or int64");
  Tensor out = detail::factory_output(shape, dtype, "random.uniform_int");
  const std::int64_t n = out.size();
  // Unsigned arithmetic: the width of [INT64_MIN, INT64_MAX) does not fit int64.
  const std::uint64_t range = static_cast<std::uint64_t>(maxval) - static_cast<std::uint64_t>(minval);
  detail::dispatch_index(dtype, "random.uniform_int", [&]<class T>() {
    const std::int64_t blocks = (n + 1) / 2;
    const PhiloxState st = reserve_blocks(blocks);
    T* p = static_cast<T*>(out.raw_data());
    for_blocks(n, blocks, [&](std::int64_t b) {
      const Words w = block(st, static_cast<std::uint64_t>(b));
      for (int k = 0; k < 2; ++k) {
        const std::int64_t i = b * 2 + k;
        if (i >= n) break;
        // 64 random bits scaled into [0, range) by a multiply-high: the bias is at most
        // range / 2^64, and no data-dependent rejection loop is needed.
        const std::uint64_t x = (static_cast<std::uint64_t>(w[2 * k]) << 32) | w[2 * k + 1];
        const auto r = static_cast<std::uint64_t>((static_cast<u128>(x) * range) >> 64);
        p[i] = static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(minval) + r));
      }
    });
  });
  return backend::place_on_default(out);
}

}  // namespace keel::random
