// The loading scope and the initializers factories make while it is alive (see loading_scope.hpp).
#include "layers/config_args.hpp"

#include "keel/ops/creation.hpp"
#include "layers/loading_scope.hpp"

namespace keel::layers::detail {

namespace {
thread_local LoadingScope* current_scope = nullptr;
}

LoadingScope::LoadingScope(std::uint64_t budget, std::string file_name)
    : remaining(budget), file(std::move(file_name)), previous(current_scope) {
  current_scope = this;
}

LoadingScope::~LoadingScope() { current_scope = previous; }

std::string show(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// Zeros within the budget also let a model whose initializer was a function load (its weights
// come from the file; the name is kept so the model saves the same config again).
initializers::Initializer make_initializer(const initializers::Initializer& real) {
  if (!current_scope) return real;
  return initializers::Initializer(
      [real](const Shape& shape, DType dtype) {
        LoadingScope* scope = current_scope;
        if (!scope) return real(shape, dtype);
        const auto n = static_cast<std::uint64_t>(shape.num_elements());
        if (n > scope->remaining)
          throw IOError(fmt::format("load_model: {}: the config asks for a weight of shape {}, but the weights file "
                                    "holds no more values for it", scope->file, shape.to_string()));
        scope->remaining -= n;
        return zeros(shape, dtype);
      },
      real.name(), real.arguments());
}
initializers::Initializer make_initializer(const std::string& name) {
  return make_initializer(initializers::Initializer(name));
}

}  // namespace keel::layers::detail
