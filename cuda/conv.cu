// conv2d and depthwise_conv2d on the GPU with cuDNN's convolution API (cudnnConvolutionForward,
// ...BackwardData, ...BackwardFilter), under the CPU kernels' contract (src/cpu/conv.hpp, core/window.hpp): NHWC
// images, kernels [kh, kw, in, out], TensorFlow's padding given by the geometry.
//
// What cuDNN needs that keel's layout does not give directly, made in scratch buffers by one
// strided copy kernel (conv_layout.cuh):
// * Filters: cuDNN wants the output channel first ([o, kh, kw, c] with NHWC images), keel stores
//   it last ([kh, kw, c, o]). The kernel is permuted before each call and the filter gradient
//   permuted back after it (filters are small next to the images).
// * Padding: cuDNN pads both sides of an axis equally, TensorFlow's "same" puts the odd row
//   after. Symmetric padding p reproduces a geometry whenever cuDNN's output size
//   floor((h + 2p - k_eff) / s) + 1 is ho, i.e. 0 <= p - pad_after < s (rows left over past the
//   last window are never read). Otherwise the image is copied into a zero-filled buffer of
//   exactly (ho-1)*s + k_eff rows and columns and convolved without padding; the input gradient
//   is computed in such a buffer too and cropped.
// * float64: cuDNN's NHWC kernels do not reliably cover double precision, so float64 runs in
//   NCHW (images and filters permuted on the way in and out). float64 on a GPU is for checking,
//   not for speed. A float32 problem for which cuDNN offers no NHWC algorithm takes the same
//   NCHW route (decided once per problem).
// Depthwise convolution is a grouped convolution with one group per input channel: group ci
// reads channel ci and writes output channels ci*m .. ci*m + m-1, which is keel's channel
// order c*m + j, and its filter is [c*m, kh, kw, 1].
//
// Each (direction, geometry, dtype, math mode) picks its algorithm once, by timing the
// candidates with cudnnFind*AlgorithmEx on the first call's buffers, and caches the choice.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cuda/conv_layout.cuh"
#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

// The convolution API is deprecated in cuDNN 9 in favour of the graph API but fully supported;
// keep any deprecation warning (cuDNN only emits them under CUDNN_WARN_DEPRECATED) out of this
// file's build.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
#if defined(__NVCC__)
#pragma nv_diag_suppress 1444
#pragma nv_diag_suppress 1215
#endif

