// The LSTM and GRU recurrences split over the threads by the batch's rows
// (src/cpu/recurrent.cpp's lstm_sequence and gru_sequence, forward and backward) against the same
// recurrences on one thread: outputs, final states and the gradients of every input.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace keel;

namespace {

// Irrational-looking values in [-scale, scale]: scale * sin(1.7 i + salt), in dtype.
Tensor wavy(Shape s, double salt, double scale, DType dtype) {
  std::vector<double> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.7 * double(i) + salt);
  return constant(v, std::move(s), DType::float64).astype(dtype);
}

// results(dtype) at 1 and at 2 threads, each of the 2-thread results against the 1-thread one,
// to 1e-12 (float64) or 1e-5 (float32) of its largest value (a bias's gradient reaches a few
// hundred), in float64 and float32.
template <class Results>
void check_two_threads_match_one(Results&& results) {
  const int threads = config::num_threads();
  for (const DType dtype : {DType::float64, DType::float32}) {
    INFO(keel::name(dtype));
    config::set_num_threads(1);
    const std::vector<Tensor> one = results(dtype);
    config::set_num_threads(2);
    const std::vector<Tensor> two = results(dtype);
    config::set_num_threads(threads);
    REQUIRE(one.size() == two.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
      INFO("result " << i);
      const double scale = 1 + reduce_max(abs(one[i])).astype(DType::float64).item<double>();
      const double tol = (dtype == DType::float64 ? 1e-12 : 1e-5) * scale;
      const std::vector<double> a = two[i].astype(DType::float64).to_vector<double>(),
                                b = one[i].astype(DType::float64).to_vector<double>();
      REQUIRE(a.size() == b.size());
      for (std::size_t j = 0; j < a.size(); ++j) {
        INFO("element " << j << ": 2 threads " << a[j] << ", 1 thread " << b[j]);
        CHECK(std::abs(a[j] - b[j]) <= tol);
      }
    }
  }
}

}  // namespace

TEST_CASE("an lstm sequence split over threads by its batch rows equals the one-thread sequence") {
  // backend::lstm_sequence[_backward] run every step of a part of the batch's rows on one thread
  // (a row's recurrence reads its own row only), the parts on parallel threads. Batch 32, 24 units,
  // 32 steps: 2.4M multiply-adds, enough for cpu/recurrent.cpp to split the rows in two (16 each)
  // on two threads; one thread runs the whole batch. Outputs, final states and the gradients of
  // every input against the one-thread run.
  const std::int64_t n = 32, t = 32, m = 3, u = 24;
  check_two_threads_match_one([&](DType dtype) {
    const std::vector<Tensor> in{wavy({n, t, m}, 2.3, 0.8, dtype),  wavy({n, u}, 0.7, 0.5, dtype),
                                 wavy({n, u}, 1.3, 0.8, dtype),     wavy({m, 4 * u}, 2.1, 0.6, dtype),
                                 wavy({u, 4 * u}, 2.9, 0.5, dtype), wavy({4 * u}, 3.7, 0.3, dtype)};
    GradientTape tape;
    for (const Tensor& s : in) tape.watch(s);
    const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5]);
    std::vector<Tensor> out = tape.gradient(reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h * s.c), in);
    for (const Tensor& v : {s.outputs, s.h, s.c}) out.push_back(v);
    return out;
  });
}

TEST_CASE("a gru sequence split over threads by its batch rows equals the one-thread sequence") {
  // backend::gru_sequence[_backward], split as the LSTM's: batch 32, 28 units, 32 steps (2.4M
  // multiply-adds: two parts of 16 rows on two threads), with both biases.
  const std::int64_t n = 32, t = 32, m = 3, u = 28;
  check_two_threads_match_one([&](DType dtype) {
    const std::vector<Tensor> in{wavy({n, t, m}, 2.3, 0.8, dtype), wavy({n, u}, 1.2, 0.5, dtype),
                                 wavy({m, 3 * u}, 2.0, 0.6, dtype), wavy({u, 3 * u}, 2.7, 0.5, dtype),
                                 wavy({2, 3 * u}, 3.4, 0.3, dtype)};
    GradientTape tape;
    for (const Tensor& s : in) tape.watch(s);
    const GRUSequence s = gru(in[0], in[1], in[2], in[3], in[4]);
    std::vector<Tensor> out = tape.gradient(reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h * s.h * s.h), in);
    for (const Tensor& v : {s.outputs, s.h}) out.push_back(v);
    return out;
  });
}
