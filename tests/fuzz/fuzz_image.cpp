// libFuzzer target: data::decode_image (PNG and JPEG decoders) on arbitrary bytes, with every
// channel count. Bytes, not a file: the decoders take the contents, as tf.io.decode_png does.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (int channels : {0, 1, 3, 4})
    keel_fuzz::expect_keel_errors_only([&] { (void)keel::data::decode_image(bytes, channels, "input"); });
  keel_fuzz::expect_keel_errors_only([&] { (void)keel::data::decode_png(bytes); });
  keel_fuzz::expect_keel_errors_only([&] { (void)keel::data::decode_jpeg(bytes); });
  return 0;
}
