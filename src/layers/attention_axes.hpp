#pragma once
// MultiHeadAttention over any attention_axes: Keras' einsum formulation
// (keras/src/layers/attention/multi_head_attention.py, _build_attention_equation), used when the
// inputs are not [batch, time, features] attended over time (the fused op's case).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::layers::detail {

struct EinsumAttentionInputs {
  Tensor query, value, key;             // [B, T..., Dq], [B, S..., Dv], [B, S..., Dk]
  Tensor wq, bq, wk, bk, wv, bv, wo, bo;  // EinsumDense shapes ([D, H, d], [H, d], [H, dv, O...], [O...])
  std::vector<int> axes;                // attended axes of the inputs, resolved (1 .. rank - 2)
  Tensor mask;                          // bool; Keras' _masked_softmax broadcast; undefined: none
  std::int64_t key_dim = 0;
  double dropout = 0;                   // applied to the probabilities when > 0
  std::optional<std::uint64_t> seed;
  std::string layer_name;
};

struct EinsumAttentionOutputs {
  Tensor output;  // [B, T..., O...]
  Tensor scores;  // the probabilities before dropout, in Keras' product layout
};

// Keras' attention_axes against an input of `rank` (batch and features included): none gives
// every axis between them; a negative axis counts from rank (Keras' (rank - 1) + axis on the
// projected rank). ValueError for axes outside 1 .. rank - 2 or repeated.
std::vector<int> resolve_attention_axes(const std::vector<int>& axes, std::int64_t rank, const std::string& name);

EinsumAttentionOutputs einsum_attention(const EinsumAttentionInputs& in);

}  // namespace keel::layers::detail
