// LSTM and GRU cells and sequences: one step against values computed by hand, several units
// against a naive scalar reference written here (not the library's code path), sequences
// against manual cell calls, go_backwards, float64 finite-difference gradients (first and
// second order), and argument errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

Tensor f64(const std::vector<double>& v, Shape s) { return constant(v, std::move(s), DType::float64); }

// Irrational-looking values in [-scale, scale]: scale * sin(1.7 i + salt).
std::vector<double> wavy(std::int64_t n, double salt, double scale = 0.8) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = scale * std::sin(1.7 * double(i) + salt);
  return v;
}
Tensor wavy64(Shape s, double salt, double scale = 0.8) {
  return f64(wavy(s.num_elements(), salt, scale), s);
}

void check_close(const Tensor& t, const std::vector<double>& expected, double tol) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": got " << v[i] << ", expected " << expected[i]);
    CHECK(std::abs(v[i] - expected[i]) <= tol);
  }
}

void check_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  check_close(a, b.to_vector<double>(), tol);
}

double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Naive LSTM step, row-major vectors, batch n, input m, units u; gate blocks i, f, c, o.
void ref_lstm(const std::vector<double>& x, const std::vector<double>& h, const std::vector<double>& c,
              const std::vector<double>& k, const std::vector<double>& r, const std::vector<double>& b,
              std::int64_t n, std::int64_t m, std::int64_t u, std::vector<double>& h_out,
              std::vector<double>& c_out) {
  h_out.assign(static_cast<std::size_t>(n * u), 0);
  c_out.assign(static_cast<std::size_t>(n * u), 0);
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t j = 0; j < u; ++j) {
      double z[4];
      for (std::int64_t g = 0; g < 4; ++g) {
        const std::int64_t col = g * u + j;
        double acc = b[static_cast<std::size_t>(col)];
        for (std::int64_t p = 0; p < m; ++p) acc += x[static_cast<std::size_t>(s * m + p)] * k[static_cast<std::size_t>(p * 4 * u + col)];
        for (std::int64_t p = 0; p < u; ++p) acc += h[static_cast<std::size_t>(s * u + p)] * r[static_cast<std::size_t>(p * 4 * u + col)];
        z[g] = acc;
      }
      const double cn = sigm(z[1]) * c[static_cast<std::size_t>(s * u + j)] + sigm(z[0]) * std::tanh(z[2]);
      c_out[static_cast<std::size_t>(s * u + j)] = cn;
      h_out[static_cast<std::size_t>(s * u + j)] = sigm(z[3]) * std::tanh(cn);
    }
}

// Naive GRU step (reset_after): b holds the input bias then the recurrent bias (2 x 3u).
std::vector<double> ref_gru(const std::vector<double>& x, const std::vector<double>& h,
                            const std::vector<double>& k, const std::vector<double>& r,
                            const std::vector<double>& b, std::int64_t n, std::int64_t m, std::int64_t u) {
  std::vector<double> out(static_cast<std::size_t>(n * u));
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t j = 0; j < u; ++j) {
      double xs[3], hs[3];
      for (std::int64_t g = 0; g < 3; ++g) {
        const std::int64_t col = g * u + j;
        double ax = b[static_cast<std::size_t>(col)], ah = b[static_cast<std::size_t>(3 * u + col)];
        for (std::int64_t p = 0; p < m; ++p) ax += x[static_cast<std::size_t>(s * m + p)] * k[static_cast<std::size_t>(p * 3 * u + col)];
        for (std::int64_t p = 0; p < u; ++p) ah += h[static_cast<std::size_t>(s * u + p)] * r[static_cast<std::size_t>(p * 3 * u + col)];
        xs[g] = ax;
        hs[g] = ah;
      }
      const double z = sigm(xs[0] + hs[0]), rr = sigm(xs[1] + hs[1]);
      const double hh = std::tanh(xs[2] + rr * hs[2]);
      out[static_cast<std::size_t>(s * u + j)] = z * h[static_cast<std::size_t>(s * u + j)] + (1 - z) * hh;
    }
  return out;
}

// x[:, t, :] as [batch, features].
Tensor step_of(const Tensor& x, std::int64_t t) {
  const std::int64_t n = x.shape()[0], f = x.shape()[2];
  return reshape(slice(x, {0, t, 0}, {n, 1, f}), Shape{n, f});
}

Tensor reverse_time(const Tensor& x) {
  std::vector<std::int64_t> idx;
  for (std::int64_t t = x.shape()[1] - 1; t >= 0; --t) idx.push_back(t);
  return gather(x, constant(idx), 1);
}

