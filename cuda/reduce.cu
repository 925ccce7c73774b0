// Reductions (sum, prod, max, min) and arg-reductions (argmax, argmin) over the trailing axes of
// a view whose kept axes come first.
//
// Two kernel shapes, chosen by the memory layout:
//  - warp per output: when the reduced axes are contiguous in memory (a row per output), the 32
//    lanes of a warp read the row together (coalesced) and meet with __shfl_down_sync;
//  - thread per output: otherwise (a column reduction, or rows too short for a warp), each
//    thread walks its output's elements; neighbouring threads read neighbouring outputs, which
//    are the neighbours in memory when the kept axes are the contiguous ones.
// When there are too few outputs to fill the GPU, each output's extent is split into chunks
// reduced by separate warps or threads into a scratch buffer of partials ([output][chunk]),
// and a second pass reduces the chunks.
//
// float16, bfloat16 and float32 accumulate in float32, float64 in double, integers in their own
// type with wrap-around, as the CPU does; max and min propagate NaN. Each thread keeps four
// accumulators and the lanes meet in a tree, so a float32 sum of n values has the error of
// sums of n / (4 * lanes * chunks) terms.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "cuda/element_types.cuh"

namespace keel::cuda {

namespace {

using namespace elem;

constexpr int kWarp = 32;
constexpr int kAccs = 4;                    // independent accumulators per thread
constexpr std::int64_t kWarpMinRow = 64;    // rows shorter than this go to a thread each
constexpr std::int64_t kWarpMinChunk = 32 * 64;  // elements per warp when rows are split
constexpr std::int64_t kThreadMinChunk = 64;     // elements per thread when columns are split
constexpr std::int64_t kMaxChunks = 8192;        // partials per output (the second pass reads them)

// ---- geometry ----------------------------------------------------------------------------------

// The kept axes (row-major over the outputs) and the reduced axes (row-major over an output's
// elements) of the input, each with its own strides.
struct ReduceGeom {
  int kept_rank = 0, red_rank = 0;
  bool kept_narrow = true, red_narrow = true;
  std::int64_t outer = 1;   // outputs
  std::int64_t extent = 1;  // elements per output
  std::int64_t kept_shape[kMaxDims] = {}, kept_strides[kMaxDims] = {};
  std::int64_t red_shape[kMaxDims] = {}, red_strides[kMaxDims] = {};

