// keel-serve's pieces without a server: JSON <-> tensor conversion (TF Serving's row and
// columnar formats), the batcher, the model-config text format, flags and the metrics text.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <thread>

#include <keel/keel.hpp>

#include "batcher.hpp"
#include "flags.hpp"
#include "metrics.hpp"
#include "model_config.hpp"
#include "signature.hpp"
#include "tensor_json.hpp"

using namespace keel;
using namespace keel::serve;
using nlohmann::json;

namespace {

Signature one_input(std::vector<std::int64_t> dims, DType dtype = DType::float32) {
  Signature s;
  s.inputs.push_back({"x", dtype, std::move(dims), false});
  s.outputs.push_back({"dense", DType::float32, {-1, 2}, false});
  return s;
}

Signature two_inputs() {
  Signature s;
  s.inputs.push_back({"in_a", DType::float32, {-1, 2}, false});
  s.inputs.push_back({"in_b", DType::float32, {-1, 1}, false});
  s.outputs.push_back({"out_a", DType::float32, {-1, 1}, false});
  s.outputs.push_back({"out_b", DType::float32, {-1, 1}, false});
  return s;
}

}  // namespace

TEST_CASE("serve: row-format instances become one batch tensor", "[serve]") {
  // api_rest.md: {"instances": [[1, 2, 3], [4, 5, 6]]} is a [2, 3] tensor for a single input.
  auto r = parse_predict_request(json::parse(R"({"instances": [[1, 2, 3], [4, 5, 6.5]]})"), one_input({-1, 3}));
  REQUIRE(r.inputs.size() == 1);
  CHECK_FALSE(r.columnar);
  CHECK(r.inputs[0].shape() == Shape{2, 3});
  CHECK(r.inputs[0].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6.5f});
}

TEST_CASE("serve: named row instances and columnar inputs give the same tensors", "[serve]") {
  const Signature sig = two_inputs();
  auto rows = parse_predict_request(
      json::parse(R"({"instances": [{"in_a": [1, 1], "in_b": [1]}, {"in_a": [2, 0], "in_b": [2]}]})"), sig);
  auto cols = parse_predict_request(json::parse(R"({"inputs": {"in_a": [[1, 1], [2, 0]], "in_b": [[1], [2]]}})"), sig);
  CHECK(cols.columnar);
  for (auto* r : {&rows, &cols}) {
    REQUIRE(r->inputs.size() == 2);
    CHECK(r->inputs[0].to_vector<float>() == std::vector<float>{1, 1, 2, 0});
    CHECK(r->inputs[1].shape() == Shape{2, 1});
    CHECK(r->inputs[1].to_vector<float>() == std::vector<float>{1, 2});
  }
}

TEST_CASE("serve: malformed predict requests are ValueErrors that say what is wrong", "[serve]") {
  const Signature sig = one_input({-1, 3});
  const auto bad = [&](const char* body) { return parse_predict_request(json::parse(body), sig); };
  CHECK_THROWS_AS(bad(R"({"instances": [[1, 2, 3], [4, 5]]})"), ValueError);        // ragged
  CHECK_THROWS_AS(bad(R"({"instances": [[1, 2]]})"), ValueError);                    // [1,2] vs [-1,3]
  CHECK_THROWS_AS(bad(R"({"instances": [["a", "b", "c"]]})"), ValueError);          // strings for DT_FLOAT
  CHECK_THROWS_AS(bad(R"({"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]})"), ValueError);  // both
  CHECK_THROWS_AS(bad(R"({"foo": 1})"), ValueError);
  CHECK_THROWS_AS(bad(R"([1, 2, 3])"), ValueError);
  CHECK_THROWS_AS(bad(R"({"instances": []})"), ValueError);
  CHECK_THROWS_AS(bad(R"({"instances": 3})"), ValueError);
  CHECK_THROWS_AS(bad(R"({"instances": [[1, 2, 3]], "signature_name": "other"})"), ValueError);
  CHECK_THROWS_WITH(bad(R"({"instances": [[1, 2]]})"), Catch::Contains("[-1, 3]") || Catch::Contains("[-1,3]"));
  // Deeper than any tensor: refused before recursing.
  std::string deep(100, '[');
  deep += std::string(100, ']');
  CHECK_THROWS_AS(json_to_tensor(json::parse(deep), DType::float32, "x"), ValueError);
  // Integer dtypes want integers in range.
  CHECK_THROWS_AS(json_to_tensor(json::parse("[1.5]"), DType::int32, "x"), ValueError);
  CHECK_THROWS_AS(json_to_tensor(json::parse("[3000000000]"), DType::int32, "x"), ValueError);
  CHECK(json_to_tensor(json::parse("[[7, -2]]"), DType::int64, "x").to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{7, -2});
  // Named inputs: a missing or an unknown name.
  CHECK_THROWS_AS(parse_predict_request(json::parse(R"({"inputs": {"in_a": [[1, 1]]}})"), two_inputs()), ValueError);
  CHECK_THROWS_AS(parse_predict_request(json::parse(R"({"inputs": {"in_a": [[1, 1]], "in_b": [[1]], "z": 1}})"),
                                        two_inputs()),
                  ValueError);
}

