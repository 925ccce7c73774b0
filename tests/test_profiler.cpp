// The profiler: kernel, layer, step and user events between start() and stop(), the
// key_averages table, the Chrome trace and the TensorBoard profile run.
#include <catch2/catch.hpp>

#include <filesystem>
#include <atomic>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <keel/keel.hpp>

#include "scratch.hpp"

using namespace keel;

namespace {

const profiler::OpStat* find(const std::vector<profiler::OpStat>& stats, const std::string& name) {
  for (const auto& s : stats)
    if (s.name == name) return &s;
  return nullptr;
}

std::string gunzip(const std::string& gz) {
  z_stream z{};
  REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
  std::string out;
  char buf[1 << 14];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  REQUIRE(rc == Z_STREAM_END);
  return out;
}

}  // namespace

TEST_CASE("the profiler times every kernel, with shapes, bytes and nesting", "[profiler]") {
  const Tensor a = random::normal({64, 32}), b = random::normal({32, 16});
  profiler::start("", {.with_stack = true});
  Tensor y;
  {
    profiler::Trace range("my_block");
    y = relu(matmul(a, b));
  }
  profiler::stop();
  const auto stats = profiler::key_averages();
  const auto* mm = find(stats, "BatchMatMulV2");
  const auto* relu_op = find(stats, "Relu");
  const auto* block = find(stats, "my_block");
  REQUIRE(mm);
  REQUIRE(relu_op);
  REQUIRE(block);
  CHECK(mm->calls == 1);
  CHECK(mm->bytes_allocated == 64 * 16 * 4);  // the [64, 16] float32 result
  CHECK(mm->device == "cpu");
  CHECK(mm->total_us > 0);
  CHECK(mm->self_us == Approx(mm->total_us));
  // The range holds both kernels: its total covers them, its self time excludes them.
  CHECK(block->total_us >= mm->total_us + relu_op->total_us);
  CHECK(block->self_us == Approx(block->total_us - mm->total_us - relu_op->total_us).margin(1e-3));
  // Sorted by total time; the table lists the names.
  for (std::size_t i = 1; i < stats.size(); ++i) CHECK(stats[i - 1].total_us >= stats[i].total_us);
  const std::string table = profiler::key_averages_table();
  CHECK_THAT(table, Catch::Contains("BatchMatMulV2") && Catch::Contains("Self %") && Catch::Contains("Calls"));
  // CPU kernels have no device time, and the table no device column.
  for (const auto& s : stats) CHECK(s.device_total_us == 0);
  CHECK_THAT(table, !Catch::Contains("Device total"));
  // Results are as without the profiler.
  CHECK(y.to_vector<float>() == relu(matmul(a, b)).to_vector<float>());
}

TEST_CASE("the profiler shows the kernels an eager step runs without it: a max pool under a tape keeps its choices",
          "[profiler]") {
  // Eagerly under a tape, the CPU max pool keeps each window's choice and its gradient scatters by
  // it (src/ops/pool.cpp); the profiler, which listens to kernel calls as a recorder does, must not
  // turn that off (only a graph trace, whose passes do their own fusion, does).
  const Tensor x = random::normal({2, 8, 8, 4});
  profiler::start("");
  GradientTape tape;
  tape.watch(x);
  const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, "valid");
  const Tensor g = tape.gradient(y, x);
  profiler::stop();
  const auto stats = profiler::key_averages();
  CHECK(find(stats, "MaxPoolWithArgmax") != nullptr);
  CHECK(find(stats, "MaxPoolGradWithArgmax") != nullptr);
  CHECK(find(stats, "MaxPoolGrad") == nullptr);
}

