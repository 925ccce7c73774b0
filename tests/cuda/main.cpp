// main() of keel_cuda_tests: runs the [cuda] tests where a GPU is present, and otherwise exits
// with 77, which CTest reports as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <iostream>

int main(int argc, char* argv[]) {
  if (keel::cuda_device_count() == 0) {
    std::cout << "no CUDA device: [cuda] tests skipped\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
