#pragma once
// The console reporter of the benchmarks that end with a ratio table: prints as usual and keeps
// each benchmark's rate counter (its median with --benchmark_repetitions, else its one run), so
// the table can divide rates measured in the same run.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace keel_bench {

class RateReporter : public benchmark::ConsoleReporter {
 public:
  // Colours only on a terminal (--benchmark_color configures only the default reporter).
  explicit RateReporter(std::string counter)
      : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular), counter_(std::move(counter)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      auto it = run.counters.find(counter_);
      if (it == run.counters.end() || run.error_occurred) continue;
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      rates_[run.run_name.function_name] = it->second.value;
    }
  }

  // The rate of the benchmark named `name`, 0 when it did not run.
  double rate(const std::string& name) const {
    auto it = rates_.find(name);
    return it == rates_.end() ? 0.0 : it->second;
  }

 private:
  std::string counter_;
  std::map<std::string, double> rates_;
};

// "a/b = r x" with both rates in giga units, or "-" when either is missing.
inline std::string ratio_text(double rate, double base) {
  if (rate <= 0 || base <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f/%.1f = %.2fx", rate * 1e-9, base * 1e-9, rate / base);
  return buf;
}

}  // namespace keel_bench