namespace keel::cuda {

namespace {

using i64 = std::int64_t;
using namespace conv_layout;

// ---- descriptors --------------------------------------------------------------------------------------

// RAII owners of cuDNN descriptors. Creation is checked; destruction cannot fail usefully (and
// must not throw), so its status is dropped.
template <class Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
struct Descriptor {
  Handle d = nullptr;
  Descriptor(int device, const char* what) { check(Create(&d), what, device); }
  ~Descriptor() {
    if (d) Destroy(d);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};
struct TensorDesc : Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> {
  explicit TensorDesc(int device) : Descriptor(device, "cudnnCreateTensorDescriptor") {}
};
struct FilterDesc : Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> {
  explicit FilterDesc(int device) : Descriptor(device, "cudnnCreateFilterDescriptor") {}
};
struct ConvDesc
    : Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor> {
  explicit ConvDesc(int device) : Descriptor(device, "cudnnCreateConvolutionDescriptor") {}
};

enum class Direction : int { forward, backward_data, backward_filter };

// cuDNN found no algorithm for a problem in the layout tried: the caller retries in NCHW.
struct NoAlgorithm : DeviceError {
  using DeviceError::DeviceError;
};

// One convolution as cuDNN sees it: the (possibly padded) input, the output, the filter, in one
// layout, with symmetric padding.
struct Problem {
  DType dtype;
  bool nchw;         // float64: NCHW images and [o, cg, kh, kw] filters; else NHWC and [o, kh, kw, cg]
  i64 n, h, w, c;    // cuDNN's input (after any explicit padding)
  i64 o, ho, wo;     // output
  i64 kh, kw, sh, sw, dh, dw;
  i64 ph, pw;        // symmetric padding
  i64 groups;        // 1, or c for depthwise
  bool padded;       // the input was copied into a padded buffer (ph = pw = 0)
  i64 pad_top, pad_left;  // the geometry's padding before, for that copy
  i64 orig_h, orig_w;     // the geometry's input size
};

// Whether symmetric padding `before` reproduces one axis of the geometry (see the file comment).
bool symmetric_ok(i64 in, i64 out, i64 k, i64 stride, i64 dilation, i64 before) {
  const i64 after = (out - 1) * stride + (k - 1) * dilation + 1 - in - before;
  return before - after >= 0 && before - after < stride;
}

Problem make_problem(DType dtype, const WindowGeom& g, i64 groups, bool nchw) {
  Problem p{};
  p.dtype = dtype;
  p.nchw = nchw;
  p.n = g.n;
  p.c = g.c;
  p.o = g.o;
  p.ho = g.ho;
  p.wo = g.wo;
  p.kh = g.kh;
  p.kw = g.kw;
  p.sh = g.sh;
  p.sw = g.sw;
  p.dh = g.dh;
  p.dw = g.dw;
  p.groups = groups;
  p.pad_top = g.pad_top;
  p.pad_left = g.pad_left;
  p.orig_h = g.h;
  p.orig_w = g.w;
  p.padded = !(symmetric_ok(g.h, g.ho, g.kh, g.sh, g.dh, g.pad_top) &&
               symmetric_ok(g.w, g.wo, g.kw, g.sw, g.dw, g.pad_left));
  if (p.padded) {
    p.h = (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1;
    p.w = (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    p.ph = p.pw = 0;
  } else {
    p.h = g.h;
    p.w = g.w;
    p.ph = g.pad_top;
    p.pw = g.pad_left;
  }
  return p;
}

cudnnDataType_t cudnn_type(DType dtype) {
  return dtype == DType::float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// float64 computes in double; float32 in plain FMA arithmetic unless TF32 is enabled (cuDNN's
// default math would allow TF32 tensor cores for float32, unlike the CPU). TF32 is asked for
// with the default math, not CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: that one also lets cuDNN
// convert float32 data down to float16.
cudnnMathType_t requested_math(DType dtype) {
  if (dtype == DType::float64) return CUDNN_DEFAULT_MATH;
  return tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

int as_int(i64 v, const char* op) {
  if (v < 0 || v > INT_MAX)
    throw DeviceError(std::string(op) + ": a dimension of " + std::to_string(v) +
                      " exceeds cuDNN's 32-bit sizes");
  return static_cast<int>(v);
}

// The descriptors of one problem.
struct Descriptors {
  TensorDesc x, y;
  FilterDesc f;
  ConvDesc conv;
  Descriptors(const Problem& p, const char* op, int device) : x(device), y(device), f(device), conv(device) {
    const cudnnTensorFormat_t format = p.nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
    const cudnnDataType_t type = cudnn_type(p.dtype);
    check(cudnnSetTensor4dDescriptor(x.d, format, type, as_int(p.n, op), as_int(p.c, op),
                                     as_int(p.h, op), as_int(p.w, op)),
          "cudnnSetTensor4dDescriptor (input)", device);
    check(cudnnSetTensor4dDescriptor(y.d, format, type, as_int(p.n, op), as_int(p.o, op),
                                     as_int(p.ho, op), as_int(p.wo, op)),
          "cudnnSetTensor4dDescriptor (output)", device);
    check(cudnnSetFilter4dDescriptor(f.d, type, format, as_int(p.o, op), as_int(p.c / p.groups, op),
                                     as_int(p.kh, op), as_int(p.kw, op)),
          "cudnnSetFilter4dDescriptor", device);
    check(cudnnSetConvolution2dDescriptor(conv.d, as_int(p.ph, op), as_int(p.pw, op),
                                          as_int(p.sh, op), as_int(p.sw, op), as_int(p.dh, op),
                                          as_int(p.dw, op), CUDNN_CROSS_CORRELATION, type),
          "cudnnSetConvolution2dDescriptor", device);
    if (p.groups != 1)
      check(cudnnSetConvolutionGroupCount(conv.d, as_int(p.groups, op)),
            "cudnnSetConvolutionGroupCount", device);
    check(cudnnSetConvolutionMathType(conv.d, requested_math(p.dtype)),
          "cudnnSetConvolutionMathType", device);
  }
};

// ---- algorithm choice ----------------------------------------------------------------------------------

struct Choice {
  int algo;
  cudnnMathType_t math;
  std::size_t workspace;
};

using Key = std::array<i64, 22>;

Key key_of(const Problem& p, Direction dir, bool aligned, int device) {
  return {static_cast<i64>(dir), static_cast<i64>(p.dtype), static_cast<i64>(requested_math(p.dtype)),
          device, p.n, p.h, p.w, p.c, p.o, p.ho, p.wo, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw,
          p.ph, p.pw, p.groups, aligned ? 1 : 0, p.nchw ? 1 : 0};
}

std::mutex g_cache_mutex;
std::map<Key, Choice>& cache() {
  static std::map<Key, Choice> choices;
  return choices;
}

// Device pointers the caller handed in may sit at any element offset of their allocation; an
// algorithm timed on 16-byte aligned buffers is not reused for unaligned ones.
bool aligned16(const void* a, const void* b, const void* c) {
  const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
                    reinterpret_cast<std::uintptr_t>(c);
  return (bits & 15u) == 0;
}

// The most workspace any algorithm of this direction asks for, capped: the algorithm search
// skips candidates that need more than it is given.
constexpr std::size_t kMaxSearchWorkspace = std::size_t(1) << 30;

std::size_t largest_workspace(Direction dir, const Descriptors& d, cudnnHandle_t handle, int device) {
  int count = 0;
  switch (dir) {
    case Direction::forward:
      check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count),
            "cudnnGetConvolutionForwardAlgorithmMaxCount", device);
      break;
    case Direction::backward_data:
      check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count),
            "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", device);
      break;
    case Direction::backward_filter:
      check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count),
            "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", device);
      break;
  }
  std::size_t most = 0;
  for (int a = 0; a < count; ++a) {
    std::size_t size = 0;
    cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
    switch (dir) {
      case Direction::forward:
        status = cudnnGetConvolutionForwardWorkspaceSize(
            handle, d.x.d, d.f.d, d.conv.d, d.y.d, static_cast<cudnnConvolutionFwdAlgo_t>(a), &size);
        break;
      case Direction::backward_data:
        status = cudnnGetConvolutionBackwardDataWorkspaceSize(
            handle, d.f.d, d.y.d, d.conv.d, d.x.d, static_cast<cudnnConvolutionBwdDataAlgo_t>(a), &size);
        break;
      case Direction::backward_filter:
        status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            handle, d.x.d, d.y.d, d.conv.d, d.f.d, static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), &size);
        break;
    }
    // An algorithm that does not support this problem reports an error here: it is not a
    // candidate, not a failure.
    if (status == CUDNN_STATUS_SUCCESS) most = std::max(most, size);
  }
  return std::min(most, kMaxSearchWorkspace);
}

