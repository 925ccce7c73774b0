// The profiler: while it runs it is the thread's kernel recorder (it runs each backend call it
// is handed and times it) and the thread's range listener (layers, fit's steps, Trace). The
// threads keel starts for the data pipeline get a recorder of their own around each piece of
// work (backend::ThreadWork), other threads (the user's) around each outermost kernel call or
// range (backend::record_detail::follow_thread_for_call), and with profile_memory every tensor
// buffer made or freed on any thread is an event of the memory timeline (core/memory_events.hpp).
#include "keel/profiler/profiler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/core.h>

#include "backend/device_timing.hpp"
#include "backend/recorder.hpp"
#include "core/memory_events.hpp"
#include "graph/plan.hpp"
#include "keel/core/config.hpp"
#include "keel/core/error.hpp"
#include "profiler/events.hpp"

namespace keel::profiler {

namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

std::string shapes_of(std::initializer_list<const Tensor*> inputs, std::initializer_list<const Tensor*> outputs) {
  std::string s;
  auto add = [&](const Tensor* t) {
    if (!s.empty() && s.back() != ' ') s += ", ";
    s += t->defined() ? t->shape().to_string() : "-";
  };
  for (const Tensor* t : inputs) add(t);
  s += inputs.size() ? " -> " : "-> ";
  for (const Tensor* t : outputs) add(t);
  return s;
}

class Profiler final : public backend::KernelRecorder, public backend::RangeListener {
 public:
  // One thread's recorder: `tid` names the thread in the trace; `live` is the session's count of
  // tensor bytes made since it started (every thread's), for the events' peaks.
  Profiler(ProfilerOptions options, Clock::time_point start, int tid, const std::atomic<std::int64_t>* live)
      : options_(options), start_(start), tid_(tid), live_(live) {
    events_.reserve(1 << 10);
  }

  void kernel(backend::KernelType type, std::initializer_list<const Tensor*> inputs,
              std::initializer_list<const Tensor*> outputs, backend::KernelReplay replay) override {
    timed(name_of(type), inputs, outputs, [&](const Tensor* t) { replay(t); });
  }
  void random(backend::KernelType type, std::initializer_list<const Tensor*> inputs,
              std::initializer_list<const Tensor*> outputs, std::uint64_t, std::uint64_t key, std::uint64_t counter,
              backend::RandomReplay replay) override {
    timed(name_of(type), inputs, outputs, [&](const Tensor* t) { replay(t, key, counter); });
  }
  void host(const char* name, const std::vector<const Tensor*>& inputs, backend::HostReplay step) override {
    std::vector<Tensor> operands;
    for (const Tensor* t : inputs) operands.push_back(*t);
    Event e = open_event(name, "host");
    {
      backend::RecordedCall inside;
      step(operands.data());
    }
    close_event(std::move(e));
  }
  void host_read(const char*) override {}  // eager code may read values; nothing to record

  void begin(const char* category, const std::string& name) override {
    open_.push_back(open_event(name, category));
  }
  void end() override {
    if (open_.empty()) return;
    Event e = std::move(open_.back());
    open_.pop_back();
    close_event(std::move(e));
  }

  // The events so far, every open range closed.
  std::vector<Event> finish() {
    while (!open_.empty()) end();
    return std::move(events_);
  }

  // A buffer was made on this thread: the open events' peaks take the new total.
  void note_live(std::int64_t live) {
    for (Event& e : open_) e.peak_bytes = std::max(e.peak_bytes, live);
  }

 private:
  // Op names by kernel family and kind, looked up once each (the families are literals).
  const std::string& name_of(const backend::KernelType& type) {
    const auto key = std::make_pair(type.family, type.kind);
    auto it = names_.find(key);
    if (it == names_.end()) it = names_.emplace(key, graph::detail::kernel_op_name(type)).first;
    return it->second;
  }

