#pragma once
// PyTorch's torch.save files of tensors (a state_dict): the zip format of PyTorch >= 1.6, holding
// a pickle (protocol 2) of the dict and one member per storage.
#include <map>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel::io {

// Reading never executes code: only the pickle opcodes and globals a tensor state_dict needs are
// accepted (torch.load's weights_only rule); anything else is an IOError naming the offset.
std::map<std::string, Tensor> load_pytorch(const std::string& path);
// Written so that torch.load(path, weights_only=True) reads it; atomically (temporary + rename).
void save_pytorch(const std::string& path, const std::map<std::string, Tensor>& tensors);

}  // namespace keel::io