// Workspace for the search: as much as asked for, or less (down to none) when the device is
// short of memory.
struct SearchWorkspace {
  std::size_t size = 0;
  std::unique_ptr<Scratch> scratch;
  SearchWorkspace(std::size_t wanted, int device) {
    constexpr std::size_t kFallback = std::size_t(64) << 20;
    for (std::size_t s = wanted; s > 0; s = s > kFallback ? kFallback : 0) {
      try {
        scratch = std::make_unique<Scratch>(s, device);
        size = s;
        return;
      } catch (const DeviceError&) {
        // out of memory: try a smaller workspace
      }
    }
  }
  void* get() const { return scratch ? scratch->get() : nullptr; }
};

std::string describe(const Problem& p, Direction dir) {
  const char* what = dir == Direction::forward         ? "forward"
                     : dir == Direction::backward_data ? "backward data"
                                                       : "backward filter";
  return std::string(what) + " of input [" + std::to_string(p.n) + "," + std::to_string(p.h) + "," +
         std::to_string(p.w) + "," + std::to_string(p.c) + "], filter [" + std::to_string(p.kh) + "," +
         std::to_string(p.kw) + "," + std::to_string(p.c / p.groups) + "," + std::to_string(p.o) +
         "], groups " + std::to_string(p.groups) + ", " + std::string(name(p.dtype));
}