  template <class Run>
  void timed(const std::string& name, std::initializer_list<const Tensor*> inputs, std::initializer_list<const Tensor*> outputs,
             Run&& run) {
    // Operands on the stack: no kernel family takes more than 12.
    constexpr std::size_t kMaxOperands = 16;
    Tensor operands[kMaxOperands];
    if (inputs.size() + outputs.size() > kMaxOperands) throw ValueError("profiler: a kernel with too many operands");
    std::size_t k = 0;
    for (const Tensor* t : inputs) operands[k++] = *t;
    for (const Tensor* t : outputs) operands[k++] = *t;
    Event e = open_event(name, "kernel");
    // The kernel's device is its first result's; a GPU kernel also gets the device's own time,
    // from marks on its stream before and after it.
    for (const Tensor* t : outputs) {
      if (!t->defined()) continue;
      if (e.device.empty()) {
        e.device = t->device().to_string();
        if (t->device().is_cuda()) e.device_index = t->device().index();
      }
      if (options_.profile_memory) e.bytes += t->size() * static_cast<std::int64_t>(itemsize(t->dtype()));
    }
    if (e.device_index >= 0) e.mark_begin = backend::timing::mark(e.device_index);
    {
      backend::RecordedCall inside;
      run(operands);
    }
    if (e.device_index >= 0) e.mark_end = backend::timing::mark(e.device_index);
    if (options_.record_shapes) e.shapes = shapes_of(inputs, outputs);
    close_event(std::move(e));
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
  }

  Event open_event(std::string name, const char* category) {
    Event e;
    e.name = std::move(name);
    e.category = category;
    e.start_ns = now_ns();
    e.tid = tid_;
    if (options_.profile_memory) e.peak_bytes = live_->load(std::memory_order_relaxed);
    if (options_.with_stack)
      for (const Event& o : open_) e.stack += (e.stack.empty() ? "" : " > ") + o.name;
    return e;
  }

  void close_event(Event e) {
    e.dur_ns = now_ns() - e.start_ns;
    if (!open_.empty()) open_.back().child_ns += e.dur_ns;
    if (e.device.empty()) e.device = "cpu";
    if (options_.profile_memory) e.host_bytes = static_cast<std::int64_t>(config::host_memory_stats().allocated_bytes);
    events_.push_back(std::move(e));
  }

  ProfilerOptions options_;
  Clock::time_point start_;
  int tid_;
  const std::atomic<std::int64_t>* live_;
  std::vector<Event> open_;
  std::vector<Event> events_;
  std::map<std::pair<const char*, int>, std::string> names_;
};

// The device time of each GPU kernel, and where it falls on the profile's clock: each device's
// first kernel (on the host clock) anchors that device's marks, so a kernel's device start is
// the anchor's host start plus the device time from the anchor's mark to its own. (The device
// may run a kernel later than its launch; the anchor assumes the first one ran at once.)
void resolve_device_times(std::vector<Event>& events) {
  std::map<int, const Event*> anchor;
  for (const Event& e : events) {
    if (e.mark_begin < 0 || e.mark_end < 0) continue;
    const Event*& a = anchor[e.device_index];
    if (!a || e.start_ns < a->start_ns) a = &e;
  }
  std::map<int, std::pair<int, double>> origin;  // by device: the anchor's mark and host start (us)
  for (const auto& [device, a] : anchor) origin[device] = {a->mark_begin, static_cast<double>(a->start_ns) * 1e-3};
  for (Event& e : events) {
    if (e.mark_begin < 0 || e.mark_end < 0) continue;
    const auto [mark, host_us] = origin.at(e.device_index);
    e.device_us = backend::timing::elapsed_us(e.mark_begin, e.mark_end);
    e.device_start_us = host_us + backend::timing::elapsed_us(mark, e.mark_begin);
  }
}

// The profiler of this thread while it records (the profiling thread's, or a keel thread's
// attached one): where a buffer made on this thread reports the new total.
thread_local Profiler* this_thread = nullptr;
thread_local int this_tid = 0;  // 0: a thread the profile does not follow

// The one profile that may run: the profiling thread's recorder, the other threads' (attached
// for a piece of work each, their events collected as they detach) and the memory timeline.
// A static: the hooks it installs may still be called by a thread that loaded them just before
// stop() took them away.
class Session final : public backend::ThreadProfiler, public keel::detail::MemoryListener {
 public:
  std::mutex mutex;  // start / stop
  std::unique_ptr<Profiler> running;
  backend::KernelRecorder* saved_recorder = nullptr;
  backend::RangeListener* saved_listener = nullptr;
  Recording last;

