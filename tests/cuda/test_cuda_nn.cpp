// Neural-network ops on cuda:0 against the CPU, forward and gradient: softmax, batch and layer
// normalisation, moments, dropout (the same numbers as the CPU for the same seed), embedding
// lookups, every loss, LSTM / GRU cells and sequences, attention. Bounds: see cuda_compare.hpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using namespace keel_cuda_test;

TEST_CASE("softmax and log_softmax on cuda:0 match the CPU", "[cuda][nn]") {
  const Tensor x = rnd({4, 5, 6}, 1, -4, 4);
  const Tensor wide = rnd({3, 3000}, 2, -30, 30);  // large logits: the max must be subtracted
  std::vector<Case> cases = {
      {"softmax last axis", [](const Inputs& v) { return softmax(v[0]); }, {x}},
      {"softmax axis 1", [](const Inputs& v) { return softmax(v[0], 1); }, {x}},
      {"softmax axis 0", [](const Inputs& v) { return softmax(v[0], 0); }, {x}},
      {"softmax of a transposed view", [](const Inputs& v) { return softmax(transpose(v[0])); }, {x}},
      {"softmax over 3000 large logits", [](const Inputs& v) { return softmax(v[0]); }, {wide}, Tol{.sum_length = 3000}},
      {"log_softmax last axis", [](const Inputs& v) { return log_softmax(v[0]); }, {x}},
      {"log_softmax axis 1", [](const Inputs& v) { return log_softmax(v[0], 1); }, {x}},
      {"log_softmax over 3000 large logits", [](const Inputs& v) { return log_softmax(v[0]); }, {wide},
       Tol{.sum_length = 3000}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("batch_norm, layer_norm and moments on cuda:0 match the CPU", "[cuda][nn]") {
  const Tensor x = rnd({8, 5, 6, 4}, 1, -2, 3);
  const Tensor gamma = rnd({4}, 2, 0.5, 1.5), beta = rnd({4}, 3);
  const Tensor mean = rnd({4}, 4), var = rnd({4}, 5, 0.5, 2);
  const Tensor x2 = rnd({6, 7}, 6);
  const Tensor g2 = rnd({7}, 7, 0.5, 1.5), b2 = rnd({7}, 8);
  const Tensor g_hw = rnd({5, 6}, 9, 0.5, 1.5), b_hw = rnd({5, 6}, 10);
  std::vector<Case> cases = {
      {"batch_norm training",
       [](const Inputs& v) {
         const auto r = batch_norm(v[0], v[1], v[2], v[3], v[4], true, 0.9);
         return pack({r.y, r.moving_mean, r.moving_variance});
       },
       {x, gamma, beta, mean, var}},
      {"batch_norm inference",
       [](const Inputs& v) { return batch_norm(v[0], v[1], v[2], v[3], v[4], false).y; }, {x, gamma, beta, mean, var}},
      {"batch_norm training, rank 2",
       [](const Inputs& v) {
         const auto r = batch_norm(v[0], v[1], v[2], v[3], v[4], true, 0.99, 1e-5);
         return pack({r.y, r.moving_mean, r.moving_variance});
       },
       {x2, g2, b2, rnd({7}, 11), rnd({7}, 12, 0.5, 2)}},
      {"batch_norm training of a transposed view",
       [](const Inputs& v) { return batch_norm(transpose(v[0], {1, 0, 2, 3}), v[1], v[2], v[3], v[4], true).y; },
       {x, gamma, beta, mean, var}},
      {"layer_norm last axis", [](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }, {x2, g2, b2}},
      {"layer_norm without gamma and beta", [](const Inputs& v) { return layer_norm(v[0], Tensor(), Tensor()); }, {x2}},
      {"layer_norm axes {1,2}", [](const Inputs& v) { return layer_norm(transpose(v[0], {0, 3, 1, 2}), v[1], v[2], {2, 3}, 1e-5); },
       {x, g_hw, b_hw}},
      {"moments axes {0,1,2}", [](const Inputs& v) { auto [m, s] = moments(v[0], {0, 1, 2}); return pack({m, s}); }, {x}},
      {"moments axis 1 keepdims", [](const Inputs& v) { auto [m, s] = moments(v[0], {1}, true); return pack({m, s}); }, {x2}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("dropout on cuda:0 drops the same elements as the CPU for the same seed", "[cuda][nn]") {
  const Tensor x = rnd({37, 29}, 1, 0.5, 1.5);  // never zero: a zero output means dropped
  same_on_gpu({
      {"dropout 0.3 with an op seed", [](const Inputs& v) { return dropout(v[0], 0.3, 1234); }, {x}},
      {"dropout 0.5 with the global seed",
       [](const Inputs& v) { random::set_seed(99); return dropout(v[0], 0.5); }, {x}},
      {"dropout 0.9 of a transposed view", [](const Inputs& v) { return dropout(transpose(v[0]), 0.9, 7); }, {x}},
      {"dropout 0.2 float64", [](const Inputs& v) { return dropout(v[0], 0.2, 5); }, {x.astype(DType::float64)},
       Tol{.rtol = kFloat64}},
      {"dropout rate 0 is the identity", [](const Inputs& v) { return dropout(v[0], 0.0, 5) * 1.0; }, {x}},
  });
  // Two draws from the global generator differ (the counter advances on the GPU too).
  DeviceScope gpu(Device::cuda(0));
  random::set_seed(3);
  const Tensor ones_gpu = ones({1000});
  const auto first = dropout(ones_gpu, 0.5).to_vector<float>();
  const auto second = dropout(ones_gpu, 0.5).to_vector<float>();
  CHECK(first != second);
}

TEST_CASE("embedding lookups on cuda:0 gather and accumulate gradients as on the CPU", "[cuda][nn]") {
  const Tensor params = rnd({10, 4}, 1);
  const Tensor ids32 = rnd_int({3, 5}, 2, 0, 10, DType::int32);  // repeated ids: summed gradients
  const Tensor ids64 = rnd_int({200}, 3, 0, 3, DType::int64);    // many repeats of three rows
  same_on_gpu({
      {"int32 ids", [](const Inputs& v) { return embedding_lookup(v[0], v[1]); }, {params, ids32}},
      {"int64 ids, heavy repeats", [](const Inputs& v) { return embedding_lookup(v[0], v[1]); }, {params, ids64}},
      {"float64 params", [](const Inputs& v) { return embedding_lookup(v[0], v[1]); }, {params.astype(DType::float64), ids32},
       Tol{.rtol = kFloat64}},
  });
}

TEST_CASE("every loss on cuda:0 matches the CPU, forward and gradient", "[cuda][nn]") {
  const Tensor logits = rnd({6, 5}, 1, -3, 3);
  const Tensor probs_raw = rnd({6, 5}, 2, 0.05, 1);
  const Tensor labels_sparse64 = rnd_int({6}, 3, 0, 5, DType::int64);
  const Tensor labels_sparse32 = rnd_int({6}, 4, 0, 5, DType::int32);
  const Tensor y_true = rnd({6, 5}, 5, 0, 1), y_pred = rnd({6, 5}, 6, -2, 2);
  const Tensor bin_true = rnd_int({6, 5}, 7, 0, 2, DType::float32);
  const Tensor bin_pred = rnd({6, 5}, 8, 0.02, 0.98);
  const Tensor logits3 = rnd({2, 5, 4}, 9, -3, 3);
  const Tensor labels3 = rnd_int({2, 5}, 10, 0, 4, DType::int64);
  auto normalized = [](const Tensor& t) { return t / reduce_sum(t, {-1}, true); };
  std::vector<Case> cases = {
      {"softmax_cross_entropy_with_logits",
       [normalized](const Inputs& v) { return softmax_cross_entropy_with_logits(normalized(v[0]), v[1]); }, {probs_raw, logits}},
      {"softmax_cross_entropy_with_logits axis 1",
       [](const Inputs& v) { return softmax_cross_entropy_with_logits(softmax(v[0], 1), v[1], 1); }, {logits3, rnd({2, 5, 4}, 11)}},
      {"sparse_softmax_cross_entropy_with_logits int64",
       [](const Inputs& v) { return sparse_softmax_cross_entropy_with_logits(v[0], v[1]); }, {labels_sparse64, logits}},
      {"sparse_softmax_cross_entropy_with_logits int32",
       [](const Inputs& v) { return sparse_softmax_cross_entropy_with_logits(v[0], v[1]); }, {labels_sparse32, logits}},
      {"sigmoid_cross_entropy_with_logits",
       [](const Inputs& v) { return sigmoid_cross_entropy_with_logits(v[0], v[1]); }, {bin_true, y_pred}},
      {"mean_squared_error", [](const Inputs& v) { return losses::mean_squared_error(v[0], v[1]); }, {y_true, y_pred}},
      {"mean_absolute_error", [](const Inputs& v) { return losses::mean_absolute_error(v[0], v[1]); }, {y_true, y_pred}},
      {"huber", [](const Inputs& v) { return losses::huber(v[0], v[1], 0.7); }, {y_true, y_pred}},
      {"sparse_categorical_crossentropy from logits",
       [](const Inputs& v) { return losses::sparse_categorical_crossentropy(v[0], v[1], true); }, {labels_sparse64, logits}},
      {"sparse_categorical_crossentropy from probabilities",
       [normalized](const Inputs& v) { return losses::sparse_categorical_crossentropy(v[0], normalized(v[1])); },
       {labels_sparse32, probs_raw}},
      {"sparse_categorical_crossentropy rank 3",
       [](const Inputs& v) { return losses::sparse_categorical_crossentropy(v[0], v[1], true); }, {labels3, logits3}},
      {"categorical_crossentropy from logits, label smoothing",
       [normalized](const Inputs& v) { return losses::categorical_crossentropy(normalized(v[0]), v[1], true, 0.1); },
       {probs_raw, logits}},
      {"categorical_crossentropy from probabilities",
       [normalized](const Inputs& v) { return losses::categorical_crossentropy(normalized(v[0]), normalized(v[1])); },
       {y_true, probs_raw}},
      {"binary_crossentropy from probabilities",
       [](const Inputs& v) { return losses::binary_crossentropy(v[0], v[1]); }, {bin_true, bin_pred}},
      {"binary_crossentropy from logits, label smoothing",
       [](const Inputs& v) { return losses::binary_crossentropy(v[0], v[1], true, 0.2); }, {bin_true, y_pred}},
      {"kl_divergence",
       [normalized](const Inputs& v) { return losses::kl_divergence(normalized(v[0]), normalized(v[1])); },
       {probs_raw, rnd({6, 5}, 12, 0.05, 1)}},
  };
  same_on_gpu(cases);
  for (auto& c : cases) {
    for (auto& in : c.inputs)
      if (in.dtype() == DType::float32) in = in.astype(DType::float64);
    c.name += " float64";
    c.tol.rtol = kFloat64;
  }
  same_on_gpu(cases);
}

TEST_CASE("LSTM and GRU cells and sequences on cuda:0 match the CPU", "[cuda][nn]") {
  const std::int64_t batch = 3, time = 7, features = 5, units = 6;
  const Tensor x = rnd({batch, time, features}, 1);
  const Tensor h0 = rnd({batch, units}, 2), c0 = rnd({batch, units}, 3);
  const Tensor lk = rnd({features, 4 * units}, 4, -0.5, 0.5), lr = rnd({units, 4 * units}, 5, -0.5, 0.5);
  const Tensor lb = rnd({4 * units}, 6, -0.2, 0.2);
  const Tensor gk = rnd({features, 3 * units}, 7, -0.5, 0.5), gr = rnd({units, 3 * units}, 8, -0.5, 0.5);
  const Tensor gb = rnd({2, 3 * units}, 9, -0.2, 0.2);
  const Tensor xt = rnd({batch, features}, 10);
  std::vector<Case> cases = {
      {"lstm_cell",
       [](const Inputs& v) { auto s = lstm_cell(v[0], v[1], v[2], v[3], v[4], v[5]); return pack({s.h, s.c}); },
       {xt, h0, c0, lk, lr, lb}},
      {"gru_cell", [](const Inputs& v) { return gru_cell(v[0], v[1], v[2], v[3], v[4]); }, {xt, h0, gk, gr, gb}},
      {"lstm sequence",
       [](const Inputs& v) { auto s = lstm(v[0], v[1], v[2], v[3], v[4], v[5]); return pack({s.outputs, s.h, s.c}); },
       {x, h0, c0, lk, lr, lb}},
      {"lstm sequence backwards",
       [](const Inputs& v) { auto s = lstm(v[0], v[1], v[2], v[3], v[4], v[5], true); return pack({s.outputs, s.h, s.c}); },
       {x, h0, c0, lk, lr, lb}},
      {"lstm sequence of a transposed (time-major) input",
       [](const Inputs& v) { auto s = lstm(transpose(v[0], {1, 0, 2}), v[1], v[2], v[3], v[4], v[5]); return pack({s.outputs, s.c}); },
       {transpose(x, {1, 0, 2}).contiguous(), h0, c0, lk, lr, lb}},
      {"gru sequence", [](const Inputs& v) { auto s = gru(v[0], v[1], v[2], v[3], v[4]); return pack({s.outputs, s.h}); },
       {x, h0, gk, gr, gb}},
      {"gru sequence backwards",
       [](const Inputs& v) { auto s = gru(v[0], v[1], v[2], v[3], v[4], true); return pack({s.outputs, s.h}); },
       {x, h0, gk, gr, gb}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("scaled dot-product and multi-head attention on cuda:0 match the CPU", "[cuda][nn]") {
  const Tensor q = rnd({2, 3, 4, 8}, 1), k = rnd({2, 3, 6, 8}, 2), v = rnd({2, 3, 6, 5}, 3);
  const Tensor mask = rnd({2, 1, 4, 6}, 4) > -0.4;  // broadcast over the heads
  // query [2,3,5]; value and key [2,4,3] (so that key may also default to value); 2 heads of 3.
  const int heads = 2;
  const Inputs mha_inputs = {rnd({2, 3, 5}, 5), rnd({2, 4, 3}, 6), rnd({2, 4, 3}, 7),
                             rnd({5, 6}, 8),    rnd({6}, 9),       rnd({3, 6}, 10),
                             rnd({6}, 11),      rnd({3, 6}, 12),   rnd({6}, 13),
                             rnd({6, 7}, 14),   rnd({7}, 15),      rnd({2, 3, 4}, 16) > -0.5};
  auto mha = [heads](const Inputs& in, bool with_key, bool with_mask) {
    MultiHeadAttentionWeights w{in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10]};
    return multi_head_attention(in[0], in[1], with_key ? in[2] : Tensor(), w, heads, with_mask ? in[11] : Tensor());
  };
  std::vector<Case> cases = {
      {"scaled_dot_product_attention", [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); },
       {q, k, v}},
      {"scaled_dot_product_attention with a mask",
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); }, {q, k, v, mask}},
      {"scaled_dot_product_attention of transposed views",
       [](const Inputs& in) {
         return scaled_dot_product_attention(transpose(in[0], {0, 2, 1, 3}), transpose(in[1], {0, 2, 1, 3}),
                                             transpose(in[2], {0, 2, 1, 3}));
       },
       {transpose(q, {0, 2, 1, 3}).contiguous(), transpose(k, {0, 2, 1, 3}).contiguous(),
        transpose(v, {0, 2, 1, 3}).contiguous()}},
      {"multi_head_attention", [mha](const Inputs& in) { return mha(in, true, false); }, mha_inputs},
      {"multi_head_attention, key = value, masked", [mha](const Inputs& in) { return mha(in, false, true); }, mha_inputs},
  };
  same_on_gpu(cases);
  for (auto& c : cases) {
    for (auto& in : c.inputs)
      if (in.dtype() == DType::float32) in = in.astype(DType::float64);
    c.name += " float64";
    c.tol.rtol = kFloat64;
  }
  same_on_gpu(cases);
}