TEST_CASE("the Chrome trace is valid Trace Event Format with shapes and stacks", "[profiler]") {
  keel_test::Scratch dir("profiler-trace");
  {
    profiler::Profile p("", {.record_shapes = true, .profile_memory = true, .with_stack = true});
    profiler::Trace outer("outer");
    exp(random::normal({8, 4}));
  }
  const std::string path = dir.dir + "/trace.json";
  profiler::export_chrome_trace(path);
  const auto j = nlohmann::json::parse(keel_test::read_all(path));
  bool saw_exp = false, saw_counter = false;
  for (const auto& e : j.at("traceEvents")) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    if (e["ph"] == "X") {
      REQUIRE(e.contains("ts"));
      REQUIRE(e.contains("dur"));
      CHECK(e["dur"].get<double>() >= 0);
    }
    if (e["ph"] == "X" && e["name"] == "Exp") {
      saw_exp = true;
      CHECK(e["args"]["shapes"] == "[8,4] -> [8,4]");
      CHECK(e["args"]["stack"] == "outer");
      CHECK(e["args"]["bytes"] == 8 * 4 * 4);
    }
    saw_counter = saw_counter || e["ph"] == "C";
  }
  CHECK(saw_exp);
  CHECK(saw_counter);
}

TEST_CASE("profiling fit shows its steps, layers and the graph's kernels", "[profiler]") {
  random::set_seed(1);
  models::Sequential model;
  model.add(layers::InputLayer(Shape{4}));
  model.add(layers::Dense(8, {.activation = "relu", .name = "hidden"}));
  model.add(layers::Dense(1));
  model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
  const Tensor x = random::normal({32, 4}), y = random::normal({32, 1});
  model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});  // traces the step
  profiler::start();
  model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});  // replays it
  profiler::stop();
  const auto stats = profiler::key_averages();
  const auto* step = find(stats, "train_step");
  REQUIRE(step);
  CHECK(step->calls == 4);
  // Replayed steps run the graph's kernels and the optimizer's host step.
  const auto* update = find(stats, "ApplyGradients");
  REQUIRE(update);
  CHECK(update->calls == 4);
  CHECK(find(stats, "BatchMatMulV2") != nullptr);
  // Eagerly, layer calls are ranges too.
  profiler::start();
  model(x);
  profiler::stop();
  CHECK(find(profiler::key_averages(), "hidden") != nullptr);
}

namespace {

// The complete ("X") events of the profiling thread in a Chrome trace, by name.
struct Span {
  double ts, end;
};
std::map<std::string, std::vector<Span>> spans_of(const std::string& path) {
  std::map<std::string, std::vector<Span>> out;
  const auto trace = nlohmann::json::parse(keel_test::read_all(path));
  for (const auto& e : trace.at("traceEvents"))
    if (e["ph"] == "X" && e["tid"] == 1) {
      const double ts = e["ts"].get<double>();
      out[e["name"].get<std::string>()].push_back({ts, ts + e["dur"].get<double>()});
    }
  return out;
}
// Whether every `inner` event lies inside one of the `outer` ones (the trace's times have a
// nanosecond's rounding).
bool all_inside(const std::vector<Span>& inner, const std::vector<Span>& outer) {
  for (const Span& i : inner) {
    bool in = false;
    for (const Span& o : outer) in = in || (i.ts >= o.ts - 1e-3 && i.end <= o.end + 1e-3);
    if (!in) return false;
  }
  return !inner.empty();
}
bool some_inside(const std::vector<Span>& inner, const std::vector<Span>& outer) {
  for (const Span& i : inner)
    if (all_inside({i}, outer)) return true;
  return false;
}

}  // namespace

