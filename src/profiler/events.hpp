#pragma once
// What a profile records (profiler.cpp) and what its exports read (chrome_trace.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace keel::profiler::detail {

struct Event {
  std::string name;
  const char* category = "";  // "kernel", "host", "layer", "step", "callbacks", "user"
  std::int64_t start_ns = 0;  // since the profile started
  std::int64_t dur_ns = 0;
  std::int64_t child_ns = 0;  // time in events nested in this one
  std::string shapes;         // record_shapes: "[64,32] , [32,10] -> [64,10]"
  std::string stack;          // with_stack: the ranges open around it
  std::string device;
  std::int64_t bytes = 0;       // profile_memory: bytes the kernel wrote
  std::int64_t host_bytes = -1; // profile_memory: host memory held when it ended
  std::int64_t peak_bytes = -1; // profile_memory: most tensor memory live while it ran
  int tid = 1;                  // the thread: 1 the profiling one, then keel's others as they came
  // A kernel on a GPU: its device marks around the call, then (when the profile ends) the time
  // the device spent between them and when that began, in the profile's host clock.
  int device_index = -1, mark_begin = -1, mark_end = -1;
  double device_us = -1, device_start_us = -1;
};

// profile_memory: one tensor buffer made (bytes > 0) or freed (bytes < 0).
struct MemoryEvent {
  std::int64_t time_ns = 0;
  std::uintptr_t address = 0;
  std::int64_t bytes = 0;
  std::int64_t live_bytes = 0;  // the tensor memory live on its device after it
  std::string device;
  int tid = 1;
};

struct Recording {
  std::vector<Event> events;
  std::vector<MemoryEvent> memory;
  std::vector<std::string> thread_names;  // by tid - 1
  std::string logdir;
};

const Recording& last_recording();
// The Trace Event Format JSON of a recording.
std::string chrome_trace_json(const Recording& r);
// Writes it gzipped as a TensorBoard profile run under r.logdir.
void write_tensorboard_run(const Recording& r);

}  // namespace keel::profiler::detail
