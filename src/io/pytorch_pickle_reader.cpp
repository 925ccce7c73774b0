// A restricted pickle VM for PyTorch state_dicts. It follows torch/_weights_only_unpickler.py:
// only the opcodes a torch.save'd dict of tensors uses, and only the globals of its allow list
// that a state_dict needs, are accepted; nothing is ever called but keel's own rebuild of a
// tensor. The opcode bytes and argument encodings are those of Python's Lib/pickle.py.
//
// Values live in an arena and refer to each other by index, so that no input (deep nesting,
// a list that holds itself through the memo) can make destruction recurse or leak.
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "io/pytorch_pickle.hpp"

namespace keel::io::detail::pytorch {

namespace {

constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", 4, DType::float32},    {"DoubleStorage", 8, DType::float64},
    {"HalfStorage", 2, DType::float16},     {"BFloat16Storage", 2, DType::bfloat16},
    {"LongStorage", 8, DType::int64},       {"IntStorage", 4, DType::int32},
    {"ShortStorage", 2, DType::int32},      {"CharStorage", 1, DType::int32},
    {"ByteStorage", 1, DType::uint8},       {"BoolStorage", 1, DType::bool_},
};

constexpr std::size_t kMaxRank = 64;  // torch's limit on the dimensions of a tensor

enum class Kind : std::uint8_t { none, boolean, integer, real, string, tuple, list, dict, global, storage, tensor };
enum class Global : std::uint8_t { ordered_dict, rebuild_tensor_v2, rebuild_parameter, rebuild_parameter_with_state, storage_type };

struct Node {
  Kind kind = Kind::none;
  std::int64_t integer = 0;           // integer, boolean; storage: its element count
  double real = 0;
  std::string text;                   // string; storage: its key
  std::vector<std::uint32_t> items;   // tuple, list; dict: key, value, key, value, ...
  Global global = Global::ordered_dict;
  const StorageType* type = nullptr;  // global storage_type, storage
  std::string_view bytes;             // storage: its bytes
  Tensor tensor;
  std::unordered_map<std::string, std::size_t> key_at;  // dict: a key's position in items
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "bool";
    case Kind::integer: return "integer";
    case Kind::real: return "float";
    case Kind::string: return "str";
    case Kind::tuple: return "tuple";
    case Kind::list: return "list";
    case Kind::dict: return "dict";
    case Kind::global: return "global";
    case Kind::storage: return "storage";
    case Kind::tensor: return "tensor";
  }
  return "?";
}

class Machine {
 public:
  Machine(std::string_view p, const StorageBytes& s, const UnpickleOptions& o) : pkl_(p), storages_(s), opt_(o) {}

  std::vector<std::pair<std::string, Tensor>> run();

