#pragma once
// Graph mode (TensorFlow's tf.function): keel::function(f) traces f once per input signature
// into a graph of kernel calls, and later calls with that signature replay the graph, with no
// per-op dispatch, shape checks or tape bookkeeping, on buffers planned once per graph.
//
//   auto step = keel::function([&](const Tensor& x) { return relu(matmul(x, w) + b); });
//   Tensor y = step(x);          // traces: f runs, its kernels are recorded
//   Tensor y2 = step(x2);        // same shape and dtype: replays the graph
//
// The rule users must know (TensorFlow's): C++ code inside f runs only while tracing; tensor
// work runs on every call. A counter incremented in f counts traces, not calls; a value read
// on the host inside f (item(), to_vector()) is an error while tracing, because the graph
// could not depend on it (use keel::cond / keel::while_loop).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "keel/core/dtype.hpp"
#include "keel/core/shape.hpp"
#include "keel/core/tensor.hpp"

namespace keel {

// One argument's shape and dtype; a dimension of -1 matches any size (Python's None).
struct TensorSpec {
  Shape shape;
  DType dtype = DType::float32;
};

struct FunctionOptions {
  // When given, every call must match it (a ValueError otherwise), and it is the signature the
  // function is traced for: one graph serves every size of its -1 dimensions.
  std::vector<TensorSpec> input_signature = {};
  // Whole-graph optimisation (dead-code elimination, elementwise fusion, buffer reuse) of
  // the traced graph; false replays the recorded kernels one by one as traced.
  bool jit_compile = true;
  // TensorFlow's: a trace that differs from the one before only in some dimensions makes
  // those dimensions -1, so that later sizes replay its graph instead of tracing again.
  bool reduce_retracing = false;
  std::string name = "";
};

namespace graph {

namespace detail {
struct Plan;
}

// One node of a traced graph: a kernel call (its TensorFlow-style op type, "MatMul", "Relu",
// ...), unique name, and the shapes it reads and writes.
struct Operation {
  std::string type;
  std::string name;
  std::vector<Shape> input_shapes, output_shapes;
  // What feeds each input: the name of the operation that last wrote it, or of the memory it
  // comes from outside the graph: "Placeholder_<k>" (argument k), "Captured_<i>" (a variable or
  // tensor made before the trace), "VarHandleOp_<i>" (state the function made), "Const_<i>".
  std::vector<std::string> inputs;
  // The named ranges it was traced inside, outermost first, joined by '/': fit's phase and the
  // layer ("forward/dense_1", "backward", "optimizer"), a user's profiler::Trace; "" outside any.
  std::string scope;
};

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::shared_ptr<const detail::Plan> plan) : plan_(std::move(plan)) {}
  // The operations in execution order (after the graph's optimisations).
  std::vector<Operation> operations() const;
  std::size_t num_nodes() const;
  // Graphviz source: arguments, captured variables and constants, operations, results.
  std::string to_dot() const;
  // Bytes of the buffers a replay computes in (shared between values whose lifetimes do not
  // overlap), and what those values would take each in its own buffer, as eager execution
  // allocates them.
  std::size_t planned_bytes() const;
  std::size_t unplanned_bytes() const;
  // Kernel calls the traced run made, before dead-code elimination and fusion.
  std::size_t traced_nodes() const;

 private:
  std::shared_ptr<const detail::Plan> plan_;
};

namespace detail {

using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The non-template part of keel::function: signatures, the traced graphs, replay.
class FunctionCore {
 public:
  explicit FunctionCore(FunctionOptions options);
  // Runs f (tracing) or replays the graph of args' signature; results flattened.
  std::vector<Tensor> call(const std::vector<Tensor>& args, const TraceFn& f);
  // The graph of args' signature, traced now (f runs, as a first call would) if there is none.
  const Graph& concrete_graph(const std::vector<Tensor>& args, const TraceFn& f);
  int trace_count() const;

