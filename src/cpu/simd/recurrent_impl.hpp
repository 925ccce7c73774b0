#pragma once
// The LSTM and GRU cells' kernels (cpu/kernels.hpp's lstm_gates, lstm_gate_grads, gru_gates and
// gru_gate_grads) written once against xsimd's batch type; each arch TU of src/cpu/simd/
// instantiates them through kernels_impl.hpp. A step's gates run as one pass per row after the
// recurrent product, every value through the same batch functions as the unary and binary
// kernels, so the bits are those of the separate ops.
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>

#include "cpu/simd/kernels_math_impl.hpp"

namespace keel::cpu::simd_impl {

// The LSTM cell after its recurrent product (cpu/kernels.hpp's lstm_gates): each batch of units
// takes its four gates' pre-activations, activates them, and gives c', tanh(c') and h' while all
// of it is in registers. The arithmetic is the unary and binary kernels', in the order the
// separate passes took: a + (x + bias), sigmoid_batch, xsimd::tanh, f*c + i*g, o * tanh(c').
template <class B>
struct LstmGateBatch {
  B i, f, g, o, c_new, tanh_c, h_new;
  // z: the pre-activations of i, f, g, o; c: the state before.
  [[gnu::always_inline]] LstmGateBatch(B zi, B zf, B zg, B zo, B c)
      : i(sigmoid_batch(zi)), f(sigmoid_batch(zf)), g(xsimd::tanh(zg)), o(sigmoid_batch(zo)),
        c_new(f * c + i * g), tanh_c(xsimd::tanh(c_new)), h_new(o * tanh_c) {}
};

// The units past the last whole batch (`full`) of every row, W at a time: gather(lane, row, unit)
// for each, then flush(n, rows, units) for each W of them (and for the n < W left at the end).
template <std::int64_t W, class Gather, class Flush>
[[gnu::always_inline]] inline void partial_units(std::int64_t rows, std::int64_t u, std::int64_t full, Gather&& gather,
                                                 Flush&& flush) {
  std::int64_t row[W], unit[W];
  int n = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = full; j < u; ++j) {
      gather(n, r, j);
      row[n] = r;
      unit[n] = j;
      if (++n == W) {
        flush(n, row, unit);
        n = 0;
      }
    }
  if (n > 0) flush(n, row, unit);
}

template <class A, class T>
void lstm_gates(std::int64_t rows, std::int64_t u, T* a, const T* x, std::int64_t xld, const T* bias, const T* c,
                std::int64_t cld, T* c_new, T* tanh_c, T* h_new) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const std::int64_t full = u / W * W;
  const auto z = [&](const T* ar, const T* xr, std::int64_t at) {
    B in = B::load_unaligned(xr + at);
    if (bias != nullptr) in = in + B::load_unaligned(bias + at);
    return B::load_unaligned(ar + at) + in;
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    T* ar = a + r * 4 * u;
    const T* xr = x + r * xld;
    for (std::int64_t j = 0; j < full; j += W) {
      const LstmGateBatch<B> v(z(ar, xr, j), z(ar, xr, u + j), z(ar, xr, 2 * u + j), z(ar, xr, 3 * u + j),
                               B::load_unaligned(c + r * cld + j));
      v.i.store_unaligned(ar + j);
      v.f.store_unaligned(ar + u + j);
      v.g.store_unaligned(ar + 2 * u + j);
      v.o.store_unaligned(ar + 3 * u + j);
      v.c_new.store_unaligned(c_new + r * u + j);
      v.tanh_c.store_unaligned(tanh_c + r * u + j);
      v.h_new.store_unaligned(h_new + r * u + j);
    }
  }
  if (full == u) return;
  // The units past the last whole batch (u = 50: 2 of every 16), of all rows together: gathered
  // into whole batches (the sums in scalar code, which rounds as the batch adds do), then
  // scattered back.
  alignas(64) T in[5][W], out[7][W];
  for (auto& lane : in) std::fill(lane, lane + W, T(0));
  partial_units<W>(
      rows, u, full,
      [&](int l, std::int64_t r, std::int64_t j) {
        const T* ar = a + r * 4 * u;
        const T* xr = x + r * xld;
        for (int g = 0; g < 4; ++g) {
          const std::int64_t at = g * u + j;
          in[g][l] = ar[at] + (bias != nullptr ? xr[at] + bias[at] : xr[at]);
        }
        in[4][l] = c[r * cld + j];
      },
      [&](int n, const std::int64_t* row, const std::int64_t* unit) {
        const LstmGateBatch<B> v(B::load_aligned(in[0]), B::load_aligned(in[1]), B::load_aligned(in[2]),
                                 B::load_aligned(in[3]), B::load_aligned(in[4]));
        const B* outs[7] = {&v.i, &v.f, &v.g, &v.o, &v.c_new, &v.tanh_c, &v.h_new};
        for (int k = 0; k < 7; ++k) outs[k]->store_aligned(out[k]);
        for (int l = 0; l < n; ++l) {
          T* ar = a + row[l] * 4 * u;
          for (int g = 0; g < 4; ++g) ar[g * u + unit[l]] = out[g][l];
          c_new[row[l] * u + unit[l]] = out[4][l];
          tanh_c[row[l] * u + unit[l]] = out[5][l];
          h_new[row[l] * u + unit[l]] = out[6][l];
        }
      });
}