// Times the candidates on the call's own buffers (their outputs are overwritten by the real
// call afterwards) and returns the fastest that ran.
// in = x (forward, backward_filter) or dy (backward_data); other = filter (forward,
// backward_data) or dy (backward_filter); out = the direction's output.
Choice search(const Problem& p, Direction dir, const Descriptors& d, const void* in,
              const void* other, void* out, const char* op, int device) {
  const cudnnHandle_t handle = cudnn(device);
  SearchWorkspace ws(largest_workspace(dir, d, handle, device), device);
  constexpr int kMaxResults = 16;
  int returned = 0;
  Choice best{-1, requested_math(p.dtype), 0};
  auto pick = [&](const auto* results) {
    for (int i = 0; i < returned; ++i)
      if (results[i].status == CUDNN_STATUS_SUCCESS) {
        best.algo = static_cast<int>(results[i].algo);
        // The reported math type is the one the timing used; keep FMA when TF32 is off so that a
        // default-math result cannot bring tensor cores back in, and never take a float16
        // down-conversion. run() asks for the workspace of the math type finally set.
        if (p.dtype == DType::float32 && requested_math(p.dtype) != CUDNN_FMA_MATH &&
            results[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
          best.math = results[i].mathType;
        best.workspace = results[i].memory;
        return;
      }
  };
  // A search that supports nothing in this layout says so with NOT_SUPPORTED (no algorithm);
  // any other failure is an error. cuDNN 9 reports NOT_SUPPORTED with sub-codes (3001
  // ..._GRAPH_PATTERN, 3004 ..._LAYOUT, ...): compare the category.
  auto searched = [&](cudnnStatus_t status, const char* what, int dev) {
    if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED)
      returned = 0;
    else
      check(status, what, dev);
  };
  switch (dir) {
    case Direction::forward: {
      cudnnConvolutionFwdAlgoPerf_t results[kMaxResults];
      searched(cudnnFindConvolutionForwardAlgorithmEx(handle, d.x.d, in, d.f.d, other, d.conv.d, d.y.d,
                                                   out, kMaxResults, &returned, results, ws.get(), ws.size),
            "cudnnFindConvolutionForwardAlgorithmEx", device);
      pick(results);
      break;
    }
    case Direction::backward_data: {
      cudnnConvolutionBwdDataAlgoPerf_t results[kMaxResults];
      searched(cudnnFindConvolutionBackwardDataAlgorithmEx(handle, d.f.d, other, d.y.d, in, d.conv.d, d.x.d,
                                                        out, kMaxResults, &returned, results, ws.get(),
                                                        ws.size),
            "cudnnFindConvolutionBackwardDataAlgorithmEx", device);
      pick(results);
      break;
    }
    case Direction::backward_filter: {
      cudnnConvolutionBwdFilterAlgoPerf_t results[kMaxResults];
      searched(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, d.x.d, in, d.y.d, other, d.conv.d,
                                                          d.f.d, out, kMaxResults, &returned, results,
                                                          ws.get(), ws.size),
            "cudnnFindConvolutionBackwardFilterAlgorithmEx", device);
      pick(results);
      break;
    }
  }
  if (best.algo < 0)
    throw NoAlgorithm(std::string(op) + " on cuda:" + std::to_string(device) +
                      ": cuDNN has no algorithm for the " + describe(p, dir));
  return best;
}