TEST_CASE("a replayed step shows fit's phases and the layer calls, nested as in an eager step", "[profiler]") {
  keel_test::Scratch dir("profiler-phases");
  for (const bool eager : {false, true}) {
    DYNAMIC_SECTION((eager ? "eager" : "traced") << " steps") {
      random::set_seed(1);
      models::Sequential model;
      model.add(layers::InputLayer(Shape{4}));
      model.add(layers::Dense(8, {.activation = "relu", .name = "hidden"}));
      model.add(layers::Dense(1, {.name = "out"}));
      model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse", .run_eagerly = eager});
      const Tensor x = random::normal({32, 4}), y = random::normal({32, 1});
      model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});  // traced steps: traces
      profiler::start();
      model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});  // traced steps: replays
      profiler::stop();
      // One range per phase and layer call in each of the 4 steps.
      const auto stats = profiler::key_averages();
      for (const char* name : {"train_step", "forward", "loss", "backward", "optimizer", "metrics", "hidden", "out"}) {
        INFO(name);
        const auto* s = find(stats, name);
        REQUIRE(s);
        CHECK(s->calls == 4);
      }
      const std::string path = dir.dir + (eager ? "/eager.json" : "/traced.json");
      profiler::export_chrome_trace(path);
      const auto spans = spans_of(path);
      // The phases run inside the step, the layers inside the forward phase, each kernel inside
      // the phase that made it: the layers' matmuls in their layer, the update in the optimizer's.
      for (const char* phase : {"forward", "loss", "backward", "optimizer"}) {
        INFO(phase);
        CHECK(all_inside(spans.at(phase), spans.at("train_step")));
      }
      CHECK(all_inside(spans.at("hidden"), spans.at("forward")));
      CHECK(all_inside(spans.at("out"), spans.at("forward")));
      CHECK(all_inside(spans.at("ApplyGradients"), spans.at("optimizer")));
      CHECK(some_inside(spans.at("BatchMatMulV2"), spans.at("hidden")));
      CHECK(some_inside(spans.at("BatchMatMulV2"), spans.at("backward")));
      CHECK_FALSE(some_inside(spans.at("BatchMatMulV2"), spans.at("optimizer")));
    }
  }
}

TEST_CASE("a traced function replays the user's ranges around the kernels traced inside them", "[profiler]") {
  random::set_seed(2);
  Variable w(random::normal({6, 3}), "w");
  auto f = keel::function([&](const Tensor& x) {
    Tensor unused;
    {
      profiler::Trace dead("unused_block");
      unused = exp(x);  // nothing reads it: dead-code elimination drops it, and its range with it
    }
    profiler::Trace block("block");
    return relu(matmul(x, w));
  });
  const Tensor x = random::normal({5, 6});
  const Tensor first = f(x);  // traces
  profiler::start();
  const Tensor again = f(x), third = f(x);
  profiler::stop();
  CHECK(f.trace_count() == 1);
  const auto stats = profiler::key_averages();
  const auto* block = find(stats, "block");
  const auto* mm = find(stats, "BatchMatMulV2");
  REQUIRE(block);
  REQUIRE(mm);
  CHECK(block->calls == 2);
  CHECK(mm->calls == 2);
  CHECK(block->total_us >= mm->total_us);
  CHECK(block->self_us < block->total_us);  // the kernels are its children
  CHECK(find(stats, "unused_block") == nullptr);
  CHECK(find(stats, "Exp") == nullptr);
  CHECK(again.to_vector<float>() == first.to_vector<float>());
  CHECK(third.to_vector<float>() == first.to_vector<float>());
}

TEST_CASE("threads the user starts are followed: their kernels and layer calls are events on tracks of their own",
          "[profiler]") {
  keel_test::Scratch dir("profiler-user-threads");
  random::set_seed(4);
  models::Sequential model({layers::InputLayer(Shape{4}), layers::Dense(3, {.name = "user_dense"})});
  const Tensor x = random::normal({8, 4}), a = random::normal({5, 6}), b = random::normal({6, 2});
  const Tensor want = model(x);
  Tensor got, product;
  profiler::start();
  std::thread user([&] {
    product = matmul(a, b);
    got = model(x);
  });
  user.join();
  exp(x);  // the profiling thread's own work
  profiler::stop();
  const auto stats = profiler::key_averages();
  const auto* mm = find(stats, "BatchMatMulV2");
  const auto* layer = find(stats, "user_dense");
  REQUIRE(mm);
  REQUIRE(layer);
  CHECK(mm->calls == 2);  // the thread's own matmul and the Dense layer's
  CHECK(layer->calls == 1);
  CHECK(find(stats, "Exp") != nullptr);
  CHECK(got.to_vector<float>() == want.to_vector<float>());  // results as without the profiler
  CHECK(product.to_vector<float>() == matmul(a, b).to_vector<float>());
  // In the trace: a track named "thread 0", holding the layer call with its matmul inside.
  const std::string path = dir.dir + "/threads.json";
  profiler::export_chrome_trace(path);
  const auto trace = nlohmann::json::parse(keel_test::read_all(path));
  int tid = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "thread 0") tid = e["tid"].get<int>();
  REQUIRE(tid > 1);
  std::vector<Span> layer_spans, mm_spans;
  for (const auto& e : trace.at("traceEvents")) {
    if (e["ph"] != "X" || e["tid"] != tid) continue;
    const double ts = e["ts"].get<double>();
    const Span span{ts, ts + e["dur"].get<double>()};
    if (e["name"] == "user_dense") layer_spans.push_back(span);
    if (e["name"] == "BatchMatMulV2") mm_spans.push_back(span);
  }
  CHECK(layer_spans.size() == 1);
  CHECK(mm_spans.size() == 2);
  CHECK(some_inside(mm_spans, layer_spans));
  // Without a profile, such a thread records nothing.
  profiler::start();
  profiler::stop();
  std::thread quiet([&] { matmul(a, b); });
  quiet.join();
  CHECK(profiler::key_averages().empty());
}

