// Writes the small models keel-serve's tests and benchmark serve, with weights fixed so that
// every prediction can be worked out by hand:
//   save_demo_model PATH [SCALE]              Sequential: x [3] -> Dense(2), named "dense"
//       kernel = SCALE * [[1, 0], [0, 1], [1, 1]], bias = [0.5, -0.5]
//       so y = [SCALE * (x0 + x2) + 0.5, SCALE * (x1 + x2) - 0.5]
//   save_demo_model PATH --two_inputs         functional: in_a [2], in_b [1] -> out_a = in_a . [1, 1],
//                                             out_b = in_b . [1] (two outputs)
// PATH is a folder, or a .keel file (Model::save decides by the name).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <keel/keel.hpp>

using namespace keel;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: save_demo_model PATH [SCALE | --two_inputs]\n");
    return 2;
  }
  try {
    const std::string path = argv[1];
    // Model::save writes beside its destination: the base path must exist.
    const auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    const std::string arg = argc > 2 ? argv[2] : "1";
    if (arg == "--two_inputs") {
      auto a = models::Input({2}, DType::float32, "in_a");
      auto b = models::Input({1}, DType::float32, "in_b");
      auto out_a = layers::Dense(1, {.kernel_initializer = "ones", .name = "out_a"})(a);
      auto out_b = layers::Dense(1, {.kernel_initializer = "ones", .name = "out_b"})(b);
      models::Model model(std::vector<Tensor>{a, b}, std::vector<Tensor>{out_a, out_b}, "two_branch");
      model.save(path);
      return 0;
    }
    const float s = std::strtof(arg.c_str(), nullptr);
    models::Sequential model{layers::InputLayer(Shape{3}), layers::Dense(2, {.name = "dense"})};
    model.set_weights({constant({s, 0.f, 0.f, s, s, s}, {3, 2}), constant({0.5f, -0.5f}, {2})});
    model.save(path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "save_demo_model: %s\n", e.what());
    return 1;
  }
}
