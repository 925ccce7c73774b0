// The non-template parts of data::Dataset: batching, argument checks, shuffle randomness, the
// tensor-slice sources, and the instantiations for the common element types.
#include "keel/data/dataset.hpp"

#include <algorithm>
#include <array>

#include <fmt/core.h>

#include "keel/core/config.hpp"
#include "keel/ops/shape.hpp"
#include "ops/philox.hpp"

namespace keel::data {

template class Dataset<Tensor>;
template class Dataset<std::pair<Tensor, Tensor>>;

namespace detail {

namespace {

// Shuffle draws its own Philox stream word so that a shuffle seed never replays the numbers of
// random::set_seed(seed) or of a dropout with the same seed ("shuf" in ASCII).
constexpr std::uint32_t kShuffleStream = 0x73687566u;

void check_same(const std::vector<Tensor>& column, std::size_t i, bool same_rank_only, const char* op) {
  const Tensor& a = column[0];
  const Tensor& b = column[i];
  if (a.dtype() != b.dtype())
    throw DTypeError(fmt::format("{}: element {} has dtype {} but element 0 has {}", op, i, name(b.dtype()),
                                 name(a.dtype())));
  if (same_rank_only ? a.rank() != b.rank() : a.shape() != b.shape())
    throw ShapeError(fmt::format("{}: element {} of the batch has shape {} but element 0 has {}{}", op, i,
                                 b.shape().to_string(), a.shape().to_string(),
                                 same_rank_only ? " (padded_batch pads axes, it cannot change the rank)"
                                                : "; use padded_batch for elements of different shapes"));
}

}  // namespace

std::vector<Tensor> combine_columns(std::vector<std::vector<Tensor>>& columns, bool padded,
                                    double padding_value, const char* op) {
  std::vector<Tensor> out;
  out.reserve(columns.size());
  for (auto& column : columns) {
    for (std::size_t i = 1; i < column.size(); ++i) check_same(column, i, padded, op);
    if (padded && column[0].rank() > 0) {
      std::vector<std::int64_t> target(column[0].shape().dims());
      for (const Tensor& t : column)
        for (std::size_t d = 0; d < target.size(); ++d) target[d] = std::max(target[d], t.shape().dims()[d]);
      for (Tensor& t : column) {
        if (t.shape().dims() == target) continue;
        std::vector<std::array<std::int64_t, 2>> paddings(target.size());
        for (std::size_t d = 0; d < target.size(); ++d) paddings[d] = {0, target[d] - t.shape().dims()[d]};
        t = pad(t, paddings, padding_value);
      }
    }
    out.push_back(stack(column, 0));
  }
  return out;
}

bool truthy(const Tensor& t) {
  if (t.size() != 1)
    throw ValueError(fmt::format("filter: the predicate returned a tensor of shape {}; it must return one boolean",
                                 t.shape().to_string()));
  return t.item<bool>();
}

int resolve_workers(int num_parallel_calls, const char* op) {
  if (num_parallel_calls == AUTOTUNE) return std::max(1, config::num_threads());
  if (num_parallel_calls < 1)
    throw ValueError(fmt::format("{}: num_parallel_calls must be positive or AUTOTUNE (-1), got {}", op,
                                 num_parallel_calls));
  return num_parallel_calls;
}

void check_count(std::int64_t n, std::int64_t min, const char* op, const char* what) {
  if (n < min)
    throw ValueError(min == -1 ? fmt::format("{}: {} must be >= 0, or -1, got {}", op, what, n)
                               : fmt::format("{}: {} must be >= {}, got {}", op, what, min, n));
}

std::uint64_t ShuffleRng::below(std::uint64_t n) {
  if (n <= 1) return 0;
  // Rejection sampling keeps every index equally likely: drop the lowest 2^64 mod n values.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    if (used_ >= 4) {
      // Each pass gets its own 2^40-block region of the key's counter space.
      const auto w = random::philox::block(random::PhiloxState{key_, pass_ << 40}, block_++, kShuffleStream);
      std::copy(w.begin(), w.end(), words_);
      used_ = 0;
    }
    const std::uint64_t r = (static_cast<std::uint64_t>(words_[used_]) << 32) | words_[used_ + 1];
    used_ += 2;
    if (r >= threshold) return r % n;
  }
}

std::uint64_t fresh_shuffle_key() {
  const auto w = random::philox::block(random::reserve(4), 0);
  return (static_cast<std::uint64_t>(w[0]) << 32) | w[1];
}

Dataset<Tensor> tensor_slices(const Tensor& x) {
  if (!x.defined()) throw ValueError("from_tensor_slices: the tensor is undefined");
  if (x.rank() == 0) throw ShapeError("from_tensor_slices: cannot slice a scalar (shape []); it needs a first axis");
  using Next = Dataset<Tensor>::Next;
  return Dataset<Tensor>([x] {
    return Next([x, i = std::int64_t{0}]() mutable -> std::optional<Tensor> {
      if (i >= x.shape()[0]) return std::nullopt;
      return x[i++];
    });
  });
}

Dataset<std::pair<Tensor, Tensor>> tensor_slices(const Tensor& x, const Tensor& y) {
  for (const Tensor* t : {&x, &y}) {
    if (!t->defined()) throw ValueError("from_tensor_slices: a tensor of the pair is undefined");
    if (t->rank() == 0)
      throw ShapeError("from_tensor_slices: cannot slice a scalar (shape []); both tensors need a first axis");
  }
  if (x.shape()[0] != y.shape()[0])
    throw ShapeError(fmt::format("from_tensor_slices: the tensors' first dimensions differ: {} and {}",
                                 x.shape().to_string(), y.shape().to_string()));
  using P = std::pair<Tensor, Tensor>;
  using Next = Dataset<P>::Next;
  return Dataset<P>([x, y] {
    return Next([x, y, i = std::int64_t{0}]() mutable -> std::optional<P> {
      if (i >= x.shape()[0]) return std::nullopt;
      const std::int64_t j = i++;
      return P(x[j], y[j]);
    });
  });
}

}  // namespace detail
}  // namespace keel::data
