// Embedding lookup, the fused cross-entropies and the per-example Keras losses: values derived
// by hand (and Keras' documented examples), stability at logits of +-1e4, label validation, and
// float64 finite-difference checks of every loss wrt y_pred and of the fused ops wrt logits
// (first and second derivatives).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

constexpr DType f64 = DType::float64;

void check_close(const Tensor& t, const std::vector<double>& expected, double eps = 1e-12) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).epsilon(eps).margin(eps));
  }
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

// Probabilities: a softmax of fixed random logits (rows sum to one, no entry near 0 or 1).
Tensor probabilities(Shape shape, std::uint64_t seed) {
  random::set_seed(seed);
  return softmax(random::normal(std::move(shape), 0, 0.5, f64));
}

Tensor randn(Shape shape, std::uint64_t seed, double mean = 0, double stddev = 1) {
  random::set_seed(seed);
  return random::normal(std::move(shape), mean, stddev, f64);
}

}  // namespace

// ---- embedding lookup ---------------------------------------------------------------------------------

TEST_CASE("embedding_lookup gathers rows of params by id", "[embedding]") {
  // params rows r = [10 r, 10 r + 1]; ids [[1, 3], [1, 1]] -> rows 1, 3, 1, 1
  const Tensor params = constant({0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0}, {4, 2}, f64);
  const Tensor ids = constant(std::vector<std::int64_t>{1, 3, 1, 1}, {2, 2});
  const Tensor y = embedding_lookup(params, ids);
  CHECK(y.shape() == Shape{2, 2, 2});
  CHECK(y.to_vector<double>() == std::vector<double>{10, 11, 30, 31, 10, 11, 10, 11});
  CHECK(embedding_lookup(params, constant(std::vector<std::int32_t>{2}, {1})).to_vector<double>() ==
        std::vector<double>{20, 21});
}

TEST_CASE("embedding_lookup gradient adds up the rows of repeated ids", "[embedding][grad]") {
  // y[i] = params[ids[i]]; d/dparams sum(y * w) puts w[i] on row ids[i], summed over repeats:
  //   ids [1, 3, 1, 1] with w rows [1, 2], [3, 4], [5, 6], [7, 8]:
  //   row 1 = [1+5+7, 2+6+8] = [13, 16], row 3 = [3, 4], rows 0 and 2 untouched (0)
  const Tensor params = zeros({4, 2}, f64);
  const Tensor ids = constant(std::vector<std::int64_t>{1, 3, 1, 1}, {4});
  const Tensor w = constant({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}, {4, 2}, f64);
  GradientTape tape;
  tape.watch(params);
  const Tensor g = tape.gradient(reduce_sum(embedding_lookup(params, ids) * w), params);
  CHECK(g.shape() == Shape{4, 2});
  CHECK(g.to_vector<double>() == std::vector<double>{0, 0, 13, 16, 0, 0, 3, 4});
  check_gradients([&](const std::vector<Tensor>& in) {
    return embedding_lookup(in[0], constant(std::vector<std::int32_t>{2, 0, 2, 2, 1}, {5}));
  }, {randn({3, 4}, 1)}, 1e-6, 1e-8);
}

TEST_CASE("embedding_lookup rejects ids out of range and non-integer ids", "[embedding][errors]") {
  const Tensor params = zeros({4, 2});
  CHECK_THROWS_AS(embedding_lookup(params, constant(std::vector<std::int64_t>{0, 4}, {2})), ValueError);
  CHECK_THROWS_WITH(embedding_lookup(params, constant(std::vector<std::int64_t>{0, 4}, {2})),
                    Contains("embedding_lookup") && Contains("4"));
  CHECK_THROWS_AS(embedding_lookup(params, constant(std::vector<std::int64_t>{-1}, {1})), ValueError);
  CHECK_THROWS_AS(embedding_lookup(params, constant({1.0f}, {1})), DTypeError);
}

