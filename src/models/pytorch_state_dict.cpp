// Model::pytorch_state_dict / Model::load_pytorch_state_dict: keel's weights in the names and
// layouts of the equivalent torch.nn modules.
//
// Names: "<i>.<tensor>", where i is the position of the layer in layers() (InputLayers not
// counted, as Keras' model.layers), layers without weights included: a keel Sequential of the
// same layers as an nn.Sequential (a ReLU layer where torch has nn.ReLU, Flatten for
// nn.Flatten, ...) has the same names. A nested model adds its own level ("2.0.weight"), as a
// nested nn.Sequential does.
//
// Layouts (torch/nn/modules/*.py):
//   Dense [in, out] kernel            Linear.weight [out, in] = kernel^T; bias
//   Conv1D [k, in/g, out]             Conv1d.weight [out, in/g, k] = kernel.permute(2, 1, 0)
//   Conv2D [kh, kw, in/g, out]        Conv2d.weight [out, in/g, kh, kw] = kernel.permute(3, 2, 0, 1)
//   BatchNormalization                BatchNorm1d/2d: weight = gamma, bias = beta, running_mean =
//                                     moving_mean, running_var = moving_variance, and
//                                     num_batches_tracked (int64 scalar: written as 0, accepted)
//   LayerNormalization                LayerNorm: weight = gamma, bias = beta
//   Embedding [n, d]                  Embedding.weight [n, d]
//   LSTM (Keras gates i, f, c, o)     nn.LSTM (gates i, f, g, o: the same order): weight_ih_l0 =
//                                     kernel^T, weight_hh_l0 = recurrent_kernel^T, and
//                                     bias = bias_ih_l0 + bias_hh_l0 (written: bias, zeros)
//   GRU reset_after=True (z, r, h)    nn.GRU (r, z, n, with the reset gate applied to the
//                                     recurrent product: Keras' reset_after): the blocks swapped,
//                                     bias[0] = bias_ih_l0, bias[1] = bias_hh_l0
//   Bidirectional(LSTM / GRU)         nn.LSTM / nn.GRU(bidirectional=True): the forward layer as
//                                     above, the backward layer's tensors named *_l0_reverse
// A torch RNN of several layers (nn.LSTM(num_layers = k)) is one module, one index: its *_l1 ...
// tensors are the keel recurrent layers that follow the first (stacked with return_sequences).
// Loading takes "<i>.weight_ih_l1" for the keel layer after layer i when the state dict has it,
// and the layers after that move down one torch index; pytorch_state_dict({.stack_recurrent})
// writes such runs of layers (same class, direction and units) as one module the same way.
// The Flatten of an NHWC feature map orders its features (h, w, c), torch's NCHW one (c, h, w):
// the Linear after it needs its input columns permuted (see samples/pytorch_to_keel.cpp), or
// the keel convolutions can use data_format = "channels_first".
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/layers/convolutional.hpp"
#include "keel/layers/core.hpp"
#include "keel/layers/normalization.hpp"
#include "keel/layers/recurrent.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"

