// A profile as Trace Event Format JSON (what Perfetto, chrome://tracing and TensorBoard's trace
// viewer read), to a file or gzipped into a TensorBoard profile run.
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "keel/core/error.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/profiler/profiler.hpp"
#include "profiler/events.hpp"

namespace keel::profiler {

namespace detail {

namespace {

// The tracks of the GPUs' kernels: cuda:N is tid kDeviceTid + N, past any thread's.
constexpr int kDeviceTid = 1 << 20;

std::string gzip(const std::string& data) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer, as the .gz the trace viewer opens.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IOError("profiler: zlib could not start compressing the trace");
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw IOError("profiler: zlib could not compress the trace");
  return out;
}

}  // namespace

std::string chrome_trace_json(const Recording& r) {
  nlohmann::json events = nlohmann::json::array();
  const int pid = static_cast<int>(::getpid());
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", "keel"}}}});
  for (std::size_t i = 0; i < r.thread_names.size(); ++i)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", static_cast<int>(i) + 1},
                      {"args", {{"name", r.thread_names[i]}}}});
  std::set<int> gpus;
  for (const Event& e : r.events)
    if (e.device_us >= 0) gpus.insert(e.device_index);
  for (int g : gpus)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", kDeviceTid + g},
                      {"args", {{"name", fmt::format("cuda:{} stream", g)}}}});
  for (const Event& e : r.events) {
    nlohmann::json args = {{"device", e.device}};
    if (!e.shapes.empty()) args["shapes"] = e.shapes;
    if (!e.stack.empty()) args["stack"] = e.stack;
    if (e.bytes > 0) args["bytes"] = e.bytes;
    if (e.peak_bytes >= 0) args["peak_bytes"] = e.peak_bytes;
    // Microseconds with nanosecond fractions, as the format allows.
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", static_cast<double>(e.start_ns) * 1e-3},
                      {"dur", static_cast<double>(e.dur_ns) * 1e-3},
                      {"pid", pid},
                      {"tid", e.tid},
                      {"args", args}});
    // A GPU kernel also on its device's track, at the time the device ran it.
    if (e.device_us >= 0)
      events.push_back({{"name", e.name},
                        {"cat", "device kernel"},
                        {"ph", "X"},
                        {"ts", e.device_start_us},
                        {"dur", e.device_us},
                        {"pid", pid},
                        {"tid", kDeviceTid + e.device_index},
                        {"args", {{"device", e.device}}}});
    if (e.host_bytes >= 0)
      events.push_back({{"name", "host memory"},
                        {"ph", "C"},
                        {"ts", static_cast<double>(e.start_ns + e.dur_ns) * 1e-3},
                        {"pid", pid},
                        {"tid", 1},
                        {"args", {{"allocated_bytes", e.host_bytes}}}});
  }
  // The memory timeline, as torch.profiler writes it: an instant event per allocation (bytes >
  // 0) and free (bytes < 0), and each device's total as a counter track.
  for (const MemoryEvent& m : r.memory) {
    const double ts = static_cast<double>(m.time_ns) * 1e-3;
    events.push_back({{"name", "[memory]"},
                      {"ph", "i"},
                      {"s", "t"},
                      {"ts", ts},
                      {"pid", pid},
                      {"tid", m.tid},
                      {"args", {{"Addr", fmt::format("{:#x}", m.address)},
                                {"Bytes", m.bytes},
                                {"Total Allocated", m.live_bytes},
                                {"Device", m.device}}}});
    events.push_back({{"name", "tensor memory " + m.device},
                      {"ph", "C"},
                      {"ts", ts},
                      {"pid", pid},
                      {"tid", 1},
                      {"args", {{"live_bytes", m.live_bytes}}}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

void write_tensorboard_run(const Recording& r) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char run[32];
  std::strftime(run, sizeof run, "%Y_%m_%d_%H_%M_%S", &tm);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const std::filesystem::path dir = std::filesystem::path(r.logdir) / "plugins" / "profile" / run;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IOError(fmt::format("profiler: cannot create {}: {}", dir.string(), ec.message()));
  io::atomic_write((dir / (std::string(host) + ".trace.json.gz")).string(), gzip(chrome_trace_json(r)));
}

}  // namespace detail

void export_chrome_trace(const std::string& path) { io::atomic_write(path, detail::chrome_trace_json(detail::last_recording())); }

}  // namespace keel::profiler
