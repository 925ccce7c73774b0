// libFuzzer target: io::load_safetensors and io::load_safetensors_metadata on arbitrary bytes.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = keel_fuzz::scratch("input.safetensors");
  keel_fuzz::write_file(path, data, size);
  keel_fuzz::expect_keel_errors_only([&] {
    const auto tensors = keel::io::load_safetensors(path);
    // What was accepted must be usable: every tensor's bytes are read.
    for (const auto& [name, t] : tensors) (void)t.to_vector<double>();
  });
  keel_fuzz::expect_keel_errors_only([&] { keel::io::load_safetensors_metadata(path); });
  return 0;
}
