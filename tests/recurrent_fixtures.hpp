#pragma once
// Shared by the recurrent layer tests (test_layers_recurrent*.cpp): deterministic weights and
// sequences, reference recurrences written in plain C++ (doubles, no keel ops), so that a mistake
// shared by a layer and the ops it uses cannot cancel out, and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "gradcheck.hpp"

namespace keel_test {

using namespace keel;

// Weight k, element i: a multiple of 1/256 (exact in float32, so that finite differences on the
// weights below perturb them exactly), spread over [-scale, scale].
inline void set_weights(layers::Layer& layer, double scale = 0.5) {
  int k = 0;
  for (Variable* v : layer.trainable_weights()) {
    const auto n = static_cast<std::size_t>(v->shape().num_elements());
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i)
      values[i] = static_cast<float>(std::round(256 * scale * std::sin(0.37 * i + 1.3 * k + 0.1)) / 256);
    v->assign(constant(values, v->shape()));
    ++k;
  }
}

// Copies the weights of `from` into `to` (same architecture).
inline void copy_weights(layers::Layer& from, layers::Layer& to) {
  auto a = from.trainable_weights(), b = to.trainable_weights();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) b[i]->assign(a[i]->peek());
}

inline Tensor sequence(std::vector<std::int64_t> dims, double phase = 0, DType dtype = DType::float32) {
  const Shape shape(dims);
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.5 * i + phase);
  return constant(v, shape, dtype);
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
inline std::vector<double> values(const Variable* v) { return v->peek().to_vector<double>(); }
       
inline void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-5) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(b[i]).margin(tol));
  }
}

// Elements [t] of a [batch, time, units] tensor's values, as [batch, units].
inline std::vector<double> step_of(const std::vector<double>& seq, std::int64_t batch, std::int64_t time,
                                   std::int64_t units, std::int64_t t) {
  std::vector<double> out;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t j = 0; j < units; ++j) out.push_back(seq[static_cast<std::size_t>((b * time + t) * units + j)]);
  return out;
}

using Fn = std::function<double(double)>;
inline const Fn kTanh = [](double v) { return std::tanh(v); };
inline const Fn kSigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
inline const Fn kRelu = [](double v) { return v > 0 ? v : 0; };

// ---- reference recurrences (row-major matrices as flat vectors) -------------------------------

struct RefRun {
  std::vector<std::vector<double>> outputs;  // per processed step: [batch * units]
  std::vector<double> h, c;
};

// z[b, :] = x_t[b, :] . K + h[b, :] . R (+ bias), K [F, n], R [u, n].
inline std::vector<double> affine(const std::vector<double>& x, std::int64_t batch, std::int64_t time, std::int64_t t,
                                  std::int64_t features, const std::vector<double>& K, const std::vector<double>& h,
                                  std::int64_t units, const std::vector<double>& R, std::int64_t n,
                                  const std::vector<double>* bias_in, const std::vector<double>* bias_rec = nullptr,
                                  bool split_recurrent = false, std::vector<double>* rec_part = nullptr) {
  std::vector<double> z(static_cast<std::size_t>(batch * n), 0.0);
  if (rec_part) rec_part->assign(static_cast<std::size_t>(batch * n), 0.0);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = bias_in ? (*bias_in)[static_cast<std::size_t>(j)] : 0.0;
      for (std::int64_t f = 0; f < features; ++f)
        s += x[static_cast<std::size_t>((b * time + t) * features + f)] * K[static_cast<std::size_t>(f * n + j)];
      double r = bias_rec ? (*bias_rec)[static_cast<std::size_t>(j)] : 0.0;
      for (std::int64_t k = 0; k < units; ++k)
        r += h[static_cast<std::size_t>(b * units + k)] * R[static_cast<std::size_t>(k * n + j)];
      if (split_recurrent) {
        z[static_cast<std::size_t>(b * n + j)] = s;
        (*rec_part)[static_cast<std::size_t>(b * n + j)] = r;
      } else {
        z[static_cast<std::size_t>(b * n + j)] = s + r;
      }
    }
  return z;
}

inline RefRun ref_simple_rnn(const std::vector<double>& x, std::int64_t B, std::int64_t T, std::int64_t F, std::int64_t u,
                             const std::vector<double>& K, const std::vector<double>& R, const std::vector<double>& b,
                             const Fn& act, bool backwards) {
  RefRun r;
  r.h.assign(static_cast<std::size_t>(B * u), 0.0);
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = backwards ? T - 1 - s : s;
    std::vector<double> z = affine(x, B, T, t, F, K, r.h, u, R, u, &b);
    for (double& v : z) v = act(v);
    r.h = z;
    r.outputs.push_back(z);
  }
  return r;
}

inline RefRun ref_lstm(const std::vector<double>& x, std::int64_t B, std::int64_t T, std::int64_t F, std::int64_t u,
                       const std::vector<double>& K, const std::vector<double>& R, const std::vector<double>& b,
                       const Fn& act, const Fn& rec_act, bool backwards) {
  RefRun r;
  r.h.assign(static_cast<std::size_t>(B * u), 0.0);
  r.c.assign(static_cast<std::size_t>(B * u), 0.0);
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = backwards ? T - 1 - s : s;
    const std::vector<double> z = affine(x, B, T, t, F, K, r.h, u, R, 4 * u, &b);
    for (std::int64_t bb = 0; bb < B; ++bb)
      for (std::int64_t j = 0; j < u; ++j) {
        const auto at = [&](int gate) { return z[static_cast<std::size_t>(bb * 4 * u + gate * u + j)]; };
        const double i = rec_act(at(0)), f = rec_act(at(1)), g = act(at(2)), o = rec_act(at(3));
        double& c = r.c[static_cast<std::size_t>(bb * u + j)];
        c = f * c + i * g;
        r.h[static_cast<std::size_t>(bb * u + j)] = o * act(c);
      }
    r.outputs.push_back(r.h);
  }
  return r;
}

