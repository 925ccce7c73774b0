// A user-written Keras layer in keel: the residual block of TensorFlow's "Making new layers and
// models via subclassing" guide, written in C++.
//
//   Keras                                            keel
//   class ResidualBlock(keras.layers.Layer):         class ResidualBlock : public layers::Layer
//     def build(self, input_shape):                    void build(const Shape& input_shape) override
//       self.dense = Dense(units)                        dense_ = track(std::make_shared<Dense>(units))
//     def call(self, inputs, training=False):          Tensor call(const Tensor& x, bool training) override
//   keras.Sequential([Input((8,)), block, Dense(1)]) models::Sequential{InputLayer({8}), block, Dense(1)}
//
// The block is used in a Sequential model and in a functional model; each prints its summary()
// and takes one gradient step. The functional model is then exported to ONNX: the block has no
// ONNX converter of its own, so its call is exported from its traced graph. Exits with status 1
// when the step does not lower the loss.
#include <keel/keel.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

using namespace keel;

namespace {

// y = x + Dense(units)(Dropout(relu(Dense(units)(x)))): the block's width follows its input,
// so build() creates the sublayers once it knows the number of features.
class ResidualBlock : public layers::Layer {
 public:
  explicit ResidualBlock(double dropout_rate = 0.1, std::string name = "")
      : Layer(std::move(name)), dropout_rate_(dropout_rate) {}
  // The Keras class name, and the move to the heap that lets a model keep a temporary.
  KEEL_LAYER_BOILERPLATE(ResidualBlock)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override {
    const int features = static_cast<int>(input_shape[input_shape.rank() - 1]);
    // track() registers each sublayer: its weights join this layer's, and freezing, the training
    // flag, summary() and saving reach it.
    inner_ = track(std::make_shared<layers::Dense>(features, layers::DenseOptions{.activation = "relu"}));
    dropout_ = track(std::make_shared<layers::Dropout>(dropout_rate_));
    outer_ = track(std::make_shared<layers::Dense>(features));
    add_ = track(std::make_shared<layers::Add>());
  }

  Tensor call(const Tensor& x, bool training) override {
    // `training` switches the Dropout on during fit-style steps and off for inference.
    const Tensor h = (*outer_)((*dropout_)((*inner_)(x, training), training), training);
    return (*add_)({x, h}, training);
  }

 private:
  double dropout_rate_;
  std::shared_ptr<layers::Dense> inner_, outer_;
  std::shared_ptr<layers::Dropout> dropout_;
  std::shared_ptr<layers::Add> add_;
};

// One plain gradient-descent step on the mean squared error; returns the loss before and after.
std::pair<double, double> train_step(models::Model& model, const Tensor& x, const Tensor& y, double lr) {
  GradientTape tape;
  const Tensor loss = reduce_mean(square(model(x, /*training=*/true) - y));
  const std::vector<Variable*> weights = model.trainable_weights();
  const std::vector<Tensor> grads = tape.gradient(loss, weights);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i]->assign_sub(grads[i] * lr);
  const double after = reduce_mean(square(model(x) - y)).item<double>();
  return {loss.item<double>(), after};
}

}  // namespace

int main() {
  try {
    random::set_seed(0);
    const Tensor x = random::normal({128, 8});
    const Tensor y = reduce_sum(x, {1}, /*keepdims=*/true) * 0.25;  // a target to regress

    // Sequential: the block sits between an InputLayer and a Dense head.
    models::Sequential sequential{layers::InputLayer({8}), ResidualBlock(0.1, "residual"), layers::Dense(1)};
    sequential.summary();
    const auto [seq_before, seq_after] = train_step(sequential, x, y, 0.01);
    std::printf("Sequential: loss %.4f -> %.4f after one step\n\n", seq_before, seq_after);

    // Functional: two blocks in a row, built when called on the symbolic input.
    const Tensor inputs = models::Input(Shape{8});
    Tensor h = ResidualBlock(0.0)(inputs);
    h = ResidualBlock(0.0)(h);
    const Tensor outputs = layers::Dense(1)(h);
    models::Model functional(inputs, outputs, "residual_mlp");
    functional.summary();
    const auto [fn_before, fn_after] = train_step(functional, x, y, 0.01);
    std::printf("Functional: loss %.4f -> %.4f after one step\n", fn_before, fn_after);

    // ONNX: the Dense layers map to MatMul + Add, each ResidualBlock is traced (its Dense, ReLU,
    // Dropout (off at inference) and Add calls become MatMul, Add, Relu and Add nodes).
    const std::filesystem::path onnx = std::filesystem::temp_directory_path() / "keel_residual_mlp.onnx";
    const io::OnnxExportReport report = io::export_onnx_report(functional, onnx.string());
    std::printf("ONNX export: %lld nodes, %lld initializers\n", static_cast<long long>(report.nodes),
                static_cast<long long>(report.initializers));
    std::filesystem::remove(onnx);

    // One forward pass at inference: the Dropout inside the block is off, so it is deterministic.
    const Tensor p1 = sequential(x), p2 = sequential(x);
    const bool deterministic = reduce_max(abs(p1 - p2)).item<double>() == 0;
    if (!(seq_after < seq_before) || !(fn_after < fn_before) || !deterministic) {
      std::fprintf(stderr, "custom_layer: a gradient step did not lower the loss, or inference was not deterministic\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_layer: %s\n", e.what());
    return 1;
  }
}