// lstm_gates' gradient (cpu/kernels.hpp's lstm_gate_grads): plain arithmetic, so the units past
// the last whole batch take the same formula in scalar code, which rounds as the batches do.
template <class A, class T>
void lstm_gate_grads(std::int64_t rows, std::int64_t u, const T* act, const T* tanh_c, const T* dh, std::int64_t dhld,
                     const T* dc, std::int64_t dcld, const T* c, std::int64_t cld, T* dz, T* dc_prev) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const auto step = [](auto i, auto f, auto g, auto o, auto tc, auto dhv, auto dcv, auto cv, auto one, auto put) {
    const auto dct = dcv + dhv * o * (one - tc * tc);
    put(0, dct * g * i * (one - i));
    put(1, dct * cv * f * (one - f));
    put(2, dct * i * (one - g * g));
    put(3, dhv * tc * o * (one - o));
    put(4, dct * f);
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* ar = act + r * 4 * u;
    const T* tr = tanh_c + r * u;
    const T* dhr = dh + r * dhld;
    const T* dcr = dc + r * dcld;
    const T* cr = c + r * cld;
    T* dzr = dz + r * 4 * u;
    T* dcp = dc_prev + r * u;
    std::int64_t j = 0;
    for (; j + W <= u; j += W) {
      const auto ld = [&](const T* p) { return B::load_unaligned(p + j); };
      step(ld(ar), ld(ar + u), ld(ar + 2 * u), ld(ar + 3 * u), ld(tr), ld(dhr), ld(dcr), ld(cr), B(T(1)),
           [&](int k, const B& v) { v.store_unaligned(k < 4 ? dzr + k * u + j : dcp + j); });
    }
    for (; j < u; ++j)
      step(ar[j], ar[u + j], ar[2 * u + j], ar[3 * u + j], tr[j], dhr[j], dcr[j], cr[j], T(1),
           [&](int k, T v) { (k < 4 ? dzr[k * u + j] : dcp[j]) = v; });
  }
}

// The GRU's gates (cpu/kernels.hpp's gru_gates) as lstm_gates does the LSTM's: a batch of units
// in registers, the partial last batch of all rows gathered. pz, pr: the z and r
// pre-activations; xh: x_h + bi_h; rec: in_h + br_h.
template <class B>
struct GruGateBatch {
  B z, r, cand, h_new;
  [[gnu::always_inline]] GruGateBatch(B pz, B pr, B xh, B rec, B h)
      : z(sigmoid_batch(pz)), r(sigmoid_batch(pr)), cand(xsimd::tanh(xh + r * rec)),
        h_new(z * h + (B(typename B::value_type(1)) - z) * cand) {}
};

