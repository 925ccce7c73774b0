// Core types: DType, Shape, Device, the Tensor handle, Variable, and printing.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

using namespace keel;
using Catch::Contains;

TEST_CASE("DType names and item sizes follow TensorFlow", "[core][dtype]") {
  CHECK(name(DType::float16) == "float16");
  CHECK(name(DType::bfloat16) == "bfloat16");
  CHECK(name(DType::float32) == "float32");
  CHECK(name(DType::float64) == "float64");
  CHECK(name(DType::int32) == "int32");
  CHECK(name(DType::int64) == "int64");
  CHECK(name(DType::uint8) == "uint8");
  CHECK(name(DType::bool_) == "bool");

  CHECK(itemsize(DType::float16) == 2);
  CHECK(itemsize(DType::bfloat16) == 2);
  CHECK(itemsize(DType::float32) == 4);
  CHECK(itemsize(DType::float64) == 8);
  CHECK(itemsize(DType::int32) == 4);
  CHECK(itemsize(DType::int64) == 8);
  CHECK(itemsize(DType::uint8) == 1);
  CHECK(itemsize(DType::bool_) == 1);

  CHECK(is_floating(DType::float16));
  CHECK(is_floating(DType::bfloat16));
  CHECK(is_floating(DType::float32));
  CHECK(is_floating(DType::float64));
  CHECK_FALSE(is_floating(DType::int32));
  CHECK_FALSE(is_floating(DType::bool_));
  CHECK(is_integral(DType::int32));
  CHECK(is_integral(DType::int64));
  CHECK(is_integral(DType::uint8));
  CHECK_FALSE(is_integral(DType::bool_));
  CHECK_FALSE(is_integral(DType::float32));

  std::ostringstream os;
  os << DType::float64;
  CHECK(os.str() == "float64");
  CHECK(fmt::format("{}", DType::bfloat16) == "bfloat16");
}

TEST_CASE("float16 and bfloat16 conversions round to nearest", "[core][dtype]") {
  // 1.5 = 1.1b * 2^0 fits in any mantissa: exact.
  CHECK(half_to_float(float_to_half(1.5f)) == 1.5f);
  CHECK(bfloat16_to_float(float_to_bfloat16(1.5f)) == 1.5f);
  // 0.1 = 1.6 * 2^-4. float16 keeps 10 mantissa bits: 1.6 * 1024 = 1638.4 -> 1638,
  // so 1638 / 1024 / 16 = 0.0999755859375 (exactly representable in float).
  CHECK(half_to_float(float_to_half(0.1f)) == 0.0999755859375f);
  // bfloat16 keeps 7: 1.6 * 128 = 204.8 -> 205, so 205 / 128 / 16 = 0.10009765625.
  CHECK(bfloat16_to_float(float_to_bfloat16(0.1f)) == 0.10009765625f);
  // 65504 is float16's largest finite value.
  CHECK(half_to_float(float_to_half(65504.0f)) == 65504.0f);
  // bfloat16 ties go to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 -> 1 (even mantissa).
  CHECK(bfloat16_to_float(float_to_bfloat16(1.0f + 1.0f / 256.0f)) == 1.0f);
}

TEST_CASE("Shape reports rank, dims, element count and prints as [d0,d1]", "[core][shape]") {
  const Shape s{2, 3};
  CHECK(s.rank() == 2);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK(s.size() == 2);  // the deprecated spelling of rank() still works
#pragma GCC diagnostic pop
  CHECK(s[0] == 2);
  CHECK(s[1] == 3);
  CHECK(s.num_elements() == 6);
  CHECK(s.dims() == std::vector<std::int64_t>{2, 3});
  CHECK(s == Shape(std::vector<std::int64_t>{2, 3}));
  CHECK(s != Shape{3, 2});
  CHECK(s.to_string() == "[2,3]");

  const Shape scalar{};
  CHECK(scalar.rank() == 0);
  CHECK(scalar.num_elements() == 1);  // the empty product
  CHECK(Shape{4, 0, 2}.num_elements() == 0);
}