TEST_CASE("stopping the profile while a user thread computes is safe, and keeps what it recorded", "[profiler]") {
  std::atomic<bool> done{false};
  std::atomic<int> rounds{0};
  const Tensor a = random::normal({32, 32});
  std::thread worker([&] {
    while (!done.load()) {
      Tensor y = relu(matmul(a, a));
      ++rounds;
    }
  });
  while (rounds.load() < 3) std::this_thread::yield();
  for (int i = 0; i < 5; ++i) {
    profiler::start();
    const int before = rounds.load();
    while (rounds.load() < before + 3) std::this_thread::yield();
    profiler::stop();
    const auto stats = profiler::key_averages();
    const auto* mm = find(stats, "BatchMatMulV2");
    REQUIRE(mm);
    CHECK(mm->calls >= 2);
  }
  done = true;
  worker.join();
}

TEST_CASE("start with a logdir writes a TensorBoard profile run", "[profiler]") {
  keel_test::Scratch dir("profiler-tb");
  profiler::start(dir.dir);
  square(random::normal({16}));
  profiler::stop();
  std::string found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.dir))
    if (e.path().string().size() > 14 && e.path().string().ends_with(".trace.json.gz")) found = e.path().string();
  REQUIRE(!found.empty());
  CHECK_THAT(found, Catch::Contains("/plugins/profile/"));
  const auto j = nlohmann::json::parse(gunzip(keel_test::read_all(found)));
  bool saw_square = false;
  for (const auto& e : j.at("traceEvents")) saw_square = saw_square || e.value("name", "") == "Square";
  CHECK(saw_square);
}

TEST_CASE("profiler misuse is a clear error; off, nothing is recorded", "[profiler]") {
  CHECK_THROWS_AS(profiler::stop(), ValueError);
  profiler::start();
  CHECK_THROWS_AS(profiler::start(), ValueError);
  profiler::stop();
  profiler::start();
  profiler::stop();
  exp(ones({3}));  // after stop: not recorded
  CHECK(profiler::key_averages().empty());
}