template <class A, class T>
void gru_gates(std::int64_t rows, std::int64_t u, const T* in, const T* x, std::int64_t xld, const T* bi,
               const T* br, const T* h, T* zr, T* rec_h, T* cand, T* h_new) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const std::int64_t full = u / W * W;
  for (std::int64_t q = 0; q < rows; ++q) {
    const T* inq = in + q * 3 * u;
    const T* xq = x + q * xld;
    for (std::int64_t j = 0; j < full; j += W) {
      const auto ld = [&](const T* p, std::int64_t at) { return B::load_unaligned(p + at + j); };
      const B rec = ld(inq, 2 * u) + ld(br, 2 * u);
      const GruGateBatch<B> v(((ld(xq, 0) + ld(inq, 0)) + ld(bi, 0)) + ld(br, 0),
                              ((ld(xq, u) + ld(inq, u)) + ld(bi, u)) + ld(br, u), ld(xq, 2 * u) + ld(bi, 2 * u), rec,
                              ld(h, q * u));
      v.z.store_unaligned(zr + q * 2 * u + j);
      v.r.store_unaligned(zr + q * 2 * u + u + j);
      rec.store_unaligned(rec_h + q * u + j);
      v.cand.store_unaligned(cand + q * u + j);
      v.h_new.store_unaligned(h_new + q * u + j);
    }
  }
  if (full == u) return;
  alignas(64) T lanes[5][W], out[4][W];
  for (auto& lane : lanes) std::fill(lane, lane + W, T(0));
  partial_units<W>(
      rows, u, full,
      [&](int l, std::int64_t q, std::int64_t j) {
        const T* inq = in + q * 3 * u;
        const T* xq = x + q * xld;
        lanes[0][l] = ((xq[j] + inq[j]) + bi[j]) + br[j];
        lanes[1][l] = ((xq[u + j] + inq[u + j]) + bi[u + j]) + br[u + j];
        lanes[2][l] = xq[2 * u + j] + bi[2 * u + j];
        lanes[3][l] = inq[2 * u + j] + br[2 * u + j];
        lanes[4][l] = h[q * u + j];
      },
      [&](int n, const std::int64_t* row, const std::int64_t* unit) {
        const GruGateBatch<B> v(B::load_aligned(lanes[0]), B::load_aligned(lanes[1]), B::load_aligned(lanes[2]),
                                B::load_aligned(lanes[3]), B::load_aligned(lanes[4]));
        v.z.store_aligned(out[0]);
        v.r.store_aligned(out[1]);
        v.cand.store_aligned(out[2]);
        v.h_new.store_aligned(out[3]);
        for (int l = 0; l < n; ++l) {
          const std::int64_t q = row[l], j = unit[l];
          zr[q * 2 * u + j] = out[0][l];
          zr[q * 2 * u + u + j] = out[1][l];
          rec_h[q * u + j] = lanes[3][l];
          cand[q * u + j] = out[2][l];
          h_new[q * u + j] = out[3][l];
        }
      });
}

// gru_gates' gradient (cpu/kernels.hpp's gru_gate_grads), plain arithmetic as lstm_gate_grads.
template <class A, class T>
void gru_gate_grads(std::int64_t rows, std::int64_t u, const T* zr, const T* rec_h, const T* cand, const T* h,
                    std::int64_t hld, const T* d, std::int64_t dld, T* dX, T* dI, T* dh_direct) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const auto step = [](auto z, auto r, auto hh, auto rec, auto hv, auto dv, auto one, auto put) {
    const auto dz_pre = dv * (hv - hh) * z * (one - z);
    const auto dh_pre = dv * (one - z) * (one - hh * hh);
    const auto dr_pre = dh_pre * rec * r * (one - r);
    put(0, dz_pre, dz_pre);
    put(1, dr_pre, dr_pre);
    put(2, dh_pre, dh_pre * r);
    put(3, dv * z, dv * z);
  };
  for (std::int64_t q = 0; q < rows; ++q) {
    const T* zq = zr + q * 2 * u;
    const T* cq = cand + q * u;
    const T* rq = rec_h + q * u;
    const T* hq = h + q * hld;
    const T* dq = d + q * dld;
    T* dxq = dX + q * 3 * u;
    T* diq = dI + q * 3 * u;
    T* ddq = dh_direct + q * u;
    std::int64_t j = 0;
    for (; j + W <= u; j += W) {
      const auto ld = [&](const T* p) { return B::load_unaligned(p + j); };
      step(ld(zq), ld(zq + u), ld(cq), ld(rq), ld(hq), ld(dq), B(T(1)), [&](int k, const B& x, const B& i) {
        if (k < 3) {
          x.store_unaligned(dxq + k * u + j);
          i.store_unaligned(diq + k * u + j);
        } else {
          x.store_unaligned(ddq + j);
        }
      });
    }
    for (; j < u; ++j)
      step(zq[j], zq[u + j], cq[j], rq[j], hq[j], dq[j], T(1), [&](int k, T x, T i) {
        if (k < 3) {
          dxq[k * u + j] = x;
          diq[k * u + j] = i;
        } else {
          ddq[j] = x;
        }
      });
  }
}

}  // namespace keel::cpu::simd_impl