  __device__ __forceinline__ std::int64_t kept_offset(std::int64_t o) const {
    return strided_offset(o, kept_rank, kept_shape, kept_strides, kept_narrow);
  }
  __device__ __forceinline__ std::int64_t red_offset(std::int64_t r) const {
    return strided_offset(r, red_rank, red_shape, red_strides, red_narrow);
  }
};

// Appends axes [begin, end) of x to one group, dropping size-1 axes and merging contiguous ones.
void add_axes(const View& x, int begin, int end, int& rank, std::int64_t* shape, std::int64_t* strides,
              std::int64_t& count) {
  rank = 0;
  count = 1;
  for (int d = begin; d < end; ++d) {
    const std::int64_t n = x.shape[d];
    count *= n;
    if (n == 1) continue;
    if (rank > 0 && strides[rank - 1] == x.strides[d] * n) {
      shape[rank - 1] *= n;
      strides[rank - 1] = x.strides[d];
    } else {
      shape[rank] = n;
      strides[rank] = x.strides[d];
      ++rank;
    }
  }
}

ReduceGeom make_geom(const View& x, int kept) {
  ReduceGeom g;
  add_axes(x, 0, kept, g.kept_rank, g.kept_shape, g.kept_strides, g.outer);
  add_axes(x, kept, x.rank, g.red_rank, g.red_shape, g.red_strides, g.extent);
  constexpr auto kNarrow = static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
  g.kept_narrow = g.outer <= kNarrow;
  g.red_narrow = g.extent <= kNarrow;
  return g;
}

// The partials of a split pass: outer rows of `chunks` contiguous values.
ReduceGeom partial_geom(std::int64_t outer, std::int64_t chunks) {
  ReduceGeom g;
  g.outer = outer;
  g.extent = chunks;
  g.kept_rank = 1;
  g.kept_shape[0] = outer;
  g.kept_strides[0] = chunks;
  g.red_rank = 1;
  g.red_shape[0] = chunks;
  g.red_strides[0] = 1;
  constexpr auto kNarrow = static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
  g.kept_narrow = outer <= kNarrow;
  return g;
}

struct Plan {
  bool warp = false;       // a warp per (output, chunk), else a thread
  std::int64_t chunk = 1;  // elements of one output per warp or thread
  std::int64_t chunks = 1;
};

int multiprocessors(int device) {
  int n = 0;
  check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute", device);
  return std::max(n, 1);
}

Plan make_plan(const ReduceGeom& g, bool allow_split, int device) {
  Plan p;
  p.warp = g.red_rank >= 1 && g.red_strides[g.red_rank - 1] == 1 && g.extent >= kWarpMinRow;
  p.chunk = std::max<std::int64_t>(g.extent, 1);
  if (!allow_split) return p;
  // Enough warps or threads to keep every multiprocessor busy (2048 threads each).
  const std::int64_t sms = multiprocessors(device);
  const std::int64_t target = p.warp ? sms * (2048 / kWarp) : sms * 2048;
  const std::int64_t min_chunk = p.warp ? kWarpMinChunk : kThreadMinChunk;
  if (g.outer >= target || g.extent < 2 * min_chunk) return p;
  std::int64_t chunks = std::min({(g.extent + min_chunk - 1) / min_chunk, (target + g.outer - 1) / g.outer, kMaxChunks});
  if (chunks <= 1) return p;
  p.chunk = (g.extent + chunks - 1) / chunks;
  p.chunks = (g.extent + p.chunk - 1) / p.chunk;
  return p;
}

int blocks_for_plan(const ReduceGeom& g, const Plan& p, int device) {
  const std::int64_t items = g.outer * p.chunks;
  // A warp kernel needs 32 threads per item; the cap only keeps the product from overflowing
  // (blocks_for limits the grid to what fills the GPU anyway).
  return blocks_for(p.warp ? std::min<std::int64_t>(items, std::int64_t{1} << 40) * kWarp : items, device);
}

// ---- combining values --------------------------------------------------------------------------

template <class A>
__device__ __forceinline__ A identity(ReduceOp op) {
  using L = std::numeric_limits<A>;
  switch (op) {
    case ReduceOp::sum: return A(0);
    case ReduceOp::prod: return A(1);
    case ReduceOp::max: if constexpr (L::has_infinity) return -L::infinity(); else return L::lowest();
    case ReduceOp::min: if constexpr (L::has_infinity) return L::infinity(); else return L::max();
  }
  return A(0);
}

template <class A>
__device__ __forceinline__ A combine(ReduceOp op, A u, A v) {
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case ReduceOp::sum: return u + v;
      case ReduceOp::prod: return u * v;
      case ReduceOp::max: return v != v ? v : (u != u ? u : (u > v ? u : v));
      case ReduceOp::min: return v != v ? v : (u != u ? u : (u < v ? u : v));
    }
  } else {
    switch (op) {
      case ReduceOp::sum: return wrap_add(u, v);
      case ReduceOp::prod: return wrap_mul(u, v);
      case ReduceOp::max: return u > v ? u : v;
      case ReduceOp::min: return u < v ? u : v;
    }
  }
  return u;
}

template <class T>
__device__ __forceinline__ T shfl_down(T v, int delta) {
  if constexpr (sizeof(T) < sizeof(int)) {
    return static_cast<T>(__shfl_down_sync(0xFFFFFFFFu, static_cast<unsigned>(v), delta));
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return static_cast<T>(__shfl_down_sync(0xFFFFFFFFu, static_cast<long long>(v), delta));
  } else {
    return __shfl_down_sync(0xFFFFFFFFu, v, delta);
  }
}

// ---- reduce kernels ----------------------------------------------------------------------------
// Item (o, c) is chunk c of output o; its result goes to y[o * chunks + c] (y is the output
// itself when chunks == 1).

