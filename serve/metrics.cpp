// Prometheus text exposition of the server's counters (see metrics.hpp). Format:
// https://prometheus.io/docs/instrumenting/exposition_formats/ (histogram buckets cumulative,
// label values escaped for '\\', '"' and newlines).
#include "metrics.hpp"


#include <fmt/core.h>

namespace keel::serve {

namespace {

std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

void Metrics::record_request(const std::string& endpoint, int http_status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, http_status}];
  Histogram& h = latency_[endpoint];
  std::size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++h.counts[b];
  ++h.count;
  h.sum += seconds;
}

void Metrics::record_batch(const std::string& model, std::size_t requests) {
  std::lock_guard<std::mutex> lock(mu_);
  ++batches_[model];
  batched_requests_[model] += requests;
}

void Metrics::set_model_version(const std::string& model, std::int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  versions_[model] = version;
}

std::uint64_t Metrics::batches(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = batches_.find(model);
  return it == batches_.end() ? 0 : it->second;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP keel_serve_requests_total HTTP requests answered, by endpoint and status code.\n"
         "# TYPE keel_serve_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("keel_serve_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", label(key.first), key.second, n);
  out += "# HELP keel_serve_request_latency_seconds Time from a request's arrival to its answer.\n"
         "# TYPE keel_serve_request_latency_seconds histogram\n";
  for (const auto& [endpoint, h] : latency_) {
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < kBuckets.size(); ++b) {
      cumulative += h.counts[b];
      out += fmt::format("keel_serve_request_latency_seconds_bucket{{endpoint=\"{}\",le=\"{}\"}} {}\n", label(endpoint),
                     kBuckets[b], cumulative);
    }
    out += fmt::format("keel_serve_request_latency_seconds_bucket{{endpoint=\"{}\",le=\"+Inf\"}} {}\n", label(endpoint),
                   h.count);
    out += fmt::format("keel_serve_request_latency_seconds_sum{{endpoint=\"{}\"}} {}\n", label(endpoint), h.sum);
    out += fmt::format("keel_serve_request_latency_seconds_count{{endpoint=\"{}\"}} {}\n", label(endpoint), h.count);
  }
  out += "# HELP keel_serve_batches_total Model calls made by the server-side batcher.\n"
         "# TYPE keel_serve_batches_total counter\n";
  for (const auto& [m, n] : batches_) out += fmt::format("keel_serve_batches_total{{model=\"{}\"}} {}\n", label(m), n);
  out += "# HELP keel_serve_batched_requests_total Requests answered by those model calls.\n"
         "# TYPE keel_serve_batched_requests_total counter\n";
  for (const auto& [m, n] : batched_requests_)
    out += fmt::format("keel_serve_batched_requests_total{{model=\"{}\"}} {}\n", label(m), n);
  out += "# HELP keel_serve_model_version The version each model serves.\n"
         "# TYPE keel_serve_model_version gauge\n";
  for (const auto& [m, v] : versions_) out += fmt::format("keel_serve_model_version{{model=\"{}\"}} {}\n", label(m), v);
  return out;
}

}  // namespace keel::serve
