#pragma once
// Where a tensor's memory lives: cpu or cuda:N.
#include <string>
#include <string_view>

namespace keel {

enum class DeviceType : unsigned char { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int idx = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  static Device parse(std::string_view);  // "cpu", "cuda", "cuda:1"; ValueError otherwise
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  int index() const { return idx; }
  std::string to_string() const;  // "cpu", "cuda:0"
  bool operator==(const Device& o) const { return type == o.type && idx == o.idx; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// The device factories use: cuda:0 when keel was built with CUDA and a GPU is present, else cpu
// (the environment variable KEEL_DEFAULT_DEVICE=cpu|cuda|cuda:N overrides this for a process);
// a DeviceScope changes it for the calling thread.
Device default_device();

// RAII: factories called while it lives create tensors on `device`. Scopes nest per thread.
class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

// Number of usable CUDA devices; 0 when keel was built without CUDA or no GPU is present.
int cuda_device_count();

// Waits until the work queued on every CUDA device has finished (no-op without CUDA). Reading a
// tensor's values (item, to_vector, to(Device::cpu())) synchronises by itself; this is for timing.
void cuda_synchronize();

}  // namespace keel
