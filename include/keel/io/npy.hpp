#pragma once
// NumPy .npy and .npz files.
//
// .npy: format versions 1.0, 2.0 and 3.0 are read; 1.0 is written (2.0 when the header needs
// it). dtypes: '<f4' float32, '<f8' float64, '<f2' float16, '<i4' int32, '<i8' int64,
// '|u1' uint8, '|b1' bool (big-endian '>' files are byte-swapped on load). Fortran-order files
// are transposed into C order on load. bfloat16 has no NumPy dtype: saving it is a DTypeError.
// .npz: a zip of .npy members named "<key>.npy", stored (np.savez) or deflated
// (np.savez_compressed); zip64 archives (what NumPy writes for large arrays) are read.
// Readers validate the header dict, shape and data size (and, for .npz, the zip structure: the
// whole central directory against the end record's count and every local header's name, method,
// sizes, CRC-32 and offset, with no overlapping or duplicate members) and throw IOError naming
// the file, the member and the byte offset. A zero-size shape such as (0, 2**62) loads; one
// whose product overflows int64 is an IOError. Writers use io::atomic_write.
#include <map>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel::io {

void save_npy(const std::string& path, const Tensor& array);
Tensor load_npy(const std::string& path);

void save_npz(const std::string& path, const std::map<std::string, Tensor>& arrays, bool compressed = false);
std::map<std::string, Tensor> load_npz(const std::string& path);

}  // namespace keel::io
