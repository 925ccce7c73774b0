#include "keel/core/device.hpp"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "cuda/runtime.hpp"
#include "keel/core/error.hpp"

namespace keel {


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
// DESIGN.md: factories use cuda:0 when keel was built with CUDA and a GPU is present, else the
// CPU. KEEL_DEFAULT_DEVICE=cpu|cuda[:N] in the environment overrides the rule for a process.
Device initial_default() {
  if (const char* env = std::getenv("KEEL_DEFAULT_DEVICE"); env && *env) return Device::parse(env);
  return cuda::device_count() > 0 ? Device::cuda(0) : Device::cpu();
}
// Per thread, starting from the process-wide rule; DeviceScope changes the calling thread's only.
thread_local std::optional<Device> current_default;
}  // namespace

Device default_device() {
  if (!current_default) current_default = initial_default();
  return *current_default;
}

DeviceScope::DeviceScope(Device device) : previous_(default_device()) { current_default = device; }
DeviceScope::~DeviceScope() { current_default = previous_; }

int cuda_device_count() { return cuda::device_count(); }

void cuda_synchronize() {
  for (int d = 0; d < cuda::device_count(); ++d) cuda::synchronize(d);
}

}  // namespace keel
