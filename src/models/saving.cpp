// Model::save_weights / load_weights: the weights as one safetensors file keyed by weight path
// ("dense/kernel"). The file also records the weights' order, so a model built the same way
// but with other layer names (a second instance: "dense_1/kernel") loads it by position, as
// Keras loads weights files by model structure.
#include <fmt/core.h>

#include <sstream>

#include "io/safetensors_file.hpp"
#include "keel/io/safetensors.hpp"
#include "keel/models/model.hpp"
#include "models/keras_files.hpp"

namespace keel::models {

void Model::save_weights(const std::string& path) {
  if (detail::is_keras_weights_path(path)) return detail::save_keras_weights(*this, path);  // Keras' HDF5 layouts
  std::map<std::string, Tensor> tensors;
  std::string order;
  for (Variable* v : weights()) {
    if (!tensors.emplace(v->name(), v->peek()).second)
      throw ValueError(fmt::format("{}.save_weights: two weights are named '{}'; give the layers unique names", name(),
                                   v->name()));
    order += v->name() + "\n";
  }
  io::save_safetensors(path, tensors, {{"format", "keel"}, {"model", name()}, {"weight_order", order}});
}

void Model::load_weights(const std::string& path) {
  if (detail::is_keras_weights_path(path)) return detail::load_keras_weights(*this, path);
  // Read once: the tensors and the weight order of the same file, even while it is being replaced.
  const io::detail::SafetensorsFile file = io::detail::read_safetensors(path);
  const auto& tensors = file.tensors;
  const auto vars = weights();
  if (vars.empty())
    throw ValueError(fmt::format("{}.load_weights: the model has no weights yet; build it (call it once) first", name()));
  std::vector<const Tensor*> source(vars.size(), nullptr);
  bool by_name = true;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    auto it = tensors.find(vars[i]->name());
    if (it == tensors.end()) {
      by_name = false;
      break;
    }
    source[i] = &it->second;
  }
  if (!by_name) {
    const auto& meta = file.metadata;
    std::vector<std::string> order;
    if (auto it = meta.find("weight_order"); it != meta.end()) {
      std::istringstream lines(it->second);
      for (std::string line; std::getline(lines, line);)
        if (!line.empty()) order.push_back(line);
    }
    if (order.size() != vars.size() || tensors.size() != vars.size())
      throw IOError(fmt::format("load_weights: {} has no tensor '{}' and its {} weights do not match the model's {} by "
                                "position", path, vars[0]->name(), tensors.size(), vars.size()));
    for (std::size_t i = 0; i < vars.size(); ++i) {
      auto it = tensors.find(order[i]);
      if (it == tensors.end()) throw IOError(fmt::format("load_weights: {}: weight_order names a missing tensor '{}'", path, order[i]));
      source[i] = &it->second;
    }
  }
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const Tensor& t = *source[i];
    if (t.shape() != vars[i]->shape() || t.dtype() != vars[i]->dtype())
      throw ShapeError(fmt::format("load_weights: the tensor for '{}' in {} is {} {}, the model's weight is {} {}",
                                   vars[i]->name(), path, keel::name(t.dtype()), t.shape().to_string(),
                                   keel::name(vars[i]->dtype()), vars[i]->shape().to_string()));
  }
  for (std::size_t i = 0; i < vars.size(); ++i) vars[i]->assign(*source[i]);
}

}  // namespace keel::models