template <class In, class Out>
__global__ void __launch_bounds__(kThreads)
    reduce_warp_kernel(ReduceOp op, const In* x, ReduceGeom g, std::int64_t chunk, std::int64_t chunks, Out* y) {
  using A = Compute<In>;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t items = g.outer * chunks;
  const std::int64_t warps = thread_count() / kWarp;
  // The loop bound is the same for all lanes of a warp, so every shuffle has all 32 lanes.
  for (std::int64_t item = thread_index() / kWarp; item < items; item += warps) {
    const std::int64_t o = item / chunks, c = item - o * chunks;
    const std::int64_t base = g.kept_offset(o);
    const std::int64_t begin = c * chunk, end = std::min(g.extent, begin + chunk);
    A acc[kAccs];
#pragma unroll
    for (int k = 0; k < kAccs; ++k) acc[k] = identity<A>(op);
    // Lane l takes elements l, l + 32, ...; kAccs of them per step into separate accumulators
    // (fixed indices keep the accumulators in registers).
    const bool one_axis = g.red_rank == 1;  // the common case: no index arithmetic
    for (std::int64_t r = begin + lane; r < end; r += kAccs * kWarp) {
#pragma unroll
      for (int k = 0; k < kAccs; ++k) {
        const std::int64_t rk = r + k * kWarp;
        if (rk < end)
          acc[k] = combine(op, acc[k], Elem<In>::load(x, base + (one_axis ? rk : g.red_offset(rk))));
      }
    }
    A v = combine(op, combine(op, acc[0], acc[1]), combine(op, acc[2], acc[3]));
#pragma unroll
    for (int delta = kWarp / 2; delta > 0; delta /= 2) v = combine(op, v, shfl_down(v, delta));
    if (lane == 0) Elem<Out>::store(y, item, static_cast<Compute<Out>>(v));
  }
}

template <class In, class Out>
__global__ void __launch_bounds__(kThreads)
    reduce_thread_kernel(ReduceOp op, const In* x, ReduceGeom g, std::int64_t chunk, std::int64_t chunks, Out* y) {
  using A = Compute<In>;
  const std::int64_t items = g.outer * chunks;
  // Outputs vary fastest across threads, so a column reduction reads memory in order.
  for (std::int64_t item = thread_index(), step = thread_count(); item < items; item += step) {
    const std::int64_t c = item / g.outer, o = item - c * g.outer;
    const std::int64_t base = g.kept_offset(o);
    const std::int64_t begin = c * chunk, end = std::min(g.extent, begin + chunk);
    A acc[kAccs];
#pragma unroll
    for (int k = 0; k < kAccs; ++k) acc[k] = identity<A>(op);
    const bool one_axis = g.red_rank <= 1;
    const std::int64_t s = g.red_rank == 1 ? g.red_strides[0] : 0;
    for (std::int64_t r = begin; r < end; r += kAccs) {
#pragma unroll
      for (int k = 0; k < kAccs; ++k) {
        const std::int64_t rk = r + k;
        if (rk < end)
          acc[k] = combine(op, acc[k], Elem<In>::load(x, base + (one_axis ? rk * s : g.red_offset(rk))));
      }
    }
    const A v = combine(op, combine(op, acc[0], acc[1]), combine(op, acc[2], acc[3]));
    Elem<Out>::store(y, o * chunks + c, static_cast<Compute<Out>>(v));
  }
}

template <class In, class Out>
void launch_reduce(ReduceOp op, const In* x, const ReduceGeom& g, const Plan& p, Out* y, int device) {
  const int blocks = blocks_for_plan(g, p, device);
  if (p.warp)
    reduce_warp_kernel<In, Out><<<blocks, kThreads, 0, stream(device)>>>(op, x, g, p.chunk, p.chunks, y);
  else
    reduce_thread_kernel<In, Out><<<blocks, kThreads, 0, stream(device)>>>(op, x, g, p.chunk, p.chunks, y);
  check_launch(p.warp ? "reduce (warp per output)" : "reduce (thread per output)", device);
}

// S: the input's and output's storage type; A: the accumulator's, which the partials keep.
template <class S>
void run_reduce(ReduceOp op, const View& x, const ReduceGeom& g, const View& out, int device) {
  using A = Compute<S>;
  const Plan p = make_plan(g, true, device);
  const auto* xp = static_cast<const S*>(x.data);
  auto* yp = static_cast<S*>(out.data);
  if (p.chunks == 1) {
    launch_reduce<S, S>(op, xp, g, p, yp, device);
    return;
  }
  Scratch partial(static_cast<std::size_t>(g.outer * p.chunks) * sizeof(A), device);
  launch_reduce<S, A>(op, xp, g, p, partial.as<A>(), device);
  const ReduceGeom g2 = partial_geom(g.outer, p.chunks);
  launch_reduce<A, S>(op, partial.as<A>(), g2, make_plan(g2, false, device), yp, device);
}

// ---- arg-reduce kernels ------------------------------------------------------------------------