  void begin(std::string logdir, ProfilerOptions options) {
    if (cuda_device_count() > 0) backend::timing::reset();  // the last profile's marks are read
    start_ = Clock::now();
    options_ = options;
    logdir_ = std::move(logdir);
    live_.store(0);
    {
      std::lock_guard<std::mutex> lock(threads_mutex_);
      thread_events_.clear();
      thread_names_ = {"profiling thread"};
      tids_.clear();
      kinds_.clear();
      accepting_ = true;
    }
    {
      std::lock_guard<std::mutex> lock(memory_mutex_);
      memory_.clear();
      live_by_device_.clear();
      memory_on_ = options.profile_memory;
    }
    running = std::make_unique<Profiler>(options, start_, 1, &live_);
    this_thread = running.get();
    this_tid = 1;
    backend::record_detail::thread_profiler.store(this, std::memory_order_release);
    if (options.profile_memory) keel::detail::memory_listener.store(this, std::memory_order_release);
  }

  Recording end() {
    backend::record_detail::thread_profiler.store(nullptr, std::memory_order_release);
    keel::detail::memory_listener.store(nullptr, std::memory_order_release);
    Recording r;
    r.events = running->finish();
    running.reset();
    this_thread = nullptr;
    this_tid = 0;
    {
      // The threads still inside a piece of work finish it (each is one pull or one map call).
      std::unique_lock<std::mutex> lock(threads_mutex_);
      accepting_ = false;
      idle_.wait(lock, [&] { return attached_ == 0; });
      for (Event& e : thread_events_) r.events.push_back(std::move(e));
      thread_events_.clear();
      r.thread_names = thread_names_;
    }
    {
      std::lock_guard<std::mutex> lock(memory_mutex_);
      memory_on_ = false;
      r.memory = std::move(memory_);
      memory_.clear();
    }
    r.logdir = logdir_;
    resolve_device_times(r.events);
    return r;
  }

  backend::KernelRecorder* attach(backend::RangeListener*& listener, const char* kind) override {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    if (!accepting_) return nullptr;
    auto [it, fresh] = tids_.try_emplace(std::this_thread::get_id(), static_cast<int>(thread_names_.size()) + 1);
    if (fresh) thread_names_.push_back(fmt::format("{} {}", kind, kinds_[kind]++));
    ++attached_;
    auto* p = new Profiler(options_, start_, it->second, &live_);
    this_thread = p;
    this_tid = it->second;
    listener = p;
    return p;
  }

  void detach(backend::KernelRecorder* recorder) override {
    auto* p = static_cast<Profiler*>(recorder);
    std::vector<Event> events = p->finish();
    delete p;
    this_thread = nullptr;
    this_tid = 0;
    {
      std::lock_guard<std::mutex> lock(threads_mutex_);
      for (Event& e : events) thread_events_.push_back(std::move(e));
      --attached_;
    }
    idle_.notify_all();
  }

  void allocated(const void* address, std::size_t bytes, Device device) noexcept override {
    record(address, static_cast<std::int64_t>(bytes), device);
  }
  void freed(const void* address, std::size_t bytes, Device device) noexcept override {
    record(address, -static_cast<std::int64_t>(bytes), device);
  }

 private:
  void record(const void* address, std::int64_t bytes, Device device) noexcept {
    std::int64_t total = 0;
    try {
      std::lock_guard<std::mutex> lock(memory_mutex_);
      if (!memory_on_) return;
      std::string where = device.to_string();
      const std::int64_t live = live_by_device_[where] += bytes;
      total = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
      memory_.push_back({std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count(),
                         reinterpret_cast<std::uintptr_t>(address), bytes, live, std::move(where), this_tid});
    } catch (...) {  // no memory for the record itself: the timeline misses one event
      return;
    }
    if (bytes > 0 && this_thread) this_thread->note_live(total);
  }

  Clock::time_point start_;
  ProfilerOptions options_;
  std::string logdir_;
  std::atomic<std::int64_t> live_{0};  // tensor bytes made minus freed since start, every device

  std::mutex threads_mutex_;
  std::condition_variable idle_;
  bool accepting_ = false;
  int attached_ = 0;
  std::vector<Event> thread_events_;
  std::vector<std::string> thread_names_;
  std::map<std::thread::id, int> tids_;
  std::map<std::string, int> kinds_;  // threads named so far, by kind ("data worker", "thread")

  std::mutex memory_mutex_;
  bool memory_on_ = false;
  std::vector<MemoryEvent> memory_;
  std::map<std::string, std::int64_t> live_by_device_;
};

Session& session() {
  static Session s;
  return s;
}

}  // namespace

const Recording& last_recording() { return session().last; }

}  // namespace detail

