// Identity and Lambda, and the registry of named functions that makes a Lambda serialisable:
// Keras saves a Lambda's Python bytecode; C++ has none, so a Lambda saves the name its function
// was registered under and loading looks the name up again.
#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "keel/layers/core.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::who;

namespace {

struct LambdaRegistry {
  std::mutex mutex;
  std::map<std::string, LambdaFn> functions;
};

LambdaRegistry& lambda_registry() {
  static LambdaRegistry r;
  return r;
}

LambdaFn one_input(std::function<Tensor(const Tensor&)> fn) {
  return [fn = std::move(fn)](const std::vector<Tensor>& xs) {
    if (xs.size() != 1)
      throw ValueError(fmt::format("Lambda: the function takes one tensor, got a list of {}", xs.size()));
    return fn(xs[0]);
  };
}

}  // namespace

void register_lambda(const std::string& name, LambdaFn fn) {
  if (name.empty()) throw ValueError("register_lambda: the name must not be empty");
  if (!fn) throw ValueError(fmt::format("register_lambda: no function given for '{}'", name));
  auto& r = lambda_registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.functions[name] = std::move(fn);
}

void register_lambda(const std::string& name, std::function<Tensor(const Tensor&)> fn) {
  if (!fn) throw ValueError(fmt::format("register_lambda: no function given for '{}'", name));
  register_lambda(name, one_input(std::move(fn)));
}

bool has_lambda(const std::string& name) {
  auto& r = lambda_registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  return r.functions.count(name) != 0;
}

// ---- Identity --------------------------------------------------------------------------------

Identity::Identity(IdentityOptions options) : Layer(std::move(options.name)) {}
Tensor Identity::call(const Tensor& inputs, bool) { return inputs; }
Tensor Identity::call(const std::vector<Tensor>& inputs, bool) { return inputs.at(0); }

// ---- Lambda ----------------------------------------------------------------------------------

Lambda::Lambda(std::string function, LambdaOptions options)
    : Layer(std::move(options.name)), function_(std::move(function)) {
  auto& r = lambda_registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.functions.find(function_);
  if (it == r.functions.end())
    throw ValueError(fmt::format("Lambda: no function is registered as '{}' (register it with "
                                 "layers::register_lambda(\"{}\", fn) first)", function_, function_));
  fn_ = it->second;
}

Lambda::Lambda(LambdaFn fn, LambdaOptions options) : Layer(std::move(options.name)), fn_(std::move(fn)) {
  if (!fn_) throw ValueError("Lambda: no function given");
}

Lambda::Lambda(std::function<Tensor(const Tensor&)> fn, LambdaOptions options)
    : Layer(std::move(options.name)) {
  if (!fn) throw ValueError("Lambda: no function given");
  fn_ = one_input(std::move(fn));
}

Tensor Lambda::call(const Tensor& inputs, bool) { return fn_({inputs}); }
Tensor Lambda::call(const std::vector<Tensor>& inputs, bool) { return fn_(inputs); }

nlohmann::json Lambda::get_config() const {
  if (function_.empty())
    throw ValueError(fmt::format("{}: a Lambda made from a bare callable cannot be serialised: register the function "
                                 "with layers::register_lambda(name, fn) and construct Lambda(name)", who(*this)));
  auto c = Layer::get_config();
  c["function"] = function_;
  return c;
}

}  // namespace keel::layers