// ---- fused cross-entropies: values -----------------------------------------------------------------------

TEST_CASE("softmax cross-entropy of a known 3-class example", "[cross_entropy]") {
  // logits [1, 2, 3]: lse = log(e + e^2 + e^3) = 3 + log(1 + e^-1 + e^-2) = 3.40760596444438
  //   one-hot class 2:        loss = lse - 3 = 0.40760596444438
  //   labels [0.2, 0.3, 0.5]: loss = lse - (0.2*1 + 0.3*2 + 0.5*3) = lse - 2.3 = 1.10760596444438
  for (DType dt : {DType::float32, DType::float64}) {
    const double tol = dt == DType::float32 ? 1e-6 : 1e-13;
    const Tensor logits = constant({1.0, 2.0, 3.0, 1.0, 2.0, 3.0}, {2, 3}, dt);
    const Tensor labels = constant({0.0, 0.0, 1.0, 0.2, 0.3, 0.5}, {2, 3}, dt);
    const Tensor loss = softmax_cross_entropy_with_logits(labels, logits);
    CHECK(loss.shape() == Shape{2});
    CHECK(loss.dtype() == dt);
    check_close(loss, {0.40760596444438013, 1.1076059644443803}, tol);
    // The same along axis 0 of the transposes.
    check_close(softmax_cross_entropy_with_logits(transpose(labels), transpose(logits), 0),
                {0.40760596444438013, 1.1076059644443803}, tol);
    // Sparse: class 2 -> lse - 3; class 0 -> lse - 1 = 2.40760596444438
    const Tensor ids = constant(std::vector<std::int64_t>{2, 0}, {2});
    check_close(sparse_softmax_cross_entropy_with_logits(ids, logits), {0.40760596444438013, 2.40760596444438}, tol);
  }
}

TEST_CASE("softmax cross-entropies over short and long rows match a float64 log-sum-exp", "[cross_entropy]") {
  // The rows go a block at a time (rows of 4 and 33 several per block, rows of 5000 one each):
  // every row's loss against lse(x) - sum_j z_j x_j from a float64 max and sum, and the sparse
  // loss against lse(x) - x[label].
  random::set_seed(5);
  for (const auto& [rows, k] : {std::pair<std::int64_t, std::int64_t>{3000, 4}, {500, 33}, {3, 5000}}) {
    INFO("[" << rows << ", " << k << "]");
    const Tensor logits = random::normal(Shape{rows, k}, 0.0, 3.0);
    const Tensor ids = random::uniform_int(Shape{rows}, 0, k);
    const Tensor labels = softmax(random::normal(Shape{rows, k}), -1);
    const std::vector<double> x = logits.to_vector<double>(), z = labels.to_vector<double>();
    const std::vector<std::int64_t> id = ids.to_vector<std::int64_t>();
    const std::vector<double> dense = softmax_cross_entropy_with_logits(labels, logits).to_vector<double>();
    const std::vector<double> sparse = sparse_softmax_cross_entropy_with_logits(ids, logits).to_vector<double>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* xr = x.data() + r * k;
      const double m = *std::max_element(xr, xr + k);
      double sum = 0, zx = 0, zs = 0;
      for (std::int64_t j = 0; j < k; ++j) {
        sum += std::exp(xr[j] - m);
        zx += z[static_cast<std::size_t>(r * k + j)] * xr[j];
        zs += z[static_cast<std::size_t>(r * k + j)];
      }
      const double lse = m + std::log(sum);
      REQUIRE(dense[static_cast<std::size_t>(r)] == Approx(lse * zs - zx).epsilon(1e-5).margin(1e-5));
      REQUIRE(sparse[static_cast<std::size_t>(r)] ==
              Approx(lse - xr[id[static_cast<std::size_t>(r)]]).epsilon(1e-5).margin(1e-5));
    }
  }
  // A -inf logit: with a zero label it adds nothing (loss log 2 from the other two equal logits);
  // with a positive label the loss is infinite.
  const Tensor logits = constant<float>({-INFINITY, 0, 0, -INFINITY, 0, 0}, {2, 3});
  const Tensor labels = constant<float>({0, 1, 0, 0.5f, 0.5f, 0}, {2, 3});
  const std::vector<float> loss = softmax_cross_entropy_with_logits(labels, logits).to_vector<float>();
  CHECK(loss[0] == Approx(std::log(2.0)));
  CHECK(std::isinf(loss[1]));
  CHECK(loss[1] > 0);
}

