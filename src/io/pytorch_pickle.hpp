#pragma once
// The pickle of a PyTorch state_dict (data.pkl of a torch.save zip): a restricted reader that
// interprets only what torch.load(weights_only=True) allows, and the writer of the same layout.
// Internal to keel: not a public header.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::io::detail::pytorch {

// torch's typed storages (torch.FloatStorage, ...) and what keel makes of them. keel has no int8
// or int16 dtype: CharStorage and ShortStorage widen losslessly to int32.
struct StorageType {
  const char* torch_name;  // "FloatStorage"
  std::size_t itemsize;    // bytes of one element in the file
  DType dtype;             // the keel dtype the elements are read as
};
// nullptr for a name that is not a storage type.
const StorageType* storage_type(std::string_view torch_name);
// The storage type keel writes for a dtype (FloatStorage for float32, ...).
const StorageType& storage_type_of(DType dtype);

// Gives the bytes of the storage `key` (the member data/<key>), which must hold at least `nbytes`
// bytes; the reader's caller throws IOError otherwise. `at` is the data.pkl offset of the
// BINPERSID that names it, for the message.
using StorageBytes = std::function<std::string_view(const std::string& key, std::uint64_t nbytes, std::uint64_t at)>;

struct UnpickleOptions {
  const char* op = "load_pytorch";
  std::string label;             // "<path>: data.pkl", the start of every message
  bool big_endian = false;       // the file's byteorder member says "big"
  std::uint64_t max_bytes = 0;   // the most bytes all tensors together may take (0: no limit)
};

// Interprets `pickle` and returns the (name, tensor) pairs of the dict it builds, in its order.
// IOError "{op}: {label} byte offset N: ..." for any opcode, global or value outside a state_dict.
std::vector<std::pair<std::string, Tensor>> unpickle_state_dict(std::string_view pickle, const StorageBytes& storages,
                                                                const UnpickleOptions& options);

// The pickle (protocol 2) of an OrderedDict of tensors as torch.save writes it: each tensor is a
// _rebuild_tensor_v2 of its own storage "0", "1", ... (contiguous, offset 0), in `names` order.
std::string pickle_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors);

}  // namespace keel::io::detail::pytorch