 private:
  std::vector<Tensor> call_differentiable(const std::vector<Tensor>& args, const TraceFn& f);
  struct State;
  std::shared_ptr<State> state_;
};

// Arguments: a Tensor, or a std::vector<Tensor> (flattened in order).
inline void flatten(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
inline void flatten(const std::vector<Tensor>& v, std::vector<Tensor>& out) { out.insert(out.end(), v.begin(), v.end()); }
inline std::size_t flat_count(const Tensor&) { return 1; }
inline std::size_t flat_count(const std::vector<Tensor>& v) { return v.size(); }

template <class A>
A take(const std::vector<Tensor>& flat, std::size_t& pos, std::size_t count) {
  if constexpr (std::is_same_v<A, Tensor>) {
    return flat[pos++];
  } else {
    static_assert(std::is_same_v<A, std::vector<Tensor>>,
                  "keel::function: arguments are Tensors or std::vector<Tensor>");
    A v(flat.begin() + static_cast<std::ptrdiff_t>(pos), flat.begin() + static_cast<std::ptrdiff_t>(pos + count));
    pos += count;
    return v;
  }
}

// Results: void, a Tensor, a std::vector<Tensor>, or a std::tuple / std::pair of Tensors.
template <class R>
std::vector<Tensor> results_of(R&& r) {
  using D = std::decay_t<R>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return {r};
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
    return r;
  } else {
    return std::apply([](const auto&... t) { return std::vector<Tensor>{Tensor(t)...}; }, r);
  }
}

template <class R>
R result_from(std::vector<Tensor>& flat) {
  if constexpr (std::is_void_v<R>) {
    return;
  } else if constexpr (std::is_same_v<R, Tensor>) {
    return flat.at(0);
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return std::move(flat);
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return R{flat.at(I)...};
    }(std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

}  // namespace detail
}  // namespace graph

// A traced function: callable like f; see keel::function.
template <class F>
class Function {
 public:
  Function(F f, FunctionOptions options)
      : f_(std::make_shared<F>(std::move(f))), core_(std::make_shared<graph::detail::FunctionCore>(std::move(options))) {}

  template <class... Args>
  auto operator()(const Args&... args) {
    using R = std::invoke_result_t<F&, const Args&...>;
    std::vector<Tensor> flat;
    (graph::detail::flatten(args, flat), ...);
    std::vector<Tensor> out = core_->call(flat, tracer<Args...>(args...));
    return graph::detail::result_from<R>(out);
  }

  int trace_count() const { return core_->trace_count(); }

  template <class... Args>
  const graph::Graph& concrete_graph(const Args&... args) {
    std::vector<Tensor> flat;
    (graph::detail::flatten(args, flat), ...);
    return core_->concrete_graph(flat, tracer<Args...>(args...));
  }

 private:
  // f called on the flat arguments rebuilt into Args (the counts of vector arguments kept; a
  // braced list evaluates in order, so `pos` walks the arguments left to right).
  template <class... Args>
  graph::detail::TraceFn tracer(const Args&... args) {
    std::vector<std::size_t> counts{graph::detail::flat_count(args)...};
    return [f = f_, counts](const std::vector<Tensor>& flat) -> std::vector<Tensor> {
      std::size_t pos = 0;
      auto call = [&]<std::size_t... I>(std::index_sequence<I...>) {
        std::tuple<Args...> a{graph::detail::take<Args>(flat, pos, counts[I])...};
        return std::apply(*f, a);
      };
      using R = std::invoke_result_t<F&, const Args&...>;
      if constexpr (std::is_void_v<R>) {
        call(std::index_sequence_for<Args...>{});
        return {};
      } else {
        return graph::detail::results_of(call(std::index_sequence_for<Args...>{}));
      }
    };
  }

  std::shared_ptr<F> f_;
  std::shared_ptr<graph::detail::FunctionCore> core_;
};

// Traces f (a callable taking Tensors or std::vector<Tensor>s) into graphs, one per input
// signature (shapes, dtypes, devices of the arguments, or options.input_signature).
template <class F>
auto function(F f, FunctionOptions options = {}) {
  return Function<F>(std::move(f), std::move(options));
}

}  // namespace keel