// b: reset_after ? [2, 3u] : [3u].
inline RefRun ref_gru(const std::vector<double>& x, std::int64_t B, std::int64_t T, std::int64_t F, std::int64_t u,
                      const std::vector<double>& K, const std::vector<double>& R, const std::vector<double>& b,
                      bool reset_after, bool backwards) {
  RefRun r;
  r.h.assign(static_cast<std::size_t>(B * u), 0.0);
  const std::int64_t n = 3 * u;
  const std::vector<double> b_in(b.begin(), b.begin() + n);
  const std::vector<double> b_rec = reset_after ? std::vector<double>(b.begin() + n, b.end()) : std::vector<double>(n, 0.0);
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = backwards ? T - 1 - s : s;
    std::vector<double> rec;
    const std::vector<double> xz = affine(x, B, T, t, F, K, r.h, u, R, n, &b_in, &b_rec, true, &rec);
    std::vector<double> h_new(r.h.size());
    for (std::int64_t bb = 0; bb < B; ++bb)
      for (std::int64_t j = 0; j < u; ++j) {
        const auto X = [&](int gate) { return xz[static_cast<std::size_t>(bb * n + gate * u + j)]; };
        const auto H = [&](int gate) { return rec[static_cast<std::size_t>(bb * n + gate * u + j)]; };
        const double z = kSigmoid(X(0) + H(0));
        double hh;
        if (reset_after) {
          const double rr = kSigmoid(X(1) + H(1));
          hh = std::tanh(X(2) + rr * H(2));
        } else {
          // The candidate sees (r * h) . R_h, so it needs every unit's reset gate.
          double acc = X(2);
          for (std::int64_t k = 0; k < u; ++k) {
            const double rk = kSigmoid(X(1) - xz[static_cast<std::size_t>(bb * n + u + j)] +
                                       xz[static_cast<std::size_t>(bb * n + u + k)] +
                                       rec[static_cast<std::size_t>(bb * n + u + k)]);
            acc += rk * r.h[static_cast<std::size_t>(bb * u + k)] * R[static_cast<std::size_t>(k * n + 2 * u + j)];
          }
          hh = std::tanh(acc);
        }
        const double h = r.h[static_cast<std::size_t>(bb * u + j)];
        h_new[static_cast<std::size_t>(bb * u + j)] = z * h + (1 - z) * hh;
      }
    r.h = h_new;
    r.outputs.push_back(h_new);
  }
  return r;
}

inline std::vector<double> flatten_sequence(const RefRun& r, std::int64_t B, std::int64_t u) {
  // [batch, time, units] from per-step [batch, units].
  const std::int64_t T = static_cast<std::int64_t>(r.outputs.size());
  std::vector<double> out(static_cast<std::size_t>(B * T * u));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < u; ++j)
        out[static_cast<std::size_t>((b * T + t) * u + j)] = r.outputs[static_cast<std::size_t>(t)][static_cast<std::size_t>(b * u + j)];
  return out;
}

// Central differences on the float32 weights (multiples of 1/256, so w +- 1/128 is exact) of a
// layer run on a float64 input (so the layer computes in float64), against the tape's gradients.
inline void check_weight_gradients(layers::Layer& layer, const Tensor& x, double tol = 2e-3) {
  std::vector<Variable*> ws = layer.trainable_weights();
  std::vector<double> w;
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    const Tensor y = layer(x);
    w = keel_test::gradcheck_weights(static_cast<std::size_t>(y.size()));
    grads = tape.gradient(reduce_sum(y * constant(w, y.shape(), y.dtype())), ws);
  }
  REQUIRE(grads.size() == ws.size());
  const double eps = 1.0 / 128;
  for (std::size_t i = 0; i < ws.size(); ++i) {
    INFO("weight " << ws[i]->name());
    REQUIRE(grads[i].defined());
    const std::vector<double> g = grads[i].to_vector<double>();
    const std::vector<float> base = ws[i]->peek().to_vector<float>();
    double worst = 0;
    for (std::size_t j = 0; j < base.size(); ++j) {
      const auto eval = [&](double delta) {
        std::vector<float> v = base;
        v[j] = static_cast<float>(v[j] + delta);
        ws[i]->assign(constant(v, ws[i]->shape()));
        return keel_test::gradcheck_weighted_sum(layer(x), w);
      };
      const double numeric = (eval(eps) - eval(-eps)) / (2 * eps);
      worst = std::max(worst, std::abs(g[j] - numeric) / std::max(1.0, std::abs(numeric)));
    }
    ws[i]->assign(constant(base, ws[i]->shape()));
    CHECK(worst <= tol);
  }
}

// Every trainable weight gets a defined, non-zero gradient from a loss on the output.
inline void check_gradient_flow(layers::Layer& layer, const Tensor& x, bool training = false) {
  GradientTape tape;
  const Tensor y = layer(x, training);
  const auto ws = layer.trainable_weights();
  REQUIRE(!ws.empty());
  const auto grads = tape.gradient(reduce_sum(square(y)), ws);
  for (std::size_t i = 0; i < ws.size(); ++i) {
    INFO("weight " << ws[i]->name());
    REQUIRE(grads[i].defined());
    CHECK(grads[i].shape() == ws[i]->shape());
    CHECK(reduce_sum(abs(grads[i])).item<double>() > 0);
  }
}

}  // namespace keel_test
