#pragma once
// Server metrics in Prometheus' text exposition format (GET /monitoring/prometheus/metrics):
//   keel_serve_requests_total{endpoint,code}            counter
//   keel_serve_request_latency_seconds{endpoint}        histogram (_bucket{le}, _sum, _count)
//   keel_serve_batches_total{model}                     counter: model calls of the batcher
//   keel_serve_batched_requests_total{model}            counter: requests those calls served
//   keel_serve_model_version{model}                     gauge: the version now served
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace keel::serve {

class Metrics {
 public:
  // Upper bounds (seconds) of the latency buckets; +Inf is added.
  static constexpr std::array<double, 14> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                      0.025,  0.05,    0.1,    0.25,  0.5,    1.0,  2.5};
  void record_request(const std::string& endpoint, int http_status, double seconds);
  void record_batch(const std::string& model, std::size_t requests);
  void set_model_version(const std::string& model, std::int64_t version);
  std::string render() const;  // the whole exposition text

  std::uint64_t batches(const std::string& model) const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  std::map<std::string, std::uint64_t> batches_, batched_requests_;
  std::map<std::string, std::int64_t> versions_;
};

}  // namespace keel::serve