TEST_CASE("softmax cross-entropy gradients of one fused pass give the composite's bits", "[cross_entropy][grad]") {
  // Without an outer tape the logits' gradient is one fused pass per block of rows; under one
  // (which must see how the gradient depends on the inputs) it is the composite of ops. Both
  // run the same kernels in the same order: equal bits, for short and long rows, dense and
  // sparse labels, float32 and float64, and a weighted upstream gradient.
  random::set_seed(9);
  for (DType dt : {DType::float32, DType::float64})
    for (const auto& [rows, k] : {std::pair<std::int64_t, std::int64_t>{700, 4}, {40, 33}, {3, 1500}}) {
      INFO(name(dt) << " [" << rows << ", " << k << "]");
      const Tensor logits = random::normal(Shape{rows, k}, 0.0, 2.0, dt);
      const Tensor ids = random::uniform_int(Shape{rows}, 0, k);
      const Tensor labels = random::uniform(Shape{rows, k}, 0.0, 1.0, dt);  // rows need not sum to 1
      const Tensor w = random::normal(Shape{rows}, 0.0, 1.0, dt);
      const auto grads = [&](bool outer_tape) {
        std::optional<GradientTape> outer;
        if (outer_tape) {
          outer.emplace();
          outer->watch(logits);
        }
        GradientTape tape;
        tape.watch(logits);
        const Tensor loss = reduce_sum(mul(softmax_cross_entropy_with_logits(labels, logits), w)) +
                            reduce_sum(mul(sparse_softmax_cross_entropy_with_logits(ids, logits), w));
        return tape.gradient(loss, logits).to_vector<double>();
      };
      CHECK(grads(false) == grads(true));
    }
}

TEST_CASE("sigmoid cross-entropy at a few points", "[cross_entropy]") {
  // max(x, 0) - x z + log(1 + exp(-|x|)):
  //   x = 0,  z = 1: log 2                       = 0.6931471805599453
  //   x = 2,  z = 0: 2 + log(1 + e^-2)           = 2.1269280110429727
  //   x = -3, z = 1: 0 + 3 + log(1 + e^-3)       = 3.048587351573742
  //   x = 1e4, z = 1: 1e4 - 1e4 + log(1 + e^-1e4) = 0
  //   x = 0.5, z = 0.25 (soft label): 0.5 - 0.125 + log(1 + e^-0.5) = 0.375 + 0.4740769841801067
  const Tensor x = constant({0.0, 2.0, -3.0, 1e4, 0.5}, {5}, f64);
  const Tensor z = constant({1.0, 0.0, 1.0, 1.0, 0.25}, {5}, f64);
  check_close(sigmoid_cross_entropy_with_logits(z, x),
              {0.6931471805599453, 2.1269280110429727, 3.048587351573742, 0.0, 0.375 + 0.4740769841801067});
}

