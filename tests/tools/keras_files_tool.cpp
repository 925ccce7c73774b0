// The C++ side of tests/python/keras_files_check.py, which checks keel's Keras files against
// files written by h5py/numpy in Keras' documented layouts:
//   keras_files_tool predict <model.keras|model.h5> <x.npy> <out.npy>
//       loads the model (compile = false) and writes model.predict(x)
//   keras_files_tool save <folder>
//       builds a fixed Sequential (Input(4), Dense(3, relu), Dense(2)) and writes m.keras, m.h5,
//       w.weights.h5 and w.h5 there, with its weights as w<i>.npy (get_weights() order).
//   keras_files_tool save_trained <folder>
//       the same model compiled with Adam(amsgrad) and trained 3 steps, saved as m_opt.keras,
//       with its optimizer's variables as opt/<name>.npy ('/' written as "__")
//   keras_files_tool save_trained_lso <folder>
//       the same with LossScaleOptimizer(Adam(amsgrad), dynamic_growth_steps 2), as m_lso.keras
//       and opt_lso/<name>.npy
//   keras_files_tool optimizer <model.keras> <folder>
//       loads the model compiled and writes its optimizer's variables as <folder>/<name>.npy
#include <keel/keel.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace keel;

namespace {

// Each of the optimizer's variables as <dir>/<name>.npy, '/' in the name written as "__".
void dump_optimizer(optimizers::Optimizer& opt, const std::string& dir) {
  for (const auto& [name, v] : opt.variables()) {
    std::string file = name;
    for (std::size_t p = file.find('/'); p != std::string::npos; p = file.find('/', p + 2)) file.replace(p, 1, "__");
    io::save_npy(dir + "/" + file + ".npy", v->peek());
  }
}

}  // namespace

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
    if ((cmd == "save_trained" || cmd == "save_trained_lso") && argc == 3) {
      const std::string dir = argv[2];
      const bool lso = cmd == "save_trained_lso";
      random::set_seed(3);
      models::Sequential model{layers::InputLayer(Shape{4}), layers::Dense(3, {.activation = "relu"}), layers::Dense(2)};
      optimizers::OptimizerRef adam = optimizers::Adam(0.01, {.amsgrad = true});
      model.compile({.optimizer = lso ? optimizers::OptimizerRef(std::make_shared<optimizers::LossScaleOptimizer>(
                                            adam, optimizers::LossScaleOptimizerOptions{.dynamic_growth_steps = 2}))
                                      : adam,
                     .loss = "mse"});
      model.fit(random::normal(Shape{12, 4}), random::normal(Shape{12, 2}), {.batch_size = 4, .epochs = 1, .verbose = 0});
      model.save(dir + (lso ? "/m_lso.keras" : "/m_opt.keras"));
      std::filesystem::create_directories(dir + (lso ? "/opt_lso" : "/opt"));
      dump_optimizer(*model.optimizer(), dir + (lso ? "/opt_lso" : "/opt"));
      return 0;
    }
    if (cmd == "optimizer" && argc == 4) {
      auto model = models::load_model(argv[2], true);
      dump_optimizer(*model->optimizer(), argv[3]);
      return 0;
    }
    std::fprintf(stderr, "usage: keras_files_tool predict <model> <x.npy> <out.npy> | save <folder> | "
                         "save_trained[_lso] <folder> | optimizer <model.keras> <folder>\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "keras_files_tool: %s\n", e.what());
    return 1;
  }
}
