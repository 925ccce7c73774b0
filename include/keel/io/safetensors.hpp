#pragma once
// safetensors files (the Hugging Face format: 8-byte little-endian header length, a JSON header
// of {name: {dtype, shape, data_offsets}} plus optional "__metadata__", then the raw data).
#include <map>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel::io {

// Writes to a temporary file in the same folder, flushes it and renames it into place, so an
// interrupted save never destroys an existing file (see atomic_write).
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Validates the header (length, JSON, dtypes, shapes, offsets in range, non-overlapping and
// covering the data exactly) before reading any data; IOError names the file and the field.
// A zero dimension makes a tensor empty whatever the others are ([0, 2^62] loads, holding no
// bytes); dimensions whose product overflows int64 are an IOError.
std::map<std::string, Tensor> load_safetensors(const std::string& path);
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

// Writes `bytes` to path through a temporary file + fsync + rename (crash-safe). The temporary,
// "<path>.tmp-<pid>-<hex>", is left behind only by a process killed mid-write; the next write
// to path removes such leftovers of processes that no longer exist (never those of live ones).
void atomic_write(const std::string& path, const std::string& bytes);

}  // namespace keel::io