TEST_CASE("the data pipeline's worker threads are followed: their pulls, map calls and kernels are events on "
          "their own threads", "[profiler]") {
  const Tensor x = random::normal({32, 4}), y = random::normal({32, 1});
  // 32 rows mapped by two worker threads (tanh of each row), batched by 8, prefetched.
  const auto ds = data::Dataset<>::from_tensor_slices({x, y})
                      .map([](const std::pair<Tensor, Tensor>& e) { return std::make_pair(tanh(e.first), e.second); }, 2)
                      .batch(8)
                      .prefetch(2);
  models::Sequential model{layers::InputLayer({4}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  keel_test::Scratch dir("profiler-threads");
  profiler::start();
  model.fit(ds, {.epochs = 1, .verbose = 0});
  profiler::stop();
  const auto stats = profiler::key_averages();
  const auto* map_call = find(stats, "Dataset.map");
  const auto* tanh_op = find(stats, "Tanh");
  const auto* wait = find(stats, "data wait");
  REQUIRE(map_call);
  REQUIRE(tanh_op);
  REQUIRE(wait);
  CHECK(map_call->calls == 32);       // one per row
  CHECK(tanh_op->calls == 32);        // the kernel inside each map call
  CHECK(wait->calls == 4 + 1);        // before each of the 4 batches, and the wait that found the end
  CHECK(find(stats, "Dataset.prefetch") != nullptr);
  CHECK(find(stats, "train_step") != nullptr);
  // In the trace the map calls and their Tanh kernels are on named worker threads, not the
  // profiling thread (tid 1).
  const std::string path = dir.dir + "/threads.json";
  profiler::export_chrome_trace(path);
  const auto j = nlohmann::json::parse(keel_test::read_all(path));
  std::map<int, std::string> names;
  int tanh_events = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"].get<int>()] = e["args"]["name"];
  CHECK(names.at(1) == "profiling thread");
  for (const auto& e : j.at("traceEvents")) {
    if (e["ph"] != "X" || (e["name"] != "Tanh" && e["name"] != "Dataset.map")) continue;
    const int tid = e["tid"].get<int>();
    CHECK(tid != 1);
    REQUIRE(names.count(tid) == 1);
    CHECK_THAT(names[tid], Catch::StartsWith("data worker"));
    tanh_events += e["name"] == "Tanh";
  }
  CHECK(tanh_events == 32);
}

TEST_CASE("profile_memory records every tensor buffer made and freed, with running totals and per-op peaks",
          "[profiler]") {
  keel_test::Scratch dir("profiler-memory");
  const Tensor a = random::normal({256, 256});  // made before the profile: not in its timeline
  profiler::start("", {.profile_memory = true});
  {
    profiler::Trace block("block");
    Tensor b = exp(a);   // 256 KiB made
    Tensor c = b * b;    // another 256 KiB: both live here
    (void)c;
  }                      // both freed
  profiler::stop();
  const std::string path = dir.dir + "/memory.json";
  profiler::export_chrome_trace(path);
  const auto j = nlohmann::json::parse(keel_test::read_all(path));
  std::int64_t made = 0, freed = 0, peak = 0, last_total = 0;
  int allocations = 0, frees = 0;
  std::map<std::string, std::int64_t> first_alloc;  // address -> bytes
  for (const auto& e : j.at("traceEvents")) {
    if (e["name"] != "[memory]") continue;
    CHECK(e["ph"] == "i");
    const auto bytes = e["args"]["Bytes"].get<std::int64_t>();
    const auto total = e["args"]["Total Allocated"].get<std::int64_t>();
    CHECK(e["args"]["Device"] == "cpu");
    // Each event moves the device's total by its bytes.
    CHECK(total == last_total + bytes);
    last_total = total;
    peak = std::max(peak, total);
    if (bytes > 0) {
      made += bytes;
      ++allocations;
      first_alloc[e["args"]["Addr"].get<std::string>()] = bytes;
    } else {
      freed -= bytes;
      ++frees;
      // A free names a buffer made in the profile, with the same size.
      const auto it = first_alloc.find(e["args"]["Addr"].get<std::string>());
      REQUIRE(it != first_alloc.end());
      CHECK(it->second == -bytes);
    }
  }
  const std::int64_t kib256 = 256 * 256 * 4;
  CHECK(allocations >= 2);
  CHECK(made >= 2 * kib256);
  CHECK(freed == made);          // everything made inside was freed inside
  CHECK(last_total == 0);
  CHECK(peak >= 2 * kib256);     // b and c at once
  // The range's peak saw both; the first kernel's saw at least its own output.
  const auto stats = profiler::key_averages();
  const auto* block = find(stats, "block");
  const auto* exp_op = find(stats, "Exp");
  REQUIRE(block);
  REQUIRE(exp_op);
  CHECK(block->peak_bytes >= 2 * kib256);
  CHECK(exp_op->peak_bytes >= kib256);
  CHECK(exp_op->peak_bytes < 2 * kib256);
  // Without profile_memory there is no timeline and no peak.
  profiler::start("", {.profile_memory = false});
  exp(a);
  profiler::stop();
  CHECK(find(profiler::key_averages(), "Exp")->peak_bytes == -1);
  profiler::export_chrome_trace(path);
  const auto j2 = nlohmann::json::parse(keel_test::read_all(path));
  for (const auto& e : j2.at("traceEvents")) CHECK(e["name"] != "[memory]");
}