 private:
  [[noreturn]] void fail(std::uint64_t at, const std::string& what) const {
    throw IOError(fmt::format("{}: {} byte offset {}: {}", opt_.op, opt_.label, at, what));
  }
  // The next n bytes of the pickle (an IOError when it ends first).
  std::string_view take(std::size_t n) {
    if (n > pkl_.size() - pos_)
      fail(pos_, fmt::format("truncated: opcode at {} needs {} more bytes, {} left", op_at_, n, pkl_.size() - pos_));
    std::string_view r = pkl_.substr(pos_, n);
    pos_ += n;
    return r;
  }
  std::uint64_t le(std::size_t n) {
    const std::string_view b = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[i]);
    return v;
  }
  std::string_view line() {  // GLOBAL's "module\n" and "name\n"
    const std::size_t end = pkl_.find('\n', pos_);
    if (end == std::string_view::npos) fail(pos_, "truncated: GLOBAL without a newline-terminated name");
    std::string_view r = pkl_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return r;
  }
  std::uint32_t make(Node n) {
    if (nodes_.size() >= std::numeric_limits<std::uint32_t>::max()) fail(op_at_, "too many values");
    nodes_.push_back(std::move(n));
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }
  std::uint32_t make_int(std::int64_t v, Kind k = Kind::integer) {
    Node n;
    n.kind = k;
    n.integer = v;
    return make(std::move(n));
  }
  void push(std::uint32_t v) { stack_.push_back(v); }
  std::uint32_t pop() {
    if (stack_.size() <= mark_floor()) fail(op_at_, "stack underflow");
    const std::uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::size_t mark_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values above the last MARK, which is removed.
  std::vector<std::uint32_t> pop_mark() {
    if (marks_.empty()) fail(op_at_, "no MARK on the stack");
    const std::size_t at = marks_.back();
    marks_.pop_back();
    std::vector<std::uint32_t> r(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
    stack_.resize(at);
    return r;
  }
  Node& at(std::uint32_t v) { return nodes_[v]; }
  Node& expect(std::uint32_t v, Kind k, const char* what) {
    Node& n = nodes_[v];
    if (n.kind != k) fail(op_at_, fmt::format("{} must be of type {}, got {}", what, kind_name(k), kind_name(n.kind)));
    return n;
  }
  void memo_put(std::uint64_t index) {
    if (stack_.size() <= mark_floor()) fail(op_at_, "memo put with an empty stack");
    memo_[index] = stack_.back();
  }
  void memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail(op_at_, fmt::format("memo index {} was never stored", index));
    push(it->second);
  }
  void global(std::string_view module, std::string_view name);
  void set_items(std::uint32_t dict, const std::vector<std::uint32_t>& kv);
  void append(std::uint32_t list, const std::vector<std::uint32_t>& values);
  void reduce();
  void persistent_load();
  std::vector<std::int64_t> int_tuple(std::uint32_t v, const char* what);
  Tensor rebuild_tensor(const std::vector<std::uint32_t>& args);

  std::string_view pkl_;
  const StorageBytes& storages_;
  const UnpickleOptions& opt_;
  std::size_t pos_ = 0, op_at_ = 0;
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, std::uint32_t> memo_;
  std::unordered_map<std::string, std::uint32_t> storage_by_key_;  // a shared storage is read once
  std::uint64_t tensor_bytes_ = 0;
};

void Machine::global(std::string_view module, std::string_view name) {
  Node n;
  n.kind = Kind::global;
  if (module == "collections" && name == "OrderedDict") n.global = Global::ordered_dict;
  else if (module == "torch._utils" && name == "_rebuild_tensor_v2") n.global = Global::rebuild_tensor_v2;
  else if (module == "torch._utils" && name == "_rebuild_parameter") n.global = Global::rebuild_parameter;
  else if (module == "torch._utils" && name == "_rebuild_parameter_with_state")
    n.global = Global::rebuild_parameter_with_state;
  else if (module == "torch" && storage_type(name)) {
    n.global = Global::storage_type;
    n.type = storage_type(name);
  } else {
    fail(op_at_, fmt::format("global '{}.{}' is not allowed (only the globals of a tensor state_dict are: "
                             "collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
                             "torch._utils._rebuild_parameter[_with_state], torch.*Storage)",
                             module, name));
  }
  push(make(std::move(n)));
}

void Machine::set_items(std::uint32_t dict, const std::vector<std::uint32_t>& kv) {
  if (kv.size() % 2 != 0) fail(op_at_, "SETITEMS with an odd number of values");
  Node& d = expect(dict, Kind::dict, "the target of SETITEM(S)");
  for (std::size_t i = 0; i < kv.size(); i += 2) {
    expect(kv[i], Kind::string, "a state_dict key");
    // A repeated key replaces the value in place, as a Python dict does.
    const auto [it, fresh] = d.key_at.emplace(nodes_[kv[i]].text, d.items.size());
    if (fresh) {
      d.items.push_back(kv[i]);
      d.items.push_back(kv[i + 1]);
    } else {
      d.items[it->second + 1] = kv[i + 1];
    }
  }
}

void Machine::append(std::uint32_t list, const std::vector<std::uint32_t>& values) {
  Node& l = expect(list, Kind::list, "the target of APPEND(S)");
  l.items.insert(l.items.end(), values.begin(), values.end());
}