// A set of LSTM weights for batch n, input m, units u.
struct LstmData {
  Tensor x, h, c, k, r, b;
};
LstmData lstm_data(std::int64_t n, std::int64_t m, std::int64_t u) {
  return {wavy64({n, m}, 0.1), wavy64({n, u}, 0.7, 0.5), wavy64({n, u}, 1.3),
          wavy64({m, 4 * u}, 2.1, 0.6), wavy64({u, 4 * u}, 2.9, 0.5), wavy64({4 * u}, 3.7, 0.3)};
}

}  // namespace

// ---- forward values ----------------------------------------------------------------------------

TEST_CASE("lstm_cell matches a step computed by hand (input 1, units 1)") {
  // x = 1, h = 0.5, c = 0.25; kernel [1,4] = [0.1, 0.2, 0.3, 0.4] (gates i, f, c, o),
  // recurrent_kernel [1,4] = [0.5, 0.6, 0.7, 0.8], bias = [0.01, 0.02, 0.03, 0.04].
  //   z_i = 0.1*1 + 0.5*0.5 + 0.01 = 0.36  -> i = sigmoid(0.36) = 0.5890404340586651
  //   z_f = 0.2*1 + 0.6*0.5 + 0.02 = 0.52  -> f = sigmoid(0.52) = 0.6271477663131956
  //   z_c = 0.3*1 + 0.7*0.5 + 0.03 = 0.68  -> g = tanh(0.68)    = 0.5915193954318165
  //   z_o = 0.4*1 + 0.8*0.5 + 0.04 = 0.84  -> o = sigmoid(0.84) = 0.6984652160025387
  //   c' = f*c + i*g = 0.6271477663131956*0.25 + 0.5890404340586651*0.5915193954318165
  //      = 0.5052157830175753
  //   h' = o * tanh(c') = 0.6984652160025387 * 0.46620919782581294 = 0.32563090806177675
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = constant({1.0}, Shape{1, 1}, dt);
    const Tensor h = constant({0.5}, Shape{1, 1}, dt);
    const Tensor c = constant({0.25}, Shape{1, 1}, dt);
    const Tensor k = constant({0.1, 0.2, 0.3, 0.4}, Shape{1, 4}, dt);
    const Tensor r = constant({0.5, 0.6, 0.7, 0.8}, Shape{1, 4}, dt);
    const Tensor b = constant({0.01, 0.02, 0.03, 0.04}, Shape{4}, dt);
    const LSTMState s = lstm_cell(x, h, c, k, r, b);
    const double tol = dt == DType::float32 ? 1e-6 : 1e-14;
    CHECK(s.h.dtype() == dt);
    CHECK(s.h.shape() == Shape{1, 1});
    check_close(s.c, {0.5052157830175753}, tol);
    check_close(s.h, {0.32563090806177675}, tol);
  }
}

TEST_CASE("lstm_cell keeps the gates in blocks i, f, c, o of units columns") {
  // batch 2, input 3, units 2: a naive per-element reference (above) reads column g*u + j for
  // gate g of unit j; an interleaved or reordered layout would disagree.
  const std::int64_t n = 2, m = 3, u = 2;
  const LstmData d = lstm_data(n, m, u);
  std::vector<double> h_ref, c_ref;
  ref_lstm(d.x.to_vector<double>(), d.h.to_vector<double>(), d.c.to_vector<double>(),
           d.k.to_vector<double>(), d.r.to_vector<double>(), d.b.to_vector<double>(), n, m, u, h_ref, c_ref);
  const LSTMState s = lstm_cell(d.x, d.h, d.c, d.k, d.r, d.b);
  check_close(s.h, h_ref, 1e-14);
  check_close(s.c, c_ref, 1e-14);

  // float32 agrees to float32 precision; an undefined bias means no bias.
  const LSTMState s32 = lstm_cell(d.x.astype(DType::float32), d.h.astype(DType::float32),
                                  d.c.astype(DType::float32), d.k.astype(DType::float32),
                                  d.r.astype(DType::float32), d.b.astype(DType::float32));
  check_close(s32.h, h_ref, 1e-6);
  check_close(s32.c, c_ref, 1e-6);
  const LSTMState nb = lstm_cell(d.x, d.h, d.c, d.k, d.r, Tensor());
  const LSTMState zb = lstm_cell(d.x, d.h, d.c, d.k, d.r, zeros_like(d.b));
  check_close(nb.h, zb.h, 1e-15);
  check_close(nb.c, zb.c, 1e-15);
}

