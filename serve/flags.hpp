#pragma once
// keel-serve's command line: TensorFlow Serving's flag names and defaults (tensorflow_serving/
// model_servers/main.cc), for the subset this server implements.
#include <cstdint>
#include <string>
#include <vector>

namespace keel::serve {

struct ServerFlags {
  std::string model_name = "default";  // TF Serving's default name
  std::string model_base_path;         // DIR holding DIR/1, DIR/2, ...
  std::string model_config_file;       // text-format ModelServerConfig (exclusive with the two above)
  int rest_api_port = 8501;            // 0: any free port (logged once bound)
  std::string rest_api_bind_address = "0.0.0.0";  // keel's addition: TF Serving binds every address
  int rest_api_num_threads = 0;        // 0: 4 per CPU, at least 16 (each keep-alive connection holds one)
  int rest_api_timeout_in_ms = 30000;  // read/write timeout of one connection (slow clients)
  int file_system_poll_wait_seconds = 1;  // 0: look for versions once, at start
  bool enable_batching = false;
  std::int64_t max_batch_size = 32;
  std::int64_t batch_timeout_micros = 1000;
  std::int64_t max_body_bytes = 64ll << 20;  // larger request bodies are answered 413
};

// Parses argv[1..]: "--name=value", "--name value", and for booleans "--name", "--name=true|false"
// (TF Serving's flag syntax). ValueError naming the flag for an unknown flag or a bad value.
ServerFlags parse_flags(const std::vector<std::string>& args);

std::string usage();

}  // namespace keel::serve
