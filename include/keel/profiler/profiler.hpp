#pragma once
// The profiler (tf.profiler / torch.profiler): between start() and stop() every kernel call on
// the profiling thread (eager ops, their gradients, replayed graphs), every layer call, fit's
// steps, data waits and callbacks, and the user's Trace ranges become timed events, with the
// shapes they read and write and the bytes they write. The data pipeline's worker threads
// (Dataset::map with num_parallel_calls, prefetch) are followed too, each pull and each map call
// an event on that thread with the kernels inside it; and with profile_memory every tensor buffer
// made or freed, on any thread, is an event of a memory timeline.
//
//   profiler::start();
//   model.fit(x, y, {.epochs = 1});
//   profiler::stop();
//   std::cout << profiler::key_averages_table();      // where the time went, by op
//   profiler::export_chrome_trace("step.json");       // open in Perfetto or chrome://tracing
//
// Off, it costs nothing per op: kernels reach it through the backend's recorder check every
// call makes anyway, and a layer call tests one thread-local pointer.
#include <cstdint>
#include <string>
#include <vector>

namespace keel::profiler {

struct ProfilerOptions {
  bool record_shapes = true;   // the operands' shapes in each kernel event
  bool profile_memory = true;  // bytes each kernel writes, and the host memory held over time
  bool with_stack = false;     // each event names the ranges open around it ("fit > dense_1")
};

// Starts profiling this thread; ValueError when a profile is already running. With `logdir`,
// stop() also writes the trace as a TensorBoard profile run:
// logdir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.trace.json.gz.
void start(std::string logdir = "", ProfilerOptions options = {});
// Ends the profile (ValueError when none runs); its events stay for the functions below.
void stop();

// RAII: start() in the constructor, stop() in the destructor.
class Profile {
 public:
  explicit Profile(std::string logdir = "", ProfilerOptions options = {});
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;
};

// One row per event name: kernels by TensorFlow op name ("Conv2D", "BatchMatMulV2", ...),
// layers by layer name, ranges by their name. self_us excludes time spent in events nested in
// it (kernels inside a layer, layers inside a model).
struct OpStat {
  std::string name;
  std::int64_t calls = 0;
  double total_us = 0, self_us = 0, mean_us = 0;
  std::int64_t bytes_allocated = 0;  // written by the kernels of this name (profile_memory)
  std::string device;                // "cpu", "cuda:0"
  // profile_memory: the most tensor memory live (made since the profile started, less what was
  // freed) while an event of this name ran; -1 without profile_memory.
  std::int64_t peak_bytes = -1;
  // Kernels on a GPU: the device time of their calls (CUDA events on keel's stream around each
  // call), summed; total_us is the host's time, launches and waits included. 0 on the CPU.
  double device_total_us = 0;
};
// Of the last profile, sorted by total time.
std::vector<OpStat> key_averages();
// torch.profiler's table: name, self time and share, total time and share, mean, calls, memory.
std::string key_averages_table(int row_limit = 20);
// The last profile as Trace Event Format JSON ("X" events with ts, dur, pid, tid, args; thread
// names; with profile_memory each allocation and free as a "[memory]" instant event with its
// address, bytes and the device's total, the totals as counters, and the host allocator's
// bytes as a counter), written to a temporary name and renamed into place.
void export_chrome_trace(const std::string& path);

// A named range of the user's own (tf.profiler.experimental.Trace); nothing when not profiling.
class Trace {
 public:
  explicit Trace(std::string name);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

 private:
  bool active_ = false;
};

}  // namespace keel::profiler
