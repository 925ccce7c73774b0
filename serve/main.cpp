// keel-serve: a TensorFlow-Serving-compatible REST server for models saved by keel's
// Model::save. Flags as TF Serving's (flags.hpp); endpoints in http_handlers.hpp. SIGTERM or
// SIGINT stops it cleanly (exit status 0): the listener closes, requests in flight finish.
#include <httplib.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <thread>

#include <fmt/core.h>

#include "flags.hpp"
#include "http_handlers.hpp"
#include "log.hpp"
#include "metrics.hpp"
#include "model_config.hpp"
#include "model_registry.hpp"

using namespace keel::serve;

int main(int argc, char** argv) {
  ServerFlags flags;
  std::vector<ModelSpec> specs;
  try {
    flags = parse_flags(std::vector<std::string>(argv + 1, argv + argc));
    if (!flags.model_config_file.empty()) specs = read_model_config_file(flags.model_config_file);
    else specs.push_back({flags.model_name, flags.model_base_path, "tensorflow"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }

  // The signals are taken by one thread with sigwait: every thread started below inherits this
  // mask, so none is interrupted, and stopping happens outside a signal handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the server

  Metrics metrics;
  std::optional<keel::serve::BatchingOptions> batching;
  if (flags.enable_batching) batching = keel::serve::BatchingOptions{flags.max_batch_size, flags.batch_timeout_micros};
  ModelRegistry registry(specs, batching, &metrics);
  registry.poll_all();  // the first load happens before the port opens, as in TF Serving
  registry.start_polling(flags.file_system_poll_wait_seconds);

  httplib::Server server;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads = flags.rest_api_num_threads > 0 ? static_cast<std::size_t>(flags.rest_api_num_threads)
                                                             : std::max<std::size_t>(16, 4 * cpus);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(static_cast<std::size_t>(flags.max_body_bytes));
  const auto timeout = std::chrono::milliseconds(flags.rest_api_timeout_in_ms);
  server.set_read_timeout(timeout);
  server.set_write_timeout(timeout);
  // Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm holds the
  // body back until the client's delayed ACK (about 40 ms per request).
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(1000);
  server.set_keep_alive_timeout(2);  // an idle keep-alive connection gives its thread back after 2 s
  install_handlers(server, registry, metrics);

  int port = flags.rest_api_port;
  if (port == 0) {
    port = server.bind_to_any_port(flags.rest_api_bind_address);
    if (port < 0) port = 0;
  } else if (!server.bind_to_port(flags.rest_api_bind_address, port)) {
    port = 0;
  }
  if (port == 0) {
    log_line(fmt::format("cannot listen on {}:{}", flags.rest_api_bind_address, flags.rest_api_port));
    registry.stop();
    return 1;
  }
  log_line(fmt::format("Exporting HTTP/REST API at:{}:{} ...", flags.rest_api_bind_address, port));

  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    log_line(fmt::format("signal {} received: stopping", sig));
    server.stop();
  });
  const bool ok = server.listen_after_bind();
  if (!ok && server.is_running()) log_line("the listener failed");
  registry.stop();
  // If the listener ended by itself, wake the signal thread so that it can be joined.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  log_line("stopped");
  return 0;
}
