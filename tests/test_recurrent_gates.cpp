// The LSTM cell's gates run as one SIMD pass per row (cpu/kernels.hpp's lstm_gates). They must
// give the bits of the ops they replace, written here with the public ops in the order the cell
// defines: z = h @ R + (x @ K + b); i, f, o = sigmoid, g = tanh of z's blocks; c' = f*c + i*g;
// h' = o * tanh(c'); and their gradient (lstm_gate_grads), whose formula the second test writes
// with the public ops. The GRU's (gru_gates, gru_gate_grads) likewise. Checked at every SIMD
// level, for unit counts with and without a partial last batch (the partial units of all rows
// are gathered into whole batches), float32 and float64.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

#include "simd_levels.hpp"

using namespace keel;

namespace {

Tensor block(const Tensor& z, std::int64_t u, int g) {
  return slice(z, {0, g * u}, {z.shape()[0], u}).contiguous();
}

struct Reference {
  Tensor h, c;
};

Reference by_ops(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& k, const Tensor& r,
                 const Tensor& b) {
  const std::int64_t u = h.shape()[1];
  const Tensor projected = matmul(x, k);
  const Tensor z = matmul(h, r) + (b.defined() ? projected + b : projected);
  const Tensor i = sigmoid(block(z, u, 0)), f = sigmoid(block(z, u, 1)), g = tanh(block(z, u, 2));
  const Tensor o = sigmoid(block(z, u, 3));
  const Tensor c_new = f * c + i * g;
  return {o * tanh(c_new), c_new};
}

void check_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const auto a = got.to_vector<double>(), e = want.to_vector<double>();
  std::size_t differ = 0;
  for (std::size_t j = 0; j < a.size(); ++j) differ += a[j] != e[j] ? 1 : 0;
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("lstm_cell's fused gates give the bits of the separate ops at every SIMD level", "[recurrent][simd]") {
  testing::at_every_simd_level([&](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      for (std::int64_t batch : {1, 3, 32}) {
        for (std::int64_t u : {1, 5, 8, 16, 17, 37, 50}) {
          INFO(name(dtype) << ", batch " << batch << ", " << u << " units");
          random::set_seed(static_cast<std::uint64_t>(batch * 100 + u));
          const Tensor x = cast(random::normal({batch, 3}), dtype);
          const Tensor h = cast(random::normal({batch, u}) * 0.5, dtype);
          const Tensor c = cast(random::normal({batch, u}) * 2.0, dtype);  // tanh(c') past its polynomial
          const Tensor k = cast(random::normal({3, 4 * u}), dtype);
          const Tensor r = cast(random::normal({u, 4 * u}) * 0.4, dtype);
          const Tensor b = cast(random::normal({4 * u}), dtype);
          for (const Tensor& bias : {b, Tensor()}) {
            const LSTMState s = lstm_cell(x, h, c, k, r, bias);
            const Reference want = by_ops(x, h, c, k, r, bias);
            check_bits(s.h, want.h);
            check_bits(s.c, want.c);
          }
        }
      }
    }
  });
}