// Runs one direction: in/other/out as for search().
void run(const Problem& p, Direction dir, const void* in, const void* other, void* out, bool aligned,
         const char* op, int device) {
  Descriptors d(p, op, device);
  const Key key = key_of(p, dir, aligned, device);
  Choice choice{};
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    const auto it = cache().find(key);
    if (it != cache().end()) {
      choice = it->second;
      found = true;
    }
  }
  if (!found) {
    choice = search(p, dir, d, in, other, out, op, device);
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    cache().emplace(key, choice);
  }
  check(cudnnSetConvolutionMathType(d.conv.d, choice.math), "cudnnSetConvolutionMathType", device);
  const cudnnHandle_t handle = cudnn(device);
  // The search reported the workspace of the math type it timed; when that differs from the one
  // set now (FMA kept over a reported default), the algorithm may need more.
  std::size_t workspace = 0;
  cudnnStatus_t ws_status = CUDNN_STATUS_SUCCESS;
  switch (dir) {
    case Direction::forward:
      ws_status = cudnnGetConvolutionForwardWorkspaceSize(
          handle, d.x.d, d.f.d, d.conv.d, d.y.d, static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), &workspace);
      break;
    case Direction::backward_data:
      ws_status = cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, d.f.d, d.y.d, d.conv.d, d.x.d, static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo),
          &workspace);
      break;
    case Direction::backward_filter:
      ws_status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d.x.d, d.y.d, d.conv.d, d.f.d, static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo),
          &workspace);
      break;
  }
  // A failed query leaves the reported size; the convolution call itself then reports the error.
  workspace = ws_status == CUDNN_STATUS_SUCCESS ? std::max(workspace, choice.workspace) : choice.workspace;
  Scratch ws(workspace, device);
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = p.dtype == DType::float64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = p.dtype == DType::float64 ? static_cast<const void*>(&zero_d) : &zero_f;
  switch (dir) {
    case Direction::forward:
      check(cudnnConvolutionForward(handle, alpha, d.x.d, in, d.f.d, other, d.conv.d,
                                    static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), ws.get(),
                                    workspace, beta, d.y.d, out),
            "cudnnConvolutionForward", device);
      break;
    case Direction::backward_data:
      check(cudnnConvolutionBackwardData(handle, alpha, d.f.d, other, d.y.d, in, d.conv.d,
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), ws.get(),
                                         workspace, beta, d.x.d, out),
            "cudnnConvolutionBackwardData", device);
      break;
    case Direction::backward_filter:
      check(cudnnConvolutionBackwardFilter(handle, alpha, d.x.d, in, d.y.d, other, d.conv.d,
                                           static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo),
                                           ws.get(), workspace, beta, d.f.d, out),
            "cudnnConvolutionBackwardFilter", device);
      break;
  }
}

// ---- the three directions, shared by conv2d (groups 1) and depthwise (groups c) --------------------

void check_dtype(DType dtype, const char* op) {
  if (dtype != DType::float32 && dtype != DType::float64)
    throw DTypeError(std::string(op) + ": no CUDA kernel for " + std::string(name(dtype)) +
                     " (float32 and float64 only)");
}

void zero_fill(void* p, i64 elements, DType dtype, const char* op, int device) {
  if (elements == 0) return;
  check(cudaMemsetAsync(p, 0, static_cast<std::size_t>(elements) * itemsize(dtype), stream(device)),
        op, device);
}

// The filter's logical dims (kh, kw, cg, o) and keel's strides of the kernel: conv2d's
// [kh, kw, c, o]; depthwise's [kh, kw, c, m] is the same memory as [kh, kw, 1, c*m].
struct FilterShape {
  i64 cg, o;
  std::array<i64, 4> keel_strides;
};
FilterShape filter_shape(const WindowGeom& g, bool depthwise) {
  const i64 cg = depthwise ? 1 : g.c;
  return {cg, g.o, keel_filter_strides(g.kh, g.kw, cg, g.o)};
}

// The kernel in cuDNN's filter layout, in a scratch buffer.
void stage_filter(const Problem& p, const WindowGeom& g, const FilterShape& fs, const void* kernel,
                  const Scratch& dst, int device) {
  copy_filter(p.dtype, g.kh, g.kw, fs.cg, fs.o, kernel, fs.keel_strides, dst.get(),
              cudnn_filter_strides(p.nchw, g.kh, g.kw, fs.cg), device);
}

