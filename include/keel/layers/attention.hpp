#pragma once
// MultiHeadAttention as Keras has it (attention over the time axis of [batch, time, features], or
// over any attention_axes of [batch, ..., features]), and the single-head Attention (Luong) and
// AdditiveAttention (Bahdanau) layers.
//
// attention_axes = {1, 2} on [B, H, W, C] attends every pixel to every pixel: scores
// [B, heads, H, W, H', W'], softmax over the last two axes; an attention_mask [B, H, W, H', W']
// gains the heads axis (Keras' _masked_softmax).
//
// Calling it:
//   layers::MultiHeadAttention mha(4, 16);
//   Tensor y = mha({query, value});                  // key = value
//   Tensor y = mha({query, value, key});
//   Tensor y = mha({query, value, mask});            // a bool input is the attention_mask
//   Tensor y = mha({query, value, key, mask});
//   Tensor y = mha(query, value, {.attention_mask = mask, .use_causal_mask = true, .training = true});
//   auto [y, scores] = mha.call_with_scores(query, value);   // Keras' return_attention_scores
// The list forms are the multi-input call (they work on symbolic tensors of the functional API
// too); the keyword form mirrors Keras' call() arguments. attention_mask is bool, true = attend,
// shaped [batch, Tq, Tv] ([Tq, Tv] and [batch, heads, Tq, Tv] broadcast as well).
//
// Masks riding on the inputs (get_mask: Embedding(mask_zero = true)) are used as Keras uses
// them: the query's mask [B, Tq] -> [B, Tq, 1], the value's and key's [B, Tv] -> [B, 1, Tv], and
// all of them, the causal mask and attention_mask are and-ed. The output carries the query's mask.
//
// Weights, named and shaped as Keras' EinsumDense sublayers: query/kernel [Dq, H, key_dim],
// query/bias [H, key_dim], key/kernel [Dk, H, key_dim], key/bias, value/kernel [Dv, H, value_dim],
// value/bias [H, value_dim], attention_output/kernel [H, value_dim, *output_shape],
// attention_output/bias [*output_shape] (output_shape defaults to [Dq]). They are created on the
// first call, when the query, value and key shapes are known.
//
// dropout acts on the attention probabilities, in training only. Without it (and without
// scores requested) the fused op multi_head_attention() runs; otherwise the same maths step by
// step. A float64 query runs the layer in float64 (weights cast, as the recurrent layers do).
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

struct MultiHeadAttentionOptions {
  std::optional<int> value_dim;               // none: key_dim
  double dropout = 0.0;                       // on the attention probabilities, in training
  bool use_bias = true;
  std::vector<std::int64_t> output_shape;     // empty: the query's last dimension
  // Keras' attention_axes: the axes of [B, ..., D] attended over (negative: from the end, the
  // last, feature, axis excluded); empty (Keras None): every axis between batch and features.
  std::vector<int> attention_axes;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer;
  regularizers::Regularizer bias_regularizer;
  regularizers::Regularizer activity_regularizer;
  constraints::Constraint kernel_constraint{};
  constraints::Constraint bias_constraint{};
  std::optional<std::uint64_t> seed;          // dropout seed: the n-th training call uses (seed, n)
  std::string name;
};

// Keras' MultiHeadAttention.call() keyword arguments (return_attention_scores: call_with_scores).
struct MultiHeadAttentionCall {
  Tensor key;              // undefined: value
  Tensor query_mask;       // bool [B, Tq]; undefined: the mask riding on query, if any
  Tensor value_mask;       // bool [B, Tv]; undefined: the mask riding on value, if any
  Tensor key_mask;         // bool [B, Tv]; undefined: the mask riding on key, if any
  Tensor attention_mask;   // bool [B, Tq, Tv], true = attend
  bool training = false;
  bool use_causal_mask = false;  // query position i attends to value positions <= i
};

class MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(int num_heads, int key_dim, MultiHeadAttentionOptions options = {});
  KEEL_LAYER_BOILERPLATE(MultiHeadAttention)

  using Layer::operator();
  // Keras' mha(query, value, key=..., attention_mask=..., use_causal_mask=..., training=...).
  Tensor operator()(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& call = {});
  // Keras' return_attention_scores = True: {output, scores [B, H, Tq, Tv]} (the softmax
  // probabilities, before dropout).
  std::pair<Tensor, Tensor> call_with_scores(const Tensor& query, const Tensor& value,
                                             const MultiHeadAttentionCall& call = {});

  using Layer::build;
  using Layer::call;
  // Weights are made on the first call (a third input may be a key or a mask: shapes alone
  // cannot tell); build(shapes) only marks the layer built.
  void build(const std::vector<Shape>& input_shapes) override;
  // One tensor is not enough input: ValueError (Keras needs query and value).
  Tensor call(const Tensor& inputs, bool training) override;
  // {query, value}, {query, value, key}; a bool tensor in third or fourth place is the attention mask.
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  nlohmann::json get_config() const override;

  int num_heads() const { return num_heads_; }
  int key_dim() const { return key_dim_; }
  int value_dim() const { return options_.value_dim ? *options_.value_dim : key_dim_; }
  const MultiHeadAttentionOptions& options() const { return options_; }
  // The attention probabilities of the last call_with_scores() (undefined otherwise).
  const Tensor& last_attention_scores() const { return scores_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  void build_weights(std::int64_t query_dim, std::int64_t key_features, std::int64_t value_features);
  std::vector<std::int64_t> out_dims() const;
  // Inputs of rank > 3 or attention over other axes than time: Keras' einsum formulation.
  Tensor call_einsum(const Tensor& query, const Tensor& value, const Tensor& key, Tensor mask,
                     const Tensor& query_mask, const Tensor& value_mask, const Tensor& key_mask, bool training);

  int num_heads_, key_dim_;
  MultiHeadAttentionOptions options_;
  bool weights_built_ = false;
  std::int64_t query_dim_ = 0, key_features_ = 0, value_features_ = 0;
  Variable *wq_ = nullptr, *bq_ = nullptr, *wk_ = nullptr, *bk_ = nullptr, *wv_ = nullptr, *bv_ = nullptr,
           *wo_ = nullptr, *bo_ = nullptr;  // owned by Layer (stable addresses)
  bool want_scores_ = false;
  Tensor scores_;
  std::uint64_t training_calls_ = 0;
};

// Keras' Attention / AdditiveAttention call() keyword arguments.
struct AttentionCall {
  Tensor key;              // undefined: value
  Tensor query_mask;       // bool [B, Tq]; undefined: the mask riding on query, if any
  Tensor value_mask;       // bool [B, Tv]; undefined: the mask riding on value, if any
  bool training = false;
  bool use_causal_mask = false;  // query position i attends to value positions <= i
};

struct AttentionOptions {
  bool use_scale = false;          // a learned scalar "scale" multiplying the scores
  std::string score_mode = "dot";  // "dot": q . k; "concat": sum(tanh(q + k)) times a learned weight
  double dropout = 0.0;            // on the attention distribution, in training
  std::optional<std::uint64_t> seed;
  std::string name;
};

// Keras' dot-product (Luong) Attention on [B, Tq, D] queries and [B, Tv, D] values (keys):
//   dot:    scores = scale * q k^T
//   concat: scores = concat_score_weight * sum_d tanh(scale * (q_i + k_j))
// masked scores (value mask, causal) lose 1e9; probs = softmax(scores); out = probs v, zeroed at
// masked query steps; the output carries the query mask. Call: att({query, value[, key]}) or
// att(query, value, {.key = ..., .use_causal_mask = true}).
class Attention : public Layer {
 public:
  explicit Attention(AttentionOptions options = {});
  KEEL_LAYER_BOILERPLATE(Attention)
  using Layer::operator();
  Tensor operator()(const Tensor& query, const Tensor& value, const AttentionCall& call = {});
  // Keras' return_attention_scores = True: {output, probabilities [B, Tq, Tv]}.
  std::pair<Tensor, Tensor> call_with_scores(const Tensor& query, const Tensor& value, const AttentionCall& call = {});
  using Layer::build;
  using Layer::call;
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& inputs, bool training) override;  // ValueError: needs a list
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  nlohmann::json get_config() const override;
  const AttentionOptions& options() const { return options_; }
  const Tensor& last_attention_scores() const { return scores_; }

 protected:
  bool floating_inputs() const override { return true; }
  // Builds the scores [B, Tq, Tv] of query [B, Tq, D] and key [B, Tv, D].
  virtual Tensor scores(const Tensor& query, const Tensor& key);
  virtual void build_weights(std::int64_t dim);
  AttentionOptions options_;
  Variable* scale_ = nullptr;
  Variable* concat_score_weight_ = nullptr;

 private:
  bool causal_ = false, want_scores_ = false;
  Tensor query_mask_, value_mask_;  // from the keyword call
  Tensor scores_;
  std::uint64_t training_calls_ = 0;
};

struct AdditiveAttentionOptions {
  bool use_scale = true;  // a learned vector "scale" [D] inside the sum
  double dropout = 0.0;
  std::optional<std::uint64_t> seed;
  std::string name;
};

// Keras' AdditiveAttention (Bahdanau): scores[b, i, j] = sum_d scale_d tanh(q[b, i, d] + k[b, j, d]),
// then as Attention.
class AdditiveAttention : public Attention {
 public:
  explicit AdditiveAttention(AdditiveAttentionOptions options = {});
  KEEL_LAYER_BOILERPLATE(AdditiveAttention)
  nlohmann::json get_config() const override;

 protected:
  Tensor scores(const Tensor& query, const Tensor& key) override;
  void build_weights(std::int64_t dim) override;
};

}  // namespace keel::layers
