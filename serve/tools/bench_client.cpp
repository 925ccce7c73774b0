// Load generator for keel-serve: N client threads, each with its own keep-alive connection
// (cpp-httplib), send single-instance predict requests until the total is reached, then print
// throughput and latency percentiles (nearest-rank) as one line of JSON.
//   keel-serve-bench --port=P [--host=127.0.0.1] [--model=demo] [--clients=32] [--requests=20000]
//                    [--body='{"instances": [[1, 2, 3]]}'] [--expect='{"predictions":[[4.5,4.5]]}']
// A request counts as an error when it fails, is not answered 200 or (with --expect) its body differs.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", model = "demo", body = R"({"instances": [[1, 2, 3]]})", expect;
  int port = 0, clients = 32;
  long requests = 20000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* flag) -> const char* {
      const std::string f = std::string("--") + flag + "=";
      return a.rfind(f, 0) == 0 ? argv[i] + f.size() : nullptr;
    };
    if (auto v = value("host")) host = v;
    else if (auto v = value("port")) port = std::atoi(v);
    else if (auto v = value("model")) model = v;
    else if (auto v = value("clients")) clients = std::atoi(v);
    else if (auto v = value("requests")) requests = std::atol(v);
    else if (auto v = value("body")) body = v;
    else if (auto v = value("expect")) expect = v;
    else {
      std::fprintf(stderr, "keel-serve-bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (port <= 0 || clients <= 0 || requests <= 0) {
    std::fprintf(stderr, "keel-serve-bench: give --port, and positive --clients and --requests\n");
    return 2;
  }
  const std::string path = "/v1/models/" + model + ":predict";
  std::atomic<long> next{0}, errors{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  std::mutex first_error_mu;
  std::string first_error;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      httplib::Client cli(host, port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);  // no Nagle delay between the request's header and body writes
      cli.set_read_timeout(30, 0);
      auto& mine = latencies[static_cast<std::size_t>(c)];
      while (next.fetch_add(1) < requests) {
        const auto t0 = std::chrono::steady_clock::now();
        auto res = cli.Post(path, body, "application/json");
        mine.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (!res || res->status != 200 || (!expect.empty() && res->body != expect)) {
          ++errors;
          std::lock_guard<std::mutex> lock(first_error_mu);
          if (first_error.empty())
            first_error = res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error());
        }
      }
    });
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  const auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    std::size_t rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(all.size()) + 0.999999);
    return all[std::min(all.size(), std::max<std::size_t>(rank, 1)) - 1];
  };
  std::printf("{\"requests\": %zu, \"clients\": %d, \"seconds\": %.3f, \"throughput_rps\": %.1f, "
              "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"errors\": %ld}\n",
              all.size(), clients, seconds, static_cast<double>(all.size()) / seconds, pct(50) * 1e3, pct(99) * 1e3,
              errors.load());
  if (!first_error.empty()) std::fprintf(stderr, "first error: %s\n", first_error.substr(0, 300).c_str());
  return errors.load() == 0 ? 0 : 1;
}
