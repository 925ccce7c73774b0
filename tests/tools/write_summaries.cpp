// Writes one known set of summaries into the directory given as argv[1], for the independent
// Python reader (tests/python/check_tensorboard_events.py), which checks every field it expects.
#include <keel/keel.hpp>
#include <keel/summary/summary.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_summaries LOGDIR\n");
    return 2;
  }
  try {
    keel::summary::FileWriter writer(argv[1]);
    keel::summary::scalar(writer, "loss", 0.25, 3);
    keel::summary::histogram(writer, "weights", keel::constant<float>({1, 2, 2, 3, 10}, {5}), 4, 3);
    keel::summary::text(writer, "note", "hello tensorboard", 5);
    keel::summary::image(writer, "pixels", keel::constant<float>({0.f, 0.5f, 1.f, 2.f}, {1, 2, 2, 1}), 6, 1);
    writer.flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_summaries: %s\n", e.what());
    return 1;
  }
  return 0;
}