// BINPERSID: ('storage', torch.XStorage, key, location, numel) as torch.save's persistent_id
// writes it; the storage is the member data/<key> (location is ignored: keel reads to the CPU,
// as torch.load's map_location="cpu").
void Machine::persistent_load() {
  const Node& pid = expect(pop(), Kind::tuple, "a persistent id");
  if (pid.items.size() != 5) fail(op_at_, fmt::format("a persistent id must have 5 items, got {}", pid.items.size()));
  const std::vector<std::uint32_t> it = pid.items;
  if (expect(it[0], Kind::string, "persistent id[0]").text != "storage")
    fail(op_at_, fmt::format("persistent id of type '{}' (only 'storage' is allowed)", at(it[0]).text));
  const Node& type = expect(it[1], Kind::global, "persistent id[1] (the storage type)");
  if (type.global != Global::storage_type) fail(op_at_, "persistent id[1] is not a torch.*Storage type");
  const StorageType* st = type.type;
  const std::string key = expect(it[2], Kind::string, "persistent id[2] (the storage key)").text;
  expect(it[3], Kind::string, "persistent id[3] (the location)");
  const std::int64_t numel = expect(it[4], Kind::integer, "persistent id[4] (the element count)").integer;
  if (numel < 0) fail(op_at_, fmt::format("storage '{}' has a negative element count {}", key, numel));
  if (const auto found = storage_by_key_.find(key); found != storage_by_key_.end()) {
    const Node& s = nodes_[found->second];
    if (s.type != st || s.integer != numel)
      fail(op_at_, fmt::format("storage '{}' is named again as {} of {} elements (first {} of {})", key,
                               st->torch_name, numel, s.type->torch_name, s.integer));
    push(found->second);
    return;
  }
  if (static_cast<std::uint64_t>(numel) > std::numeric_limits<std::uint64_t>::max() / st->itemsize)
    fail(op_at_, fmt::format("storage '{}': {} elements overflow a byte count", key, numel));
  Node s;
  s.kind = Kind::storage;
  s.type = st;
  s.integer = numel;
  s.text = key;
  s.bytes = storages_(key, static_cast<std::uint64_t>(numel) * st->itemsize, op_at_);
  const std::uint32_t v = make(std::move(s));
  storage_by_key_[key] = v;
  push(v);
}