// The input image in the problem's layout and padding: x itself when nothing needs changing.
const void* stage_input(const Problem& p, const void* x, const Scratch& buf, int device) {
  if (!p.padded && !p.nchw) return x;
  copy_image(p.dtype, p.n, p.c, x, false, p.orig_h, p.orig_w, buf.get(), p.nchw, p.h, p.w,
             p.padded ? -p.pad_top : 0, p.padded ? -p.pad_left : 0, device);
  return buf.get();
}
std::size_t input_buffer_bytes(const Problem& p) {
  return (!p.padded && !p.nchw) ? 0 : static_cast<std::size_t>(p.n * p.h * p.w * p.c) * itemsize(p.dtype);
}

// The output-sized image (y or dy) in the problem's layout.
std::size_t output_buffer_bytes(const Problem& p) {
  return p.nchw ? static_cast<std::size_t>(p.n * p.ho * p.wo * p.o) * itemsize(p.dtype) : 0;
}

// Problems (by geometry, dtype and direction) for which cuDNN had no NHWC algorithm: they run in
// NCHW from then on.
std::mutex g_layout_mutex;
std::map<Key, bool>& nchw_fallbacks() {
  static std::map<Key, bool> fallbacks;
  return fallbacks;
}

// Runs attempt(problem) in NHWC (float32) and, when cuDNN has no algorithm for that, once more in
// NCHW, remembering the choice. float64 always runs in NCHW.
template <class Attempt>
void with_layout(DType dtype, const WindowGeom& g, bool depthwise, Direction dir, int device,
                 Attempt&& attempt) {
  const i64 groups = depthwise ? g.c : 1;
  if (dtype == DType::float64) {
    attempt(make_problem(dtype, g, groups, true));
    return;
  }
  const Problem nhwc = make_problem(dtype, g, groups, false);
  const Key key = key_of(nhwc, dir, false, device);
  bool fallback = false;
  {
    std::lock_guard<std::mutex> lock(g_layout_mutex);
    fallback = nchw_fallbacks().count(key) != 0;
  }
  if (!fallback) {
    try {
      attempt(nhwc);
      return;
    } catch (const NoAlgorithm&) {
      std::lock_guard<std::mutex> lock(g_layout_mutex);
      nchw_fallbacks().emplace(key, true);
    }
  }
  attempt(make_problem(dtype, g, groups, true));
}

void forward(const char* op, bool depthwise, DType dtype, const WindowGeom& g, const void* x,
             const void* kernel, void* y, int device) {
  check_dtype(dtype, op);
  const i64 outputs = g.n * g.ho * g.wo * g.o;
  if (outputs == 0) return;
  use_device(device);
  if (g.c == 0 || g.kh * g.kw == 0) {  // an empty sum
    zero_fill(y, outputs, dtype, op, device);
    return;
  }
  const FilterShape fs = filter_shape(g, depthwise);
  with_layout(dtype, g, depthwise, Direction::forward, device, [&](const Problem& p) {
    Scratch filter(static_cast<std::size_t>(g.kh * g.kw * fs.cg * fs.o) * itemsize(dtype), device);
    stage_filter(p, g, fs, kernel, filter, device);
    Scratch xbuf(input_buffer_bytes(p), device);
    const void* xin = stage_input(p, x, xbuf, device);
    Scratch ybuf(output_buffer_bytes(p), device);
    void* yout = p.nchw ? ybuf.get() : y;
    run(p, Direction::forward, xin, filter.get(), yout, aligned16(xin, yout, yout), op, device);
    if (p.nchw) copy_image(dtype, p.n, p.o, yout, true, p.ho, p.wo, y, false, p.ho, p.wo, 0, 0, device);
  });
}

