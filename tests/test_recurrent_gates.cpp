// The LSTM cell's gates run as one SIMD pass per row (cpu/kernels.hpp's lstm_gates). They must
// give the bits of the ops they replace, written here with the public ops in the order the cell
// defines: z = h @ R + (x @ K + b); i, f, o = sigmoid, g = tanh of z's blocks; c' = f*c + i*g;
// h' = o * tanh(c'). Checked at every SIMD level, for unit counts with and without a partial last
// batch (the partial units of all rows are gathered into whole batches), float32 and float64.
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
