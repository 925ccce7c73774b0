#pragma once
// Shared by the metric tests: short spellings for the small float32 and int64 tensors they feed.
#include <keel/keel.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace keel_test {

inline keel::Tensor f32(std::vector<float> v, keel::Shape s) { return keel::constant(v, std::move(s)); }
inline keel::Tensor f32(std::vector<float> v) { return keel::constant(v); }
inline keel::Tensor i64(std::vector<std::int64_t> v, keel::Shape s) { return keel::constant(v, std::move(s)); }

}  // namespace keel_test