TEST_CASE("lstm_cell's fused gate gradients give the bits of their formula at every SIMD level", "[recurrent][simd]") {
  // loss = sum(h' * wh) + sum(c' * wc): the cell's backward gets dh = wh and dc = wc, and the
  // gradient of c is dc_prev = dct * f; with one row, the bias gradient is dz itself.
  testing::at_every_simd_level([&](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      for (std::int64_t batch : {1, 4}) {
        for (std::int64_t u : {1, 7, 16, 37}) {
          INFO(name(dtype) << ", batch " << batch << ", " << u << " units");
          random::set_seed(static_cast<std::uint64_t>(batch * 1000 + u));
          const Tensor x = cast(random::normal({batch, 2}), dtype);
          const Tensor h = cast(random::normal({batch, u}) * 0.5, dtype);
          const Tensor c = cast(random::normal({batch, u}) * 2.0, dtype);
          const Tensor k = cast(random::normal({2, 4 * u}), dtype);
          const Tensor r = cast(random::normal({u, 4 * u}) * 0.4, dtype);
          const Tensor b = cast(random::normal({4 * u}), dtype);
          const Tensor wh = cast(random::normal({batch, u}), dtype), wc = cast(random::normal({batch, u}), dtype);
          GradientTape tape;
          tape.watch(c);
          tape.watch(b);
          const LSTMState s = lstm_cell(x, h, c, k, r, b);
          const std::vector<Tensor> got = tape.gradient(reduce_sum(s.h * wh) + reduce_sum(s.c * wc), {c, b});

          const Tensor z = matmul(h, r) + (matmul(x, k) + b);
          const Tensor i = sigmoid(block(z, u, 0)), f = sigmoid(block(z, u, 1)), g = tanh(block(z, u, 2));
          const Tensor o = sigmoid(block(z, u, 3));
          const Tensor tc = tanh(f * c + i * g);
          const Tensor dct = wc + wh * o * (1.0 - tc * tc);
          check_bits(got[0], dct * f);
          if (batch == 1) {
            const Tensor dz = concat({dct * g * i * (1.0 - i), dct * c * f * (1.0 - f), dct * i * (1.0 - g * g),
                                      wh * tc * o * (1.0 - o)}, 1);
            check_bits(got[1], reshape(dz, {4 * u}));
          }
        }
      }
    }
  });
}

TEST_CASE("gru_cell's fused gates and their gradient give the bits of their formulas at every SIMD level",
          "[recurrent][simd]") {
  // in = h @ R; z, r = sigmoid(x @ K + in + b_in + b_rec) of their blocks; rec = in_h + b_rec_h;
  // cand = tanh(x_h + b_in_h + r * rec); h' = z * h + (1 - z) * cand. loss = sum(h' * w) gives
  // d = w, and with one row the bias gradient is [dX; dI] itself.
  testing::at_every_simd_level([&](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      for (std::int64_t batch : {1, 4}) {
        for (std::int64_t u : {1, 7, 16, 37}) {
          INFO(name(dtype) << ", batch " << batch << ", " << u << " units");
          random::set_seed(static_cast<std::uint64_t>(batch * 10000 + u));
          const Tensor x = cast(random::normal({batch, 2}), dtype);
          const Tensor h = cast(random::normal({batch, u}) * 0.5, dtype);
          const Tensor k = cast(random::normal({2, 3 * u}), dtype);
          const Tensor r = cast(random::normal({u, 3 * u}) * 0.4, dtype);
          const Tensor b = cast(random::normal({2, 3 * u}), dtype);
          const Tensor w = cast(random::normal({batch, u}), dtype);
          GradientTape tape;
          tape.watch(b);
          const Tensor got_h = gru_cell(x, h, k, r, b);
          const Tensor got_db = tape.gradient(reduce_sum(got_h * w), b);

          const Tensor bi = reshape(slice(b, {0, 0}, {1, 3 * u}), {3 * u});
          const Tensor br = reshape(slice(b, {1, 0}, {1, 3 * u}), {3 * u});
          const Tensor in = matmul(h, r), xk = matmul(x, k);
          const Tensor pre = ((xk + in) + bi) + br;
          const Tensor z = sigmoid(block(pre, u, 0)), rg = sigmoid(block(pre, u, 1));
          const Tensor rec = block(in, u, 2) + block(reshape(br, {1, 3 * u}), u, 2);
          const Tensor cand = tanh((block(xk, u, 2) + block(reshape(bi, {1, 3 * u}), u, 2)) + rg * rec);
          check_bits(got_h, z * h + (1.0 - z) * cand);
          if (batch == 1) {
            const Tensor dz_pre = w * (h - cand) * z * (1.0 - z);
            const Tensor dh_pre = w * (1.0 - z) * (1.0 - cand * cand);
            const Tensor dr_pre = dh_pre * rec * rg * (1.0 - rg);
            check_bits(got_db, concat({concat({dz_pre, dr_pre, dh_pre}, 1), concat({dz_pre, dr_pre, dh_pre * rg}, 1)},
                                      0));
          }
        }
      }
    }
  });
}
