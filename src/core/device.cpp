#include "keel/core/device.hpp"

#include <charconv>
#include <string>

#include "keel/core/error.hpp"

namespace keel {

#ifdef KEEL_WITH_CUDA
namespace cuda { int device_count(); }
#endif

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  for (std::string_view prefix : {"cuda:"}) {
    if (text.substr(0, prefix.size()) == prefix) {
      const std::string_view digits = text.substr(prefix.size());
      int index = -1;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (ec == std::errc() && ptr == digits.data() + digits.size() && index >= 0) return cuda(index);
    }
  }
  throw ValueError("Device::parse: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"" +
                   std::string(text) + "\"");
}

std::string Device::to_string() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(idx);
}

namespace {
thread_local Device current_default = Device::cpu();
}

Device default_device() { return current_default; }

DeviceScope::DeviceScope(Device device) : previous_(current_default) { current_default = device; }
DeviceScope::~DeviceScope() { current_default = previous_; }

int cuda_device_count() {
#ifdef KEEL_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace keel
