// libFuzzer target: io::load_npz (the zip reader and the .npy members) on arbitrary bytes.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = keel_fuzz::scratch("input.npz");
  keel_fuzz::write_file(path, data, size);
  keel_fuzz::expect_keel_errors_only([&] {
    for (const auto& [name, t] : keel::io::load_npz(path)) (void)t.to_vector<double>();
  });
  return 0;
}