TEST_CASE("Device::parse accepts cpu, cuda and cuda:N and rejects anything else", "[core][device]") {
  const Device cpu = Device::parse("cpu");
  CHECK(cpu == Device::cpu());
  CHECK_FALSE(cpu.is_cuda());
  CHECK(cpu.to_string() == "cpu");

  const Device cuda = Device::parse("cuda");
  CHECK(cuda.is_cuda());
  CHECK(cuda.index() == 0);
  CHECK(cuda == Device::cuda());
  CHECK(cuda.to_string() == "cuda:0");

  const Device cuda1 = Device::parse("cuda:1");
  CHECK(cuda1.is_cuda());
  CHECK(cuda1.index() == 1);
  CHECK(cuda1 == Device::cuda(1));
  CHECK(cuda1 != Device::cuda(0));

  CHECK_THROWS_AS(Device::parse("gpu"), ValueError);
  CHECK_THROWS_WITH(Device::parse("gpu"), Contains("gpu"));
  CHECK_THROWS_AS(Device::parse(""), ValueError);
  CHECK_THROWS_AS(Device::parse("cuda:"), ValueError);
  CHECK_THROWS_AS(Device::parse("cuda:x"), ValueError);
  CHECK_THROWS_AS(Device::parse("cuda:-1"), ValueError);
}

TEST_CASE("a default Tensor is undefined and a constant reports shape, rank, size and dtype",
          "[core][tensor]") {
  const Tensor undefined;
  CHECK_FALSE(undefined.defined());

  const Tensor t = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  CHECK(t.defined());
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.rank() == 2);
  CHECK(t.size() == 6);
  CHECK(t.dtype() == DType::float32);
  CHECK(t.is_contiguous());

  const Tensor s = constant(4.0);
  CHECK(s.rank() == 0);
  CHECK(s.size() == 1);
  CHECK(s.shape() == Shape{});
  CHECK(s.dtype() == DType::float32);  // the scalar factory's default dtype

  DeviceScope on_cpu(Device::cpu());
  CHECK(constant({1.0}, {1}).device() == Device::cpu());
}

TEST_CASE("item and to_vector convert to the requested C++ type", "[core][tensor]") {
  CHECK(constant(2.5).item<float>() == 2.5f);
  CHECK(constant(2.5).item<double>() == 2.5);
  CHECK(constant(2.5, DType::float64).item<double>() == 2.5);
  CHECK(constant({-3.0f}, {1, 1}).item<std::int32_t>() == -3);  // any one-element shape
  CHECK(constant({7}, {1}).item<double>() == 7.0);
  CHECK(constant({true}, {1}).item<int>() == 1);

  const Tensor i = constant({1, -2, 3}, {3});
  CHECK(i.dtype() == DType::int32);
  CHECK(i.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 3});
  CHECK(i.to_vector<double>() == std::vector<double>{1.0, -2.0, 3.0});
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -2, 3});
  CHECK(constant({0.5f, 4.0f}, {2}).to_vector<double>() == std::vector<double>{0.5, 4.0});
  CHECK(constant({true, false, true}, {3}).to_vector<float>() == std::vector<float>{1, 0, 1});
  CHECK(constant({0.0f, 2.0f}, {2}).to_vector<bool>() == std::vector<bool>{false, true});
}

TEST_CASE("item on a tensor with several elements throws ValueError naming the shape",
          "[core][tensor][errors]") {
  const Tensor t = zeros({2, 3});
  CHECK_THROWS_AS(t.item<float>(), ValueError);
  CHECK_THROWS_WITH(t.item<float>(), Contains("item") && Contains("[2,3]"));
  CHECK_THROWS_AS(zeros({0}).item<float>(), ValueError);  // no element at all
}