void start(std::string logdir, ProfilerOptions options) {
  auto& s = detail::session();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.running) throw ValueError("profiler::start: a profile is already running (call profiler::stop first)");
  if (backend::record_detail::active)
    throw ValueError("profiler::start: cannot profile inside a keel::function trace");
  s.begin(std::move(logdir), options);
  s.saved_recorder = backend::record_detail::active;
  s.saved_listener = backend::record_detail::ranges;
  backend::record_detail::active = s.running.get();
  backend::record_detail::ranges = s.running.get();
}

void stop() {
  auto& s = detail::session();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.running) throw ValueError("profiler::stop: no profile is running");
  if (backend::record_detail::active != s.running.get())
    throw ValueError("profiler::stop: call it on the thread that started the profile");
  backend::record_detail::active = s.saved_recorder;
  backend::record_detail::ranges = s.saved_listener;
  s.last = s.end();
  if (!s.last.logdir.empty()) detail::write_tensorboard_run(s.last);
}

Profile::Profile(std::string logdir, ProfilerOptions options) { start(std::move(logdir), options); }
Profile::~Profile() {
  try {
    stop();
  } catch (const Error&) {  // stopped by hand already: nothing to do
  }
}

Trace::Trace(std::string name) {
  if (backend::RangeListener* l = backend::record_detail::ranges) {
    l->begin("user", name);
    active_ = true;
  }
}
Trace::~Trace() {
  if (active_ && backend::record_detail::ranges) backend::record_detail::ranges->end();
}

std::vector<OpStat> key_averages() {
  std::map<std::string, OpStat> by_name;
  for (const detail::Event& e : detail::last_recording().events) {
    OpStat& s = by_name[e.name];
    s.name = e.name;
    s.device = e.device;
    ++s.calls;
    s.total_us += static_cast<double>(e.dur_ns) * 1e-3;
    s.self_us += static_cast<double>(e.dur_ns - e.child_ns) * 1e-3;
    s.bytes_allocated += e.bytes;
    s.peak_bytes = std::max(s.peak_bytes, e.peak_bytes);
    if (e.device_us > 0) s.device_total_us += e.device_us;
  }
  std::vector<OpStat> out;
  for (auto& [name, s] : by_name) {
    s.mean_us = s.total_us / static_cast<double>(s.calls);
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) { return a.total_us > b.total_us; });
  return out;
}

std::string key_averages_table(int row_limit) {
  const std::vector<OpStat> stats = key_averages();
  double self_sum = 0;
  for (const OpStat& s : stats) self_sum += s.self_us;
  const double share = self_sum > 0 ? 100.0 / self_sum : 0;
  std::size_t width = 4;
  const std::size_t rows = row_limit < 0 ? stats.size() : std::min(stats.size(), static_cast<std::size_t>(row_limit));
  for (std::size_t i = 0; i < rows; ++i) width = std::max(width, stats[i].name.size());
  auto us = [](double v) { return v >= 1e3 ? fmt::format("{:.3f}ms", v * 1e-3) : fmt::format("{:.3f}us", v); };
  // A GPU's kernels add a column of their device time (torch.profiler's "CUDA total").
  bool device = false;
  for (const OpStat& s : stats) device = device || s.device_total_us > 0;
  const std::string rule(width + 94 + (device ? 14 : 0), '-');
  std::string t = rule + "\n";
  t += fmt::format("{:<{}}  {:>10}  {:>12}  {:>10}  {:>12}  {:>12}  {:>8}  {:>12}", "Name", width, "Self %", "Self",
                   "Total %", "Total", "Mean", "Calls", "Memory");
  t += device ? fmt::format("  {:>12}\n", "Device total") : "\n";
  t += rule + "\n";
  for (std::size_t i = 0; i < rows; ++i) {
    const OpStat& s = stats[i];
    t += fmt::format("{:<{}}  {:>9.2f}%  {:>12}  {:>9.2f}%  {:>12}  {:>12}  {:>8}  {:>10.2f}Mb", s.name, width,
                     s.self_us * share, us(s.self_us), s.total_us * share, us(s.total_us), us(s.mean_us), s.calls,
                     static_cast<double>(s.bytes_allocated) / (1 << 20));
    t += device ? fmt::format("  {:>12}\n", s.device_total_us > 0 ? us(s.device_total_us) : "-") : "\n";
  }
  t += rule + "\n";
  t += fmt::format("Self time total: {}\n", us(self_sum));
  return t;
}

}  // namespace keel::profiler
