// Command-line flags of keel-serve (see flags.hpp).
#include "flags.hpp"

#include <charconv>
#include <limits>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::serve {

namespace {

std::int64_t parse_int(const std::string& flag, const std::string& value, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || p != end)
    throw ValueError(fmt::format("--{}: '{}' is not an integer", flag, value));
  if (v < lo || v > hi) throw ValueError(fmt::format("--{}: {} is outside [{}, {}]", flag, v, lo, hi));
  return v;
}

bool parse_bool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  throw ValueError(fmt::format("--{}: '{}' is not true or false", flag, value));
}

}  // namespace

std::string usage() {
  return "usage: keel-serve --model_name=NAME --model_base_path=DIR [--rest_api_port=8501]\n"
         "                  [--model_config_file=FILE] [--file_system_poll_wait_seconds=1]\n"
         "                  [--enable_batching] [--max_batch_size=32] [--batch_timeout_micros=1000]\n"
         "                  [--max_body_bytes=67108864] [--rest_api_num_threads=N]\n"
         "                  [--rest_api_timeout_in_ms=30000] [--rest_api_bind_address=0.0.0.0]\n";
}

ServerFlags parse_flags(const std::vector<std::string>& args) {
  ServerFlags f;
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) throw ValueError(fmt::format("keel-serve: unexpected argument '{}'", a));
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const auto take = [&]() -> const std::string& {
      if (!has_value) {
        if (i + 1 >= args.size()) throw ValueError(fmt::format("--{}: missing value", name));
        value = args[++i];
        has_value = true;
      }
      return value;
    };
    if (name == "model_name") f.model_name = take();
    else if (name == "model_base_path") f.model_base_path = take();
    else if (name == "model_config_file") f.model_config_file = take();
    else if (name == "rest_api_bind_address") f.rest_api_bind_address = take();
    else if (name == "rest_api_port") f.rest_api_port = static_cast<int>(parse_int(name, take(), 0, 65535));
    else if (name == "rest_api_num_threads") f.rest_api_num_threads = static_cast<int>(parse_int(name, take(), 0, 4096));
    else if (name == "rest_api_timeout_in_ms") f.rest_api_timeout_in_ms = static_cast<int>(parse_int(name, take(), 1, kIntMax));
    else if (name == "file_system_poll_wait_seconds")
      f.file_system_poll_wait_seconds = static_cast<int>(parse_int(name, take(), 0, kIntMax));
    else if (name == "max_batch_size") f.max_batch_size = parse_int(name, take(), 1, 1 << 20);
    else if (name == "batch_timeout_micros") f.batch_timeout_micros = parse_int(name, take(), 0, 60'000'000);
    else if (name == "max_body_bytes") f.max_body_bytes = parse_int(name, take(), 1, std::int64_t{1} << 40);
    else if (name == "enable_batching") f.enable_batching = has_value ? parse_bool(name, value) : true;
    else throw ValueError(fmt::format("keel-serve: unknown flag --{}\n{}", name, usage()));
  }
  if (f.model_config_file.empty() && f.model_base_path.empty())
    throw ValueError("keel-serve: give --model_base_path (with --model_name) or --model_config_file\n" + usage());
  if (!f.model_config_file.empty() && !f.model_base_path.empty())
    throw ValueError("keel-serve: --model_config_file and --model_base_path exclude each other (as in TF Serving)");
  if (f.model_name.empty()) throw ValueError("--model_name: must not be empty");
  return f;
}

}  // namespace keel::serve