TEST_CASE("lstm_cell reads strided views of its inputs") {
  const LstmData d = lstm_data(3, 2, 2);
  // Transposed views of the same values: the results must not change.
  const Tensor xt = transpose(transpose(d.x).contiguous());
  const Tensor ht = transpose(transpose(d.h).contiguous());
  const Tensor ct = transpose(transpose(d.c).contiguous());
  REQUIRE(!xt.is_contiguous());
  const LSTMState a = lstm_cell(d.x, d.h, d.c, d.k, d.r, d.b);
  const LSTMState b = lstm_cell(xt, ht, ct, d.k, d.r, d.b);
  check_close(a.h, b.h, 1e-15);
  check_close(a.c, b.c, 1e-15);
}

TEST_CASE("gru_cell matches a step computed by hand (reset_after, input 1, units 1)") {
  // x = 1, h = 0.5; kernel [1,3] = [0.1, 0.2, 0.3] (gates z, r, h),
  // recurrent_kernel [1,3] = [0.4, 0.5, 0.6], bias [2,3] = [[0.01, 0.02, 0.03], [0.04, 0.05, 0.06]].
  //   input side     X = x K + b_in  = [0.11, 0.22, 0.33]
  //   recurrent side I = h R + b_rec = [0.5*0.4 + 0.04, 0.5*0.5 + 0.05, 0.5*0.6 + 0.06]
  //                                  = [0.24, 0.30, 0.36]
  //   z  = sigmoid(0.11 + 0.24) = sigmoid(0.35) = 0.5866175789173301
  //   r  = sigmoid(0.22 + 0.30) = sigmoid(0.52) = 0.6271477663131956
  //   hh = tanh(0.33 + r * 0.36) = tanh(0.5557731958727504) = 0.5048345884891415
  //        (reset_after: r multiplies the recurrent product including its bias)
  //   h' = z*h + (1-z)*hh = 0.5866175789173301*0.5 + 0.4133824210826699*0.5048345884891415
  //      = 0.5019985338945797
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = constant({1.0}, Shape{1, 1}, dt);
    const Tensor h = constant({0.5}, Shape{1, 1}, dt);
    const Tensor k = constant({0.1, 0.2, 0.3}, Shape{1, 3}, dt);
    const Tensor r = constant({0.4, 0.5, 0.6}, Shape{1, 3}, dt);
    const Tensor b = constant({0.01, 0.02, 0.03, 0.04, 0.05, 0.06}, Shape{2, 3}, dt);
    const Tensor y = gru_cell(x, h, k, r, b);
    CHECK(y.dtype() == dt);
    check_close(y, {0.5019985338945797}, dt == DType::float32 ? 1e-6 : 1e-14);
  }
}

TEST_CASE("gru_cell keeps the gates in blocks z, r, h against a naive reference") {
  const std::int64_t n = 3, m = 2, u = 3;
  const Tensor x = wavy64({n, m}, 0.2), h = wavy64({n, u}, 0.9, 0.5);
  const Tensor k = wavy64({m, 3 * u}, 1.4, 0.6), r = wavy64({u, 3 * u}, 2.2, 0.5);
  const Tensor b = wavy64({2, 3 * u}, 3.1, 0.3);
  const auto expected = ref_gru(x.to_vector<double>(), h.to_vector<double>(), k.to_vector<double>(),
                                r.to_vector<double>(), b.to_vector<double>(), n, m, u);
  check_close(gru_cell(x, h, k, r, b), expected, 1e-14);
  check_close(gru_cell(x, h, k, r, Tensor()), gru_cell(x, h, k, r, zeros_like(b)), 1e-15);
}

TEST_CASE("lstm over two steps equals two manual lstm_cell calls") {
  const std::int64_t n = 2, t = 2, m = 3, u = 4;
  const LstmData d = lstm_data(n, m, u);
  const Tensor x = wavy64({n, t, m}, 4.2);
  const LSTMState s1 = lstm_cell(step_of(x, 0), d.h, d.c, d.k, d.r, d.b);
  const LSTMState s2 = lstm_cell(step_of(x, 1), s1.h, s1.c, d.k, d.r, d.b);
  const LSTMSequence seq = lstm(x, d.h, d.c, d.k, d.r, d.b);
  REQUIRE(seq.outputs.shape() == Shape{n, t, u});
  check_close(seq.outputs, stack({s1.h, s2.h}, 1), 1e-14);
  check_close(seq.h, s2.h, 1e-14);
  check_close(seq.c, s2.c, 1e-14);
}

