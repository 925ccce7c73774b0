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
#include "backend/random.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "ops/philox.hpp"
#include "ops/random_stream.hpp"

namespace keel::random {

namespace {

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

// A factory's draw into a new host tensor (placed on the default device after): the blocks are
// reserved here, under the generator's lock, and sampled by the backend without it.
Tensor draw(const kernel::RandomDraw& d, const Shape& shape, DType dtype, const char* op) {
  Tensor out = detail::factory_output(shape, dtype, op);
  const std::int64_t blocks = backend::random_blocks(d.distribution, dtype, out.size());
  const PhiloxState st = reserve(static_cast<std::uint64_t>(blocks) * 4);
  backend::random_fill(d, st.key, st.counter, out);
  return backend::place_on_default(out);
}

}  // namespace

void set_seed(std::uint64_t seed) {
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.key = seed;
  g.counter = 0;
  g.streams = 0;
  g.seeded = true;
}

namespace tracing {
thread_local std::int64_t reserved_words = 0;
}  // namespace tracing

SeedGenerator* current_generator() { return current_stream; }

PhiloxState reserve(std::uint64_t count) {
  if (current_stream) return current_stream->reserve(count);
  if (backend::recorder()) tracing::reserved_words += static_cast<std::int64_t>(count);
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
  if (backend::recorder()) random::tracing::reserved_words += static_cast<std::int64_t>(count);
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
  return draw({kernel::Distribution::uniform, minval, maxval}, shape, dtype, "random.uniform");
}

namespace {
Tensor normals(kernel::Distribution d, const char* op, const Shape& shape, double mean, double stddev, DType dtype) {
  detail::check_finite(mean, op, "mean");
  detail::check_finite(stddev, op, "stddev");
  if (stddev < 0) throw ValueError(fmt::format("{}: stddev must be >= 0, got {}", op, stddev));
  if (dtype != DType::float32 && dtype != DType::float64) detail::unsupported_dtype(op, dtype, "float32 or float64");
  return draw({d, mean, stddev}, shape, dtype, op);
}
}  // namespace

Tensor normal(Shape shape, double mean, double stddev, DType dtype) {
  return normals(kernel::Distribution::normal, "random.normal", shape, mean, stddev, dtype);
}

Tensor truncated_normal(Shape shape, double mean, double stddev, DType dtype) {
  return normals(kernel::Distribution::truncated_normal, "random.truncated_normal", shape, mean, stddev, dtype);
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
  // Unsigned arithmetic: the width of [INT64_MIN, INT64_MAX) does not fit int64.
  kernel::RandomDraw d;
  d.distribution = kernel::Distribution::uniform_int;
  d.int_min = minval;
  d.int_range = static_cast<std::uint64_t>(maxval) - static_cast<std::uint64_t>(minval);
  return draw(d, shape, dtype, "random.uniform_int");
}

}  // namespace keel::random