TEST_CASE("fused cross-entropies are finite in value and gradient for logits of +-1e4", "[cross_entropy][stability]") {
  for (DType dt : {DType::float32, DType::float64}) {
    INFO(name(dt));
    // Softmax: the true class has the lowest logit: loss = 1e4 - (-1e4) = 2e4, gradient
    // softmax - labels = [1, -1, 0].
    const Tensor logits = constant({1e4, -1e4, 0.0, -1e4, 1e4, 1e4}, {2, 3}, dt);
    const Tensor labels = constant({0.0, 1.0, 0.0, 1.0, 0.0, 0.0}, {2, 3}, dt);
    const Tensor ids = constant(std::vector<std::int32_t>{1, 0}, {2});
    const Tensor zs = constant({0.0, 1.0, 0.0, 1.0, 0.0, 1.0}, {2, 3}, dt);
    GradientTape tape(true);
    tape.watch(logits);
    const Tensor dense = softmax_cross_entropy_with_logits(labels, logits);
    const Tensor sparse = sparse_softmax_cross_entropy_with_logits(ids, logits);
    const Tensor sig = sigmoid_cross_entropy_with_logits(zs, logits);
    const Tensor bce = losses::binary_crossentropy(zs, logits, true);
    const Tensor cce = losses::categorical_crossentropy(labels, logits, true, 0.1);
    for (const Tensor& loss : {dense, sparse, sig, bce, cce}) {
      CHECK(all_finite(loss));
      CHECK(all_finite(tape.gradient(reduce_sum(loss), logits)));
    }
    // Row 1: logits [-1e4, 1e4, 1e4], class 0: 1e4 + log 2 - (-1e4) = 2e4 + log 2.
    check_close(dense, {2e4, 2e4 + std::log(2.0)}, 1e-6);
    check_close(sparse, {2e4, 2e4 + std::log(2.0)}, 1e-6);
    check_close(tape.gradient(reduce_sum(dense), logits), {1, -1, 0, -1, 0.5, 0.5}, 1e-6);
    // Sigmoid: a logit of 1e4 with label 0, or -1e4 with label 1, costs 1e4; 1e4 with label 1
    // costs 0; a logit of 0 costs log 2 whatever the label.
    check_close(sig, {1e4, 1e4, std::log(2.0), 1e4, 1e4, 0}, 1e-6);
  }
}

// ---- fused cross-entropies: gradients --------------------------------------------------------------------

TEST_CASE("softmax cross-entropy gradient is softmax - labels and matches finite differences", "[cross_entropy][grad]") {
  const Tensor logits = randn({4, 5}, 11);
  const Tensor labels = probabilities({4, 5}, 12);
  GradientTape tape;
  tape.watch(logits);
  const Tensor g = tape.gradient(reduce_sum(softmax_cross_entropy_with_logits(labels, logits)), logits);
  const auto expected = (softmax(logits) - labels).to_vector<double>();
  const auto got = g.to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-14));
  // wrt logits and labels (labels need not sum to one here), last axis and axis 0
  const Tensor loose = randn({4, 5}, 13, 0.5, 0.3);
  check_gradients([](const std::vector<Tensor>& in) { return softmax_cross_entropy_with_logits(in[1], in[0]); },
                  {logits, loose}, 1e-6, 1e-6);
  check_gradients([](const std::vector<Tensor>& in) { return softmax_cross_entropy_with_logits(in[1], in[0], 0); },
                  {randn({3, 2, 4}, 14), randn({3, 2, 4}, 15)}, 1e-6, 1e-6);
}

TEST_CASE("sparse softmax cross-entropy gradient matches finite differences", "[cross_entropy][grad]") {
  const Tensor ids = constant(std::vector<std::int64_t>{0, 4, 2, 2, 1, 3}, {2, 3});
  check_gradients([&](const std::vector<Tensor>& in) { return sparse_softmax_cross_entropy_with_logits(ids, in[0]); },
                  {randn({2, 3, 5}, 21, 0, 2)}, 1e-6, 1e-6);
}

TEST_CASE("sigmoid cross-entropy gradient is sigmoid(x) - z and matches finite differences", "[cross_entropy][grad]") {
  const Tensor x = randn({3, 4}, 31, 0, 3);
  const Tensor z = probabilities({3, 4}, 32);
  GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(reduce_sum(sigmoid_cross_entropy_with_logits(z, x)), x);
  const auto expected = (sigmoid(x) - z).to_vector<double>();
  const auto got = g.to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-14));
  check_gradients([](const std::vector<Tensor>& in) { return sigmoid_cross_entropy_with_logits(in[1], in[0]); },
                  {x, z}, 1e-6, 1e-6);
}