TEST_CASE("lstm with go_backwards runs the reversed sequence and returns outputs in processed order") {
  const std::int64_t n = 2, t = 3, m = 2, u = 3;
  const LstmData d = lstm_data(n, m, u);
  const Tensor x = wavy64({n, t, m}, 5.1);
  const LSTMSequence back = lstm(x, d.h, d.c, d.k, d.r, d.b, /*go_backwards=*/true);
  const LSTMSequence fwd_rev = lstm(reverse_time(x), d.h, d.c, d.k, d.r, d.b);
  check_close(back.outputs, fwd_rev.outputs, 1e-14);
  check_close(back.h, fwd_rev.h, 1e-14);
  check_close(back.c, fwd_rev.c, 1e-14);
  // The first output is the step that read the last time step.
  const LSTMState first = lstm_cell(step_of(x, t - 1), d.h, d.c, d.k, d.r, d.b);
  check_close(squeeze(slice(back.outputs, {0, 0, 0}, {n, 1, u}), {1}), first.h, 1e-14);
  // ... and it differs from the forward direction.
  const LSTMSequence fwd = lstm(x, d.h, d.c, d.k, d.r, d.b);
  CHECK(std::abs(fwd.h.to_vector<double>()[0] - back.h.to_vector<double>()[0]) > 1e-6);
}

TEST_CASE("gru over a sequence equals manual gru_cell calls, forwards and backwards") {
  const std::int64_t n = 2, t = 3, m = 2, u = 3;
  const Tensor x = wavy64({n, t, m}, 0.4), h0 = wavy64({n, u}, 1.1, 0.5);
  const Tensor k = wavy64({m, 3 * u}, 1.9, 0.6), r = wavy64({u, 3 * u}, 2.6, 0.5);
  const Tensor b = wavy64({2, 3 * u}, 3.3, 0.3);
  for (bool backwards : {false, true}) {
    std::vector<Tensor> outs;
    Tensor h = h0;
    for (std::int64_t s = 0; s < t; ++s) {
      h = gru_cell(step_of(x, backwards ? t - 1 - s : s), h, k, r, b);
      outs.push_back(h);
    }
    const GRUSequence seq = gru(x, h0, k, r, b, backwards);
    REQUIRE(seq.outputs.shape() == Shape{n, t, u});
    check_close(seq.outputs, stack(outs, 1), 1e-14);
    check_close(seq.h, h, 1e-14);
  }
}

TEST_CASE("lstm and gru over an empty sequence return the initial states") {
  const LstmData d = lstm_data(2, 3, 2);
  const LSTMSequence s = lstm(zeros({2, 0, 3}, DType::float64), d.h, d.c, d.k, d.r, d.b);
  CHECK(s.outputs.shape() == Shape{2, 0, 2});
  check_close(s.h, d.h, 0);
  check_close(s.c, d.c, 0);
  const GRUSequence g = gru(zeros({2, 0, 3}, DType::float64), d.h, wavy64({3, 6}, 1), wavy64({2, 6}, 2),
                            wavy64({2, 6}, 3));
  CHECK(g.outputs.shape() == Shape{2, 0, 2});
  check_close(g.h, d.h, 0);
}

TEST_CASE("lstm_cell and gru_cell accept an empty batch") {
  const LSTMState s = lstm_cell(zeros({0, 3}, DType::float64), zeros({0, 2}, DType::float64),
                                zeros({0, 2}, DType::float64), wavy64({3, 8}, 0), wavy64({2, 8}, 1),
                                wavy64({8}, 2));
  CHECK(s.h.shape() == Shape{0, 2});
  CHECK(s.c.shape() == Shape{0, 2});
  const Tensor g = gru_cell(zeros({0, 3}, DType::float64), zeros({0, 2}, DType::float64), wavy64({3, 6}, 0),
                            wavy64({2, 6}, 1), wavy64({2, 6}, 2));
  CHECK(g.shape() == Shape{0, 2});
}

// ---- gradients ---------------------------------------------------------------------------------

TEST_CASE("lstm_cell gradients match finite differences for every input") {
  const LstmData d = lstm_data(3, 2, 2);
  // Both outputs feed the checked value, so dL/dh' and dL/dc' are both exercised.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        const LSTMState s = lstm_cell(in[0], in[1], in[2], in[3], in[4], in[5]);
        return concat({s.h, s.c}, 1);
      },
      {d.x, d.h, d.c, d.k, d.r, d.b});
  // Only h' used: c' gets a zero upstream gradient from the tape.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return lstm_cell(in[0], in[1], in[2], in[3], in[4], in[5]).h;
      },
      {d.x, d.h, d.c, d.k, d.r, d.b});
}

TEST_CASE("gru_cell gradients match finite differences for every input") {
  const std::int64_t n = 3, m = 2, u = 2;
  check_gradients(
      [](const std::vector<Tensor>& in) { return gru_cell(in[0], in[1], in[2], in[3], in[4]); },
      {wavy64({n, m}, 0.3), wavy64({n, u}, 0.8, 0.5), wavy64({m, 3 * u}, 1.6, 0.6),
       wavy64({u, 3 * u}, 2.4, 0.5), wavy64({2, 3 * u}, 3.2, 0.3)});
}