namespace keel::models {

namespace {

// One keel weight and the torch tensors it corresponds to.
struct Mapping {
  Variable* var = nullptr;
  std::vector<std::string> locals;  // torch names after "<index>.", "{}" where an RNN's layer number goes
  std::vector<std::string> names;   // the full torch names (resolve)
  std::function<std::vector<Tensor>(const Tensor&)> to_torch;       // keel value -> torch tensors
  std::function<Tensor(const std::vector<Tensor>&)> from_torch;     // torch tensors -> keel value
};

struct LayerMap {
  std::string layer;                   // "dense_1 (Dense, index 3)", for messages
  std::string stack_kind;              // recurrent layers that torch can stack: class, direction, units
  bool returns_sequences = false;      // a recurrent layer that another can be stacked on
  std::vector<Mapping> maps;
  std::vector<std::string> accepted;   // torch names read and ignored (num_batches_tracked)
  std::vector<std::pair<std::string, Tensor>> extra_out;  // written with the weights
  std::string module;                  // "<prefix><torch index>." (resolve)
  int level = 0;                       // the layer number within a stacked torch RNN
};

std::string full_name(const std::string& module, const std::string& local, int level) {
  return module + fmt::format(fmt::runtime(local), level);
}

// Gives m's tensors their torch names as layer `level` of module `module`.
void resolve(LayerMap& m, const std::string& module, int level) {
  m.module = module;
  m.level = level;
  for (Mapping& mp : m.maps) {
    mp.names.clear();
    for (const std::string& local : mp.locals) mp.names.push_back(full_name(module, local, level));
  }
  for (std::string& a : m.accepted) a = full_name(module, a, level);
  for (auto& [name, t] : m.extra_out) name = full_name(module, name, level);
}

Variable* weight_named(layers::Layer& layer, const std::string& name) {
  for (Variable* v : layer.weights()) {
    const std::string& n = v->name();
    const auto slash = n.rfind('/');
    if ((slash == std::string::npos ? n : n.substr(slash + 1)) == name) return v;
  }
  return nullptr;
}

Tensor permuted(const Tensor& x, std::vector<int> perm) { return transpose(x, std::move(perm)).contiguous(); }

// Rows [a*u, (a+1)*u) of x for each block a in `order`: GRU's z, r, h <-> torch's r, z, n.
Tensor blocks(const Tensor& x, std::int64_t u, std::vector<int> order) {
  std::vector<Tensor> parts;
  std::vector<std::int64_t> begin(static_cast<std::size_t>(x.shape().rank()), 0);
  std::vector<std::int64_t> size = x.shape().dims();
  size[0] = u;
  for (int a : order) {
    begin[0] = a * u;
    parts.push_back(slice(x, begin, size));
  }
  return concat(parts, 0).contiguous();
}

void add(LayerMap& m, Variable* v, std::vector<std::string> locals, std::function<std::vector<Tensor>(const Tensor&)> to,
         std::function<Tensor(const std::vector<Tensor>&)> from) {
  if (v) m.maps.push_back({v, std::move(locals), {}, std::move(to), std::move(from)});
}

void same(LayerMap& m, layers::Layer& l, const char* keel_name, const char* torch_name) {
  add(m, weight_named(l, keel_name), {torch_name}, [](const Tensor& x) { return std::vector<Tensor>{x}; },
      [](const std::vector<Tensor>& t) { return t[0]; });
}

void transposed(LayerMap& m, layers::Layer& l, const char* keel_name, const std::string& torch_name,
                std::vector<int> to_perm, std::vector<int> from_perm) {
  add(m, weight_named(l, keel_name), {torch_name},
      [to_perm](const Tensor& x) { return std::vector<Tensor>{permuted(x, to_perm)}; },
      [from_perm](const std::vector<Tensor>& t) { return permuted(t[0], from_perm); });
}

void check_recurrent_activations(const std::string& layer, const activations::ActivationFn& act,
                                 const activations::ActivationFn& rec) {
  if (act.name() != "tanh" || rec.name() != "sigmoid")
    throw ValueError(fmt::format("pytorch state_dict: layer {}: torch's recurrent layers use tanh and sigmoid, "
                                 "this one activation '{}' and recurrent_activation '{}'",
                                 layer, act.name(), rec.name()));
}

// An LSTM or GRU as one direction of one layer of nn.LSTM / nn.GRU: weight_ih_l<k><suffix>,
// weight_hh_l<k><suffix>, bias_ih_l<k><suffix>, bias_hh_l<k><suffix>.
void map_recurrent(LayerMap& m, layers::Layer& l, const std::string& suffix) {
  const std::string w_ih = "weight_ih_l{}" + suffix, w_hh = "weight_hh_l{}" + suffix;
  const std::vector<std::string> biases{"bias_ih_l{}" + suffix, "bias_hh_l{}" + suffix};
  if (l.class_name() == "LSTM") {
    const auto& o = dynamic_cast<layers::LSTM&>(l).options();
    check_recurrent_activations(m.layer, o.activation, o.recurrent_activation);
    transposed(m, l, "kernel", w_ih, {1, 0}, {1, 0});
    transposed(m, l, "recurrent_kernel", w_hh, {1, 0}, {1, 0});
    add(m, weight_named(l, "bias"), biases,
        [](const Tensor& b) { return std::vector<Tensor>{b, zeros_like(b)}; },
        [](const std::vector<Tensor>& t) { return keel::add(t[0], t[1]); });
    return;
  }
  if (l.class_name() != "GRU")
    throw ValueError(fmt::format("pytorch state_dict: layer {}: a {} has no torch equivalent keel maps (LSTM, GRU)",
                                 m.layer, l.class_name()));
  const auto& gru = dynamic_cast<layers::GRU&>(l);
  const auto& o = gru.options();
  check_recurrent_activations(m.layer, o.activation, o.recurrent_activation);
  if (!o.reset_after)
    throw ValueError(fmt::format("pytorch state_dict: layer {}: nn.GRU applies the reset gate after the recurrent "
                                 "product: only reset_after = true has a torch equivalent",
                                 m.layer));
  const std::int64_t u = gru.units();
  // keel blocks z, r, h -> torch r, z, n: take keel block 1, 0, 2 (and the same way back).
  auto kernel_to = [u](const Tensor& k) { return std::vector<Tensor>{blocks(permuted(k, {1, 0}), u, {1, 0, 2})}; };
  auto kernel_from = [u](const std::vector<Tensor>& t) { return permuted(blocks(t[0], u, {1, 0, 2}), {1, 0}); };
  add(m, weight_named(l, "kernel"), {w_ih}, kernel_to, kernel_from);
  add(m, weight_named(l, "recurrent_kernel"), {w_hh}, kernel_to, kernel_from);
  add(m, weight_named(l, "bias"), biases,
      [u](const Tensor& b) {  // [2, 3u]: input bias, recurrent bias
        const std::vector<Tensor> rows = unstack(b, 0);
        return std::vector<Tensor>{blocks(rows[0], u, {1, 0, 2}), blocks(rows[1], u, {1, 0, 2})};
      },
      [u](const std::vector<Tensor>& t) {
        return stack({blocks(t[0], u, {1, 0, 2}), blocks(t[1], u, {1, 0, 2})}, 0);
      });
}

// The mapping of one layer, names still local (resolve gives them their module and layer number).
LayerMap map_layer(layers::Layer& l, const std::string& index) {
  LayerMap m;
  const std::string cls = l.class_name();
  m.layer = fmt::format("'{}' ({}, index {})", l.name(), cls, index);
  if (cls == "Dense") {
    transposed(m, l, "kernel", "weight", {1, 0}, {1, 0});
    same(m, l, "bias", "bias");
  } else if (cls == "Conv1D") {
    transposed(m, l, "kernel", "weight", {2, 1, 0}, {2, 1, 0});
    same(m, l, "bias", "bias");
  } else if (cls == "Conv2D") {
    transposed(m, l, "kernel", "weight", {3, 2, 0, 1}, {2, 3, 1, 0});
    same(m, l, "bias", "bias");
  } else if (cls == "BatchNormalization") {
    same(m, l, "gamma", "weight");
    same(m, l, "beta", "bias");
    same(m, l, "moving_mean", "running_mean");
    same(m, l, "moving_variance", "running_var");
    m.accepted.push_back("num_batches_tracked");
    m.extra_out.emplace_back("num_batches_tracked", constant(0.0, DType::int64));
  } else if (cls == "LayerNormalization") {
    same(m, l, "gamma", "weight");
    same(m, l, "beta", "bias");
  } else if (cls == "Embedding") {
    same(m, l, "embeddings", "weight");
  } else if (cls == "LSTM" || cls == "GRU") {
    auto& rnn = dynamic_cast<layers::Recurrent&>(l);
    if (rnn.go_backwards())
      throw ValueError(fmt::format("pytorch state_dict: layer {}: go_backwards has no torch equivalent outside "
                                   "Bidirectional", m.layer));
    map_recurrent(m, l, "");
    m.stack_kind = fmt::format("{} {}", cls, rnn.units());
    m.returns_sequences = rnn.return_sequences();
  } else if (cls == "Bidirectional") {
    // nn.LSTM / nn.GRU(bidirectional=True): the forward layer's weights as <name>_l0, the backward
    // layer's as <name>_l0_reverse. torch concatenates the two directions' outputs.
    auto& bi = dynamic_cast<layers::Bidirectional&>(l);
    if (bi.options().merge_mode != "concat")
      throw ValueError(fmt::format("pytorch state_dict: layer {}: torch's bidirectional RNNs concatenate the two "
                                   "directions, this one has merge_mode '{}'", m.layer, bi.options().merge_mode));
    map_recurrent(m, *bi.forward_layer(), "");
    map_recurrent(m, *bi.backward_layer(), "_reverse");
    m.stack_kind = fmt::format("bidirectional {} {}", bi.forward_layer()->class_name(), bi.forward_layer()->units());
    m.returns_sequences = bi.forward_layer()->return_sequences();
  } else if (!l.weights().empty()) {
    throw ValueError(fmt::format("pytorch state_dict: layer {} has weights but no PyTorch equivalent keel maps "
                                 "(Dense, Conv1D, Conv2D, BatchNormalization, LayerNormalization, Embedding, LSTM, GRU, "
                                 "Bidirectional)",
                                 m.layer));
  }
  // A weight of the layer that no mapping covers would be silently dropped: refuse instead.
  std::size_t covered = 0;
  for (const auto& mp : m.maps) covered += mp.var != nullptr;
  if (covered != l.weights().size())
    throw ValueError(fmt::format("pytorch state_dict: layer {} has {} weights, {} of which have a torch name", m.layer,
                                 l.weights().size(), covered));
  return m;
}

// Whether a recurrent layer continues the torch RNN module of the layer before it, as its next
// layer (given that the two could stack: same class, direction and units).
using StackRule = std::function<bool(LayerMap& next, const LayerMap& previous)>;

// The layers of `model` in order, torch indices counted from 0 under `prefix`: a layer that
// `stack` puts on the previous recurrent layer shares its index as layer number + 1.
void collect(const Model& model, const std::string& prefix, const StackRule& stack, std::vector<LayerMap>& out) {
  std::size_t keel_index = 0, torch_index = 0;
  std::optional<std::size_t> previous;  // out's entry for the previous layer at this level
  for (const auto& l : model.layers()) {
    if (std::dynamic_pointer_cast<layers::InputLayer>(l)) continue;
    const std::string keel_name = prefix + std::to_string(keel_index++);
    if (auto* sub = dynamic_cast<Model*>(l.get())) {
      collect(*sub, prefix + std::to_string(torch_index++) + ".", stack, out);
      previous.reset();
      continue;
    }
    LayerMap m = map_layer(*l, keel_name);
    const LayerMap* prev = previous ? &out[*previous] : nullptr;
    if (prev && !m.stack_kind.empty() && m.stack_kind == prev->stack_kind && prev->returns_sequences &&
        stack(m, *prev)) {
      resolve(m, prev->module, prev->level + 1);
    } else {
      resolve(m, prefix + std::to_string(torch_index++) + ".", 0);
    }
    out.push_back(std::move(m));
    previous = out.size() - 1;
  }
}

std::vector<LayerMap> mappings(Model& model, const char* op, const StackRule& stack) {
  if (!model.built())
    throw ValueError(fmt::format("{}: model '{}' is not built: build it (or call it once) first", op, model.name()));
  std::vector<LayerMap> maps;
  collect(model, "", stack, maps);
  return maps;
}

}  // namespace

std::map<std::string, Tensor> Model::pytorch_state_dict(PytorchStateDictOptions options) {
  std::map<std::string, Tensor> out;
  const StackRule stack = [&](LayerMap&, const LayerMap&) { return options.stack_recurrent; };
  for (const LayerMap& m : mappings(*this, "pytorch_state_dict", stack)) {
    for (const Mapping& mp : m.maps) {
      const Tensor host = mp.var->peek().device().is_cpu() ? mp.var->peek() : mp.var->peek().to(Device::cpu());
      const std::vector<Tensor> ts = mp.to_torch(host);
      for (std::size_t i = 0; i < ts.size(); ++i) out[mp.names[i]] = ts[i].contiguous();
    }
    for (const auto& [name, t] : m.extra_out) out[name] = t;
  }
  return out;
}

void Model::load_pytorch_state_dict(const std::map<std::string, Tensor>& state, LoadStateDictOptions options) {
  const char* op = "load_pytorch_state_dict";
  // A recurrent layer is the next layer of the torch RNN before it when the state dict has its
  // tensors under that module's next layer number.
  const StackRule stack = [&](LayerMap& next, const LayerMap& previous) {
    for (const Mapping& mp : next.maps)
      for (const std::string& local : mp.locals)
        if (!state.count(full_name(previous.module, local, previous.level + 1))) return false;
    return !next.maps.empty();
  };
  const std::vector<LayerMap> maps = mappings(*this, op, stack);
  std::set<std::string> used;
  // Checked (and converted) in full before the first assign: a failed load changes nothing.
  std::vector<std::pair<Variable*, Tensor>> assigns;
  for (const LayerMap& m : maps) {
    for (const std::string& name : m.accepted)
      if (state.count(name)) used.insert(name);
    for (const Mapping& mp : m.maps) {
      std::vector<Tensor> given;
      for (const std::string& name : mp.names) {
        const auto it = state.find(name);
        if (it == state.end()) break;
        given.push_back(it->second);
      }
      if (given.size() != mp.names.size()) {
        if (options.strict)
          throw ValueError(fmt::format("{}: missing '{}' for weight '{}' of layer {}", op,
                                       mp.names[given.size()], mp.var->name(), m.layer));
        continue;
      }
      // The shapes torch has for this weight, from the keel weight's own value.
      const std::vector<Tensor> expect = mp.to_torch(mp.var->peek().device().is_cpu() ? mp.var->peek()
                                                                                      : mp.var->peek().to(Device::cpu()));
      for (std::size_t i = 0; i < given.size(); ++i) {
        if (!given[i].defined()) throw ValueError(fmt::format("{}: '{}' is an undefined tensor", op, mp.names[i]));
        if (given[i].shape() != expect[i].shape())
          throw ValueError(fmt::format("{}: layer {}: '{}' has shape {}, but weight '{}' needs {}", op, m.layer,
                                       mp.names[i], given[i].shape().to_string(), mp.var->name(),
                                       expect[i].shape().to_string()));
        if (!is_floating(given[i].dtype()))
          throw ValueError(fmt::format("{}: layer {}: '{}' is {}, not a floating tensor", op, m.layer, mp.names[i],
                                       keel::name(given[i].dtype())));
        given[i] = (given[i].device().is_cpu() ? given[i] : given[i].to(Device::cpu())).astype(mp.var->dtype());
        used.insert(mp.names[i]);
      }
      assigns.emplace_back(mp.var, mp.from_torch(given).astype(mp.var->dtype()).to(mp.var->device()));
    }
  }
  if (options.strict)
    for (const auto& [name, t] : state)
      if (!used.count(name))
        throw ValueError(fmt::format("{}: unexpected '{}' (shape {}): no weight of model '{}' has that name", op, name,
                                     t.defined() ? t.shape().to_string() : "undefined", this->name()));
  for (auto& [var, value] : assigns) var->assign(value);
}

}  // namespace keel::models
