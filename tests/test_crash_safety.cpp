// Saves killed midway: the destination is never damaged (absent before the first complete save,
// else a whole file that loads), and the temporaries the killed processes left behind are removed
// by the next save to the same path (a CheckpointManager clears its directory), while those of
// live processes are never touched.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "scratch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"
#include "killed_child.hpp"

using namespace keel;
using keel_test::Scratch;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

void touch(const std::string& path) { std::ofstream(path) << "left behind"; }

// The pid of a process that has exited and been reaped: no process has it (until the kernel
// hands it out again, which takes a full turn of the pid space).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// Every temporary keel's writers name (whoever made it) under `dir`, recursively.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (io::detail::parse_temp_name(e.path().filename().string())) out.push_back(e.path().string());
  return out;
}

// Runs `save` in a child process over and over, kills it with SIGKILL after `delay`, and reaps it.
template <class Save>
void kill_while_saving(Save&& save, std::chrono::microseconds delay) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // One thread: the parent's OpenMP workers do not exist in a forked child.
    config::set_num_threads(1);
    try {
      for (;;) save();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::usleep(static_cast<useconds_t>(delay.count()));
  const int status = keel_test::kill_and_reap(pid);
  CHECK(WIFSIGNALED(status));
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("temporary names carry the writer's pid and parse back", "[io][crash]") {
  const std::string name = io::detail::temp_name("/some/dir/model.keel", "parts");
  const std::string file = fs::path(name).filename().string();
  const auto t = io::detail::parse_temp_name(file);
  REQUIRE(t);
  CHECK(t->base == "model.keel");
  CHECK(t->kind == "parts");
  CHECK(t->pid == ::getpid());
  CHECK(io::detail::parse_temp_name("w.safetensors.tmp-123-abc0")->pid == 123);
  for (const char* other : {"w.safetensors", "w.safetensors.tmp-", "w.safetensors.tmp-12", "w.safetensors.tmp-12-",
                            "w.safetensors.tmp-x-ab", "w.safetensors.tmp-12-XYZ", "w.bak-12-ab", ".tmp-12-ab",
                            "w.safetensors.tmp-0-ab"})
    CHECK_FALSE(io::detail::parse_temp_name(other));
  CHECK(io::detail::process_alive(::getpid()));
  CHECK_FALSE(io::detail::process_alive(dead_pid()));
}

TEST_CASE("a save removes the temporaries of dead processes beside its path and keeps those of live ones",
          "[io][crash]") {
  Scratch s("stale");
  const std::string path = s / "w.safetensors";
  const pid_t dead = dead_pid();
  const std::string dead_tmp = fmt::format("{}.tmp-{}-1f", path, dead);
  const std::string dead_parts = fmt::format("{}.parts-{}-2e", path, dead);
  const std::string dead_old = fmt::format("{}.old-{}-3d", path, dead);
  const std::string mine = fmt::format("{}.tmp-{}-4c", path, ::getpid());
  const std::string parents = fmt::format("{}.tmp-{}-5b", path, ::getppid());
  const std::string other_file = fmt::format("{}/x.safetensors.tmp-{}-6a", s.dir, dead);
  touch(dead_tmp);
  fs::create_directories(dead_parts);
  touch(dead_parts + "/model.safetensors.tmp-1-1");
  fs::create_directories(dead_old);
  touch(dead_old + "/config.json");
  touch(mine);
  touch(parents);
  touch(other_file);
  touch(s / "notes.txt");

  io::save_safetensors(path, {{"w", ones({3})}});
  CHECK_FALSE(fs::exists(dead_tmp));
  CHECK_FALSE(fs::exists(dead_parts));
  CHECK(fs::exists(dead_old));  // the path did not exist: this could be the only earlier copy
  CHECK(fs::exists(mine));      // a live process's (this one's) save in progress
  CHECK(fs::exists(parents));
  CHECK(fs::exists(other_file));  // another path's
  CHECK(fs::exists(s / "notes.txt"));
  io::save_safetensors(path, {{"w", ones({3})}});
  CHECK_FALSE(fs::exists(dead_old));  // now the path holds a whole file

  // The other writers clean up after themselves the same way.
  const std::string npy = s / "a.npy";
  touch(fmt::format("{}.tmp-{}-7", npy, dead));
  io::save_npy(npy, ones({2}));
  const std::string keel_file = s / "m.keel";
  touch(fmt::format("{}.tmp-{}-8", keel_file, dead));
  fs::create_directories(fmt::format("{}.parts-{}-9", keel_file, dead));
  models::Sequential model{layers::InputLayer(Shape{2}), layers::Dense(2)};
  model.save(keel_file);
  const std::string keel_dir = s / "m_dir";
  fs::create_directories(fmt::format("{}.tmp-{}-a", keel_dir, dead));
  model.save(keel_dir);
  const std::string cache = s / "cache.bin";
  touch(fmt::format("{}.tmp-{}-b", cache, dead));
  for (const Tensor& t : data::Dataset<Tensor>::from_tensor_slices(ones({4, 2})).cache(cache)) (void)t;
  REQUIRE(fs::exists(cache));
  std::vector<std::string> left = temporaries(s.dir);
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected{mine, other_file, parents};
  std::sort(expected.begin(), expected.end());
  CHECK(left == expected);
}

TEST_CASE("CheckpointManager clears its directory of the temporaries dead saves left", "[checkpoint][crash]") {
  Scratch s("manager");
  const pid_t dead = dead_pid();
  const std::string dir = s / "ckpts";
  fs::create_directories(dir);
  const std::string stale = fmt::format("{}/ckpt-3.safetensors.tmp-{}-ab", dir, dead);
  const std::string live = fmt::format("{}/ckpt-4.safetensors.tmp-{}-cd", dir, ::getpid());
  const std::string foreign = fmt::format("{}/photo.jpg.tmp-{}-ef", dir, dead);  // not a checkpoint's
  for (const auto& f : {stale, live, foreign}) touch(f);
  models::Sequential model{layers::InputLayer(Shape{2}), layers::Dense(2)};
  train::Checkpoint ckpt(model);
  train::CheckpointManager manager(ckpt, dir, 2);
  CHECK_FALSE(fs::exists(stale));  // already at construction
  touch(stale);
  manager.save();
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(foreign));
}