TEST_CASE("lstm sequence gradients flow through time (T = 3, both directions)") {
  const std::int64_t n = 2, t = 3, m = 2, u = 2;
  const LstmData d = lstm_data(n, m, u);
  const Tensor x = wavy64({n, t, m}, 6.1);
  for (bool backwards : {false, true}) {
    INFO("go_backwards = " << backwards);
    check_gradients(
        [backwards, n, t, u](const std::vector<Tensor>& in) {
          const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5], backwards);
          return concat({reshape(s.outputs, Shape{n, t * u}), s.c}, 1);
        },
        {x, d.h, d.c, d.k, d.r, d.b});
  }
  // Only the final state: every gradient must come back through all three steps.
  check_gradients(
      [](const std::vector<Tensor>& in) { return lstm(in[0], in[1], in[2], in[3], in[4], in[5]).h; },
      {x, d.h, d.c, d.k, d.r, d.b});
}

TEST_CASE("gru sequence gradients flow through time (T = 3, both directions)") {
  const std::int64_t n = 2, t = 3, m = 2, u = 2;
  const Tensor x = wavy64({n, t, m}, 0.6), h0 = wavy64({n, u}, 1.2, 0.5);
  const Tensor k = wavy64({m, 3 * u}, 2.0, 0.6), r = wavy64({u, 3 * u}, 2.7, 0.5);
  const Tensor b = wavy64({2, 3 * u}, 3.4, 0.3);
  for (bool backwards : {false, true}) {
    INFO("go_backwards = " << backwards);
    check_gradients(
        [backwards](const std::vector<Tensor>& in) {
          return gru(in[0], in[1], in[2], in[3], in[4], backwards).outputs;
        },
        {x, h0, k, r, b});
  }
}

namespace {

// Gradients of loss_of(ins) wrt ins; with `outer`, another tape watching the inputs records
// the backward pass (which then runs as differentiable ops instead of the fused loops).
std::vector<Tensor> grads_with(bool outer, const std::vector<Tensor>& ins,
                               const std::function<Tensor(const std::vector<Tensor>&)>& loss_of) {
  std::unique_ptr<GradientTape> rec;
  if (outer) {
    rec = std::make_unique<GradientTape>();
    for (const auto& t : ins) rec->watch(t);
  }
  GradientTape tape;
  for (const auto& t : ins) tape.watch(t);
  return tape.gradient(loss_of(ins), ins);
}

void check_same_grads(const std::vector<Tensor>& ins,
                      const std::function<Tensor(const std::vector<Tensor>&)>& loss_of) {
  const auto fused = grads_with(false, ins, loss_of);
  const auto composite = grads_with(true, ins, loss_of);
  REQUIRE(fused.size() == composite.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    INFO("input " << i);
    REQUIRE(fused[i].defined());
    REQUIRE(composite[i].defined());
    check_close(fused[i], composite[i], 1e-13);
  }
}

}  // namespace

TEST_CASE("recurrent cells give the same first-order gradients when an outer tape records the backward pass") {
  const LstmData d = lstm_data(3, 2, 3);
  check_same_grads({d.x, d.h, d.c, d.k, d.r, d.b}, [](const std::vector<Tensor>& in) {
    const LSTMState s = lstm_cell(in[0], in[1], in[2], in[3], in[4], in[5]);
    return reduce_sum(s.h * s.h) + reduce_sum(s.c);
  });
  const Tensor x = wavy64({3, 4, 2}, 0.3);
  check_same_grads({x, d.h, d.c, d.k, d.r, d.b}, [](const std::vector<Tensor>& in) {
    const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5]);
    return reduce_sum(s.outputs * s.outputs) + reduce_sum(s.c);
  });
  const Tensor gk = wavy64({2, 9}, 1.1, 0.6), gr = wavy64({3, 9}, 1.7, 0.5), gb = wavy64({2, 9}, 2.3, 0.3);
  check_same_grads({d.x, d.h, gk, gr, gb}, [](const std::vector<Tensor>& in) {
    const Tensor y = gru_cell(in[0], in[1], in[2], in[3], in[4]);
    return reduce_sum(y * y);
  });
  check_same_grads({x, d.h, gk, gr, gb}, [](const std::vector<Tensor>& in) {
    const Tensor y = gru(in[0], in[1], in[2], in[3], in[4], true).outputs;
    return reduce_sum(y * y);
  });
}

