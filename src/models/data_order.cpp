// The names of a model's inputs and outputs, and x / y given as lists or maps put in model
// order (what fit, evaluate, predict and the *_on_batch forms take).
#include <algorithm>
#include <set>

#include <fmt/core.h>

#include "keel/models/model.hpp"
#include "models/graph.hpp"

namespace keel::models {

namespace {

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// `data` as one tensor per name, in the order of `names`; `what` is "inputs" or "outputs".
std::vector<Tensor> in_order(const ModelData& data, const std::vector<std::string>& names, std::size_t count,
                             const std::string& model, const char* op, const char* side, const char* what) {
  if (!data.by_name.empty()) {
    if (names.empty()) {  // a Sequential or subclassed model: its one input or output
      if (data.by_name.size() != 1 || count != 1)
        throw ValueError(fmt::format("{}: {} {} given by name for a model with {} {}", op, data.by_name.size(), side,
                                     count, what));
      return {data.by_name.begin()->second};
    }
    for (const auto& [key, t] : data.by_name)
      if (std::find(names.begin(), names.end(), key) == names.end())
        throw ValueError(fmt::format("{}: {} names '{}', which is not one of {}'s {} ({})", op, side, key, model, what,
                                     joined_names(names)));
    std::vector<Tensor> out;
    for (const auto& n : names) {
      auto it = data.by_name.find(n);
      if (it == data.by_name.end())
        throw ValueError(fmt::format("{}: {} has no entry for '{}' (the model's {}: {})", op, side, n, what, joined_names(names)));
      out.push_back(it->second);
    }
    return out;
  }
  if (data.list.empty()) throw ValueError(fmt::format("{}: no {} given", op, side));
  if (data.list.size() != count)
    throw ValueError(fmt::format("{}: {} has {} {} but the model has {} {}", op, side, data.list.size(),
                                 data.list.size() == 1 ? "tensor" : "tensors", count, what));
  for (std::size_t i = 0; i < data.list.size(); ++i)
    if (!data.list[i].defined()) throw ValueError(fmt::format("{}: {}[{}] is undefined", op, side, i));
  return data.list;
}

}  // namespace

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> out;
  if (graph_)
    for (const auto& in : graph_->inputs) out.push_back(in.impl()->symbolic->input_name);
  return out;
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> out;
  if (!graph_) {
    // Keras names a Sequential's output after its last layer.
    const auto list = layers();
    out.push_back(dynamic_cast<const Sequential*>(this) && !list.empty() ? list.back()->name() : name());
    return out;
  }
  std::set<std::string> taken;
  for (const auto& o : graph_->outputs) {
    // The layer that made the output; a layer giving two outputs names the second "<name>_1".
    std::string base = o.impl()->symbolic->layer ? o.impl()->symbolic->layer->name() : o.impl()->symbolic->input_name;
    std::string n = base;
    for (int k = 1; taken.count(n); ++k) n = fmt::format("{}_{}", base, k);
    taken.insert(n);
    out.push_back(n);
  }
  return out;
}

std::vector<Tensor> Model::inputs_in_order(const ModelData& x, const char* op) const {
  return in_order(x, input_names(), num_inputs(), name(), op, "x", "inputs");
}

std::vector<Tensor> Model::targets_in_order(const ModelData& y, const char* op) const {
  return in_order(y, graph_ ? output_names() : std::vector<std::string>{}, num_outputs(), name(), op, "y", "outputs");
}

}  // namespace keel::models
