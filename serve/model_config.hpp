#pragma once
// TF Serving's --model_config_file: a ModelServerConfig in protobuf text format
// (tensorflow_serving/config/model_server_config.proto). Supported subset:
//
//   model_config_list {
//     config { name: "a" base_path: "/models/a" model_platform: "tensorflow" }
//     config { name: "b" base_path: "/models/b" }
//   }
//
// Any other field (model_version_policy, version_labels, logging_config, custom_model_config,
// ...) is refused with ValueError naming it and its line, rather than silently ignored.
#include <string>
#include <vector>

namespace keel::serve {

struct ModelSpec {
  std::string name;
  std::string base_path;
  std::string model_platform = "tensorflow";
};

// `where` names the text in messages (the file's name).
std::vector<ModelSpec> parse_model_config(const std::string& text, const std::string& where);
std::vector<ModelSpec> read_model_config_file(const std::string& path);

}  // namespace keel::serve