TEST_CASE("reshape infers one -1 dimension and rejects a wrong element count",
          "[core][tensor][shape]") {
  const Tensor t = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor r = t.reshape({3, -1});  // 6 / 3 = 2
  CHECK(r.shape() == Shape{3, 2});
  CHECK(r.to_vector<float>() == t.to_vector<float>());  // row-major order is kept
  CHECK(t.reshape({-1}).shape() == Shape{6});
  CHECK(t.reshape({1, 2, 1, 3}).shape() == Shape{1, 2, 1, 3});
  CHECK(constant({5.f}, {1}).reshape({}).shape() == Shape{});

  CHECK_THROWS_AS(t.reshape({4, 2}), ShapeError);
  CHECK_THROWS_WITH(t.reshape({4, 2}), Contains("[2,3]") && Contains("[4,2]"));
  CHECK_THROWS_AS(t.reshape({4, -1}), ShapeError);  // 6 is not a multiple of 4
  CHECK_THROWS_AS(t.reshape({-1, -1}), Error);      // only one dimension may be inferred
}

TEST_CASE("operator[] indexes the first axis and returns a view", "[core][tensor]") {
  const Tensor t = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor row = t[1];
  CHECK(row.shape() == Shape{3});
  CHECK(row.to_vector<float>() == std::vector<float>{4, 5, 6});
  CHECK(row.impl()->storage == t.impl()->storage);  // a view, no copy
  CHECK(t[1][2].shape() == Shape{});
  CHECK(t[1][2].item<float>() == 6.0f);
  CHECK(t[0][0].item<float>() == 1.0f);

  const Tensor cube = reshape(arange(0, 24), {2, 3, 4});
  CHECK(cube[1][2].to_vector<float>() == std::vector<float>{20, 21, 22, 23});  // 12 + 8 + k

  CHECK_THROWS_AS(t[2], Error);
  CHECK_THROWS_AS(constant(1.0)[0], Error);  // a scalar has no first axis
}

TEST_CASE("astype round trips through every dtype", "[core][tensor][dtype]") {
  const Tensor f = constant({1.5f, -2.0f, 0.0f, 100.0f}, {2, 2});
  for (DType dt : {DType::float64, DType::float32, DType::float16, DType::bfloat16, DType::int32,
                   DType::int64}) {
    INFO("via " << name(dt));
    const Tensor other = f.astype(dt);
    CHECK(other.dtype() == dt);
    CHECK(other.shape() == Shape{2, 2});
    // 1.5, -2, 0 and 100 are exact in every float format; int dtypes can't hold 1.5
    const Tensor back = other.astype(DType::float32);
    CHECK(back.dtype() == DType::float32);
    if (is_floating(dt)) CHECK(back.to_vector<float>() == f.to_vector<float>());
  }
  CHECK(f.astype(DType::int32).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 0, 100});
  CHECK(f.astype(DType::bool_).to_vector<bool>() == std::vector<bool>{true, true, false, true});
  CHECK(constant({0, 200, 255}, {3}).astype(DType::uint8).to_vector<int>() ==
        std::vector<int>{0, 200, 255});

  // 0.1 is not exact in the 16-bit formats (see the conversion test for the exact values).
  const Tensor tenth = constant(0.1);
  CHECK(tenth.astype(DType::float16).astype(DType::float32).item<float>() ==
        Approx(0.1).epsilon(1e-3));
  CHECK(tenth.astype(DType::float16).item<float>() == 0.0999755859375f);
  CHECK(tenth.astype(DType::bfloat16).astype(DType::float32).item<float>() ==
        Approx(0.1).epsilon(4e-3));
  CHECK(tenth.astype(DType::bfloat16).item<double>() == 0.10009765625);
  CHECK(constant(1.5).astype(DType::float16).item<double>() == 1.5);
  CHECK(constant(1.5).astype(DType::bfloat16).item<double>() == 1.5);
}

TEST_CASE("transpose is a view of the same storage and contiguous() copies it in order",
          "[core][tensor][views]") {
  const Tensor t = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor tt = transpose(t);
  CHECK(tt.shape() == Shape{3, 2});
  CHECK_FALSE(tt.is_contiguous());
  CHECK(tt.impl()->storage == t.impl()->storage);
  CHECK(tt.raw_data() == t.raw_data());  // both start at element [0,0]
  CHECK(tt.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});

  const Tensor c = tt.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.shape() == Shape{3, 2});
  CHECK(c.impl()->storage != t.impl()->storage);
  CHECK(c.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  const float* p = c.data<float>();
  CHECK(std::vector<float>(p, p + 6) == std::vector<float>{1, 4, 2, 5, 3, 6});

  // contiguous() of a contiguous tensor is the tensor itself
  CHECK(t.contiguous().impl() == t.impl());
  // a reshape of a contiguous tensor shares its storage too
  CHECK(t.reshape({6}).impl()->storage == t.impl()->storage);
}