std::vector<std::int64_t> Machine::int_tuple(std::uint32_t v, const char* what) {
  const Node& t = expect(v, Kind::tuple, what);
  std::vector<std::int64_t> r;
  for (std::uint32_t x : t.items) {
    if (nodes_[x].kind != Kind::integer)
      fail(op_at_, fmt::format("{} must hold integers, got {}", what, kind_name(nodes_[x].kind)));
    if (nodes_[x].integer < 0) fail(op_at_, fmt::format("{} holds the negative value {}", what, nodes_[x].integer));
    r.push_back(nodes_[x].integer);
  }
  return r;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[,
// metadata]) (torch/_utils.py): the view storage[offset + sum(i_k * stride_k)] of `size`, copied
// out as a contiguous keel tensor. Every element it reads must lie inside the storage.
Tensor Machine::rebuild_tensor(const std::vector<std::uint32_t>& args) {
  if (args.size() != 6 && args.size() != 7)
    fail(op_at_, fmt::format("_rebuild_tensor_v2 takes 6 or 7 arguments, got {}", args.size()));
  const Node& storage = expect(args[0], Kind::storage, "_rebuild_tensor_v2's storage");
  const std::int64_t offset = expect(args[1], Kind::integer, "_rebuild_tensor_v2's storage_offset").integer;
  const std::vector<std::int64_t> size = int_tuple(args[2], "_rebuild_tensor_v2's size");
  const std::vector<std::int64_t> stride = int_tuple(args[3], "_rebuild_tensor_v2's stride");
  if (at(args[4]).kind != Kind::boolean) fail(op_at_, "_rebuild_tensor_v2's requires_grad must be a bool");
  if (offset < 0) fail(op_at_, fmt::format("negative storage_offset {}", offset));
  if (size.size() != stride.size())
    fail(op_at_, fmt::format("size has {} dimensions but stride {}", size.size(), stride.size()));
  if (size.size() > kMaxRank) fail(op_at_, fmt::format("a tensor of {} dimensions (torch allows {})", size.size(), kMaxRank));
  const std::string where = fmt::format("tensor of size {} stride {} at offset {} of storage '{}' ({} elements)",
                                        Shape(size).to_string(), Shape(stride).to_string(), offset, storage.text,
                                        storage.integer);
  // Overflow-safe: the element count and the last element read, in unsigned 128 bits.
  unsigned __int128 count = 1, last = static_cast<unsigned __int128>(offset);
  for (std::size_t i = 0; i < size.size(); ++i) {
    count *= static_cast<unsigned __int128>(size[i]);
    if (count > static_cast<unsigned __int128>(std::numeric_limits<std::int64_t>::max()))
      fail(op_at_, fmt::format("{}: the element count overflows int64", where));
    if (size[i] > 0) last += static_cast<unsigned __int128>(size[i] - 1) * static_cast<unsigned __int128>(stride[i]);
  }
  if (count > 0 && last >= static_cast<unsigned __int128>(storage.integer))
    fail(op_at_, fmt::format("{} reads past the end of the storage", where));
  const StorageType& st = *storage.type;
  const std::uint64_t out_bytes = static_cast<std::uint64_t>(count) * itemsize(st.dtype);
  tensor_bytes_ += out_bytes;
  if (opt_.max_bytes && tensor_bytes_ > opt_.max_bytes)
    fail(op_at_, fmt::format("{}: the tensors would take {} bytes, more than the {} allowed for a file this size",
                             where, tensor_bytes_, opt_.max_bytes));
  DeviceScope cpu(Device::cpu());
  Tensor t = keel::detail::empty_tensor(Shape(size), st.dtype, Device::cpu(), "load_pytorch");
  auto* out = static_cast<unsigned char*>(t.raw_data());
  const auto* in = reinterpret_cast<const unsigned char*>(storage.bytes.data());
  const std::size_t item = st.itemsize, rank = size.size();
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t src = offset;
  for (std::int64_t n = 0; n < static_cast<std::int64_t>(count); ++n) {
    unsigned char e[8];
    std::memcpy(e, in + static_cast<std::size_t>(src) * item, item);
    if (opt_.big_endian)
      for (std::size_t a = 0, b = item - 1; a < b; ++a, --b) std::swap(e[a], e[b]);
    unsigned char* dst = out + static_cast<std::size_t>(n) * itemsize(st.dtype);
    if (st.itemsize == 1 && st.dtype == DType::int32) {  // CharStorage: int8 widened
      const std::int32_t v = static_cast<std::int8_t>(e[0]);
      std::memcpy(dst, &v, 4);
    } else if (st.itemsize == 2 && st.dtype == DType::int32) {  // ShortStorage: int16 widened
      std::int16_t s16;
      std::memcpy(&s16, e, 2);
      const std::int32_t v = s16;
      std::memcpy(dst, &v, 4);
    } else if (st.dtype == DType::bool_) {
      *dst = e[0] != 0;  // keel's bools are 0/1 bytes
    } else {
      std::memcpy(dst, e, item);
    }
    for (std::size_t d = rank; d-- > 0;) {  // the next index, row-major
      src += stride[d];
      if (++index[d] < size[d]) break;
      src -= stride[d] * size[d];
      index[d] = 0;
    }
  }
  return t;
}

void Machine::reduce() {
  const std::uint32_t args_v = pop(), fn_v = pop();
  const Node& fn = expect(fn_v, Kind::global, "the callable of REDUCE");
  const std::vector<std::uint32_t> args = expect(args_v, Kind::tuple, "the arguments of REDUCE").items;
  Node r;
  switch (fn.global) {
    case Global::ordered_dict:
      if (!args.empty()) fail(op_at_, "OrderedDict() takes no arguments here");
      r.kind = Kind::dict;
      break;
    case Global::rebuild_tensor_v2:
      r.kind = Kind::tensor;
      r.tensor = rebuild_tensor(args);
      break;
    case Global::rebuild_parameter:  // (data, requires_grad, backward_hooks): the tensor itself
    case Global::rebuild_parameter_with_state:  // (data, requires_grad, backward_hooks, state)
      if (args.size() != (fn.global == Global::rebuild_parameter ? 3u : 4u))
        fail(op_at_, fmt::format("_rebuild_parameter got {} arguments", args.size()));
      r.kind = Kind::tensor;
      r.tensor = expect(args[0], Kind::tensor, "_rebuild_parameter's data").tensor;
      break;
    case Global::storage_type:
      fail(op_at_, fmt::format("REDUCE of torch.{} is not allowed", fn.type->torch_name));
  }
  push(make(std::move(r)));
}

std::vector<std::pair<std::string, Tensor>> Machine::run() {
  while (true) {
    op_at_ = pos_;
    if (pos_ >= pkl_.size()) fail(pos_, "truncated: the pickle ends before STOP");
    const auto op = static_cast<unsigned char>(pkl_[pos_++]);
    switch (op) {
      case 0x80: le(1); break;                       // PROTO n
      case 0x95: le(8); break;                       // FRAME size (framing only groups bytes)
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case ')': { Node n; n.kind = Kind::tuple; push(make(std::move(n))); break; }  // EMPTY_TUPLE
      case 't': case 0x85: case 0x86: case 0x87: {  // TUPLE, TUPLE1, TUPLE2, TUPLE3
        Node n;
        n.kind = Kind::tuple;
        if (op == 't') {
          n.items = pop_mark();
        } else {
          n.items.resize(op - 0x84u);
          for (std::size_t i = n.items.size(); i-- > 0;) n.items[i] = pop();
        }
        push(make(std::move(n)));
        break;
      }
      case ']': { Node n; n.kind = Kind::list; push(make(std::move(n))); break; }  // EMPTY_LIST
      case 'a': {  // APPEND
        const std::uint32_t v = pop();
        if (stack_.size() <= mark_floor()) fail(op_at_, "APPEND without a list");
        append(stack_.back(), {v});
        break;
      }
      case 'e': {  // APPENDS
        const auto vs = pop_mark();
        if (stack_.size() <= mark_floor()) fail(op_at_, "APPENDS without a list");
        append(stack_.back(), vs);
        break;
      }
      case '}': { Node n; n.kind = Kind::dict; push(make(std::move(n))); break; }  // EMPTY_DICT
      case 's': {  // SETITEM
        const std::uint32_t v = pop(), k = pop();
        if (stack_.size() <= mark_floor()) fail(op_at_, "SETITEM without a dict");
        set_items(stack_.back(), {k, v});
        break;
      }
      case 'u': {  // SETITEMS
        auto kv = pop_mark();
        if (stack_.size() <= mark_floor()) fail(op_at_, "SETITEMS without a dict");
        set_items(stack_.back(), kv);
        break;
      }
      case 'X': case 0x8c: case 0x8d: {  // BINUNICODE (4-byte length), SHORT_ (1), BINUNICODE8 (8)
        const std::uint64_t n = le(op == 'X' ? 4 : op == 0x8c ? 1 : 8);
        if (n > pkl_.size() - pos_) fail(pos_, fmt::format("truncated: a string of {} bytes runs past the end", n));
        Node s;
        s.kind = Kind::string;
        s.text = std::string(take(static_cast<std::size_t>(n)));
        push(make(std::move(s)));
        break;
      }
      case 'K': push(make_int(static_cast<std::int64_t>(le(1)))); break;  // BININT1 (unsigned)
      case 'M': push(make_int(static_cast<std::int64_t>(le(2)))); break;  // BININT2 (unsigned)
      case 'J': push(make_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))))); break;  // BININT
      case 0x8a: {  // LONG1: n bytes of a little-endian two's complement integer
        const std::uint64_t n = le(1);
        if (n > 8) fail(op_at_, fmt::format("LONG1 of {} bytes does not fit int64", n));
        std::uint64_t v = n ? le(static_cast<std::size_t>(n)) : 0;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
        push(make_int(static_cast<std::int64_t>(v)));
        break;
      }
      case 'G': {  // BINFLOAT: an 8-byte big-endian double
        const std::string_view b = take(8);
        std::uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<unsigned char>(c);
        Node n;
        n.kind = Kind::real;
        std::memcpy(&n.real, &bits, 8);
        push(make(std::move(n)));
        break;
      }
      case 'N': { Node n; push(make(std::move(n))); break; }  // NONE
      case 0x88: push(make_int(1, Kind::boolean)); break;      // NEWTRUE
      case 0x89: push(make_int(0, Kind::boolean)); break;      // NEWFALSE
      case 'q': memo_put(le(1)); break;                        // BINPUT
      case 'r': memo_put(le(4)); break;                        // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); break;                // MEMOIZE
      case 'h': memo_get(le(1)); break;                        // BINGET
      case 'j': memo_get(le(4)); break;                        // LONG_BINGET
      case '0': pop(); break;                                  // POP
      case 'c': {                                              // GLOBAL "module\nname\n"
        const std::string_view module = line(), name = line();
        global(module, name);
        break;
      }
      case 0x93: {  // STACK_GLOBAL: module and name strings from the stack
        const std::string name = expect(pop(), Kind::string, "STACK_GLOBAL's name").text;
        const std::string module = expect(pop(), Kind::string, "STACK_GLOBAL's module").text;
        global(module, name);
        break;
      }
      case 'R': reduce(); break;
      case 'Q': persistent_load(); break;  // BINPERSID
      case 'b': {  // BUILD: only an OrderedDict's attribute state ({'_metadata': ...}), dropped
        const std::uint32_t state = pop();
        if (stack_.size() <= mark_floor()) fail(op_at_, "BUILD without an object");
        expect(stack_.back(), Kind::dict, "the object of BUILD");
        expect(state, Kind::dict, "the state of BUILD");
        break;
      }
      case '.': {  // STOP: the dict of tensors
        const std::uint32_t result = pop();
        if (pos_ != pkl_.size())
          fail(op_at_, fmt::format("STOP with {} bytes after it", pkl_.size() - pos_));
        const Node& d = expect(result, Kind::dict, "the pickled object");
        std::vector<std::pair<std::string, Tensor>> out;
        for (std::size_t i = 0; i < d.items.size(); i += 2) {
          const Node& v = nodes_[d.items[i + 1]];
          if (v.kind != Kind::tensor)
            fail(op_at_, fmt::format("the value of '{}' is of type {}, not a tensor", nodes_[d.items[i]].text,
                                     kind_name(v.kind)));
          out.emplace_back(nodes_[d.items[i]].text, v.tensor);
        }
        return out;
      }
      default:
        fail(op_at_, fmt::format("opcode 0x{:02x} is not allowed in a state_dict pickle", op));
    }
  }
}

}  // namespace

const StorageType* storage_type(std::string_view torch_name) {
  for (const auto& t : kStorageTypes)
    if (torch_name == t.torch_name) return &t;
  return nullptr;
}

const StorageType& storage_type_of(DType dtype) {
  switch (dtype) {
    case DType::float32: return kStorageTypes[0];
    case DType::float64: return kStorageTypes[1];
    case DType::float16: return kStorageTypes[2];
    case DType::bfloat16: return kStorageTypes[3];
    case DType::int64: return kStorageTypes[4];
    case DType::int32: return kStorageTypes[5];
    case DType::uint8: return kStorageTypes[8];
    case DType::bool_: return kStorageTypes[9];
  }
  return kStorageTypes[0];
}

std::vector<std::pair<std::string, Tensor>> unpickle_state_dict(std::string_view pickle, const StorageBytes& storages,
                                                                const UnpickleOptions& options) {
  return Machine(pickle, storages, options).run();
}

}  // namespace keel::io::detail::pytorch
