// keel_example.cpp written with libtorch's C++ frontend, for scripts/compile-time.sh.
#include <torch/torch.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  auto x = torch::randn({64, 10});
  auto w = torch::randn({10, 1}, torch::requires_grad());
  auto loss = (torch::matmul(x, w) - 1.0).square().mean();
  loss.backward();
  auto g = w.grad();
  std::cout << "loss " << loss << "\ngradient " << g << "\n";
  return g.sizes() == torch::IntArrayRef({10, 1}) ? 0 : 1;
}
