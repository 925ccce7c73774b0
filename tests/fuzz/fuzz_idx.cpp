// libFuzzer target: data::read_idx (plain or gzip IDX) and data::load_idx on arbitrary bytes.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = keel_fuzz::scratch("input-idx-ubyte");
  keel_fuzz::write_file(path, data, size);
  keel_fuzz::expect_keel_errors_only([&] { (void)keel::data::read_idx(path).to_vector<double>(); });
  // The same bytes as images and as labels: exercises both magic checks and the count check.
  keel_fuzz::expect_keel_errors_only([&] { keel::data::load_idx(path, path); });
  return 0;
}
