// libFuzzer target: models::load_model on a saved model folder whose config.json is the fuzz
// input, next to the fixed weights and optimizer state of fuzz_model(): the layer registry's
// factories, the functional graph rebuild and the compile settings get arbitrary JSON (a .keel
// archive's CRCs would stop almost every mutation of its deflated config before it is parsed).
#include "fuzz_common.hpp"
#include "fuzz_model.hpp"

namespace {
const std::string& model_dir() {
  static const std::string dir = [] {
    const std::string d = keel_fuzz::scratch("model");
    keel_fuzz::fuzz_model()->save(d);
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  keel_fuzz::write_file(model_dir() + "/config.json", data, size);
  keel_fuzz::expect_keel_errors_only([&] {
    const auto model = keel::models::load_model(model_dir());
    // A model that loaded must run: one batch of zeros of its input shape.
    if (model->built() && model->built_shape().num_elements() <= (1 << 16)) (*model)(keel::zeros(model->built_shape()));
  });
  return 0;
}
