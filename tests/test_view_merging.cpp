// How the CUDA dispatch folds a strided, broadcast operation into as few axes as possible before
// it builds the kernels' views (backend::merge_axes). Pure host arithmetic, so it is checked here,
// on any machine: a wrong merge would silently read the wrong elements on the GPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "backend/cuda_views.hpp"

using keel::backend::merge_axes;
using V = std::vector<std::int64_t>;

TEST_CASE("a contiguous operand merges into one axis, however many it has") {
  // [2,3,4,5,2,3,2,2,2,2]: rank 10 (above the kernels' 8), contiguous row-major strides.
  const V shape{2, 3, 4, 5, 2, 3, 2, 2, 2, 2};
  V strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  const auto m = merge_axes(shape, {strides, strides});
  CHECK(m.shape == V{s});
  CHECK(m.strides[0] == V{1});
  CHECK(m.strides[1] == V{1});
}

TEST_CASE("a transposed operand keeps the axes it cannot merge") {
  // x [3,4] contiguous (strides 4,1) added to y = transpose of a [4,3] (strides 1,4).
  const auto m = merge_axes({3, 4}, {{4, 1}, {1, 3}});
  CHECK(m.shape == V{3, 4});
  CHECK(m.strides[0] == V{4, 1});
  CHECK(m.strides[1] == V{1, 3});
}

TEST_CASE("size-1 axes are dropped whatever their stride") {
  const auto m = merge_axes({1, 5, 1, 2}, {{99, 2, 7, 1}});
  CHECK(m.shape == V{10});
  CHECK(m.strides[0] == V{1});
}

TEST_CASE("broadcast axes (stride 0) merge with each other but not with real ones") {
  // z [2,3,4] = x [2,3,4] + b [4] broadcast: b's strides are (0, 0, 1).
  const auto m = merge_axes({2, 3, 4}, {{12, 4, 1}, {0, 0, 1}, {12, 4, 1}});
  CHECK(m.shape == V{6, 4});
  CHECK(m.strides[0] == V{4, 1});
  CHECK(m.strides[1] == V{0, 1});
  CHECK(m.strides[2] == V{4, 1});
  // A per-row scalar [2,3,1] broadcast along the last axis: strides (3, 1, 0).
  const auto r = merge_axes({2, 3, 4}, {{12, 4, 1}, {3, 1, 0}});
  CHECK(r.shape == V{6, 4});
  CHECK(r.strides[0] == V{4, 1});
  CHECK(r.strides[1] == V{1, 0});
}

TEST_CASE("a sliced operand merges only its contiguous inner axes") {
  // x[:, 1:3, :] of a [4,5,6] tensor: shape [4,2,6], strides (30, 6, 1); the output contiguous.
  const auto m = merge_axes({4, 2, 6}, {{30, 6, 1}, {12, 6, 1}});
  CHECK(m.shape == V{4, 12});
  CHECK(m.strides[0] == V{30, 1});
  CHECK(m.strides[1] == V{12, 1});
}

TEST_CASE("an empty operand stays empty and rank 0 stays rank 0") {
  const auto e = merge_axes({3, 0, 2}, {{0, 2, 1}});
  std::int64_t elements = 1;
  for (auto d : e.shape) elements *= d;
  CHECK(elements == 0);  // the kernels see no work
  const auto z = merge_axes({}, {{}, {}});
  CHECK(z.shape.empty());
  CHECK(z.strides.size() == 2);
}