TEST_CASE("serve: responses print floats as their shortest text, and TF Serving's NaN/Infinity", "[serve]") {
  const Signature sig = one_input({-1, 3});
  const Tensor y = constant({0.1f, 4.5f, std::nanf(""), -INFINITY}, {2, 2});
  CHECK(predict_response_json({y}, sig, false) == R"({"predictions":[[0.1,4.5],[NaN,-Infinity]]})");
  CHECK(predict_response_json({y}, sig, true) == R"({"outputs":[[0.1,4.5],[NaN,-Infinity]]})");
  // Several outputs: row format gives one object per row, columnar one object of tensors.
  const Signature two = two_inputs();
  const Tensor a = constant({2.f, 2.f}, {2, 1}), b = constant({1.f, 2.f}, {2, 1});
  CHECK(predict_response_json({a, b}, two, false) == R"({"predictions":[{"out_a":[2],"out_b":[1]},{"out_a":[2],"out_b":[2]}]})");
  CHECK(predict_response_json({a, b}, two, true) == R"({"outputs":{"out_a":[[2],[2]],"out_b":[[1],[2]]}})");
  std::string s;
  append_tensor_json(s, constant({1, 0}, {2}, DType::bool_));
  CHECK(s == "[true,false]");
}

TEST_CASE("serve: the batcher merges concurrent requests into one model call and splits the rows back", "[serve]") {
  std::atomic<int> calls{0};
  std::atomic<std::int64_t> largest{0};
  // The "model" doubles its input, so every request can check it got its own rows back.
  Batcher batcher(
      [&](const std::vector<Tensor>& x) {
        ++calls;
        largest = std::max<std::int64_t>(largest, x[0].shape()[0]);
        return std::vector<Tensor>{x[0] * 2.0};
      },
      BatchingOptions{8, 2000000});  // 2 s: far more than 8 threads take to queue; a full batch closes at once
  std::vector<std::thread> threads;
  std::atomic<int> correct{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto out = batcher.run({constant({float(i), float(10 * i)}, {1, 2})});
      if (out[0].shape() == Shape{1, 2} && out[0].to_vector<float>() == std::vector<float>{2.f * i, 20.f * i}) ++correct;
    });
  for (auto& t : threads) t.join();
  CHECK(correct == 8);
  // 8 rows = max_batch_size: one full batch closes before the timeout.
  CHECK(calls == 1);
  CHECK(largest == 8);
}

TEST_CASE("serve: the batcher keeps incompatible shapes apart and refuses oversized requests", "[serve]") {
  std::atomic<int> calls{0};
  Batcher batcher(
      [&](const std::vector<Tensor>& x) {
        ++calls;
        if (x[0].shape()[1] == 5) throw ShapeError("model: expects 2 or 3 features, got [n, 5]");
        return std::vector<Tensor>{x[0] + 1.0};
      },
      BatchingOptions{4, 50000});
  std::thread t1([&] { CHECK(batcher.run({zeros({1, 2})})[0].to_vector<float>() == std::vector<float>{1, 1}); });
  std::thread t2([&] { CHECK(batcher.run({zeros({2, 3})})[0].shape() == Shape{2, 3}); });
  t1.join();
  t2.join();
  CHECK(calls == 2);  // [.,2] and [.,3] rows cannot share a batch
  CHECK_THROWS_AS(batcher.run({zeros({5, 2})}), ValueError);    // 5 rows > max_batch_size 4
  CHECK_THROWS_AS(batcher.run({zeros({1, 5})}), ShapeError);    // the model's own error comes back
  CHECK(batcher.run({zeros({1, 2})})[0].to_vector<float>() == std::vector<float>{1, 1});  // and it keeps serving
}