TEST_CASE("lstm_cell second-order gradients match finite differences of the first-order ones") {
  const LstmData d = lstm_data(2, 2, 2);
  // f(inputs) = d/dx sum(h' * c'): computed by an inner tape while the checker's outer tape
  // records, so the cell's backward runs as differentiable ops and is differentiated again.
  // The finite differences evaluate f with no outer tape (the fused path).
  check_gradients(
      [](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(in[0]);
        inner.watch(in[3]);
        const LSTMState s = lstm_cell(in[0], in[1], in[2], in[3], in[4], in[5]);
        const auto g = inner.gradient(reduce_sum(s.h * s.c), std::vector<Tensor>{in[0], in[3]});
        return concat({reshape(g[0], Shape{-1}), reshape(g[1], Shape{-1})}, 0);
      },
      {d.x, d.h, d.c, d.k, d.r, d.b}, 1e-5, 1e-6);
}

TEST_CASE("lstm sequence second-order gradients match finite differences of the first-order ones") {
  // The sequence is one tape node; under a recording outer tape its backward recomputes the
  // states and gates with ops, which the outer tape differentiates again.
  const std::int64_t n = 2, t = 3, m = 2, u = 2;
  const LstmData d = lstm_data(n, m, u);
  check_gradients(
      [](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(in[0]);
        inner.watch(in[4]);
        const LSTMSequence s = lstm(in[0], in[1], in[2], in[3], in[4], in[5]);
        const auto g = inner.gradient(reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h * s.c),
                                      std::vector<Tensor>{in[0], in[4]});
        return concat({reshape(g[0], Shape{-1}), reshape(g[1], Shape{-1})}, 0);
      },
      {wavy64({n, t, m}, 0.7), d.h, d.c, d.k, d.r, d.b}, 1e-5, 1e-6);
}

TEST_CASE("lstm sequence gradients equal those of its steps as separate cells (T = 6)") {
  // One node over the whole sequence (one product for the recurrent kernel's gradient over all
  // steps) against a chain of lstm_cell nodes, for every subset of watched inputs that matters:
  // all of them, the weights alone, the input and initial state alone.
  const std::int64_t n = 3, t = 6, m = 2, u = 4;
  const LstmData d = lstm_data(n, m, u);
  const Tensor x = wavy64({n, t, m}, 2.3);
  const auto loss = [](const Tensor& outputs, const Tensor& h, const Tensor& c) {
    return reduce_sum(outputs * outputs) + reduce_sum(h * c);
  };
  for (const std::vector<int>& watched : std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5}, {3, 4, 5}, {0, 1, 2}, {4}}) {
    for (bool backwards : {false, true}) {
      INFO("go_backwards = " << backwards << ", " << watched.size() << " watched");
      const std::vector<Tensor> in{x, d.h, d.c, d.k, d.r, d.b};
      std::vector<Tensor> sources;
      for (int i : watched) sources.push_back(in[static_cast<std::size_t>(i)]);
      std::vector<Tensor> fused, cells;
      {
        GradientTape tape;
        for (const Tensor& s : sources) tape.watch(s);
        const LSTMSequence s = lstm(x, d.h, d.c, d.k, d.r, d.b, backwards);
        fused = tape.gradient(loss(s.outputs, s.h, s.c), sources);
      }
      {
        GradientTape tape;
        for (const Tensor& s : sources) tape.watch(s);
        LSTMState state{d.h, d.c};
        std::vector<Tensor> hs;
        for (std::int64_t k = 0; k < t; ++k) {
          state = lstm_cell(step_of(x, backwards ? t - 1 - k : k), state.h, state.c, d.k, d.r, d.b);
          hs.push_back(state.h);
        }
        cells = tape.gradient(loss(stack(hs, 1), state.h, state.c), sources);
      }
      for (std::size_t i = 0; i < sources.size(); ++i) {
        INFO("input " << watched[i]);
        REQUIRE(fused[i].defined());
        check_close(fused[i], cells[i], 1e-12);
      }
    }
  }
}