TEST_CASE("fused cross-entropies have second derivatives", "[cross_entropy][grad]") {
  // f(logits) = d/dlogits sum(w * loss): the outer tape differentiates the closed-form backward.
  const Tensor w = randn({3}, 41, 1, 0.3);
  const Tensor labels = probabilities({3, 4}, 42);
  const Tensor ids = constant(std::vector<std::int64_t>{3, 0, 1}, {3});
  const Tensor zs = probabilities({3, 4}, 43);
  auto second = [&](int which) {
    return [&, which](const std::vector<Tensor>& in) {
      GradientTape inner;
      inner.watch(in[0]);
      Tensor loss;
      if (which == 0) loss = softmax_cross_entropy_with_logits(labels, in[0]) * w;
      if (which == 1) loss = sparse_softmax_cross_entropy_with_logits(ids, in[0]) * w;
      if (which == 2) loss = sigmoid_cross_entropy_with_logits(zs, in[0]) * reshape(w, {3, 1});
      return inner.gradient(reduce_sum(loss), in[0]);
    };
  };
  for (int which = 0; which < 3; ++which) {
    INFO("op " << which);
    check_gradients(second(which), {randn({3, 4}, 44)}, 1e-6, 1e-6);
  }
}

TEST_CASE("sparse cross-entropy labels out of range are a ValueError naming the label and the classes",
          "[cross_entropy][errors]") {
  const Tensor logits = zeros({2, 3});
  const Tensor bad = constant(std::vector<std::int64_t>{1, 3}, {2});
  CHECK_THROWS_AS(sparse_softmax_cross_entropy_with_logits(bad, logits), ValueError);
  CHECK_THROWS_WITH(sparse_softmax_cross_entropy_with_logits(bad, logits), Contains("label 3") && Contains("3"));
  CHECK_THROWS_AS(sparse_softmax_cross_entropy_with_logits(constant(std::vector<std::int32_t>{-1, 0}, {2}), logits),
                  ValueError);
  CHECK_THROWS_WITH(losses::sparse_categorical_crossentropy(bad, softmax(logits)),
                    Contains("label 3") && Contains("number of classes is 3"));
  CHECK_THROWS_AS(losses::sparse_categorical_crossentropy(bad, logits, true), ValueError);
  // and the other argument errors
  CHECK_THROWS_AS(sparse_softmax_cross_entropy_with_logits(constant({1.0f, 0.0f}, {2}), logits), DTypeError);
  CHECK_THROWS_AS(sparse_softmax_cross_entropy_with_logits(constant(std::vector<std::int64_t>{1, 0, 0}, {3}), logits),
                  ShapeError);
  CHECK_THROWS_AS(softmax_cross_entropy_with_logits(zeros({2, 4}), logits), ShapeError);
  CHECK_THROWS_AS(sigmoid_cross_entropy_with_logits(zeros({3, 2}), logits), ShapeError);
  CHECK_THROWS_AS(losses::sparse_categorical_crossentropy(bad, logits, true, 0), ValueError);  // axis
}

// ---- per-example losses: values ---------------------------------------------------------------------------

