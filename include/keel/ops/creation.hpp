#pragma once
// Factories: constants, filled tensors, ranges and random numbers.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

// T = float, double, int32_t, int64_t, uint8_t, bool. values.size() must equal shape's elements.
template <class T>
Tensor constant(const std::vector<T>& values, Shape shape, DType dtype = dtype_of<T>);
template <class T>
Tensor constant(std::initializer_list<T> values, Shape shape, DType dtype = dtype_of<T>) {
  return constant(std::vector<T>(values), std::move(shape), dtype);
}
// A 1-D tensor of the values (shape = {values.size()}).
template <class T>
Tensor constant(const std::vector<T>& values) {
  return constant(values, Shape{static_cast<std::int64_t>(values.size())}, dtype_of<T>);
}
Tensor constant(double scalar, DType dtype = DType::float32);  // rank 0

Tensor empty(Shape shape, DType dtype = DType::float32);  // uninitialised memory
Tensor zeros(Shape shape, DType dtype = DType::float32);
Tensor ones(Shape shape, DType dtype = DType::float32);
Tensor full(Shape shape, double value, DType dtype = DType::float32);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
Tensor arange(double stop);  // 0, 1, ..., stop-1 (float32)
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::float32);
Tensor linspace(double start, double stop, std::int64_t num, DType dtype = DType::float32);
Tensor eye(std::int64_t n, DType dtype = DType::float32);

namespace random {
// Philox-4x32-10 counter-based generator: a global seed and a counter. The same seed gives the
// same numbers in the same order, whatever the number of threads.
void set_seed(std::uint64_t seed);
Tensor normal(Shape shape, double mean = 0, double stddev = 1, DType dtype = DType::float32);
Tensor uniform(Shape shape, double minval = 0, double maxval = 1, DType dtype = DType::float32);
// Values more than two standard deviations from the mean are redrawn (tf.random.truncated_normal).
Tensor truncated_normal(Shape shape, double mean = 0, double stddev = 1,
                        DType dtype = DType::float32);
// Uniform integers in [minval, maxval).
Tensor uniform_int(Shape shape, std::int64_t minval, std::int64_t maxval,
                   DType dtype = DType::int64);
// tf.random.categorical: logits [batch, classes] (unnormalised log-probabilities) ->
// [batch, num_samples] class indices, int64 or int32, drawn independently (Gumbel-max: the
// argmax of logits + Gumbel noise has exactly the softmax distribution). A -inf logit is never
// drawn.
Tensor categorical(const Tensor& logits, std::int64_t num_samples, DType dtype = DType::int64);
// tf.random.shuffle: x's slices along axis 0 in a uniformly random order.
Tensor shuffle(const Tensor& x);
// Draws `count` 32-bit words' worth of fresh counter space from the global generator:
// returns {key, first counter}. Used by ops with their own randomness (dropout, shuffles).
struct PhiloxState { std::uint64_t key; std::uint64_t counter; };
PhiloxState reserve(std::uint64_t count);
// The global generator's position: {key, next counter}. Checkpoints save it and set_state puts
// it back, so that a resumed run draws the numbers the interrupted one would have drawn.
// get_state on a never-seeded generator seeds it first (from std::random_device), as a draw would.
PhiloxState get_state();
void set_state(PhiloxState state);

// A random stream of its own (Keras 3's SeedGenerator): what a model draws from in fit(),
// evaluate() and predict(), so that models trained in different threads do not share (and race
// for) the global generator. Default-constructed, it is derived from the global generator's seed
// and a count of the streams made since set_seed(), without drawing from the global stream: the
// same set_seed and the same creation order give the same streams. One thread at a time.
class SeedGenerator {
 public:
  SeedGenerator();
  explicit SeedGenerator(std::uint64_t seed);
  void reset(std::uint64_t seed);            // as if constructed with `seed`
  PhiloxState reserve(std::uint64_t count);  // like random::reserve, from this stream
  PhiloxState state() const { return {key_, counter_}; }
  void set_state(PhiloxState state) {
    key_ = state.key;
    counter_ = state.counter;
  }

 private:
  std::uint64_t key_ = 0, counter_ = 0;
};

// While a scope lives, every random draw of this thread (normal, uniform, dropout, shuffles,
// initializers) comes from `generator` instead of the global one. Scopes nest.
class GeneratorScope {
 public:
  explicit GeneratorScope(SeedGenerator& generator);
  ~GeneratorScope();
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;

 private:
  SeedGenerator* saved_;
};
}  // namespace random

}  // namespace keel
