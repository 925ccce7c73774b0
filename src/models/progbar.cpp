#include "models/progbar.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include <fmt/core.h>

namespace keel::models {

std::string format_duration(double s) {
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60, static_cast<int>(s) % 60);
  if (s >= 60) return fmt::format("{}:{:02d}", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{:.0f}s", s);
}

std::string format_per_step(double s) {
  if (s >= 1) return fmt::format("{:.0f}s/step", s);
  if (s >= 1e-3) return fmt::format("{:.0f}ms/step", s * 1e3);
  return fmt::format("{:.0f}us/step", s * 1e6);
}

Progbar::Progbar(std::int64_t target, int verbose, std::ostream& out)
    : target_(target), verbose_(verbose), out_(out), start_(std::chrono::steady_clock::now()) {
  // Only a terminal can take carriage-return redraws; logs get one line per epoch.
  dynamic_ = &out == &std::cout && isatty(fileno(stdout));
}

std::string Progbar::format_values(const std::map<std::string, double>& values) {
  std::string s;
  // Keras prints the loss first, then the rest in order.
  auto one = [&](const std::string& k, double v) {
    s += " - " + k + ": " + (std::abs(v) < 1e-3 && v != 0 ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v));
  };
  if (auto it = values.find("loss"); it != values.end()) one(it->first, it->second);
  for (const auto& [k, v] : values)
    if (k != "loss" && k.rfind("val_", 0) != 0) one(k, v);
  if (auto it = values.find("val_loss"); it != values.end()) one(it->first, it->second);
  for (const auto& [k, v] : values)
    if (k != "val_loss" && k.rfind("val_", 0) == 0) one(k, v);
  return s;
}

void Progbar::update(std::int64_t current, const std::map<std::string, double>& values, bool finalize) {
  if (verbose_ == 0) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double per_step = current > 0 ? elapsed / static_cast<double>(current) : 0;
  const bool done = finalize || (target_ > 0 && current >= target_);
  if (verbose_ == 2 || !dynamic_) {
    if (!finalize) return;  // once per epoch: the last batch is followed by the finalizing call
    if (verbose_ == 2) {
      out_ << fmt::format("{}/{} - {} - {}{}", current, target_, format_duration(elapsed), format_per_step(per_step),
                          format_values(values))
           << std::endl;
      return;
    }
  } else if (!done) {
    // Redraw at most every 50 ms: printing must not slow training down.
    static thread_local std::chrono::steady_clock::time_point last_draw;
    const auto now = std::chrono::steady_clock::now();
    if (current > 1 && now - last_draw < std::chrono::milliseconds(50)) return;
    last_draw = now;
  }
  const int width = 30;
  const std::int64_t target = target_ > 0 ? target_ : current;
  std::string bar = "[";
  const int filled = target > 0 ? static_cast<int>(width * static_cast<double>(current) / static_cast<double>(target)) : width;
  if (filled > 0) {
    bar += std::string(static_cast<std::size_t>(filled - 1), '=');
    bar += current < target ? '>' : '=';
  }
  bar += std::string(static_cast<std::size_t>(width - std::min(filled, width)), '.');
  bar += "]";
  const int digits = static_cast<int>(std::to_string(target).size());
  std::string line = fmt::format("{:>{}}/{} {}", current, digits, target, bar);
  if (done) {
    line += fmt::format(" - {} {}", format_duration(elapsed), format_per_step(per_step));
  } else {
    line += fmt::format(" - ETA: {}", format_duration(per_step * static_cast<double>(target - current)));
  }
  line += format_values(values);
  if (dynamic_) {
    std::string padded = line;
    if (padded.size() < last_width_) padded += std::string(last_width_ - padded.size(), ' ');
    last_width_ = line.size();
    out_ << '\r' << padded << (done ? "\n" : "") << std::flush;
  } else {
    out_ << line << std::endl;
  }
}

}  // namespace keel::models