TEST_CASE("gru sequence gradients equal those of its steps as separate cells (T = 6)") {
  // One node over the whole sequence (the recurrent kernel's and bias's gradients one product and
  // one column sum over all steps) against a chain of gru_cell nodes, for the subsets of watched
  // inputs that matter, both directions, with and without a bias.
  const std::int64_t n = 3, t = 6, m = 2, u = 4;
  const Tensor x = wavy64({n, t, m}, 2.3), h0 = wavy64({n, u}, 1.2, 0.5);
  const Tensor k = wavy64({m, 3 * u}, 2.0, 0.6), r = wavy64({u, 3 * u}, 2.7, 0.5);
  const Tensor b = wavy64({2, 3 * u}, 3.4, 0.3);
  const auto loss = [](const Tensor& outputs, const Tensor& h) {
    return reduce_sum(outputs * outputs) + reduce_sum(h * h * h);
  };
  for (const bool with_bias : {true, false})
    for (const std::vector<int>& watched : std::vector<std::vector<int>>{{0, 1, 2, 3, 4}, {2, 3, 4}, {0, 1}, {3}}) {
      for (bool backwards : {false, true}) {
        INFO("go_backwards = " << backwards << ", " << watched.size() << " watched, bias " << with_bias);
        const Tensor bias = with_bias ? b : Tensor();
        const std::vector<Tensor> in{x, h0, k, r, b};
        std::vector<Tensor> sources;
        for (int i : watched)
          if (i != 4 || with_bias) sources.push_back(in[static_cast<std::size_t>(i)]);
        std::vector<Tensor> fused, cells;
        {
          GradientTape tape;
          for (const Tensor& s : sources) tape.watch(s);
          const GRUSequence s = gru(x, h0, k, r, bias, backwards);
          fused = tape.gradient(loss(s.outputs, s.h), sources);
        }
        {
          GradientTape tape;
          for (const Tensor& s : sources) tape.watch(s);
          Tensor h = h0;
          std::vector<Tensor> hs;
          for (std::int64_t j = 0; j < t; ++j) {
            h = gru_cell(step_of(x, backwards ? t - 1 - j : j), h, k, r, bias);
            hs.push_back(h);
          }
          cells = tape.gradient(loss(stack(hs, 1), h), sources);
        }
        REQUIRE(fused.size() == cells.size());
        for (std::size_t i = 0; i < sources.size(); ++i) {
          INFO("source " << i);
          REQUIRE(fused[i].defined());
          check_close(fused[i], cells[i], 1e-12);
        }
      }
    }
  // Only the final state, without a bias: every gradient comes back through all the steps.
  check_gradients([](const std::vector<Tensor>& in) { return gru(in[0], in[1], in[2], in[3], Tensor()).h; },
                  {wavy64({2, 3, 2}, 0.6), wavy64({2, 2}, 1.2, 0.5), wavy64({2, 6}, 2.0, 0.6),
                   wavy64({2, 6}, 2.7, 0.5)});
}

TEST_CASE("gru sequence second-order gradients match finite differences of the first-order ones") {
  // Under a recording outer tape the sequence node's backward recomputes the states and gates
  // with ops, which the outer tape differentiates again.
  const std::int64_t n = 2, t = 3, m = 2, u = 2;
  check_gradients(
      [](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(in[0]);
        inner.watch(in[3]);
        inner.watch(in[4]);
        const GRUSequence s = gru(in[0], in[1], in[2], in[3], in[4]);
        const auto g = inner.gradient(reduce_sum(s.outputs * s.outputs) + reduce_sum(s.h),
                                      std::vector<Tensor>{in[0], in[3], in[4]});
        return concat({reshape(g[0], Shape{-1}), reshape(g[1], Shape{-1}), reshape(g[2], Shape{-1})}, 0);
      },
      {wavy64({n, t, m}, 0.7), wavy64({n, u}, 1.0, 0.5), wavy64({m, 3 * u}, 1.5, 0.6), wavy64({u, 3 * u}, 2.5, 0.5),
       wavy64({2, 3 * u}, 3.5, 0.3)},
      1e-5, 1e-6);
}

TEST_CASE("gru_cell second-order gradients match finite differences of the first-order ones") {
  const std::int64_t n = 2, m = 2, u = 2;
  check_gradients(
      [](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(in[1]);
        inner.watch(in[3]);
        const Tensor y = gru_cell(in[0], in[1], in[2], in[3], in[4]);
        const auto g = inner.gradient(reduce_sum(y * y), std::vector<Tensor>{in[1], in[3]});
        return concat({reshape(g[0], Shape{-1}), reshape(g[1], Shape{-1})}, 0);
      },
      {wavy64({n, m}, 0.5), wavy64({n, u}, 1.0, 0.5), wavy64({m, 3 * u}, 1.5, 0.6),
       wavy64({u, 3 * u}, 2.5, 0.5), wavy64({2, 3 * u}, 3.5, 0.3)},
      1e-5, 1e-6);
}

TEST_CASE("lstm trains weights held in Variables and detects weights changed before gradient()") {
  const LstmData d = lstm_data(4, 1, 3);
  Variable k(d.k.astype(DType::float32), "kernel"), r(d.r.astype(DType::float32), "recurrent_kernel"),
      b(d.b.astype(DType::float32), "bias");
  const Tensor x = wavy64({4, 5, 1}, 0.2).astype(DType::float32);
  const Tensor h0 = zeros({4, 3}), c0 = zeros({4, 3});
  const Tensor target = full({4, 3}, 0.5);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(lstm(x, h0, c0, k, r, b).h - target));
    const auto g = tape.gradient(loss, std::vector<Variable*>{&k, &r, &b});
    for (const auto& gi : g) REQUIRE(gi.defined());
    k.assign_sub(g[0] * 0.5);
    r.assign_sub(g[1] * 0.5);
    b.assign_sub(g[2] * 0.5);
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < first * 0.5);

  GradientTape tape;
  const Tensor loss = reduce_sum(lstm(x, h0, c0, k, r, b).h);
  r.assign_sub(ones({3, 12}) * 0.01);
  CHECK_THROWS_AS(tape.gradient(loss, k), Error);
}

