// The C++ side of tests/python/keras_files_check.py, which checks keel's Keras files against
// files written by h5py/numpy in Keras' documented layouts:
//   keras_files_tool predict <model.keras|model.h5> <x.npy> <out.npy>
//       loads the model (compile = false) and writes model.predict(x)
//   keras_files_tool save <folder>
//       builds a fixed Sequential (Input(4), Dense(3, relu), Dense(2)) and writes m.keras, m.h5,
//       w.weights.h5 and w.h5 there, with its weights as w<i>.npy (get_weights() order).
#include <keel/keel.hpp>

#include <cstdio>
#include <string>

using namespace keel;

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "predict" && argc == 5) {
      auto model = models::load_model(argv[2], false);
      io::save_npy(argv[4], model->predict(io::load_npy(argv[3])));
      return 0;
    }
    if (cmd == "save" && argc == 3) {
      const std::string dir = argv[2];
      random::set_seed(3);
      models::Sequential model{layers::InputLayer(Shape{4}), layers::Dense(3, {.activation = "relu"}), layers::Dense(2)};
      const auto w = model.get_weights();
      for (std::size_t i = 0; i < w.size(); ++i) io::save_npy(dir + "/w" + std::to_string(i) + ".npy", w[i]);
      model.save(dir + "/m.keras");
      model.save(dir + "/m.h5");
      model.save_weights(dir + "/w.weights.h5");
      model.save_weights(dir + "/w.h5");
      return 0;
    }
    std::fprintf(stderr, "usage: keras_files_tool predict <model> <x.npy> <out.npy> | save <folder>\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "keras_files_tool: %s\n", e.what());
    return 1;
  }
}