TEST_CASE("saves killed with SIGKILL at random moments leave a whole file and, after one more save, no orphans",
          "[io][crash][saving][checkpoint]") {
  Scratch s("sigkill");
  random::set_seed(31);
  // About 4 MiB of weights, and as much optimizer state: each save takes some milliseconds.
  auto model = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{512}), std::make_shared<layers::Dense>(2048)});
  model->compile({.optimizer = optimizers::SGD(0.1, {.momentum = 0.9}), .loss = "mse"});
  model->optimizer()->build(model->trainable_weights());
  const Tensor x = random::normal({2, 512});
  const auto expected = values((*model)(x));
  const Tensor big = full({1024, 1024}, 7.0f);
  train::Checkpoint ckpt(*model);

  const std::string st = s / "w.safetensors", keel_file = s / "m.keel", dir = s / "ckpts";
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> delay_us(500, 60000);
  std::size_t orphans_seen = 0;  // temporaries found right after a kill: saves cut short
  for (int round = 0; round < 10; ++round) {
    INFO("round " << round);
    // safetensors: absent, or the whole tensor.
    kill_while_saving([&] { io::save_safetensors(st, {{"w", big}}); }, std::chrono::microseconds(delay_us(rng)));
    if (fs::exists(st)) {
      const Tensor w = io::load_safetensors(st).at("w");
      CHECK(w.shape() == big.shape());
      CHECK(w.to_vector<float>() == big.to_vector<float>());
    }
    // A .keel model with its optimizer state: absent, or the whole model.
    kill_while_saving([&] { model->save(keel_file); }, std::chrono::microseconds(delay_us(rng)));
    if (fs::exists(keel_file)) {
      const auto loaded = models::load_model(keel_file);
      CHECK(values((*loaded)(x)) == expected);
    }
    // A CheckpointManager: every checkpoint listed restores.
    kill_while_saving(
        [&] {
          train::CheckpointManager manager(ckpt, dir, 2);
          manager.save();
        },
        std::chrono::microseconds(delay_us(rng)));
    train::CheckpointManager reader(ckpt, dir, 2);
    for (const std::string& c : reader.checkpoints()) CHECK_NOTHROW(ckpt.restore(c));
    orphans_seen += temporaries(s.dir).size();
  }
  INFO("temporaries left by interrupted saves: " << orphans_seen);
  CHECK(orphans_seen > 0);  // some kills landed in the middle of a save
  // One more save of each in this process removes what the killed ones left.
  io::save_safetensors(st, {{"w", big}});
  model->save(keel_file);
  train::CheckpointManager(ckpt, dir, 2).save();
  CHECK(temporaries(s.dir).empty());
  CHECK(values((*models::load_model(keel_file))(x)) == expected);
}
