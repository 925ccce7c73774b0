#pragma once
// safetensors bytes already in memory (a .keel member, a checkpoint read once): the parser behind
// io::load_safetensors. Internal to keel: not a public header.
#include <map>
#include <string>
#include <string_view>

#include "keel/core/tensor.hpp"

namespace keel::io::detail {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Validates the whole file (see io::load_safetensors) before allocating any tensor. Errors are
// IOError "load_safetensors: <label>: <field>: ...", `label` naming the file (or archive member).
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& label);
// Reads `path` once and parses it: tensors and metadata of the same file, even while another
// process replaces it.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace keel::io::detail
