// libFuzzer target: data::load_cifar10 on an arbitrary test_batch.bin record file.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string d = keel_fuzz::scratch("cifar");
    std::filesystem::create_directories(d);
    return d;
  }();
  keel_fuzz::write_file(dir + "/test_batch.bin", data, size);
  keel_fuzz::expect_keel_errors_only([&] {
    const auto [x, y] = keel::data::load_cifar10(dir, false);
    (void)y.to_vector<std::int64_t>();
  });
  return 0;
}