TEST_CASE("mean squared and absolute error average over the last axis", "[losses]") {
  // y_true [[0, 1], [2, 3]], y_pred [[1, 1], [0, 0]]:
  //   MSE per row: (1 + 0) / 2 = 0.5, (4 + 9) / 2 = 6.5;  MAE: (1 + 0) / 2 = 0.5, (2 + 3) / 2 = 2.5
  const Tensor yt = constant({0.0, 1.0, 2.0, 3.0}, {2, 2}, f64);
  const Tensor yp = constant({1.0, 1.0, 0.0, 0.0}, {2, 2}, f64);
  check_close(losses::mean_squared_error(yt, yp), {0.5, 6.5});
  check_close(losses::mean_absolute_error(yt, yp), {0.5, 2.5});
  // Keras' squeeze_or_expand_to_same_rank: y_true [2] against y_pred [2, 1] is one value per
  // example (not a [2, 2] broadcast): [(1-0)^2, (3-1)^2] = [1, 4].
  const Tensor t1 = constant({1.0, 3.0}, {2}, f64);
  const Tensor p1 = constant({0.0, 1.0}, {2, 1}, f64);
  check_close(losses::mean_squared_error(t1, p1), {1.0, 4.0});
  check_close(losses::mean_squared_error(reshape(t1, {2, 1}), reshape(p1, {2})), {1.0, 4.0});
  // Integer labels are converted to y_pred's dtype.
  check_close(losses::mean_squared_error(constant(std::vector<std::int32_t>{0, 1, 2, 3}, {2, 2}), yp), {0.5, 6.5});
  CHECK(losses::mean_squared_error(yt.astype(DType::float32), yp.astype(DType::float32)).dtype() == DType::float32);
}

TEST_CASE("huber is quadratic within delta and linear beyond it", "[losses]") {
  // delta = 1, errors e = y_pred - y_true = [0.5, -1, 2, -3]:
  //   0.5 * 0.25 = 0.125 | 0.5 * 1 = 0.5 (|e| = delta: quadratic) | 1*2 - 0.5 = 1.5 | 1*3 - 0.5 = 2.5
  const Tensor yt = zeros({4, 1}, f64);
  const Tensor yp = constant({0.5, -1.0, 2.0, -3.0}, {4, 1}, f64);
  check_close(losses::huber(yt, yp), {0.125, 0.5, 1.5, 2.5});
  // The mean over the last axis: (0.125 + 0.5 + 1.5 + 2.5) / 4 = 1.15625
  check_close(losses::huber(reshape(yt, {1, 4}), reshape(yp, {1, 4})), {1.15625});
  // delta = 2: 0.125 | 0.5 | 0.5 * 4 = 2 (|e| = delta) | 2*3 - 0.5*4 = 4
  check_close(losses::huber(yt, yp, 2.0), {0.125, 0.5, 2.0, 4.0});
  CHECK_THROWS_AS(losses::huber(yt, yp, -1.0), ValueError);
}

TEST_CASE("sparse categorical cross-entropy of probabilities is -log p[label], clipped", "[losses]") {
  // p rows [0.1, 0.6, 0.3], [0.2, 0.2, 0.6], labels [1, 2]: -log 0.6 = 0.5108256237659907 both
  const Tensor p = constant({0.1, 0.6, 0.3, 0.2, 0.2, 0.6}, {2, 3}, f64);
  const Tensor ids = constant(std::vector<std::int64_t>{1, 2}, {2});
  check_close(losses::sparse_categorical_crossentropy(ids, p), {0.5108256237659907, 0.5108256237659907});
  // Labels as floats with a trailing axis of 1 (Keras casts and squeezes them).
  check_close(losses::sparse_categorical_crossentropy(constant({1.0f, 2.0f}, {2, 1}), p),
              {0.5108256237659907, 0.5108256237659907});
  // A zero probability is clipped to 1e-7: -log 1e-7 = 16.11809565095832, not Inf.
  const Tensor hard = constant({1.0, 0.0, 0.0}, {1, 3}, f64);
  check_close(losses::sparse_categorical_crossentropy(constant(std::vector<std::int64_t>{1}, {1}), hard),
              {16.11809565095832}, 1e-9);
  // Rows are normalised first (Keras 3): [2, 1, 1] is [0.5, 0.25, 0.25]: class 0 costs log 2.
  check_close(losses::sparse_categorical_crossentropy(constant(std::vector<std::int64_t>{0}, {1}),
                                                      constant({2.0, 1.0, 1.0}, {1, 3}, f64)),
              {0.6931471805599453});
  // from_logits takes the fused op.
  const Tensor logits = randn({4, 5}, 51);
  const Tensor labels = constant(std::vector<std::int64_t>{0, 4, 2, 2}, {4});
  CHECK(losses::sparse_categorical_crossentropy(labels, logits, true).to_vector<double>() ==
        sparse_softmax_cross_entropy_with_logits(labels, logits).to_vector<double>());
}