// Whether candidate (v, i) beats (bv, bi): NaN beats numbers, then the larger (smaller) value,
// then the smaller index; i < 0 marks "no candidate yet". The order is total, so any grouping
// of the comparisons finds what the CPU's left-to-right scan finds: the first NaN if there is
// one, else the first index of the extreme value.
template <class A>
__device__ __forceinline__ bool beats(bool is_max, A v, std::int64_t i, A bv, std::int64_t bi) {
  if (i < 0) return false;
  if (bi < 0) return true;
  const bool vn = is_nan(v), bn = is_nan(bv);
  if (vn || bn) return vn && (!bn || i < bi);
  if (v == bv) return i < bi;
  return is_max ? v > bv : v < bv;
}

// idx == nullptr: x is the input and an element's index is its position r along the axis;
// otherwise x and idx are the partials (value, index) of a split first pass. Results go to
// (pv, pi) at o * chunks + c; pv is nullptr in the final pass.
template <class In>
__global__ void __launch_bounds__(kThreads)
    arg_warp_kernel(bool is_max, const In* x, const std::int64_t* idx, ReduceGeom g, std::int64_t chunk,
                    std::int64_t chunks, Compute<In>* pv, std::int64_t* pi) {
  using A = Compute<In>;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t items = g.outer * chunks;
  const std::int64_t warps = thread_count() / kWarp;
  const std::int64_t s = g.red_rank == 1 ? g.red_strides[0] : 0;
  for (std::int64_t item = thread_index() / kWarp; item < items; item += warps) {
    const std::int64_t o = item / chunks, c = item - o * chunks;
    const std::int64_t base = g.kept_offset(o);
    const std::int64_t begin = c * chunk, end = std::min(g.extent, begin + chunk);
    A best = A(0);
    std::int64_t best_i = -1;
    for (std::int64_t r = begin + lane; r < end; r += kWarp) {
      const std::int64_t off = base + r * s;
      const A v = Elem<In>::load(x, off);
      const std::int64_t i = idx ? idx[off] : r;
      if (beats(is_max, v, i, best, best_i)) {
        best = v;
        best_i = i;
      }
    }
#pragma unroll
    for (int delta = kWarp / 2; delta > 0; delta /= 2) {
      const A v = shfl_down(best, delta);
      const std::int64_t i = shfl_down(best_i, delta);
      if (beats(is_max, v, i, best, best_i)) {
        best = v;
        best_i = i;
      }
    }
    if (lane == 0) {
      if (pv) pv[item] = best;
      pi[item] = best_i;
    }
  }
}

template <class In>
__global__ void __launch_bounds__(kThreads)
    arg_thread_kernel(bool is_max, const In* x, const std::int64_t* idx, ReduceGeom g, std::int64_t chunk,
                      std::int64_t chunks, Compute<In>* pv, std::int64_t* pi) {
  using A = Compute<In>;
  const std::int64_t items = g.outer * chunks;
  const std::int64_t s = g.red_rank == 1 ? g.red_strides[0] : 0;
  for (std::int64_t item = thread_index(), step = thread_count(); item < items; item += step) {
    const std::int64_t c = item / g.outer, o = item - c * g.outer;
    const std::int64_t base = g.kept_offset(o);
    const std::int64_t begin = c * chunk, end = std::min(g.extent, begin + chunk);
    A best = A(0);
    std::int64_t best_i = -1;
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t off = base + r * s;
      const A v = Elem<In>::load(x, off);
      const std::int64_t i = idx ? idx[off] : r;
      if (beats(is_max, v, i, best, best_i)) {
        best = v;
        best_i = i;
      }
    }
    const std::int64_t at = o * chunks + c;
    if (pv) pv[at] = best;
    pi[at] = best_i;
  }
}

template <class In>
void launch_arg(bool is_max, const In* x, const std::int64_t* idx, const ReduceGeom& g, const Plan& p,
                Compute<In>* pv, std::int64_t* pi, int device) {
  const int blocks = blocks_for_plan(g, p, device);
  if (p.warp)
    arg_warp_kernel<In><<<blocks, kThreads, 0, stream(device)>>>(is_max, x, idx, g, p.chunk, p.chunks, pv, pi);
  else
    arg_thread_kernel<In><<<blocks, kThreads, 0, stream(device)>>>(is_max, x, idx, g, p.chunk, p.chunks, pv, pi);
  check_launch(is_max ? "argmax" : "argmin", device);
}

