// main() of test_cuda: runs the [cuda] tests where a GPU is present, and otherwise exits with
// 77, which CTest reports as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt). Listing the
// tests (--list-tests and friends) works without a GPU.
//
// When the environment variable KEEL_TEST_SUMMARY names a file, one line per run is appended to
// it: the arguments (the CTest entry's tag filter), then the test-case and assertion counts.
// scripts/gpu-check.sh builds its summary table from these lines.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace {

std::string g_run_label = "(all)";

struct SummaryListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunEnded(Catch::TestRunStats const& stats) override {
    const char* path = std::getenv("KEEL_TEST_SUMMARY");
    if (path == nullptr || *path == '\0') return;
    std::FILE* f = std::fopen(path, "a");
    if (f == nullptr) return;
    const auto& t = stats.totals;
    // One fprintf: concurrent CTest entries append whole lines.
    std::fprintf(f, "%s|%llu|%llu|%llu|%llu\n", g_run_label.c_str(),
                 static_cast<unsigned long long>(t.testCases.passed),
                 static_cast<unsigned long long>(t.testCases.failed + t.testCases.failedButOk),
                 static_cast<unsigned long long>(t.assertions.passed),
                 static_cast<unsigned long long>(t.assertions.failed));
    std::fclose(f);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(SummaryListener)

int main(int argc, char* argv[]) {
  bool listing = false;
  std::string label;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--list", 0) == 0 || arg == "-l" || arg == "-t" || arg == "-h" || arg == "--help")
      listing = true;
    if (!label.empty()) label += ' ';
    label += arg;
  }
  if (!label.empty()) g_run_label = label;
  if (!listing && keel::cuda_device_count() == 0) {
    std::cout << "no CUDA device: [cuda] tests skipped\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