TEST_CASE("categorical cross-entropy matches Keras' documented example and label smoothing", "[losses]") {
  // Keras: y_true [[0, 1, 0], [0, 0, 1]], y_pred [[0.05, 0.95, 0], [0.1, 0.8, 0.1]]
  //   -> [-log 0.95, -log 0.1] = [0.05129329438755058, 2.3025850929940455]
  const Tensor yt = constant({0.0, 1.0, 0.0, 0.0, 0.0, 1.0}, {2, 3}, f64);
  const Tensor yp = constant({0.05, 0.95, 0.0, 0.1, 0.8, 0.1}, {2, 3}, f64);
  check_close(losses::categorical_crossentropy(yt, yp), {0.05129329438755058, 2.3025850929940455});
  // label_smoothing 0.1, 3 classes: y = y * 0.9 + 0.1 / 3, row 0 = [1/30, 14/15, 1/30];
  //   -(1/30 log 0.05 + 14/15 log 0.95 + 1/30 log 1e-7) = 0.6850013389121242 (0 clipped to 1e-7)
  check_close(losses::categorical_crossentropy(slice(yt, {0, 0}, {1, 3}), slice(yp, {0, 0}, {1, 3}), false, 0.1),
              {0.6850013389121242}, 1e-10);
  // from_logits = the fused op on the smoothed labels; axis 0 works on the transposes.
  const Tensor logits = randn({3, 4}, 61);
  const Tensor labels = probabilities({3, 4}, 62);
  check_close(losses::categorical_crossentropy(labels, logits, true),
              softmax_cross_entropy_with_logits(labels, logits).to_vector<double>());
  check_close(losses::categorical_crossentropy(labels, logits, true, 0.2),
              softmax_cross_entropy_with_logits(labels * 0.8 + 0.2 / 4, logits).to_vector<double>());
  check_close(losses::categorical_crossentropy(transpose(labels), transpose(logits), true, 0, 0),
              softmax_cross_entropy_with_logits(labels, logits).to_vector<double>());
  CHECK_THROWS_AS(losses::categorical_crossentropy(zeros({2, 3}), zeros({2, 4})), ShapeError);
}

TEST_CASE("binary cross-entropy matches Keras' documented examples", "[losses]") {
  // Keras: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]]:
  //   row 0: -(log 0.4 + log 0.4) / 2 = 0.916290731874155
  //   row 1: -(log 0.6 + log 0.4) / 2 = 0.7135581778200728
  const Tensor yt = constant({0.0, 1.0, 0.0, 0.0}, {2, 2}, f64);
  const Tensor yp = constant({0.6, 0.4, 0.4, 0.6}, {2, 2}, f64);
  check_close(losses::binary_crossentropy(yt, yp), {0.916290731874155, 0.7135581778200728});
  // label_smoothing 0.2: y = y * 0.8 + 0.1. Row 0 = [0.1, 0.9]:
  //   -(0.1 log 0.6 + 0.9 log 0.4 + 0.9 log 0.6 + 0.1 log 0.4) / 2 = 0.8757442210633385
  check_close(losses::binary_crossentropy(yt, yp, false, 0.2), {0.8757442210633385, 0.7135581778200728});
  // from_logits, Keras' example logits [[-18.6, 0.51], [2.94, -12.8]]: per element
  //   max(x,0) - x z + log(1 + e^-|x|), averaged: [0.23515666320163253, 1.495759236360562]
  const Tensor logits = constant({-18.6, 0.51, 2.94, -12.8}, {2, 2}, f64);
  check_close(losses::binary_crossentropy(yt, logits, true), {0.23515666320163253, 1.495759236360562});
  // Probabilities of exactly 0 and 1 are clipped: finite.
  CHECK(all_finite(losses::binary_crossentropy(constant({1.0, 0.0}, {1, 2}, f64), constant({0.0, 1.0}, {1, 2}, f64))));
}

