// libFuzzer target: models::load_model on an arbitrary .keel file (the zip reader, config.json,
// the safetensors members, the rebuilt model and its compile state).
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = keel_fuzz::scratch("input.keel");
  keel_fuzz::write_file(path, data, size);
  keel_fuzz::expect_keel_errors_only([&] { keel::models::load_model(path); });
  return 0;
}
