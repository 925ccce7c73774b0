// libFuzzer target: io::load_pytorch (torch.save's zip + restricted pickle) on arbitrary bytes.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = keel_fuzz::scratch("input.pt");
  keel_fuzz::write_file(path, data, size);
  keel_fuzz::expect_keel_errors_only([&] {
    const auto tensors = keel::io::load_pytorch(path);
    // What was accepted must be usable: every tensor's elements are read.
    for (const auto& [name, t] : tensors) (void)t.to_vector<double>();
  });
  return 0;
}
