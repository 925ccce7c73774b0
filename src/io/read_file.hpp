#pragma once
// Reading a whole file into memory, for the loaders that parse bytes (.npy/.npz, safetensors,
// MNIST/CIFAR/IMDB archives). Internal to keel: not a public header.
#include <string>

namespace keel::io::detail {

// The bytes of the file at `path`. IOError naming `op` and the path when it cannot be opened
// ("<op>: cannot open <path>: <reason>"), sized or read.
std::string read_file(const std::string& path, const char* op);

}  // namespace keel::io::detail
