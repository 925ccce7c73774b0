#pragma once
// models::Model (a Layer that can be trained: functional graphs, Sequential stacks, or
// subclasses with their own call()), models::Sequential and models::Input.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel::models {

// A symbolic tensor: the start of a functional model. shape excludes the batch dimension.
Tensor Input(Shape shape_without_batch, DType dtype = DType::float32, std::string name = "");

class Model : public layers::Layer {
 public:
  // A subclassed model: override call() and track() the layers it uses.
  explicit Model(std::string name = "");
  // The functional API: outputs computed from inputs by layer calls on symbolic tensors.
  Model(Tensor inputs, Tensor outputs, std::string name = "");
  Model(std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::string name = "");
  ~Model() override;
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  // Every output of a multi-output model (call() returns the first).
  std::vector<Tensor> call_all(const std::vector<Tensor>& inputs, bool training);
  void build(const Shape& input_shape) override;
  void check_input_shape(const Shape& input_shape) const override;

  bool is_functional() const { return graph_ != nullptr; }
  std::size_t num_inputs() const;
  std::size_t num_outputs() const;
  // The layers, in the order Keras lists them (graph order for functional models).
  virtual std::vector<std::shared_ptr<layers::Layer>> layers() const;
  std::shared_ptr<layers::Layer> get_layer(const std::string& name) const;

  // Keras' table: layer name (type), output shape, parameter count; then the totals.
  void summary(std::ostream& out = std::cout);

  std::string class_name() const override { return is_functional() ? "Functional" : "Model"; }
  std::shared_ptr<layers::Layer> move_to_heap() override;

 protected:
  struct Graph;
  std::shared_ptr<Graph> graph_;
};

class Sequential : public Model {
 public:
  explicit Sequential(std::vector<std::shared_ptr<layers::Layer>> layers = {}, std::string name = "");
  Sequential(std::initializer_list<layers::LayerRef> layers, std::string name = "");
  Sequential(Sequential&&) noexcept;
  ~Sequential() override;

  void add(layers::LayerRef layer);
  void pop();
  Tensor call(const Tensor& inputs, bool training) override;
  void build(const Shape& input_shape) override;  // with the batch dimension
  void check_input_shape(const Shape& input_shape) const override;
  std::vector<std::shared_ptr<layers::Layer>> layers() const override { return stack_; }
  std::string class_name() const override { return "Sequential"; }
  std::shared_ptr<layers::Layer> move_to_heap() override;

 private:
  std::vector<std::shared_ptr<layers::Layer>> stack_;
};

}  // namespace keel::models
