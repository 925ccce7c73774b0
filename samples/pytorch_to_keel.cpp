// PyTorch weights in a keel model: the SimpleCNN of samples/cifar10_cnn.cpp (--bn variant),
// trained in PyTorch and saved with torch.save(model.state_dict(), "simple_cnn.pt")
// (scripts/make_simple_cnn_pt.py), loaded into the equivalent keel Sequential, whose predictions
// must equal torch's.
//
//   PyTorch                                             keel
//   sd = torch.load("simple_cnn.pt", weights_only=True) auto sd = io::load_pytorch("simple_cnn.pt");
//   model.load_state_dict(sd)                           model.load_pytorch_state_dict(sd);
//   nn.Conv2d(3, 16, 3, padding=1, bias=False)          layers::Conv2D(16, 3, {.padding = "same", .use_bias = false})
//   nn.BatchNorm2d(16, eps=1e-3)                        layers::BatchNormalization()
//   nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()            layers::ReLU(), layers::MaxPooling2D(2), layers::Flatten()
//   nn.Linear(1024, 128), nn.Dropout(0.5)               layers::Dense(128), layers::Dropout(0.5)
//
// The keel model has one layer for each torch module (ReLU as its own layer, not a Dense
// activation), so that the names "0.weight", "1.running_mean", ... line up. Two layouts differ:
// * images: torch is NCHW, keel NHWC: the input is transposed (0, 2, 3, 1);
// * Flatten: torch flattens [C=64, H=4, W=4] as c*16 + h*4 + w, keel [H, W, C] as h*256 + w*64 + c,
//   so the first Linear's input columns are permuted before loading:
//     W_keel[:, h, w, c] = W_torch[:, c, h, w]  (W.reshape(128, 64, 4, 4).permute(0, 2, 3, 1)).
//
//   pytorch_to_keel [DATA_DIR]    (default: samples/data beside this source file)
// Prints the largest difference between keel's and torch's logits; exits 1 above 1e-4.
#include <keel/keel.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

using namespace keel;

namespace {

namespace fs = std::filesystem;

// samples/data beside this source file. __FILE__ is the path the compiler was given: absolute
// (Makefiles) or relative to the build folder (Ninja), which is the executable's parent folder.
fs::path default_data_dir() {
  const fs::path source = fs::path(__FILE__).parent_path() / "data";
  if (source.is_absolute()) return source;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path beside_build = exe.parent_path().parent_path() / source;
  return !ec && fs::exists(beside_build / "simple_cnn.pt", ec) ? beside_build : source;
}

models::Sequential simple_cnn() {
  models::Sequential model(std::vector<std::shared_ptr<layers::Layer>>{}, "simple_cnn");
  model.add(layers::InputLayer({32, 32, 3}));
  for (int filters : {16, 32, 64}) {
    model.add(layers::Conv2D(filters, 3, {.padding = "same", .use_bias = false}));
    model.add(layers::BatchNormalization({.momentum = 0.9}));
    model.add(layers::ReLU());
    model.add(layers::MaxPooling2D(2));
  }
  model.add(layers::Flatten());
  model.add(layers::Dense(128));
  model.add(layers::ReLU());
  model.add(layers::Dropout(0.5));
  model.add(layers::Dense(10));
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const fs::path dir = argc > 1 ? fs::path(argv[1]) : default_data_dir();
    auto state = io::load_pytorch((dir / "simple_cnn.pt").string());
    std::printf("simple_cnn.pt: %zu tensors\n", state.size());

    // torch's Flatten order (c, h, w) -> keel's (h, w, c) for the Linear after it (index 13).
    const Tensor w = state.at("13.weight");  // [128, 64 * 4 * 4]
    state["13.weight"] = reshape(transpose(reshape(w, Shape{128, 64, 4, 4}), {0, 2, 3, 1}), Shape{128, 1024});

    models::Sequential model = simple_cnn();
    model.load_pytorch_state_dict(state);  // strict: every tensor used, every weight set

    const Tensor x_nchw = io::load_npy((dir / "simple_cnn_input.npy").string());
    const Tensor expected = io::load_npy((dir / "simple_cnn_logits.npy").string());
    const Tensor logits = model.predict(transpose(x_nchw, {0, 2, 3, 1}));
    const float diff = reduce_max(abs(sub(logits, expected))).item<float>();
    std::printf("keel logits %s vs torch's: max abs diff %.3g\n", logits.shape().to_string().c_str(), diff);
    const Tensor agree = equal(argmax(logits, -1), argmax(expected, -1));
    std::printf("predicted classes equal for %lld of %lld images\n",
                static_cast<long long>(reduce_sum(agree.astype(DType::int64)).item<std::int64_t>()),
                static_cast<long long>(logits.shape()[0]));
    if (!(diff <= 1e-4f)) {
      std::fprintf(stderr, "pytorch_to_keel: predictions differ (max abs diff %g > 1e-4)\n", diff);
      return 1;
    }
    std::printf("predictions are equal\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pytorch_to_keel: %s\n", e.what());
    return 1;
  }
}