template <class S>
void run_arg(bool is_max, const View& x, const ReduceGeom& g, const View& out, int device) {
  using A = Compute<S>;
  const Plan p = make_plan(g, true, device);
  const auto* xp = static_cast<const S*>(x.data);
  auto* yp = static_cast<std::int64_t*>(out.data);
  if (p.chunks == 1) {
    launch_arg<S>(is_max, xp, nullptr, g, p, nullptr, yp, device);
    return;
  }
  const auto items = static_cast<std::size_t>(g.outer * p.chunks);
  Scratch values(items * sizeof(A), device), indices(items * sizeof(std::int64_t), device);
  launch_arg<S>(is_max, xp, nullptr, g, p, values.as<A>(), indices.as<std::int64_t>(), device);
  const ReduceGeom g2 = partial_geom(g.outer, p.chunks);
  launch_arg<A>(is_max, values.as<A>(), indices.as<std::int64_t>(), g2, make_plan(g2, false, device), nullptr, yp,
                device);
}

double identity_value(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0.0;
    case ReduceOp::prod: return 1.0;
    case ReduceOp::max: return -std::numeric_limits<double>::infinity();  // lowest for integers
    case ReduceOp::min: return std::numeric_limits<double>::infinity();   // max for integers
  }
  return 0.0;
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "reduce_sum";
    case ReduceOp::prod: return "reduce_prod";
    case ReduceOp::max: return "reduce_max";
    case ReduceOp::min: return "reduce_min";
  }
  return "reduce";
}

// Checks x and out and returns the geometry; out must hold one value per kept position.
ReduceGeom checked_geom(const View& x, int kept, const View& out, DType out_dtype, const char* op) {
  check_rank(x, op);
  check_rank(out, op);
  if (kept < 0 || kept > x.rank)
    throw ValueError(std::string(op) + ": " + std::to_string(kept) + " kept axes of a view of rank " +
                     std::to_string(x.rank));
  if (out.dtype != out_dtype)
    throw DTypeError(std::string(op) + ": output " + describe(out) + " should be " + std::string(name(out_dtype)));
  if (x.device != out.device)
    throw DeviceError(std::string(op) + ": input " + describe(x) + " and output " + describe(out) +
                      " are on different devices");
  if (!is_contiguous(out)) throw DeviceError(std::string(op) + ": the output view must be contiguous");
  const ReduceGeom g = make_geom(x, kept);
  if (numel(out) != g.outer)
    throw ShapeError(std::string(op) + ": output " + describe(out) + " does not hold the " + std::to_string(g.outer) +
                     " results of input " + describe(x) + " with " + std::to_string(kept) + " kept axes");
  return g;
}

}  // namespace

void reduce(ReduceOp op, const View& x, int kept, const View& out) {
  const char* opname = reduce_name(op);
  const ReduceGeom g = checked_geom(x, kept, out, x.dtype, opname);
  if (g.outer == 0) return;
  if (g.extent == 0) {  // nothing to reduce: every output is the identity
    fill(out, identity_value(op));
    return;
  }
  const int device = out.device;
  use_device(device);
  const bool ok = dispatch_numeric(x.dtype, true, [&](auto tag) {
    using S = typename decltype(tag)::type;
    run_reduce<S>(op, x, g, out, device);
  });
  if (!ok) unsupported(opname, x, "a float or integer dtype");
}

void arg_reduce(ArgReduceOp op, const View& x, const View& out) {
  const bool is_max = op == ArgReduceOp::argmax;
  const char* opname = is_max ? "argmax" : "argmin";
  if (x.rank < 1) throw ValueError(std::string(opname) + ": the input view has no axis to reduce");
  const ReduceGeom g = checked_geom(x, x.rank - 1, out, DType::int64, opname);
  if (g.outer == 0) return;
  const int device = out.device;
  use_device(device);
  if (g.extent == 0) {  // an empty axis: index 0, as the CPU's scan leaves it
    check(cudaMemsetAsync(out.data, 0, static_cast<std::size_t>(g.outer) * sizeof(std::int64_t), stream(device)),
          "argmax (cudaMemsetAsync)", device);
    return;
  }
  const bool ok = dispatch_numeric(x.dtype, true, [&](auto tag) {
    using S = typename decltype(tag)::type;
    run_arg<S>(is_max, x, g, out, device);
  });
  if (!ok) unsupported(opname, x, "a float or integer dtype");
}

}  // namespace keel::cuda
