// models::Model: functional graphs (recorded by layer calls on symbolic tensors), subclassed
// models, and the summary table.
#include "keel/models/model.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "keel/ops/creation.hpp"
#include "layers/symbolic.hpp"
#include "models/graph.hpp"

namespace keel::models {

using layers::detail::is_symbolic;
using layers::detail::shape_text;
using layers::detail::static_shape;

Tensor Input(Shape shape, DType dtype, std::string name) {
  std::vector<std::int64_t> dims{-1};  // the batch
  bool dynamic = false;
  for (auto d : shape.dims()) {
    if (d < -1)
      throw ValueError(fmt::format("Input: dimension {} of shape {}: sizes are non-negative, or -1 for None", d,
                                   shape.to_string()));
    dynamic = dynamic || d == -1;
    dims.push_back(d);
  }
  auto node = std::make_shared<SymbolicNode>();
  node->input_name = name.empty() ? layers::unique_name("InputLayer") : std::move(name);
  node->shape = Shape(dims);
  // The placeholders: a batch of one row, None dimensions at the two probe sizes.
  if (dynamic) node->alternate = zeros(layers::detail::probe_shape(node->shape, layers::detail::kNoneProbeAlt), dtype);
  Tensor placeholder = zeros(layers::detail::probe_shape(node->shape, layers::detail::kNoneProbe), dtype);
  return layers::detail::make_symbolic(placeholder, std::move(node));
}

namespace {

void topo_visit(const std::shared_ptr<SymbolicNode>& node, std::set<const SymbolicNode*>& done,
                std::set<const SymbolicNode*>& active, std::vector<std::shared_ptr<SymbolicNode>>& order) {
  if (done.count(node.get())) return;
  if (active.count(node.get())) throw ValueError("Model: the layer graph has a cycle");
  active.insert(node.get());
  for (const auto& in : node->inputs) topo_visit(in.impl()->symbolic, done, active, order);
  active.erase(node.get());
  done.insert(node.get());
  order.push_back(node);
}

std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

Model::Model(std::string name) : Layer(std::move(name)) {}

Model::Model(Tensor inputs, Tensor outputs, std::string name)
    : Model(std::vector<Tensor>{std::move(inputs)}, std::vector<Tensor>{std::move(outputs)}, std::move(name)) {}

Model::Model(std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::string name) : Layer(std::move(name)) {
  if (inputs.empty() || outputs.empty()) throw ValueError("Model: needs at least one input and one output");
  for (const auto& t : inputs)
    if (!is_symbolic(t) || t.impl()->symbolic->layer)
      throw ValueError("Model: every input must be a tensor made by models::Input");
  for (const auto& t : outputs)
    if (!is_symbolic(t))
      throw ValueError("Model: every output must be a symbolic tensor computed from models::Input by layer calls");
  auto g = std::make_shared<Graph>();
  g->inputs = inputs;
  g->outputs = outputs;
  std::set<const SymbolicNode*> done, active;
  std::vector<std::shared_ptr<SymbolicNode>> order;
  for (const auto& o : outputs) topo_visit(o.impl()->symbolic, done, active, order);
  std::set<const SymbolicNode*> given;
  for (const auto& t : inputs) given.insert(t.impl()->symbolic.get());
  for (const auto& node : order) {
    if (!node->layer) {
      if (!given.count(node.get()))
        throw ValueError(fmt::format("Model: graph disconnected: the outputs depend on the input '{}' that was "
                                     "not passed to Model(inputs, outputs)", node->input_name));
      continue;
    }
    g->order.push_back(node);
    if (std::find(g->layers.begin(), g->layers.end(), node->layer) == g->layers.end()) {
      g->layers.push_back(node->layer);
      track_layer(node->layer);
    }
  }
  graph_ = std::move(g);
  set_built(layers::detail::placeholder_of(inputs[0]).shape());
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

std::shared_ptr<layers::Layer> Model::move_to_heap() { return std::make_shared<Model>(std::move(*this)); }

std::size_t Model::num_inputs() const { return graph_ ? graph_->inputs.size() : 1; }
std::size_t Model::num_outputs() const { return graph_ ? graph_->outputs.size() : 1; }

std::vector<Tensor> Model::call_all(const std::vector<Tensor>& inputs, bool training) {
  if (!graph_) return {call(inputs, training)};
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size())
    throw ValueError(fmt::format("{}: the model has {} inputs, got {}", name(), g.inputs.size(), inputs.size()));
  std::map<const SymbolicNode*, Tensor> values;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Shape& want = static_shape(g.inputs[i]);
    const Shape& got = inputs[i].shape();
    bool ok = got.rank() == want.rank();
    for (std::int64_t d = 1; ok && d < want.rank(); ++d) ok = want[d] < 0 || got[d] == want[d];
    if (!ok)
      throw ShapeError(fmt::format("{}: input {} has shape {}, expected {}", name(), i, got.to_string(),
                                   shape_text(want)));
    values[g.inputs[i].impl()->symbolic.get()] = inputs[i];
  }
  for (const auto& node : g.order) {
    std::vector<Tensor> args;
    args.reserve(node->inputs.size());
    for (const auto& in : node->inputs) args.push_back(values.at(in.impl()->symbolic.get()));
    values[node.get()] = node->multi_input ? (*node->layer)(args, training) : (*node->layer)(args[0], training);
  }
  std::vector<Tensor> out;
  for (const auto& o : g.outputs) out.push_back(values.at(o.impl()->symbolic.get()));
  return out;
}

Tensor Model::call(const Tensor& inputs, bool training) {
  if (!graph_)
    throw ValueError(fmt::format("{}: a subclassed Model must override call()", name()));
  return call_all({inputs}, training)[0];
}

Tensor Model::call(const std::vector<Tensor>& inputs, bool training) {
  if (!graph_) {
    if (inputs.size() == 1) return call(inputs[0], training);
    throw ValueError(fmt::format("{}: a subclassed Model with several inputs must override call(vector)", name()));
  }
  return call_all(inputs, training)[0];
}

void Model::build(const Shape&) {}

void Model::check_input_shape(const Shape&) const {}  // call_all checks functional inputs

std::vector<std::shared_ptr<layers::Layer>> Model::layers() const {
  return graph_ ? graph_->layers : sublayers();
}

std::shared_ptr<layers::Layer> Model::get_layer(const std::string& lname) const {
  for (const auto& l : layers())
    if (l->name() == lname) return l;
  throw ValueError(fmt::format("{}: no layer named '{}'", name(), lname));
}

void Model::summary(std::ostream& out) {
  const auto list = layers();
  if (!built() && !graph_)
    throw ValueError(fmt::format("{}: the model has not been built yet; call it on data (or give a Sequential an "
                                 "InputLayer) before summary()", name()));
  // Keras' layout (columns end at 29, 55 and 65), widened to fit the longest entries so that
  // names and shapes stay whole.
  std::vector<std::array<std::string, 3>> rows;
  if (graph_)
    for (const auto& in : graph_->inputs)
      rows.push_back({fmt::format("{} (InputLayer)", in.impl()->symbolic->input_name),
                      fmt::format("[{}]", shape_text(static_shape(in))), "0"});
  for (const auto& l : list)
    rows.push_back({fmt::format("{} ({})", l->name(), l->class_name()),
                    l->output_shape().rank() ? shape_text(l->output_shape()) : std::string("?"),
                    with_commas(l->count_params())});
  std::size_t w0 = 29, w1 = 26;
  for (const auto& r : rows) {
    w0 = std::max(w0, r[0].size() + 3);
    w1 = std::max(w1, r[1].size() + 2);
  }
  const std::size_t total = std::max<std::size_t>(65, w0 + w1 + 10);
  const std::string rule(total, '_'), double_rule(total, '=');
  auto row = [&](const std::string& a, const std::string& b, const std::string& c) {
    std::string line(1, ' ');
    line.append(a);
    line.append(w0 - std::min(w0, line.size()), ' ');
    line.append(b);
    line.append(w0 + w1 - std::min(w0 + w1, line.size()), ' ');
    line.append(c);
    out << line << "\n";
  };
  out << "Model: \"" << name() << "\"\n" << rule << "\n";
  row("Layer (type)", "Output Shape", "Param #");
  out << double_rule << "\n";
  bool first = true;
  auto separator = [&] {
    if (!first) out << "\n";
    first = false;
  };
  for (const auto& r : rows) {
    separator();
    row(r[0], r[1], r[2]);
  }
  std::int64_t trainable = 0, frozen = 0;
  for (Variable* v : trainable_weights()) trainable += v->shape().num_elements();
  for (Variable* v : non_trainable_weights()) frozen += v->shape().num_elements();
  out << double_rule << "\n";
  out << "Total params: " << with_commas(trainable + frozen) << "\n";
  out << "Trainable params: " << with_commas(trainable) << "\n";
  out << "Non-trainable params: " << with_commas(frozen) << "\n";
  out << rule << "\n";
}

// ---- Sequential ----------------------------------------------------------------------------

Sequential::Sequential(std::vector<std::shared_ptr<layers::Layer>> list, std::string name) : Model(std::move(name)) {
  for (auto& l : list) add(layers::LayerRef(std::move(l)));
}

Sequential::Sequential(std::initializer_list<layers::LayerRef> list, std::string name) : Model(std::move(name)) {
  for (const auto& l : list) add(l);
}

Sequential::Sequential(Sequential&&) noexcept = default;
Sequential::~Sequential() = default;

std::shared_ptr<layers::Layer> Sequential::move_to_heap() { return std::make_shared<Sequential>(std::move(*this)); }

void Sequential::add(layers::LayerRef ref) {
  const auto& layer = ref.get();
  if (!layer) throw ValueError(fmt::format("{}: add() got a null layer", name()));
  if (auto input = std::dynamic_pointer_cast<layers::InputLayer>(layer)) {
    if (!stack_.empty())
      throw ValueError(fmt::format("{}: an InputLayer can only be the first layer", name()));
    stack_.push_back(layer);
    track_layer(layer);
    build(input->built_shape());
    return;
  }
  stack_.push_back(layer);
  track_layer(layer);
  if (built()) build(built_shape());  // builds the new layer, as Keras does
}

std::vector<std::shared_ptr<layers::Layer>> Sequential::layers() const {
  std::vector<std::shared_ptr<layers::Layer>> out;
  for (const auto& l : stack_)
    if (!std::dynamic_pointer_cast<layers::InputLayer>(l)) out.push_back(l);
  return out;
}

void Sequential::pop() {
  if (stack_.empty()) throw ValueError(fmt::format("{}: pop() on an empty Sequential", name()));
  stack_.pop_back();
}

void Sequential::build(const Shape& input_shape) {
  // Traced on a batch of one row; other -1 (None) dimensions on the two probe sizes, as in a
  // functional model, which gives each layer's output shape its None dimensions.
  using layers::detail::probe_shape;
  const auto& in = input_shape.dims();
  const bool dynamic = in.size() > 1 && std::any_of(in.begin() + 1, in.end(), [](std::int64_t d) { return d < 0; });
  if (input_shape.rank() == 0) {
    Tensor x = zeros(input_shape);
    autograd::NoRecordScope no_record;
    for (const auto& l : stack_) x = (*l)(x, false);
    set_built(input_shape);
    return;
  }
  Tensor x = zeros(probe_shape(input_shape, layers::detail::kNoneProbe));
  Tensor alt = dynamic ? zeros(probe_shape(input_shape, layers::detail::kNoneProbeAlt)) : Tensor();
  {
    autograd::NoRecordScope no_record;
    for (const auto& l : stack_) {
      x = (*l)(x, false);
      if (!dynamic) continue;
      try {
        alt = (*l)(alt, false);
      } catch (const Error& e) {
        throw ValueError(fmt::format("{} ({}): cannot take inputs whose None dimensions may have any size (the "
                                     "Sequential's input shape is {}): {}", l->name(), l->class_name(),
                                     shape_text(input_shape), e.what()));
      }
      layers::detail::set_output_shape(*l, layers::detail::shape_from_probes(x.shape(), alt.shape(), l->name()));
    }
  }
  set_built(probe_shape(input_shape, -1));  // a batch of one, None dimensions as -1
}

void Sequential::check_input_shape(const Shape&) const {}  // each layer checks its own input

Tensor Sequential::call(const Tensor& inputs, bool training) {
  Tensor x = inputs;
  for (const auto& l : stack_) x = (*l)(x, training);
  return x;
}

}  // namespace keel::models
