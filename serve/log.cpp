// Timestamped log lines on stderr (see log.hpp).
#include "log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace keel::serve {

void log_line(const std::string& message) {
  static std::mutex mu;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s.%03d: keel-serve: %s\n", stamp, static_cast<int>(ms), message.c_str());
  std::fflush(stderr);
}

}  // namespace keel::serve
