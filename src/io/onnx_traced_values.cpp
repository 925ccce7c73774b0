// export_onnx's traced graphs: buffers and views as ONNX values (see onnx_traced.hpp).
#include "io/onnx_traced.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace keel::io::onnx_detail::traced {

bool TracedValues::whole_buffer(int v) const {
  const View& va = view_a(v);
  const auto slot = static_cast<std::size_t>(va.slot);
  return graph::detail::whole_slot_view(va, a_.slots[slot]) && graph::detail::whole_slot_view(view_b(v), b_.slots[slot]);
}

void TracedValues::bind_input(int k, const TracedValue& v, bool first) {
  for (std::size_t s = 0; s < a_.slots.size(); ++s) {
    if (a_.slots[s].kind != SlotKind::input || a_.slots[s].input != k) continue;
    if (first) {
      slots_[s].first = v.name;
      slots_[s].first_shape = v.shape;
    } else {
      slots_[s].whole = v;
    }
  }
}

Value TracedValues::result(int v) {
  const View& va = view_a(v);
  const SlotState& st = slots_[static_cast<std::size_t>(va.slot)];
  if (st.first && !st.whole && whole_buffer(v) && dims(va.shape, view_b(v).shape) == st.first_shape)
    return {*st.first, onnx_shape(st.first_shape), Layout::first, DType::float32};
  const TracedValue y = read_view(v, false);
  return {y.name, onnx_shape(y.shape), Layout::last, y.dtype};
}

[[noreturn]] void TracedValues::fail(const std::string& why) const {
  throw ValueError(fmt::format("export_onnx: {} has no ONNX converter of its own and could not be exported from "
                               "its traced graph: {}", who(layer_), why));
}

TracedDim TracedValues::dim(std::int64_t a, std::int64_t b) const {
  if (a != b && (b - a) * kTracedBatchA != a)
    fail(fmt::format("a size is {} at batch {} and {} at batch {}, not proportional to the batch", a, kTracedBatchA,
                     b, kTracedBatchB));
  return {a, b};
}

TracedDims TracedValues::dims(const Shape& a, const Shape& b) const {
  if (a.rank() != b.rank()) fail("the traced graph changes with the batch size");
  TracedDims d;
  for (std::int64_t i = 0; i < a.rank(); ++i) d.push_back(dim(a[i], b[i]));
  return d;
}

const std::string& TracedValues::batch() {
  if (batch_.empty()) {
    const std::string shape = g_.op("Shape", {batch_source_}, base_ + "/batch");
    batch_ = g_.op("Slice", {shape, g_.ints(base_ + "/zero", {0}), g_.ints(base_ + "/one", {1})}, base_ + "/batch");
  }
  return batch_;
}

std::string TracedValues::shape_tensor(const TracedDims& d, bool minus_one_allowed) {
  int following = 0;
  for (const auto& x : d) following += x.follows_batch();
  if (following == 0 || (following == 1 && minus_one_allowed)) return g_.ints(base_ + "/shape", onnx_shape(d));
  std::vector<std::string> parts;
  std::vector<std::int64_t> run;
  for (const auto& x : d) {
    if (!x.follows_batch()) {
      run.push_back(x.a);
      continue;
    }
    if (!run.empty()) parts.push_back(g_.ints(base_ + "/shape", run));
    run.clear();
    parts.push_back(x.per_example() == 1 ? batch()
                                          : g_.op("Mul", {batch(), g_.ints(base_ + "/k", {x.per_example()})}, base_));
  }
  if (!run.empty()) parts.push_back(g_.ints(base_ + "/shape", run));
  return g_.op("Concat", parts, base_ + "/shape", {attr("axis", 0)});
}

TracedValue TracedValues::reshape(const TracedValue& x, const TracedDims& to) {
  if (x.shape == to) return x;
  return {g_.op("Reshape", {x.name, shape_tensor(to, true)}, base_), to, x.dtype};
}

TracedValue TracedValues::expand(const TracedValue& x, const TracedDims& to) {
  if (x.shape == to) return x;
  return {g_.op("Expand", {x.name, shape_tensor(to, false)}, base_), to, x.dtype};
}

