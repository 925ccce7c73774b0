// The LSTM and GRU recurrences split over the threads by the batch's rows
// (src/cpu/recurrent.cpp's lstm_sequence and gru_sequence, forward and backward, and the input
// projection and its gradient over the same parts) against the same recurrences on one thread:
// outputs, final states and the gradients of every input. The buffers of a split recurrence are
// in part order (each part's rows of every step together), so these also check that order in
// every path that reads them: the projection with few features (sums of kernel rows) and many (a
// product per part), go_backwards, a thread count changed between the forward and the gradient,
// a gradient's gradient (an outer tape) and a traced step.
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

// The inputs of an LSTM over batch 32, t steps, m features and u units: x, h0, c0, kernel,
// recurrent kernel, bias.
std::vector<Tensor> lstm_inputs(std::int64_t t, std::int64_t m, std::int64_t u, DType dtype) {
  const std::int64_t n = 32;
  return {wavy({n, t, m}, 2.3, 0.8, dtype),     wavy({n, u}, 0.7, 0.5, dtype), wavy({n, u}, 1.3, 0.8, dtype),
          wavy({m, 4 * u}, 2.1, 0.6, dtype), wavy({u, 4 * u}, 2.9, 0.5, dtype), wavy({4 * u}, 3.7, 0.3, dtype)};
}

std::vector<Tensor> lstm_results(const std::vector<Tensor>& in, bool go_backwards) {
  GradientTape tape;
  for (const Tensor& s : in) tape.watch(s);
  const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5], go_backwards);
  std::vector<Tensor> out = tape.gradient(reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h * s.c), in);
  for (const Tensor& v : {s.outputs, s.h, s.c}) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("an lstm sequence split over threads by its batch rows equals the one-thread sequence") {
  // backend::lstm_sequence[_backward] run every step of a part of the batch's rows on one thread
  // (a row's recurrence reads its own row only), the parts on parallel threads. Batch 32, 24 units,
  // 32 steps: 2.4M multiply-adds, enough for cpu/recurrent.cpp to split the rows in two (16 each)
  // on two threads; one thread runs the whole batch. 3 features project as sums of kernel rows,
  // 12 as a product per part. Outputs, final states and the gradients of every input against the
  // one-thread run, forwards and backwards.
  for (const std::int64_t m : {3, 12})
    for (const bool backwards : {false, true}) {
      INFO(m << " features, go_backwards " << backwards);
      check_two_threads_match_one([&](DType dtype) { return lstm_results(lstm_inputs(32, m, 24, dtype), backwards); });
    }
}

TEST_CASE("an lstm sequence's gradient uses the forward's parts when the thread count changes in between") {
  // The forward on two threads lays its buffers out in two parts; the gradient, taken after the
  // pool is cut to one thread, must read them in that order (it runs both parts on one thread).
  const int threads = config::num_threads();
  const std::vector<Tensor> in = lstm_inputs(32, 3, 24, DType::float64);
  config::set_num_threads(1);
  const std::vector<Tensor> one = lstm_results(in, false);
  config::set_num_threads(2);
  GradientTape tape;
  for (const Tensor& s : in) tape.watch(s);
  const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5]);
  const Tensor loss = reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h * s.c);
  config::set_num_threads(1);
  const std::vector<Tensor> grads = tape.gradient(loss, in);
  config::set_num_threads(threads);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK(reduce_max(abs(grads[i] - one[i])).item<double>() <= 1e-12 * (1 + reduce_max(abs(one[i])).item<double>()));
  }
}

TEST_CASE("an lstm sequence split over threads gives the one-thread second-order gradient and traced step") {
  // A gradient's gradient: the outer tape records the node's backward, which recomputes the steps
  // with ops from the projection in part order (rnn::from_part_order) and returns the input
  // side's gradient in part order again (to_part_order). And a traced step (keel::function)
  // replays the same kernels with the parts fixed when it traced.
  check_two_threads_match_one([&](DType dtype) {
    const std::vector<Tensor> in = lstm_inputs(32, 3, 24, dtype);
    GradientTape outer;
    outer.watch(in[4]);
    Tensor norm;
    {
      GradientTape inner;
      for (const Tensor& s : in) inner.watch(s);
      const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5]);
      const Tensor dk = inner.gradient(reduce_sum(s.outputs * s.outputs), in[4]);
      norm = reduce_sum(dk * dk);
    }
    std::vector<Tensor> out{outer.gradient(norm, in[4])};
    auto step = keel::function([](const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& k,
                                  const Tensor& rk, const Tensor& b) {
      return lstm_results({x, h0, c0, k, rk, b}, false);
    });
    for (int call = 0; call < 2; ++call)
      for (const Tensor& v : step(in[0], in[1], in[2], in[3], in[4], in[5])) out.push_back(v);
    return out;
  });
}

TEST_CASE("a gru sequence split over threads by its batch rows equals the one-thread sequence") {
  // backend::gru_sequence[_backward], split as the LSTM's: batch 32, 28 units, 32 steps (2.4M
  // multiply-adds: two parts of 16 rows on two threads), with both biases; 3 and 12 features,
  // forwards and backwards.
  const std::int64_t n = 32, t = 32, u = 28;
  for (const std::int64_t m : {3, 12})
    for (const bool backwards : {false, true}) {
      INFO(m << " features, go_backwards " << backwards);
      check_two_threads_match_one([&](DType dtype) {
        const std::vector<Tensor> in{wavy({n, t, m}, 2.3, 0.8, dtype), wavy({n, u}, 1.2, 0.5, dtype),
                                     wavy({m, 3 * u}, 2.0, 0.6, dtype), wavy({u, 3 * u}, 2.7, 0.5, dtype),
                                     wavy({2, 3 * u}, 3.4, 0.3, dtype)};
        GradientTape tape;
        for (const Tensor& s : in) tape.watch(s);
        const GRUSequence s = gru(in[0], in[1], in[2], in[3], in[4], backwards);
        std::vector<Tensor> out =
            tape.gradient(reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h * s.h * s.h), in);
        for (const Tensor& v : {s.outputs, s.h}) out.push_back(v);
        return out;
      });
    }
}