// ---- errors ------------------------------------------------------------------------------------

TEST_CASE("lstm_cell and lstm reject wrong shapes with ShapeErrors naming the op and the shapes") {
  const LstmData d = lstm_data(2, 3, 4);  // kernel [3,16], recurrent [4,16], bias [16]
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, d.c, wavy64({3, 12}, 0), d.r, d.b), ShapeError);
  CHECK_THROWS_WITH(lstm_cell(d.x, d.h, d.c, wavy64({3, 12}, 0), d.r, d.b),
                    Contains("lstm_cell") && Contains("kernel") && Contains("[3,16]") && Contains("[3,12]"));
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, d.c, wavy64({2, 16}, 0), d.r, d.b), ShapeError);  // input 3 vs 2
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, d.c, d.k, wavy64({4, 12}, 0), d.b), ShapeError);
  CHECK_THROWS_WITH(lstm_cell(d.x, d.h, d.c, d.k, wavy64({4, 12}, 0), d.b),
                    Contains("recurrent_kernel") && Contains("[4,12]"));
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, d.c, d.k, d.r, wavy64({12}, 0)), ShapeError);
  CHECK_THROWS_WITH(lstm_cell(d.x, d.h, d.c, d.k, d.r, wavy64({12}, 0)),
                    Contains("bias") && Contains("[16]") && Contains("[12]"));
  CHECK_THROWS_AS(lstm_cell(d.x, wavy64({2, 3}, 0), d.c, d.k, d.r, d.b), ShapeError);
  CHECK_THROWS_WITH(lstm_cell(d.x, wavy64({2, 3}, 0), d.c, d.k, d.r, d.b),
                    Contains("h") && Contains("[2,4]") && Contains("[2,3]"));
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, wavy64({3, 4}, 0), d.k, d.r, d.b), ShapeError);  // batch 3 vs 2
  CHECK_THROWS_AS(lstm_cell(wavy64({2, 1, 3}, 0), d.h, d.c, d.k, d.r, d.b), ShapeError);
  CHECK_THROWS_AS(lstm(d.x, d.h, d.c, d.k, d.r, d.b), ShapeError);  // x must be rank 3
  CHECK_THROWS_WITH(lstm(d.x, d.h, d.c, d.k, d.r, d.b), Contains("lstm") && Contains("[batch, time, features]"));
  CHECK_THROWS_AS(lstm(wavy64({2, 5, 2}, 0), d.h, d.c, d.k, d.r, d.b), ShapeError);  // features 2 vs 3
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, d.c, d.k.astype(DType::float32), d.r, d.b), DTypeError);
  CHECK_THROWS_AS(lstm_cell(d.x, d.h, d.c, Tensor(), d.r, d.b), ValueError);
}

TEST_CASE("gru_cell and gru reject wrong shapes with ShapeErrors naming the op and the shapes") {
  const Tensor x = wavy64({2, 3}, 0), h = wavy64({2, 4}, 1);
  const Tensor k = wavy64({3, 12}, 2), r = wavy64({4, 12}, 3), b = wavy64({2, 12}, 4);
  CHECK_NOTHROW(gru_cell(x, h, k, r, b));
  CHECK_THROWS_AS(gru_cell(x, h, k, r, wavy64({12}, 0)), ShapeError);  // reset_after: [2, 3u]
  CHECK_THROWS_WITH(gru_cell(x, h, k, r, wavy64({12}, 0)),
                    Contains("gru_cell") && Contains("bias") && Contains("[2,12]"));
  CHECK_THROWS_AS(gru_cell(x, h, wavy64({3, 16}, 0), r, b), ShapeError);
  CHECK_THROWS_AS(gru_cell(x, h, k, wavy64({4, 16}, 0), b), ShapeError);
  CHECK_THROWS_WITH(gru_cell(x, h, k, wavy64({4, 16}, 0), b), Contains("[units, 3*units]"));
  CHECK_THROWS_AS(gru_cell(x, wavy64({3, 4}, 0), k, r, b), ShapeError);
  CHECK_THROWS_AS(gru(x, h, k, r, b), ShapeError);
  CHECK_THROWS_AS(gru(wavy64({2, 2, 5}, 0), h, k, r, b), ShapeError);
  CHECK_THROWS_AS(gru_cell(x.astype(DType::int32), h, k, r, b), DTypeError);
}