TracedValue TracedValues::initializer(int slot, DType dtype) {
  const Slot& sa = a_.slots[static_cast<std::size_t>(slot)];
  const Slot& sb = b_.slots[static_cast<std::size_t>(slot)];
  if (!sa.held || !sb.held || !sa.device.is_cpu())
    fail("it reads a buffer whose values are not on the host");
  const std::size_t item = itemsize(dtype);
  const std::int64_t n_a = static_cast<std::int64_t>(sa.nbytes / item), n_b = static_cast<std::int64_t>(sb.nbytes / item);
  if (sa.nbytes == sb.nbytes && std::memcmp(sa.held->data(), sb.held->data(), sa.nbytes) == 0)
    return {g_.raw(fmt::format("{}/const", layer_.name()), dtype, sa.held->data(), sa.nbytes, {n_a}), {{n_a, n_a}}, dtype};
  // A constant as large as the batch (zeros_like(x), an initial state): one value repeated, so
  // the same value expanded to the batch's size.
  const auto uniform = [&](const Slot& s) {
    const auto* p = static_cast<const unsigned char*>(s.held->data());
    for (std::size_t i = item; i < s.nbytes; i += item)
      if (std::memcmp(p, p + i, item) != 0) return false;
    return s.nbytes >= item;
  };
  if (!uniform(sa) || !uniform(sb) || std::memcmp(sa.held->data(), sb.held->data(), item) != 0)
    fail("a constant it computes depends on the batch size");
  const std::string value = g_.raw(fmt::format("{}/const", layer_.name()), dtype, sa.held->data(), item, {1});
  return expand({value, {{1, 1}}, dtype}, {dim(n_a, n_b)});
}

TracedValue TracedValues::buffer(int slot, DType dtype) {
  SlotState& st = slots_[static_cast<std::size_t>(slot)];
  if (!st.whole && st.first) st.whole = TracedValue{nhwc(*st.first), st.first_shape, DType::float32};
  if (!st.whole) {
    const SlotKind kind = a_.slots[static_cast<std::size_t>(slot)].kind;
    if (kind == SlotKind::captured || kind == SlotKind::constant) st.whole = initializer(slot, dtype);
    else if (!st.pieces.empty()) st.whole = assemble(slot);
    else fail("it reads memory that nothing in the call wrote");
  }
  if (st.whole->dtype != dtype)
    fail(fmt::format("it reads {} memory as {}", keel::name(st.whole->dtype), keel::name(dtype)));
  return *st.whole;
}

TracedValue TracedValues::assemble(int slot) {
  auto& pieces = slots_[static_cast<std::size_t>(slot)].pieces;
  const std::int64_t n_a = static_cast<std::int64_t>(a_.slots[static_cast<std::size_t>(slot)].nbytes);
  const std::int64_t n_b = static_cast<std::int64_t>(b_.slots[static_cast<std::size_t>(slot)].nbytes);
  const View& first = view_a(pieces[0].first);
  const std::int64_t rank = first.shape.rank();
  for (std::int64_t axis = 0; axis < rank; ++axis) {
    // The whole: the pieces' shape with `axis` as long as the buffer allows; each piece a
    // row-major slice of it along axis.
    std::vector<std::pair<std::int64_t, std::size_t>> starts;  // start along axis, piece
    TracedDims whole;
    bool ok = true;
    for (std::size_t p = 0; p < pieces.size() && ok; ++p) {
      const View& va = view_a(pieces[p].first);
      const View& vb = view_b(pieces[p].first);
      if (va.shape.rank() != rank) {
        ok = false;
        break;
      }
      std::int64_t rest_a = 1, rest_b = 1;
      for (std::int64_t i = 0; i < rank; ++i)
        if (i != axis) rest_a *= va.shape[i], rest_b *= vb.shape[i];
      const std::int64_t item = static_cast<std::int64_t>(itemsize(va.dtype));
      if (rest_a == 0 || rest_b == 0 || n_a % (rest_a * item) != 0 || n_b % (rest_b * item) != 0) {
        ok = false;
        break;
      }
      TracedDims w = dims(va.shape, vb.shape);
      w[static_cast<std::size_t>(axis)] = dim(n_a / (rest_a * item), n_b / (rest_b * item));
      if (p == 0) whole = w;
      ok = w == whole;
      // Row-major strides of the whole, and the offset a multiple of the axis' stride.
      std::int64_t stride = 1, axis_stride = 1;
      for (std::int64_t i = rank - 1; i >= 0 && ok; --i) {
        if (i == axis) axis_stride = stride;
        if (va.shape[i] != 1 && va.strides[static_cast<std::size_t>(i)] != stride) ok = false;
        stride *= w[static_cast<std::size_t>(i)].a;
      }
      if (ok && va.offset % axis_stride != 0) ok = false;
      if (ok) starts.push_back({va.offset / axis_stride, p});
    }
    if (!ok) continue;
    std::sort(starts.begin(), starts.end());
    std::int64_t at = 0;
    std::vector<std::string> parts;
    for (const auto& [start, p] : starts) {
      if (start != at) {
        ok = false;
        break;
      }
      at += view_a(pieces[p].first).shape[axis];
      parts.push_back(pieces[p].second.name);
    }
    if (!ok || at != whole[static_cast<std::size_t>(axis)].a) continue;
    return {parts.size() == 1 ? parts[0] : g_.op("Concat", parts, base_ + "/assemble", {attr("axis", axis)}), whole,
            pieces[0].second.dtype};
  }
  fail("it writes parts of a buffer that do not tile it along one axis");
}

