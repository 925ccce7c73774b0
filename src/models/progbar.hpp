#pragma once
// Keras' progress bar for fit/evaluate/predict:
//   Epoch 3/10
//   469/469 [==============================] - 4s 8ms/step - loss: 0.3121 - accuracy: 0.8874
// Redrawn in place on a terminal; one line per epoch when output is a file or pipe (CI logs).
#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>

namespace keel::models {

class Progbar {
 public:
  // verbose: 0 silent, 1 bar, 2 one summary line at the end.
  Progbar(std::int64_t target, int verbose, std::ostream& out);
  void update(std::int64_t current, const std::map<std::string, double>& values, bool finalize = false);

 private:
  static std::string format_values(const std::map<std::string, double>& values);
  std::int64_t target_;
  int verbose_;
  std::ostream& out_;
  bool dynamic_;
  std::chrono::steady_clock::time_point start_;
  std::size_t last_width_ = 0;
};

// "4s 8ms/step" style durations.
std::string format_duration(double seconds);
std::string format_per_step(double seconds);

}  // namespace keel::models