void backward_input(const char* op, bool depthwise, DType dtype, const WindowGeom& g,
                    const void* dy, const void* kernel, void* dx, int device) {
  check_dtype(dtype, op);
  const i64 inputs = g.n * g.h * g.w * g.c;
  if (inputs == 0) return;
  use_device(device);
  if (g.ho * g.wo * g.o == 0) {  // no output reads the input
    zero_fill(dx, inputs, dtype, op, device);
    return;
  }
  const FilterShape fs = filter_shape(g, depthwise);
  with_layout(dtype, g, depthwise, Direction::backward_data, device, [&](const Problem& p) {
    Scratch filter(static_cast<std::size_t>(g.kh * g.kw * fs.cg * fs.o) * itemsize(dtype), device);
    stage_filter(p, g, fs, kernel, filter, device);
    Scratch dybuf(output_buffer_bytes(p), device);
    const void* dyin = dy;
    if (p.nchw) {
      copy_image(dtype, p.n, p.o, dy, false, p.ho, p.wo, dybuf.get(), true, p.ho, p.wo, 0, 0, device);
      dyin = dybuf.get();
    }
    // The gradient of cuDNN's input (padded and/or NCHW) goes to a buffer, then is cropped into dx.
    Scratch dxbuf(input_buffer_bytes(p), device);
    void* dxout = (p.padded || p.nchw) ? dxbuf.get() : dx;
    run(p, Direction::backward_data, dyin, filter.get(), dxout, aligned16(dyin, dxout, dxout), op, device);
    if (p.padded || p.nchw)
      copy_image(dtype, p.n, p.c, dxout, p.nchw, p.h, p.w, dx, false, p.orig_h, p.orig_w,
                 p.padded ? p.pad_top : 0, p.padded ? p.pad_left : 0, device);
  });
}

void backward_filter(const char* op, bool depthwise, DType dtype, const WindowGeom& g,
                     const void* x, const void* dy, void* dkernel, int device) {
  check_dtype(dtype, op);
  const FilterShape fs = filter_shape(g, depthwise);
  const i64 taps = g.kh * g.kw * fs.cg * fs.o;
  if (taps == 0) return;
  use_device(device);
  if (g.n * g.ho * g.wo == 0 || g.c == 0) {  // an empty sum over the batch
    zero_fill(dkernel, taps, dtype, op, device);
    return;
  }
  with_layout(dtype, g, depthwise, Direction::backward_filter, device, [&](const Problem& p) {
    Scratch xbuf(input_buffer_bytes(p), device);
    const void* xin = stage_input(p, x, xbuf, device);
    Scratch dybuf(output_buffer_bytes(p), device);
    const void* dyin = dy;
    if (p.nchw) {
      copy_image(dtype, p.n, p.o, dy, false, p.ho, p.wo, dybuf.get(), true, p.ho, p.wo, 0, 0, device);
      dyin = dybuf.get();
    }
    Scratch filter(static_cast<std::size_t>(taps) * itemsize(dtype), device);
    run(p, Direction::backward_filter, xin, dyin, filter.get(), aligned16(xin, dyin, dyin), op, device);
    // Back from cuDNN's filter layout to keel's.
    copy_filter(dtype, g.kh, g.kw, fs.cg, fs.o, filter.get(), cudnn_filter_strides(p.nchw, g.kh, g.kw, fs.cg),
                dkernel, fs.keel_strides, device);
  });
}

}  // namespace

void conv2d_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel,
                    void* y, int device) {
  forward("conv2d", false, dtype, g, x, kernel, y, device);
}

void conv2d_backward_input(DType dtype, const WindowGeom& g, const void* dy,
                           const void* kernel, void* dx, int device) {
  backward_input("conv2d_backprop_input", false, dtype, g, dy, kernel, dx, device);
}

void conv2d_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                            void* dkernel, int device) {
  backward_filter("conv2d_backprop_filter", false, dtype, g, x, dy, dkernel, device);
}

void depthwise_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel,
                       void* y, int device) {
  forward("depthwise_conv2d", true, dtype, g, x, kernel, y, device);
}

void depthwise_backward_input(DType dtype, const WindowGeom& g, const void* dy,
                              const void* kernel, void* dx, int device) {
  backward_input("depthwise_conv2d_backprop_input", true, dtype, g, dy, kernel, dx, device);
}

void depthwise_backward_filter(DType dtype, const WindowGeom& g, const void* x,
                               const void* dy, void* dkernel, int device) {
  backward_filter("depthwise_conv2d_backprop_filter", true, dtype, g, x, dy, dkernel, device);
}

}  // namespace keel::cuda
