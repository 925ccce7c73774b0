#pragma once
// The recorded graph of a functional Model (what Model(inputs, outputs) keeps), shared by
// model.cpp, which runs it, and serialization.cpp, which writes and rebuilds it.
#include <memory>
#include <vector>

#include "keel/models/model.hpp"
#include "layers/symbolic.hpp"

namespace keel::models {

struct Model::Graph {
  std::vector<Tensor> inputs, outputs;                  // symbolic
  std::vector<std::shared_ptr<SymbolicNode>> order;     // layer calls, inputs before users
  std::vector<std::shared_ptr<layers::Layer>> layers;   // distinct, in first-use order
};

}  // namespace keel::models