TEST_CASE("kl_divergence clips both arguments and sums over the last axis", "[losses]") {
  // Keras: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]]; zeros clip to 1e-7:
  //   row 0: 1e-7 log(1e-7 / 0.6) + 1 log(1 / 0.4) = 0.9162891711471524
  //   row 1: 1e-7 log(1e-7 / 0.4) + 1e-7 log(1e-7 / 0.6) = -3.080907494627649e-06
  const Tensor yt = constant({0.0, 1.0, 0.0, 0.0}, {2, 2}, f64);
  const Tensor yp = constant({0.6, 0.4, 0.4, 0.6}, {2, 2}, f64);
  check_close(losses::kl_divergence(yt, yp), {0.9162891711471524, -3.080907494627649e-06}, 1e-10);
}

// ---- per-example losses: gradients --------------------------------------------------------------------------

TEST_CASE("every per-example loss has gradients wrt y_pred matching finite differences", "[losses][grad]") {
  const Tensor yt = randn({3, 4}, 71);
  // y_pred = y_true + offsets of magnitude 0.3..2 (away from the kinks of |e| at 0 and the
  // huber joints at |e| = delta = 1)
  const Tensor offset = constant({0.3, -0.5, 1.5, -2.0, 0.7, -0.4, 1.8, 0.35, -1.6, 0.45, -0.6, 1.3}, {3, 4}, f64);
  const Tensor yp = yt + offset;
  auto with_true = [](Tensor (*loss)(const Tensor&, const Tensor&), Tensor t) {
    return [loss, t](const std::vector<Tensor>& in) { return loss(t, in[0]); };
  };
  SECTION("mean_squared_error") { check_gradients(with_true(losses::mean_squared_error, yt), {yp}); }
  SECTION("mean_absolute_error") { check_gradients(with_true(losses::mean_absolute_error, yt), {yp}); }
  SECTION("huber") {
    check_gradients([&](const std::vector<Tensor>& in) { return losses::huber(yt, in[0]); }, {yp});
  }
  const Tensor probs = probabilities({3, 4}, 72);
  const Tensor target = probabilities({3, 4}, 73);
  const Tensor ids = constant(std::vector<std::int64_t>{1, 3, 0}, {3});
  SECTION("sparse_categorical_crossentropy (probabilities and logits)") {
    check_gradients([&](const std::vector<Tensor>& in) { return losses::sparse_categorical_crossentropy(ids, in[0]); },
                    {probs});
    check_gradients(
        [&](const std::vector<Tensor>& in) { return losses::sparse_categorical_crossentropy(ids, in[0], true); },
        {yp});
  }
  SECTION("categorical_crossentropy (probabilities, logits, smoothing)") {
    check_gradients([&](const std::vector<Tensor>& in) { return losses::categorical_crossentropy(target, in[0]); },
                    {probs});
    check_gradients(
        [&](const std::vector<Tensor>& in) { return losses::categorical_crossentropy(target, in[0], true, 0.1); },
        {yp});
  }
  SECTION("binary_crossentropy (probabilities, logits, smoothing)") {
    check_gradients([&](const std::vector<Tensor>& in) { return losses::binary_crossentropy(target, in[0], false, 0.1); },
                    {probs});
    check_gradients([&](const std::vector<Tensor>& in) { return losses::binary_crossentropy(target, in[0], true); },
                    {yp});
  }
  SECTION("kl_divergence") {
    check_gradients([&](const std::vector<Tensor>& in) { return losses::kl_divergence(target, in[0]); }, {probs});
  }
}
