// The pickle torch.save writes for a state_dict (protocol 2, Lib/pickle.py's opcodes), as
// pickletools.dis shows it for torch.save(OrderedDict(...)):
//   PROTO 2; GLOBAL 'collections OrderedDict'; EMPTY_TUPLE; REDUCE      the dict
//   MARK; for each entry:
//     BINUNICODE name
//     GLOBAL 'torch._utils _rebuild_tensor_v2'
//     MARK; MARK 'storage' GLOBAL 'torch FloatStorage' '<key>' 'cpu' numel TUPLE; BINPERSID
//           storage_offset (size...) (stride...) NEWFALSE OrderedDict() TUPLE
//     REDUCE
//   SETITEMS; STOP
// The memo is not used (torch.load does not need it); the dict's _metadata attribute (module
// versions) is left out, which torch's load_state_dict accepts.
#include <algorithm>
#include <string>

#include "io/pytorch_pickle.hpp"

namespace keel::io::detail::pytorch {

namespace {

void put_int(std::string& out, std::int64_t v) {
  if (v >= 0 && v < 256) {  // BININT1
    out += 'K';
    out += static_cast<char>(v);
  } else if (v >= 0 && v < 65536) {  // BININT2
    out += 'M';
    out += static_cast<char>(v & 0xFF);
    out += static_cast<char>(v >> 8);
  } else if (v >= -2147483648LL && v <= 2147483647LL) {  // BININT: 4 bytes, signed
    out += 'J';
    const auto u = static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
    for (int i = 0; i < 4; ++i) out += static_cast<char>((u >> (8 * i)) & 0xFF);
  } else {  // LONG1 with 8 bytes of two's complement
    out += '\x8a';
    out += '\x08';
    const auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xFF);
  }
}

void put_string(std::string& out, const std::string& s) {  // BINUNICODE: 4-byte length + UTF-8
  out += 'X';
  const auto n = static_cast<std::uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  out += s;
}

void put_global(std::string& out, const char* module, const std::string& name) {
  out += 'c';
  out += module;
  out += '\n';
  out += name;
  out += '\n';
}

void put_int_tuple(std::string& out, const std::vector<std::int64_t>& v) {
  if (v.empty()) {
    out += ')';  // EMPTY_TUPLE
    return;
  }
  if (v.size() > 3) out += '(';  // MARK ... TUPLE, else TUPLE1/2/3
  for (std::int64_t x : v) put_int(out, x);
  out += v.size() > 3 ? 't' : static_cast<char>(0x84 + v.size());
}

}  // namespace

std::string pickle_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::string out = "\x80\x02";  // PROTO 2
  put_global(out, "collections", "OrderedDict");
  out += ")R";  // EMPTY_TUPLE REDUCE
  if (!tensors.empty()) {
    out += '(';
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, t] = tensors[i];
      put_string(out, name);
      put_global(out, "torch._utils", "_rebuild_tensor_v2");
      out += "((";
      put_string(out, "storage");
      put_global(out, "torch", storage_type_of(t.dtype()).torch_name);
      put_string(out, std::to_string(i));
      put_string(out, "cpu");
      put_int(out, t.size());
      out += "tQ";  // TUPLE BINPERSID
      put_int(out, 0);
      const std::vector<std::int64_t> size = t.shape().dims();
      std::vector<std::int64_t> stride(size.size(), 1);  // contiguous, row-major
      for (std::size_t d = size.size(); d-- > 1;) stride[d - 1] = stride[d] * std::max<std::int64_t>(size[d], 1);
      put_int_tuple(out, size);
      put_int_tuple(out, stride);
      out += '\x89';  // NEWFALSE: requires_grad
      put_global(out, "collections", "OrderedDict");
      out += ")R";  // backward_hooks = OrderedDict()
      out += "tR";  // TUPLE REDUCE
    }
    out += 'u';  // SETITEMS
  }
  out += '.';  // STOP
  return out;
}

}  // namespace keel::io::detail::pytorch
