// A small user program: what scripts/compile-time.sh compiles (g++ -O2 -c) to measure the cost
// of including <keel/keel.hpp>. torch_example.cpp is the same program written with libtorch.
#include <keel/keel.hpp>

#include <iostream>

int main() {
  using namespace keel;
  random::set_seed(0);
  auto x = random::normal({64, 10});
  Variable w(random::normal({10, 1}), "w");
  GradientTape tape;
  auto loss = reduce_mean(square(matmul(x, w) - 1.0));
  auto g = tape.gradient(loss, w);
  std::cout << "loss " << loss << "\ngradient " << g << "\n";
  return g.shape() == Shape{10, 1} ? 0 : 1;
}