std::optional<ViewPick> TracedValues::pick(const View& v, std::int64_t n) {
  ViewPick p;
  const std::int64_t rank = v.shape.rank();
  if (v.offset == 0 && graph::detail::contiguous_view(v) && v.shape.num_elements() == n) {
    p.plain = true;
    return p;
  }
  std::vector<int> main;
  for (std::int64_t i = 0; i < rank; ++i)
    if (v.shape[i] > 1 && v.strides[static_cast<std::size_t>(i)] != 0) main.push_back(static_cast<int>(i));
  if (std::any_of(v.strides.begin(), v.strides.end(), [](std::int64_t s) { return s < 0; })) return std::nullopt;
  std::stable_sort(main.begin(), main.end(), [&](int x, int y) {
    return v.strides[static_cast<std::size_t>(x)] > v.strides[static_cast<std::size_t>(y)];
  });
  std::vector<std::int64_t> strides, sizes;
  for (int i : main) {
    strides.push_back(v.strides[static_cast<std::size_t>(i)]);
    sizes.push_back(v.shape[i]);
    p.order.push_back(i);
  }
  // A step (the innermost stride above 1), or a single element: an inner axis of that extent
  // of which one element is taken.
  if (strides.empty() || strides.back() != 1) {
    strides.push_back(1);
    sizes.push_back(1);
    p.order.push_back(-1);
  }
  const std::size_t m = strides.size();
  p.w.resize(m);
  if (n % strides[0] != 0) return std::nullopt;
  p.w[0] = n / strides[0];
  for (std::size_t j = 1; j < m; ++j) {
    if (strides[j - 1] % strides[j] != 0) return std::nullopt;
    p.w[j] = strides[j - 1] / strides[j];
  }
  std::int64_t rem = v.offset;
  for (std::size_t j = 0; j < m; ++j) {
    p.start.push_back(rem / strides[j]);
    rem %= strides[j];
    p.size.push_back(sizes[j]);
    if (p.start[j] + sizes[j] > p.w[j]) return std::nullopt;
  }
  return p;
}

TracedValue TracedValues::read_view(int v, bool broadcast_ok) {
  const View& va = view_a(v);
  const View& vb = view_b(v);
  if (va.slot != vb.slot || va.dtype != vb.dtype) fail("the traced graph changes with the batch size");
  const TracedValue buf = buffer(va.slot, va.dtype);
  const TracedDims shape = dims(va.shape, vb.shape);
  std::int64_t n_a = 1, n_b = 1;
  for (const auto& d : buf.shape) n_a *= d.a, n_b *= d.b;
  const auto pa = pick(va, n_a), pb = pick(vb, n_b);
  if (!pa || !pb || pa->plain != pb->plain || pa->order != pb->order || pa->start != pb->start)
    fail(fmt::format("it reads a view (shape {}, strides [{}], offset {}) that export_onnx cannot express",
                     va.shape.to_string(), fmt::join(va.strides, ", "), va.offset));
  if (pa->plain) return reshape(buf, shape);
  const std::size_t m = pa->w.size();
  TracedDims w;
  for (std::size_t j = 0; j < m; ++j) w.push_back(dim(pa->w[j], pb->w[j]));
  TracedValue x = reshape(buf, w);
  std::vector<std::int64_t> starts, ends, axes;
  for (std::size_t j = 0; j < m; ++j) {
    const TracedDim size = dim(pa->size[j], pb->size[j]);
    if (pa->start[j] == 0 && size == w[j]) continue;
    std::int64_t end = pa->start[j] + size.a;
    if (size.a == w[j].a - pa->start[j] && size.b == w[j].b - pa->start[j]) end = std::numeric_limits<std::int64_t>::max();
    else if (size.follows_batch() || w[j].follows_batch()) fail("it slices along the batch axis");
    starts.push_back(pa->start[j]);
    ends.push_back(end);
    axes.push_back(static_cast<std::int64_t>(j));
    w[j] = size;
  }
  if (!axes.empty())
    x = {g_.op("Slice", {x.name, g_.ints(base_ + "/starts", starts), g_.ints(base_ + "/ends", ends),
                         g_.ints(base_ + "/axes", axes)},
               base_),
         w, x.dtype};
  // Axes back in the view's order (a step's inner axis, size 1, last).
  std::vector<std::int64_t> perm(m);
  for (std::size_t j = 0; j < m; ++j) perm[j] = static_cast<std::int64_t>(j);
  std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t x1, std::int64_t x2) {
    const int o1 = pa->order[static_cast<std::size_t>(x1)], o2 = pa->order[static_cast<std::size_t>(x2)];
    return (o1 < 0 ? 1 << 30 : o1) < (o2 < 0 ? 1 << 30 : o2);
  });
  bool identity = true;
  for (std::size_t j = 0; j < m; ++j) identity = identity && perm[j] == static_cast<std::int64_t>(j);
  if (!identity) {
    TracedDims t;
    for (auto j : perm) t.push_back(x.shape[static_cast<std::size_t>(j)]);
    x = {g_.transpose(x.name, perm, base_), t, x.dtype};
  }
  TracedDims kept = shape;
  for (std::int64_t i = 0; i < va.shape.rank(); ++i)
    if (va.strides[static_cast<std::size_t>(i)] == 0) kept[static_cast<std::size_t>(i)] = {1, 1};
  x = reshape(x, kept);
  return broadcast_ok ? x : expand(x, shape);
}