TEST_CASE("serve: model_config_file's text format: the supported subset and clear refusals", "[serve]") {
  const auto specs = parse_model_config(R"(
    # two models
    model_config_list {
      config { name: 'a' base_path: "/models/a" model_platform: "tensorflow" }
      config: { name: "b", base_path: '/models/b' }
    })", "models.config");
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "a");
  CHECK(specs[0].base_path == "/models/a");
  CHECK(specs[1].name == "b");
  CHECK(specs[1].model_platform == "tensorflow");
  const auto bad = [](const char* text) { return parse_model_config(text, "models.config"); };
  CHECK_THROWS_WITH(bad("model_config_list { config { name: 'a' base_path: '/a' model_version_policy { all {} } } }"),
                    Catch::Contains("model_version_policy") && Catch::Contains("line 1"));
  CHECK_THROWS_AS(bad("custom_model_config {}"), ValueError);
  CHECK_THROWS_AS(bad("model_config_list { config { name: 'a' } }"), ValueError);              // no base_path
  CHECK_THROWS_AS(bad("model_config_list { config { name: 'a' base_path: '/a' "), ValueError);  // unterminated
  CHECK_THROWS_AS(bad("model_config_list { config { name: 'a' base_path: '/a' model_platform: 'onnx' } }"), ValueError);
  CHECK_THROWS_AS(bad("model_config_list { config { name: 'a' base_path: '/a' } config { name: 'a' base_path: '/b' } }"),
                  ValueError);
  CHECK_THROWS_AS(bad(""), ValueError);
}

TEST_CASE("serve: flags follow TF Serving's syntax and refuse unknown ones", "[serve]") {
  auto f = parse_flags({"--model_name=m", "--model_base_path", "/models/m", "--rest_api_port=0", "--enable_batching",
                        "--max_batch_size=16", "--batch_timeout_micros=500", "--max_body_bytes=1024"});
  CHECK(f.model_name == "m");
  CHECK(f.model_base_path == "/models/m");
  CHECK(f.rest_api_port == 0);
  CHECK(f.enable_batching);
  CHECK(f.max_batch_size == 16);
  CHECK(f.batch_timeout_micros == 500);
  CHECK(f.max_body_bytes == 1024);
  CHECK_FALSE(parse_flags({"--model_base_path=/m", "--enable_batching=false"}).enable_batching);
  CHECK_THROWS_AS(parse_flags({"--model_base_path=/m", "--port=8500"}), ValueError);
  CHECK_THROWS_AS(parse_flags({"--model_base_path=/m", "--rest_api_port=70000"}), ValueError);
  CHECK_THROWS_AS(parse_flags({"--model_base_path=/m", "--max_batch_size=abc"}), ValueError);
  CHECK_THROWS_AS(parse_flags({"--model_name=m"}), ValueError);  // no base path nor config file
}

TEST_CASE("serve: metrics render as Prometheus text with cumulative histogram buckets", "[serve]") {
  Metrics m;
  m.record_request("predict", 200, 0.0003);  // bucket le=0.0005
  m.record_request("predict", 200, 0.002);   // bucket le=0.0025
  m.record_request("predict", 400, 3.0);     // only +Inf
  m.record_batch("demo", 5);
  const std::string text = m.render();
  CHECK_THAT(text, Catch::Contains("keel_serve_requests_total{endpoint=\"predict\",code=\"200\"} 2"));
  CHECK_THAT(text, Catch::Contains("keel_serve_requests_total{endpoint=\"predict\",code=\"400\"} 1"));
  CHECK_THAT(text, Catch::Contains("keel_serve_request_latency_seconds_bucket{endpoint=\"predict\",le=\"0.00025\"} 0"));
  CHECK_THAT(text, Catch::Contains("keel_serve_request_latency_seconds_bucket{endpoint=\"predict\",le=\"0.0005\"} 1"));
  CHECK_THAT(text, Catch::Contains("keel_serve_request_latency_seconds_bucket{endpoint=\"predict\",le=\"2.5\"} 2"));
  CHECK_THAT(text, Catch::Contains("keel_serve_request_latency_seconds_bucket{endpoint=\"predict\",le=\"+Inf\"} 3"));
  CHECK_THAT(text, Catch::Contains("keel_serve_request_latency_seconds_count{endpoint=\"predict\"} 3"));
  CHECK_THAT(text, Catch::Contains("keel_serve_batched_requests_total{model=\"demo\"} 5"));
  CHECK(m.batches("demo") == 1);
}
