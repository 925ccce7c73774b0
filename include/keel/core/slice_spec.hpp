#pragma once
// The entries of Tensor::slice, NumPy's basic indexing written with braces:
//   x.slice({keel::range(1, -1), keel::all, keel::range(0, keel::end, 2)})   // x[1:-1, :, ::2]
//   x.slice({2})                                  // x[2]: an integer entry removes its axis
//   x.slice({keel::ellipsis, keel::newaxis})      // x[..., None]
//   x.slice({keel::range(keel::end, keel::end, -1)})   // x[::-1]
// Negative indices count from the end. Range bounds out of range are clamped (NumPy's rules); an
// integer entry out of range is a ValueError naming the index and the axis size.
#include <cstdint>
#include <vector>

namespace keel {

// An omitted range bound (the empty side of Python's `a:` or `:b`): the far end of the axis in
// the direction of the step, so that keel::range(keel::end, keel::end, -1) reverses.
struct SliceEndT {};
inline constexpr SliceEndT end{};
struct SliceAllT {};  // `:`, the whole axis
inline constexpr SliceAllT all{};
struct NewAxisT {};  // None / np.newaxis: a new axis of size 1
inline constexpr NewAxisT newaxis{};
struct EllipsisT {};  // `...`: as many whole axes as the other entries leave
inline constexpr EllipsisT ellipsis{};

// One bound of a range: an index or keel::end.
class SliceBound {
 public:
  constexpr SliceBound(std::int64_t index) : value_(index), given_(true) {}  // NOLINT: implicit on purpose
  constexpr SliceBound(SliceEndT) {}                                         // NOLINT
  constexpr bool given() const { return given_; }
  constexpr std::int64_t value() const { return value_; }

 private:
  std::int64_t value_ = 0;
  bool given_ = false;
};

struct SliceRange {
  SliceBound begin, end;
  std::int64_t step = 1;  // not 0; negative walks backwards
};
// Python's begin:end:step.
constexpr SliceRange range(SliceBound begin, SliceBound end, std::int64_t step = 1) { return {begin, end, step}; }

class SliceItem {
 public:
  enum class Kind : std::uint8_t { index, range, all, newaxis, ellipsis };
  // Any integer type converts (one constructor, so that int, long and size_t are not ambiguous).
  constexpr SliceItem(std::int64_t index) : kind_(Kind::index), range_{index, index} {}  // NOLINT
  constexpr SliceItem(SliceRange r) : kind_(Kind::range), range_(r) {}                 // NOLINT
  constexpr SliceItem(SliceAllT) : kind_(Kind::all) {}                                 // NOLINT
  constexpr SliceItem(NewAxisT) : kind_(Kind::newaxis) {}                              // NOLINT
  constexpr SliceItem(EllipsisT) : kind_(Kind::ellipsis) {}                            // NOLINT
  constexpr Kind kind() const { return kind_; }
  constexpr std::int64_t index() const { return range_.begin.value(); }  // Kind::index
  constexpr const SliceRange& range() const { return range_; }           // Kind::range

 private:
  Kind kind_;
  SliceRange range_{SliceEndT{}, SliceEndT{}, 1};
};

using SliceSpec = std::vector<SliceItem>;

}  // namespace keel
