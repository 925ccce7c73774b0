// The profiler's device clock (see cuda/device_timer.hpp): a pool of timing events.
#include "cuda/device_timer.hpp"

#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

namespace keel::cuda::timing {

namespace {

struct Mark {
  cudaEvent_t event = nullptr;
  int device = -1;
};

struct Pool {
  std::mutex mutex;
  std::vector<Mark> marks;  // events are made once and kept for the next profile
  std::size_t used = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: a profile may end during exit
  return *p;
}

Mark at(int index) {
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  if (index < 0 || static_cast<std::size_t>(index) >= p.used)
    throw ValueError("profiler: device mark " + std::to_string(index) + " does not exist");
  return p.marks[static_cast<std::size_t>(index)];
}

}  // namespace

int mark(int device) {
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  if (p.used == p.marks.size() || p.marks[p.used].device != device) {
    // A new event, or one made on another device (an event belongs to the device current when
    // it was made): replace it.
    use_device(device);
    Mark m;
    m.device = device;
    check(cudaEventCreate(&m.event), "cudaEventCreate", device);
    if (p.used == p.marks.size()) {
      p.marks.push_back(m);
    } else {
      cudaEventDestroy(p.marks[p.used].event);
      p.marks[p.used] = m;
    }
  }
  use_device(device);
  check(cudaEventRecord(p.marks[p.used].event, stream(device)), "cudaEventRecord", device);
  return static_cast<int>(p.used++);
}

double elapsed_us(int from, int to) {
  const Mark a = at(from), b = at(to);
  if (a.device != b.device) throw ValueError("profiler: device marks of two devices");
  use_device(b.device);
  check(cudaEventSynchronize(b.event), "cudaEventSynchronize", b.device);
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a.event, b.event), "cudaEventElapsedTime", b.device);
  return static_cast<double>(ms) * 1e3;
}

void reset() {
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  p.used = 0;
}

}  // namespace keel::cuda::timing