TracedValue TracedValues::in(std::size_t j, bool broadcast_ok) {
  const int v = node_a_->operands[j];
  if (v < 0) fail("a kernel's optional operand is absent");
  return read_view(v, broadcast_ok);
}

TracedDims TracedValues::out_shape(std::size_t j) const {
  const int v = node_a_->operands[node_a_->num_inputs + j];
  return dims(view_a(v).shape, view_b(v).shape);
}

void TracedValues::put(std::size_t j, const std::string& name, std::optional<TracedDims> shape) {
  const int v = node_a_->operands[node_a_->num_inputs + j];
  if (v < 0) return;
  const TracedDims want = out_shape(j);
  TracedValue x{name, shape ? *shape : want, view_a(v).dtype};
  if (shape) {
    std::int64_t n1 = 1, n2 = 1;
    for (const auto& d : *shape) n1 *= d.a;
    for (const auto& d : want) n2 *= d.a;
    x = n1 == n2 ? reshape(x, want) : expand(x, want);
  }
  write(v, x);
}

void TracedValues::write(int v, const TracedValue& x) {
  const View& va = view_a(v);
  SlotState& st = slots_[static_cast<std::size_t>(va.slot)];
  if (whole_buffer(v)) {
    st.whole = x;
    st.first.reset();
    st.pieces.clear();
    return;
  }
  if (st.whole || st.first) fail("it writes into part of a buffer it computed before");
  st.pieces.push_back({v, x});
}

std::string TracedValues::constant(double value, DType dtype) {
  switch (dtype) {
    case DType::float32: {
      const float f = static_cast<float>(value);
      return g_.raw(base_ + "/c", dtype, &f, sizeof f, {});
    }
    case DType::float64: return g_.raw(base_ + "/c", dtype, &value, sizeof value, {});
    case DType::int32: {
      const std::int32_t i = static_cast<std::int32_t>(value);
      return g_.raw(base_ + "/c", dtype, &i, sizeof i, {});
    }
    case DType::int64: {
      const std::int64_t i = static_cast<std::int64_t>(value);
      return g_.raw(base_ + "/c", dtype, &i, sizeof i, {});
    }
    case DType::uint8:
    case DType::bool_: {
      const std::uint8_t i = static_cast<std::uint8_t>(value);
      return g_.raw(base_ + "/c", dtype, &i, sizeof i, {});
    }
    default: fail(fmt::format("a constant of dtype {}", keel::name(dtype)));
  }
}

std::optional<std::string> TracedValues::first_form(std::size_t j) {
  const int v = node_a_->operands[j];
  if (v < 0) return std::nullopt;
  const View& va = view_a(v);
  const SlotState& st = slots_[static_cast<std::size_t>(va.slot)];
  if (!st.first || st.whole || !whole_buffer(v) || dims(va.shape, view_b(v).shape) != st.first_shape) return std::nullopt;
  return st.first;
}

void TracedValues::put_first(std::size_t j, const std::string& y) {
  const int v = node_a_->operands[node_a_->num_inputs + j];
  if (v < 0) return;
  const View& va = view_a(v);
  const View& vb = view_b(v);
  SlotState& st = slots_[static_cast<std::size_t>(va.slot)];
  if (!whole_buffer(v) || va.shape.rank() != 4 || va.dtype != DType::float32) return put(j, nhwc(y));
  st.whole.reset();
  st.pieces.clear();
  st.first = y;
  st.first_shape = dims(va.shape, vb.shape);
}

TracedValue TracedValues::nchw(const TracedValue& x) {
  const Value v = g_.to_first({x.name, onnx_shape(x.shape), Layout::last, x.dtype});
  return {v.name, {x.shape[0], x.shape[3], x.shape[1], x.shape[2]}, x.dtype};
}

}  // namespace keel::io::onnx_detail::traced