TEST_CASE("Variable assign, assign_add and assign_sub write in place and check shapes",
          "[core][variable]") {
  Variable v(constant({1.f, 2.f}, {2}), "w");
  CHECK(v.name() == "w");
  CHECK(v.trainable());
  CHECK(v.shape() == Shape{2});
  CHECK(v.dtype() == DType::float32);
  CHECK(v.value().to_vector<float>() == std::vector<float>{1, 2});

  v.assign(constant({3.f, 4.f}, {2}));
  CHECK(v.value().to_vector<float>() == std::vector<float>{3, 4});
  v.assign_add(constant({0.5f, -1.f}, {2}));  // [3.5, 3]
  CHECK(v.value().to_vector<float>() == std::vector<float>{3.5f, 3.f});
  v.assign_sub(constant({1.5f, 1.f}, {2}));  // [2, 2]
  CHECK(v.value().to_vector<float>() == std::vector<float>{2.f, 2.f});

  const Tensor& as_tensor = v;  // usable wherever a Tensor is
  CHECK((as_tensor * 2.0).to_vector<float>() == std::vector<float>{4.f, 4.f});

  CHECK_THROWS_AS(v.assign(zeros({3})), ShapeError);
  CHECK_THROWS_WITH(v.assign(zeros({3})), Contains("[2]") && Contains("[3]"));
  CHECK_THROWS_AS(v.assign_add(zeros({2, 1})), ShapeError);
  CHECK_THROWS_AS(v.assign_sub(zeros({1})), ShapeError);
  CHECK_THROWS_AS(v.assign(zeros({2}, DType::float64)), DTypeError);
  // a failed write leaves the value alone
  CHECK(v.value().to_vector<float>() == std::vector<float>{2.f, 2.f});

  Variable frozen(zeros({1}), "frozen", false);
  CHECK_FALSE(frozen.trainable());

  // a scalar variable from a C++ number is float32, as tf.Variable(5.0)
  Variable five(5.0, "five");
  CHECK(five.dtype() == DType::float32);
  CHECK(five.shape() == Shape{});
  CHECK(five.value().item<float>() == 5.0f);
  five.assign_add(constant(0.5));
  CHECK(five.value().item<float>() == 5.5f);
}

TEST_CASE("printing a tensor looks like TensorFlow's tf.Tensor", "[core][format]") {
  const Tensor t = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  std::ostringstream os;
  os << t;
  const std::string text = os.str();
  CHECK_THAT(text, Contains("shape=(2, 3), dtype=float32"));
  CHECK_THAT(text, Contains("[[1. 2. 3.]\n [4. 5. 6.]]"));  // numpy style
  CHECK(fmt::format("{}", t) == text);
  CHECK(t.to_string() == text);

  std::ostringstream scalar;
  scalar << constant(2.5);
  CHECK_THAT(scalar.str(), Contains("2.5") && Contains("shape=()") && Contains("dtype=float32"));

  std::ostringstream vec;
  vec << constant({1, 2, 3}, {3});
  CHECK_THAT(vec.str(), Contains("[1 2 3]") && Contains("shape=(3,)") && Contains("dtype=int32"));

  CHECK_THAT(fmt::format("{}", Shape{2, 3}), Contains("[2,3]"));
}

TEST_CASE("printing a large tensor summarises it with ...", "[core][format]") {
  const Tensor big = arange(0, 10000);
  const std::string text = fmt::format("{}", big);
  CHECK_THAT(text, Contains("..."));
  CHECK_THAT(text, Contains("shape=(10000,)"));
  CHECK(text.size() < 1000);  // not ten thousand numbers

  const Tensor big2 = zeros({100, 100});
  const std::string text2 = fmt::format("{}", big2);
  CHECK_THAT(text2, Contains("...") && Contains("shape=(100, 100)"));
  CHECK(text2.size() < 2000);
}
