// Every error path of the foundation: the exception type, and a message that names the op and
// the offending shapes / dtypes / axes / indices. Shapes print as Shape::to_string: "[2,3]".
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

using namespace keel;
using Catch::Contains;

TEST_CASE("errors derive from keel::Error, itself a std::runtime_error", "[errors]") {
  CHECK_THROWS_AS(throw ShapeError("s"), Error);
  CHECK_THROWS_AS(throw DTypeError("d"), Error);
  CHECK_THROWS_AS(throw DeviceError("v"), Error);
  CHECK_THROWS_AS(throw IOError("i"), Error);
  CHECK_THROWS_AS(throw ValueError("x"), Error);
  CHECK_THROWS_AS(throw Error("e"), std::runtime_error);
  CHECK_THROWS_WITH(throw ShapeError("the message"), "the message");
}

TEST_CASE("binary ops with shapes that do not broadcast throw ShapeError naming both",
          "[errors][shape]") {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_AS(add(a, b), ShapeError);
  CHECK_THROWS_WITH(add(a, b), Contains("add") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_AS(sub(a, b), ShapeError);
  CHECK_THROWS_WITH(sub(a, b), Contains("sub") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_WITH(mul(a, b), Contains("mul") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_WITH(div(a, b), Contains("div") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_WITH(pow(a, b), Contains("pow") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_WITH(maximum(a, b), Contains("maximum") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_AS(a + b, ShapeError);
  CHECK_THROWS_AS(a < b, ShapeError);
  CHECK_THROWS_WITH(equal(a, b), Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_AS(where(zeros({3}, DType::bool_), a, zeros({2, 4})), ShapeError);
}

TEST_CASE("matmul shape errors name matmul and both shapes", "[errors][shape]") {
  // the example of DESIGN.md
  CHECK_THROWS_AS(matmul(zeros({64, 10}), zeros({11, 1})), ShapeError);
  CHECK_THROWS_WITH(matmul(zeros({64, 10}), zeros({11, 1})),
                    Contains("matmul") && Contains("[64,10]") && Contains("[11,1]"));
  // rank errors
  CHECK_THROWS_AS(matmul(zeros({10}), zeros({10, 1})), ShapeError);
  CHECK_THROWS_WITH(matmul(zeros({10}), zeros({10, 1})), Contains("matmul") && Contains("[10]"));
  CHECK_THROWS_AS(matmul(zeros({2, 2}), constant(1.0)), ShapeError);
}

TEST_CASE("shape-op mismatches throw ShapeError naming the op and the shapes", "[errors][shape]") {
  const Tensor a = zeros({2, 3});
  CHECK_THROWS_AS(concat({a, zeros({2, 4})}, 0), ShapeError);
  CHECK_THROWS_WITH(concat({a, zeros({2, 4})}, 0),
                    Contains("concat") && Contains("[2,3]") && Contains("[2,4]"));
  CHECK_THROWS_AS(stack({a, zeros({3, 2})}), ShapeError);
  CHECK_THROWS_WITH(stack({a, zeros({3, 2})}),
                    Contains("stack") && Contains("[2,3]") && Contains("[3,2]"));
  CHECK_THROWS_AS(broadcast_to(a, {4, 3}), ShapeError);
  CHECK_THROWS_WITH(broadcast_to(a, {4, 3}),
                    Contains("broadcast_to") && Contains("[2,3]") && Contains("[4,3]"));
  CHECK_THROWS_WITH(slice(a, {1, 0}, {2, 3}), Contains("slice") && Contains("[2,3]"));
  CHECK_THROWS_WITH(tile(a, {2}), Contains("tile") && Contains("[2,3]"));
  CHECK_THROWS_WITH(split(a, 2, 1), Contains("split") && Contains("[2,3]"));
  CHECK_THROWS_WITH(squeeze(a, {0}), Contains("squeeze") && Contains("[2,3]"));
  CHECK_THROWS_WITH(pad(a, {{1, 1}}), Contains("pad") && Contains("[2,3]"));
}

TEST_CASE("reshape to a different element count throws ShapeError naming both shapes",
          "[errors][reshape]") {
  const Tensor a = zeros({2, 3});
  CHECK_THROWS_AS(reshape(a, {4, 2}), ShapeError);
  CHECK_THROWS_WITH(reshape(a, {4, 2}), Contains("reshape") && Contains("[2,3]") && Contains("[4,2]"));
  CHECK_THROWS_AS(a.reshape({7}), ShapeError);
  CHECK_THROWS_WITH(a.reshape({7}), Contains("reshape") && Contains("[2,3]") && Contains("[7]"));
  CHECK_THROWS_AS(a.reshape({5, -1}), ShapeError);  // 6 is not a multiple of 5
  CHECK_THROWS_WITH(a.reshape({5, -1}), Contains("[2,3]"));
}

TEST_CASE("axes out of range throw ValueError naming the op and the axis", "[errors][axis]") {
  const Tensor a = zeros({2, 3});
  CHECK_THROWS_AS(reduce_sum(a, {5}), ValueError);
  CHECK_THROWS_WITH(reduce_sum(a, {5}), Contains("reduce_sum") && Contains("5"));
  CHECK_THROWS_WITH(reduce_max(a, {-3}), Contains("reduce_max") && Contains("-3"));
  CHECK_THROWS_WITH(argmax(a, 4), Contains("argmax") && Contains("4"));
  CHECK_THROWS_WITH(softmax(a, 7), Contains("softmax") && Contains("7"));
  CHECK_THROWS_WITH(log_softmax(a, 7), Contains("log_softmax") && Contains("7"));
  CHECK_THROWS_WITH(concat({a, a}, 6), Contains("concat") && Contains("6"));
  CHECK_THROWS_WITH(stack({a, a}, 9), Contains("stack") && Contains("9"));
  CHECK_THROWS_WITH(expand_dims(a, 8), Contains("expand_dims") && Contains("8"));
  CHECK_THROWS_WITH(gather(a, constant({0}, {1}), 5), Contains("gather") && Contains("5"));
  CHECK_THROWS_WITH(unstack(a, 3), Contains("unstack") && Contains("3"));
  CHECK_THROWS_AS(transpose(a, {0, 2}), ValueError);
  CHECK_THROWS_WITH(transpose(a, {0, 2}), Contains("transpose"));
  CHECK_THROWS_AS(squeeze(a, {4}), ValueError);
  CHECK_THROWS_AS(split(a, 3, 2), ValueError);
}

TEST_CASE("binary ops on different dtypes throw DTypeError naming the op and both dtypes",
          "[errors][dtype]") {
  const Tensor f = zeros({2}), d = zeros({2}, DType::float64), i = zeros({2}, DType::int32);
  CHECK_THROWS_AS(add(f, d), DTypeError);
  CHECK_THROWS_WITH(add(f, d), Contains("add") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_WITH(mul(i, f), Contains("mul") && Contains("int32") && Contains("float32"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2}), zeros({2, 2}, DType::float64)),
                    Contains("matmul") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_WITH(concat({f, d}, 0), Contains("concat") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(where(zeros({2}, DType::bool_), f, d), DTypeError);
  CHECK_THROWS_AS(f == d, DTypeError);
  // indices must be integers
  CHECK_THROWS_AS(gather(f, constant({0.f}, {1})), DTypeError);
  CHECK_THROWS_WITH(gather(f, constant({0.f}, {1})), Contains("gather") && Contains("float32"));
  CHECK_THROWS_AS(one_hot(constant({1.f}, {1}), 3), DTypeError);
  CHECK_THROWS_AS(unsorted_segment_sum(f, constant({0.f, 1.f}, {2}), 2), DTypeError);
  // writing a float64 into a float32 Variable
  Variable v(zeros({2}), "v");
  CHECK_THROWS_AS(v.assign(d), DTypeError);
  CHECK_THROWS_WITH(v.assign(d), Contains("float32") && Contains("float64"));
}

TEST_CASE("device errors: copying to a missing GPU or mixing devices throws DeviceError",
          "[errors][device]") {
  DeviceScope on_cpu(Device::cpu());
  const Tensor x = zeros({2});
  if (cuda_device_count() == 0) {
    CHECK_THROWS_AS(x.to(Device::cuda()), DeviceError);
    CHECK_THROWS_WITH(x.to(Device::cuda()), Contains("cuda:0"));
    CHECK_THROWS_AS(x.to(Device::cuda(3)), DeviceError);
  } else {
    const Tensor g = x.to(Device::cuda());
    CHECK_THROWS_AS(add(x, g), DeviceError);
    CHECK_THROWS_WITH(add(x, g), Contains("add") && Contains("cpu") && Contains("cuda:0"));
    CHECK_THROWS_AS(x.to(Device::cuda(cuda_device_count())), DeviceError);  // one past the last
  }
  // cpu -> cpu is always fine
  CHECK(x.to(Device::cpu()).device() == Device::cpu());
}

TEST_CASE("item() on several elements throws ValueError naming the shape", "[errors][item]") {
  const Tensor a = zeros({2, 3});
  CHECK_THROWS_AS(a.item<float>(), ValueError);
  CHECK_THROWS_WITH(a.item<float>(), Contains("item") && Contains("[2,3]"));
  CHECK_THROWS_AS(a.item<double>(), ValueError);
  CHECK_THROWS_AS(zeros({0}).item<float>(), ValueError);
  CHECK_NOTHROW(zeros({1, 1, 1}).item<float>());
}

TEST_CASE("gather with an index out of range throws ValueError naming the index",
          "[errors][gather]") {
  const Tensor p = zeros({3, 2});
  CHECK_THROWS_AS(gather(p, constant({0, 7, 1}, {3})), ValueError);
  CHECK_THROWS_WITH(gather(p, constant({0, 7, 1}, {3})), Contains("gather") && Contains("7"));
  CHECK_THROWS_AS(gather(p, constant({3}, {1})), ValueError);  // == size
  CHECK_THROWS_WITH(gather(p, constant(std::vector<std::int64_t>{5}, Shape{1}), 1),
                    Contains("gather") && Contains("5"));
  CHECK_THROWS_AS(unsorted_segment_sum(zeros({2}), constant({0, 4}, {2}), 3), Error);
  CHECK_THROWS_WITH(unsorted_segment_sum(zeros({2}), constant({0, 4}, {2}), 3),
                    Contains("unsorted_segment_sum") && Contains("4"));
  CHECK_THROWS_AS(one_hot(constant({0}, {1}), -1), Error);  // a negative depth
}

TEST_CASE("using an undefined tensor throws keel::Error", "[errors][undefined]") {
  const Tensor u;
  const Tensor x = zeros({2});
  CHECK_THROWS_AS(u.shape(), Error);
  CHECK_THROWS_AS(u.dtype(), Error);
  CHECK_THROWS_AS(u.size(), Error);
  CHECK_THROWS_AS(u.item<float>(), Error);
  CHECK_THROWS_AS(u.to_vector<float>(), Error);
  CHECK_THROWS_AS(u.reshape({1}), Error);
  CHECK_THROWS_AS(u[0], Error);
  CHECK_THROWS_AS(add(u, x), Error);
  CHECK_THROWS_AS(add(x, u), Error);
  CHECK_THROWS_WITH(add(x, u), Contains("add") && Contains("undefined"));
  CHECK_THROWS_AS(u + 1.0, Error);
  CHECK_THROWS_AS(exp(u), Error);
  CHECK_THROWS_AS(reduce_sum(u), Error);
  CHECK_THROWS_AS(matmul(u, u), Error);
  CHECK_THROWS_AS(concat({x, u}, 0), Error);
  CHECK_THROWS_AS(transpose(u), Error);
  CHECK_THROWS_AS(u.astype(DType::float64), Error);
  GradientTape tape;
  CHECK_THROWS_AS(tape.watch(u), Error);
  CHECK_THROWS_AS(tape.gradient(u, x), Error);
}

TEST_CASE("constant with the wrong number of values and bad factory arguments throw",
          "[errors][creation]") {
  CHECK_THROWS_AS(constant({1.f, 2.f, 3.f}, {2, 2}), Error);
  CHECK_THROWS_WITH(constant({1.f, 2.f, 3.f}, {2, 2}), Contains("constant") && Contains("[2,2]") &&
                                                          Contains("3"));
  CHECK_THROWS_AS(zeros({2, -3}), Error);  // negative dimension
  CHECK_THROWS_AS(arange(0, 5, 0), ValueError);  // step 0 never ends
  CHECK_THROWS_AS(linspace(0, 1, -1), ValueError);
  CHECK_THROWS_AS(eye(-1), Error);
  CHECK_THROWS_AS(config::set_num_threads(0), ValueError);
}

TEST_CASE("Variable writes with the wrong shape throw ShapeError naming both shapes",
          "[errors][variable]") {
  Variable v(zeros({2, 3}), "v");
  CHECK_THROWS_AS(v.assign(zeros({3, 2})), ShapeError);
  CHECK_THROWS_WITH(v.assign(zeros({3, 2})), Contains("assign") && Contains("[2,3]") &&
                                                 Contains("[3,2]"));
  CHECK_THROWS_WITH(v.assign_add(zeros({3})), Contains("assign_add") && Contains("[2,3]") &&
                                                  Contains("[3]"));
  CHECK_THROWS_WITH(v.assign_sub(zeros({1, 3})), Contains("assign_sub") && Contains("[2,3]") &&
                                                     Contains("[1,3]"));
}

TEST_CASE("Device::parse rejects unknown devices with ValueError quoting the input",
          "[errors][device]") {
  CHECK_THROWS_AS(Device::parse("tpu"), ValueError);
  CHECK_THROWS_WITH(Device::parse("tpu"), Contains("tpu"));
  CHECK_THROWS_WITH(Device::parse("cuda:abc"), Contains("cuda:abc"));
}

TEST_CASE("autograd misuse throws keel::Error", "[errors][autograd]") {
  const Tensor x = constant(2.0, DType::float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  CHECK_NOTHROW(tape.gradient(y, x));
  CHECK_THROWS_AS(tape.gradient(y, x), Error);  // non-persistent, second call

  Variable v(constant({1.0, 2.0}, {2}, DType::float64), "v");
  GradientTape tape2(/*persistent=*/true);  // so that the second call fails for the same reason
  const Tensor z = reduce_sum(v * v);
  v.assign(constant({0.0, 0.0}, {2}, DType::float64));
  CHECK_THROWS_AS(tape2.gradient(z, v), Error);
  CHECK_THROWS_WITH(tape2.gradient(z, v), Contains("mul"));  // names the op whose input changed

  GradientTape tape3;
  tape3.watch(x);
  const Tensor w = x * 3.0;
  // output_gradient of the wrong shape
  CHECK_THROWS_AS(tape3.gradient(w, std::vector<Tensor>{x}, zeros({5}, DType::float64)), Error);
}

TEST_CASE("a saved tensor modified in place is a ValueError", "[errors][autograd]") {
  Variable v(constant({1.0, 2.0}, {2}, DType::float64), "v");
  GradientTape tape;
  const Tensor z = reduce_sum(v * v);
  v.assign(constant({0.0, 0.0}, {2}, DType::float64));
  CHECK_THROWS_AS(tape.gradient(z, v), ValueError);
}

TEST_CASE("custom_gradient checks the shape and dtype of the gradients grad_fn returns", "[errors][autograd]") {
  const Tensor x = constant({1.0, 2.0}, {2}, DType::float64);
  const auto wrong_shape = custom_gradient([](const Tensor& t) {
    return std::make_pair(t * 2.0, std::function<Tensor(const Tensor&)>([](const Tensor&) {
                            return zeros({7}, DType::float64);  // [7] for a [2] input
                          }));
  });
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(wrong_shape(x));
  CHECK_THROWS_WITH(tape.gradient(y, x), Contains("custom_gradient") && Contains("[7]") && Contains("[2]"));
  const auto wrong_dtype = custom_gradient([](const Tensor& t) {
    return std::make_pair(t * 2.0, std::function<Tensor(const Tensor&)>([](const Tensor&) { return zeros({2}); }));
  });
  GradientTape tape2;
  tape2.watch(x);
  const Tensor y2 = reduce_sum(wrong_dtype(x));
  CHECK_THROWS_AS(tape2.gradient(y2, x), DTypeError);
  // the right gradient passes: d(2x)/dx = 2 for each element
  const auto right = custom_gradient([](const Tensor& t) {
    return std::make_pair(t * 2.0, std::function<Tensor(const Tensor&)>([](const Tensor& dy) { return dy * 2.0; }));
  });
  GradientTape tape3;
  tape3.watch(x);
  CHECK(tape3.gradient(reduce_sum(right(x)), x).to_vector<double>() == std::vector<double>{2, 2});
}

TEST_CASE("errors inside composite ops name the op the user called", "[errors]") {
  // TensorFlow returns an empty softmax for an empty input instead of failing in its max
  CHECK(softmax(zeros({5, 0})).shape() == Shape{5, 0});
  CHECK(log_softmax(zeros({5, 0})).shape() == Shape{5, 0});
  CHECK_THROWS_WITH(reduce_logsumexp(zeros({5, 0}), {1}), Contains("reduce_logsumexp"));
  CHECK_THROWS_WITH(losses::mean_squared_error(zeros({2, 3}), zeros({2, 4})), Contains("mean_squared_error"));
  CHECK_THROWS_AS(losses::mean_squared_error(zeros({2, 3}), zeros({2, 4})), ShapeError);
  CHECK_THROWS_WITH(losses::huber(zeros({2, 3}), zeros({2, 4})), Contains("huber"));
}
