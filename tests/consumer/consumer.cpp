// A downstream application of keel: built by the three CMake projects beside this file
// (add_subdirectory, FetchContent, find_package) and run by scripts/consumer-check.sh.
// It needs nothing but <keel/keel.hpp> and the keel::keel target.
#include <keel/keel.hpp>

#include <cmath>
#include <iostream>

int main() {
  try {
    // d/dx (x^3 + 2x) at x = 2 is 3 * 2^2 + 2 = 14; the second derivative 6x = 12.
    keel::Tensor x = keel::constant(2.0);
    keel::GradientTape outer;
    outer.watch(x);
    keel::GradientTape inner;
    inner.watch(x);
    keel::Tensor y = x * x * x + 2.0 * x;
    keel::Tensor dy_dx = inner.gradient(y, x);
    keel::Tensor d2y_dx2 = outer.gradient(dy_dx, x);

    // And a Variable, watched automatically: d/dw mean((w * 3 - 1)^2) at w = 1 is 2 * 2 * 3 = 12.
    keel::Variable w(keel::constant(1.0), "w");
    keel::GradientTape tape;
    keel::Tensor loss = keel::reduce_mean(keel::square(w * 3.0 - 1.0));
    keel::Tensor dl_dw = tape.gradient(loss, w);

    std::cout << "dy/dx = " << dy_dx << "\n";
    std::cout << "d2y/dx2 = " << d2y_dx2 << "\n";
    std::cout << "dloss/dw = " << dl_dw << "\n";
    const bool ok = std::abs(dy_dx.item<double>() - 14.0) < 1e-4 &&
                    std::abs(d2y_dx2.item<double>() - 12.0) < 1e-4 &&
                    std::abs(dl_dw.item<double>() - 12.0) < 1e-4;
    std::cout << (ok ? "consumer: OK" : "consumer: WRONG GRADIENT") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
