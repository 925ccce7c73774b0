// libFuzzer target: io::load_npy on arbitrary bytes.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = keel_fuzz::scratch("input.npy");
  keel_fuzz::write_file(path, data, size);
  keel_fuzz::expect_keel_errors_only([&] { (void)keel::io::load_npy(path).to_vector<double>(); });
  return 0;
}
