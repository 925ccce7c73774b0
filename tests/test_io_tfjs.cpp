// io::save_tfjs / io::load_tfjs: the TensorFlow.js Layers format (model.json + weight shards).
// The cases tagged [.tfjs_oracle] run from tests/cmake/tfjs.cmake between the two halves of
// tests/node/tfjs_layers_oracle.js, which checks keel against @tensorflow/tfjs itself.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <keel/keel.hpp>

#include "io/tfjs_weights.hpp"

using namespace keel;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("keel_test_io_tfjs_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

// Deterministic weights, w[i] = 0.5 sin(0.37 (i + 1) + k) for the k-th weight (variances positive).
void set_fixed_weights(models::Model& m) {
  auto ws = m.get_weights();
  for (std::size_t k = 0; k < ws.size(); ++k) {
    std::vector<float> v(static_cast<std::size_t>(ws[k].size()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(0.5 * std::sin(0.37 * (i + 1) + k));
    ws[k] = constant(v, ws[k].shape());
  }
  m.set_weights(ws);
  for (const auto& l : m.layers())
    for (Variable* v : l->non_trainable_weights())
      if (v->name().find("moving_variance") != std::string::npos) v->assign(abs(v->peek()) + 1.0);
}

Tensor fixed_input(Shape shape) {
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.11 * i) + 0.2 * std::cos(0.7 * i));
  return constant(v, shape);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(double(x[i]) - double(y[i])));
  return worst;
}

std::shared_ptr<models::Sequential> conv_model() {
  auto m = std::make_shared<models::Sequential>(
      std::initializer_list<layers::LayerRef>{
          layers::InputLayer(Shape{6, 6, 2}),
          layers::Conv2D(3, 3, {.padding = "same", .activation = "relu", .name = "conv_a"}),
          layers::BatchNormalization({.name = "bn"}),
          layers::MaxPooling2D(2, {.name = "pool"}),
          layers::Flatten({.name = "flat"}),
          layers::Dense(5, {.activation = "relu", .name = "hidden"}),
          layers::Dropout(0.25, {.name = "drop"}),
          layers::Dense(3, {.activation = "softmax", .name = "probs"}),
      },
      "seq_conv");
  set_fixed_weights(*m);
  return m;
}

std::shared_ptr<models::Sequential> rnn_model() {
  auto m = std::make_shared<models::Sequential>(
      std::initializer_list<layers::LayerRef>{
          layers::InputLayer(Shape{5, 3}),
          layers::LSTM(4, {.return_sequences = true}),
          layers::SimpleRNN(4, {.return_sequences = true}),
          layers::GRU(3, {.reset_after = false}),
          layers::Dense(2),
      },
      "seq_rnn");
  set_fixed_weights(*m);
  return m;
}

std::shared_ptr<models::Sequential> misc_model() {
  auto m = std::make_shared<models::Sequential>(
      std::initializer_list<layers::LayerRef>{
          layers::InputLayer(Shape{8, 8, 3}),
          layers::DepthwiseConv2D(3, {.depth_multiplier = 2}),
          layers::SeparableConv2D(4, 3, {.padding = "same", .activation = "elu"}),
          layers::AveragePooling2D(2),
          layers::ZeroPadding2D(1),
          layers::UpSampling2D(2),
          layers::Conv2DTranspose(2, 3, {.strides = {2, 2}, .padding = "same"}),
          layers::GlobalMaxPooling2D(),
          layers::Dense(2, {.activation = "sigmoid"}),
      },
      "seq_misc");
  set_fixed_weights(*m);
  return m;
}

std::shared_ptr<models::Model> functional_model() {
  Tensor a = models::Input({4}, DType::float32, "a");
  Tensor b = models::Input({4}, DType::float32, "b");
  Tensor da = layers::Dense(4, {.activation = "elu", .name = "da"})(a);
  Tensor db = layers::Dense(4, {.activation = "sigmoid", .name = "db"})(b);
  Tensor s = layers::Add({.name = "sum"})({da, db});
  Tensor p = layers::Multiply({.name = "prod"})({da, db});
  Tensor c = layers::Concatenate({.name = "cat"})({s, p, a});
  Tensor n = layers::LayerNormalization({.name = "ln"})(c);
  Tensor y = layers::Dense(2, {.name = "out"})(n);
  auto m = std::make_shared<models::Model>(std::vector<Tensor>{a, b}, std::vector<Tensor>{y}, "functional");
  set_fixed_weights(*m);
  return m;
}

json read_json(const fs::path& p) { return json::parse(slurp(p)); }

}  // namespace

TEST_CASE("save_tfjs writes model.json, tfjs's weight names and order, and the shards", "[io][tfjs]") {
  auto m = conv_model();
  const fs::path dir = scratch("layout");
  io::save_tfjs(*m, dir.string());
  const json mj = read_json(dir / "model.json");
  CHECK(mj["format"] == "layers-model");
  CHECK(mj["generatedBy"].is_string());
  CHECK(mj.contains("convertedBy"));
  const json& topo = mj["modelTopology"];
  CHECK(topo["class_name"] == "Sequential");
  CHECK(topo["backend"] == "tensor_flow.js");
  CHECK(topo["keras_version"].get<std::string>().rfind("tfjs-layers", 0) == 0);
  const json& first = topo["config"]["layers"][0];
  CHECK(first["class_name"] == "Conv2D");  // the InputLayer rides on the first layer, as tfjs writes it
  CHECK(first["config"]["batch_input_shape"] == json::parse("[null, 6, 6, 2]"));
  CHECK(first["config"]["kernel_initializer"]["class_name"] == "GlorotUniform");
  // tf.LayersModel.weights: every trainable weight in layer order, then the non-trainable ones.
  std::vector<std::string> names;
  for (const auto& w : mj["weightsManifest"][0]["weights"]) names.push_back(w["name"]);
  CHECK(names == std::vector<std::string>{"conv_a/kernel", "conv_a/bias", "bn/gamma", "bn/beta", "hidden/kernel",
                                          "hidden/bias", "probs/kernel", "probs/bias", "bn/moving_mean",
                                          "bn/moving_variance"});
  CHECK(mj["weightsManifest"][0]["weights"][0]["shape"] == json::parse("[3, 3, 2, 3]"));
  // conv 54+3, bn 4*3, hidden 27*5+5, probs 5*3+3: 227 floats, one 908-byte shard.
  CHECK(mj["weightsManifest"][0]["paths"] == json::parse(R"(["group1-shard1of1.bin"])"));
  CHECK(fs::file_size(dir / "group1-shard1of1.bin") == 227 * 4);

  // Cut at 300 bytes: 908 = 300 + 300 + 300 + 8, named as tfjs-converter names them.
  const fs::path small = scratch("shards");
  io::save_tfjs(*m, small.string(), {.shard_size_bytes = 300});
  const json sj = read_json(small / "model.json");
  CHECK(sj["weightsManifest"][0]["paths"] ==
        json::parse(R"(["group1-shard1of4.bin", "group1-shard2of4.bin", "group1-shard3of4.bin", "group1-shard4of4.bin"])"));
  CHECK(fs::file_size(small / "group1-shard1of4.bin") == 300);
  CHECK(fs::file_size(small / "group1-shard4of4.bin") == 8);
  auto back = io::load_tfjs((small / "model.json").string());
  const Tensor x = fixed_input({2, 6, 6, 2});
  CHECK(max_abs_diff(back->predict(x), m->predict(x)) == 0.0);

  // The default 4 MiB shards: a 1100 x 1000 kernel (4,400,000 bytes) and its bias need two.
  models::Sequential big({layers::InputLayer(Shape{1100}), layers::Dense(1000, {.name = "wide"})});
  const fs::path bigdir = scratch("big");
  io::save_tfjs(big, bigdir.string());
  CHECK(fs::file_size(bigdir / "group1-shard1of2.bin") == 4194304);
  CHECK(fs::file_size(bigdir / "group1-shard2of2.bin") == 4404000 - 4194304);
}

TEST_CASE("save_tfjs then load_tfjs keeps the architecture and the predictions", "[io][tfjs]") {
  SECTION("Sequential: convolutions, normalization, pooling, dense") {
    auto m = conv_model();
    const fs::path dir = scratch("rt_conv");
    io::save_tfjs(*m, dir.string());
    auto back = io::load_tfjs((dir / "model.json").string());
    CHECK(back->layers().size() == m->layers().size());
    const Tensor x = fixed_input({2, 6, 6, 2});
    CHECK(max_abs_diff(back->predict(x), m->predict(x)) == 0.0);
  }
  SECTION("Sequential: recurrent layers") {
    auto m = rnn_model();
    const fs::path dir = scratch("rt_rnn");
    io::save_tfjs(*m, dir.string());
    auto back = io::load_tfjs((dir / "model.json").string());
    const Tensor x = fixed_input({2, 5, 3});
    CHECK(max_abs_diff(back->predict(x), m->predict(x)) == 0.0);
  }
  SECTION("functional: two inputs, merges") {
    auto m = functional_model();
    const fs::path dir = scratch("rt_fun");
    io::save_tfjs(*m, dir.string());
    CHECK(read_json(dir / "model.json")["modelTopology"]["class_name"] == "Model");
    auto back = io::load_tfjs((dir / "model.json").string());
    CHECK(back->is_functional());
    const std::vector<Tensor> xs{fixed_input({2, 4}), fixed_input({2, 4}) + 0.5};
    CHECK(max_abs_diff(back->predict(xs), m->predict(xs)) == 0.0);
  }
  SECTION("a second save replaces the first whole") {
    auto m = conv_model();
    const fs::path dir = scratch("rt_twice");
    io::save_tfjs(*m, dir.string(), {.shard_size_bytes = 100});
    io::save_tfjs(*m, dir.string());
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
    CHECK(files == 2);  // model.json and one shard: no shard of the first save is left
  }
}

TEST_CASE("tfjs-converter's affine quantization, by hand", "[io][tfjs]") {
  // w = [-1, 0, 0.25, 3], uint8: scale = 4/255; the zero point round(1 / scale) = round(63.75) = 64,
  // so min = -64 * 4/255; q = round((w - min) / scale) = [round(0.25), 64, round(79.9375), clip -> 255].
  auto q = io::detail::quantize_affine({-1.f, 0.f, 0.25f, 3.f}, 8);
  CHECK(q.scale == Approx(4.0 / 255).epsilon(1e-12));
  CHECK(q.min == Approx(-256.0 / 255).epsilon(1e-12));
  CHECK(q.q == std::vector<std::uint16_t>{0, 64, 80, 255});
  // All positive: no nudging, min = 1, scale = 2/255; 1.5 -> round(63.75) = 64.
  q = io::detail::quantize_affine({1.f, 1.5f, 3.f}, 8);
  CHECK(q.min == 1.0);
  CHECK(q.q == std::vector<std::uint16_t>{0, 64, 255});
  // One value: zeros, scale 1, min the value.
  q = io::detail::quantize_affine({0.7f, 0.7f}, 16);
  CHECK(q.scale == 1.0);
  CHECK(q.min == Approx(0.7));
  CHECK(q.q == std::vector<std::uint16_t>{0, 0});
  // uint16: qmax = 65535.
  q = io::detail::quantize_affine({0.f, 1.f}, 16);
  CHECK(q.scale == Approx(1.0 / 65535).epsilon(1e-12));
  CHECK(q.q == std::vector<std::uint16_t>{0, 65535});
}

TEST_CASE("quantized weights load within the quantization error", "[io][tfjs]") {
  auto m = conv_model();
  const auto original = m->get_weights();
  for (const char* dtype : {"uint8", "uint16"}) {
    const fs::path dir = scratch(std::string("quant_") + dtype);
    io::save_tfjs(*m, dir.string(), {.quantization = dtype});
    const json mj = read_json(dir / "model.json");
    const json& specs = mj["weightsManifest"][0]["weights"];
    // 227 weights at 1 or 2 bytes each.
    CHECK(fs::file_size(dir / "group1-shard1of1.bin") == (std::string(dtype) == "uint8" ? 227u : 454u));
    auto back = io::load_tfjs((dir / "model.json").string());
    std::map<std::string, Tensor> loaded;
    for (const auto& l : back->layers())
      for (Variable* v : l->weights()) loaded[l->name() + "/" + v->name().substr(v->name().rfind('/') + 1)] = v->peek();
    std::map<std::string, Tensor> before;
    for (const auto& l : m->layers())
      for (Variable* v : l->weights()) before[l->name() + "/" + v->name().substr(v->name().rfind('/') + 1)] = v->peek();
    for (const auto& spec : specs) {
      const std::string name = spec["name"];
      CHECK(spec["dtype"] == "float32");
      REQUIRE(spec["quantization"]["dtype"] == dtype);
      const double scale = spec["quantization"]["scale"];
      // Rounding costs at most scale / 2; nudging the zero point can clip one end by another scale / 2.
      INFO(name);
      CHECK(max_abs_diff(loaded.at(name), before.at(name)) <= scale * (1 + 1e-6));
    }
    const Tensor x = fixed_input({2, 6, 6, 2});
    CHECK(max_abs_diff(back->predict(x), m->predict(x)) < (std::string(dtype) == "uint8" ? 0.05 : 1e-3));
  }
  CHECK_THROWS_AS(io::save_tfjs(*m, scratch("quant_bad").string(), {.quantization = "int4"}), ValueError);
  CHECK_THROWS_AS(io::save_tfjs(*m, scratch("shard_bad").string(), {.shard_size_bytes = 0}), ValueError);
}

TEST_CASE("save_tfjs refuses what TensorFlow.js computes differently", "[io][tfjs]") {
  // tfjs's GRU has reset_after = false only.
  models::Sequential gru({layers::InputLayer(Shape{4, 2}), layers::GRU(3)});
  CHECK_THROWS_AS(io::save_tfjs(gru, scratch("gru").string()), ValueError);
  // tfjs's hard_sigmoid is Keras 2's clip(0.2 x + 0.5), keel's Keras 3's relu6(x + 3) / 6.
  models::Sequential hs({layers::InputLayer(Shape{4}), layers::Dense(2, {.activation = "hard_sigmoid"})});
  CHECK_THROWS_WITH(io::save_tfjs(hs, scratch("hs").string()), Catch::Contains("hard_sigmoid"));
  // Keras 2's, which tfjs names hard_sigmoid, is written under that name.
  models::Sequential k2({layers::InputLayer(Shape{4}), layers::Dense(2, {.activation = "hard_sigmoid_keras2"})});
  const fs::path k2_dir = scratch("k2");
  io::save_tfjs(k2, k2_dir.string());
  CHECK(json::parse(slurp(k2_dir / "model.json")).dump().find("\"activation\":\"hard_sigmoid\"") != std::string::npos);
  // A folder that is not a TensorFlow.js model is never replaced.
  const fs::path dir = scratch("occupied");
  fs::create_directories(dir);
  spit(dir / "notes.txt", "mine");
  auto m = conv_model();
  CHECK_THROWS_AS(io::save_tfjs(*m, dir.string()), IOError);
  CHECK(slurp(dir / "notes.txt") == "mine");
}

TEST_CASE("load_tfjs rejects malformed model.json files with IOError", "[io][tfjs]") {
  auto m = functional_model();
  const fs::path good = scratch("malformed_src");
  io::save_tfjs(*m, good.string());
  const json base = read_json(good / "model.json");
  const std::string shard = slurp(good / "group1-shard1of1.bin");
  int n = 0;
  // Writes a variant of the model into its own folder and returns the model.json path.
  const auto variant = [&](const json& mj, const std::string& bin) {
    const fs::path dir = scratch("malformed_" + std::to_string(n++));
    fs::create_directories(dir);
    spit(dir / "model.json", mj.dump());
    spit(dir / "group1-shard1of1.bin", bin);
    return (dir / "model.json").string();
  };
  CHECK_NOTHROW(io::load_tfjs(variant(base, shard)));
  SECTION("missing fields") {
    json a = base;
    a.erase("modelTopology");
    CHECK_THROWS_AS(io::load_tfjs(variant(a, shard)), IOError);
    json b = base;
    b.erase("weightsManifest");
    CHECK_THROWS_AS(io::load_tfjs(variant(b, shard)), IOError);
    json c = base;
    c["weightsManifest"][0].erase("paths");
    CHECK_THROWS_AS(io::load_tfjs(variant(c, shard)), IOError);
    json d = base;
    d["weightsManifest"][0]["weights"][0].erase("shape");
    CHECK_THROWS_AS(io::load_tfjs(variant(d, shard)), IOError);
    json e = base;
    e["modelTopology"]["config"].erase("layers");
    CHECK_THROWS_AS(io::load_tfjs(variant(e, shard)), IOError);
    json f = base;
    f["weightsManifest"][0]["weights"].erase(0);  // the first kernel gone: no weight for da/kernel
    CHECK_THROWS_AS(io::load_tfjs(variant(f, shard)), IOError);
  }
  SECTION("wrong format, not JSON") {
    json a = base;
    a["format"] = "graph-model";
    CHECK_THROWS_AS(io::load_tfjs(variant(a, shard)), IOError);
    CHECK_THROWS_AS(io::load_tfjs(variant(json(), shard)), IOError);
    const fs::path dir = scratch("not_json");
    fs::create_directories(dir);
    spit(dir / "model.json", "{\"format\": \"layers-model\", ");
    CHECK_THROWS_WITH(io::load_tfjs((dir / "model.json").string()), Catch::Contains("at byte"));
    CHECK_THROWS_AS(io::load_tfjs((scratch("absent") / "model.json").string()), IOError);
  }
  SECTION("shards too short, too long or missing") {
    CHECK_THROWS_WITH(io::load_tfjs(variant(base, shard.substr(0, shard.size() - 4))), Catch::Contains("too short"));
    CHECK_THROWS_AS(io::load_tfjs(variant(base, shard + "xxxx")), IOError);
    json a = base;
    a["weightsManifest"][0]["paths"] = json::parse(R"(["group1-shard1of1.bin", "group1-shard2of2.bin"])");
    CHECK_THROWS_AS(io::load_tfjs(variant(a, shard)), IOError);
  }
  SECTION("paths that leave the folder") {
    for (const char* p : {"../group1-shard1of1.bin", "/etc/hostname", "sub/../../x.bin", ""}) {
      json a = base;
      a["weightsManifest"][0]["paths"] = json::array({p});
      INFO(p);
      CHECK_THROWS_AS(io::load_tfjs(variant(a, shard)), IOError);
    }
    // A symbolic link inside the folder that points outside it.
    json a = base;
    a["weightsManifest"][0]["paths"] = json::array({"link.bin"});
    const std::string path = variant(a, shard);
    fs::create_symlink(good / "group1-shard1of1.bin", fs::path(path).parent_path() / "link.bin");
    CHECK_THROWS_AS(io::load_tfjs(path), IOError);
  }
  SECTION("shapes and dtypes that do not fit") {
    json a = base;
    a["weightsManifest"][0]["weights"][0]["shape"] = json::parse("[4611686018427387904, 4]");  // overflows
    CHECK_THROWS_AS(io::load_tfjs(variant(a, shard)), IOError);
    json b = base;
    b["weightsManifest"][0]["weights"][0]["shape"] = json::parse("[-4, 4]");
    CHECK_THROWS_AS(io::load_tfjs(variant(b, shard)), IOError);
    json c = base;
    c["weightsManifest"][0]["weights"][0]["dtype"] = "complex64";
    CHECK_THROWS_AS(io::load_tfjs(variant(c, shard)), IOError);
    json d = base;  // da/kernel [4, 4] declared [2, 8]: same bytes, wrong shape for the layer
    d["weightsManifest"][0]["weights"][0]["shape"] = json::parse("[2, 8]");
    CHECK_THROWS_WITH(io::load_tfjs(variant(d, shard)), Catch::Contains("da/kernel"));
    json e = base;
    e["weightsManifest"][0]["weights"][0]["quantization"] = {{"dtype", "uint8"}};  // no min / scale
    CHECK_THROWS_AS(io::load_tfjs(variant(e, shard)), IOError);
  }
  SECTION("layer classes and settings keel has not: ValueError naming them") {
    json a = base;
    a["modelTopology"]["config"]["layers"][2]["class_name"] = "FancyLayer";
    CHECK_THROWS_AS(io::load_tfjs(variant(a, shard)), ValueError);
    CHECK_THROWS_WITH(io::load_tfjs(variant(a, shard)), Catch::Contains("FancyLayer"));
    json b = base;
    b["modelTopology"]["config"]["layers"][2]["config"]["activation"] = "gelu_new";  // tfjs's own
    CHECK_THROWS_AS(io::load_tfjs(variant(b, shard)), ValueError);
    CHECK_THROWS_WITH(io::load_tfjs(variant(b, shard)), Catch::Contains("gelu_new"));
  }
  SECTION("tfjs's hard_sigmoid is Keras 2's: keel's hard_sigmoid_keras2") {
    json h = base;
    h["modelTopology"]["config"]["layers"][2]["config"]["activation"] = "hard_sigmoid";
    const std::string lname = h["modelTopology"]["config"]["layers"][2]["config"]["name"];
    auto m = io::load_tfjs(variant(h, shard));
    CHECK(m->get_layer(lname)->get_config().at("activation") == "hard_sigmoid_keras2");
  }
}

// ---- against TensorFlow.js (tests/cmake/tfjs.cmake) ---------------------------------------------

namespace {

fs::path oracle_dir() {
  const char* d = std::getenv("KEEL_TFJS_DIR");
  REQUIRE(d != nullptr);
  return d;
}

Tensor tensor_of(const json& j) {
  std::vector<std::int64_t> dims = j["shape"];
  std::vector<float> data = j["data"];
  Tensor t = constant(data, Shape(dims));
  return j.value("dtype", std::string("float32")) == "int32" ? t.astype(DType::int32) : t;
}

json json_of(const Tensor& t) {
  return {{"shape", t.shape().dims()}, {"data", t.to_vector<float>()}, {"dtype", "float32"}};
}

}  // namespace

TEST_CASE("models written by TensorFlow.js load and predict what tfjs predicted", "[.tfjs_oracle]") {
  int count = 0;
  for (const auto& e : fs::directory_iterator(oracle_dir() / "from_tfjs")) {
    INFO(e.path().filename().string());
    const json io = read_json(e.path() / "io.json");
    auto model = io::load_tfjs((e.path() / "model.json").string());
    std::vector<Tensor> xs;
    for (const auto& x : io["inputs"]) xs.push_back(tensor_of(x));
    const Tensor y = xs.size() == 1 ? model->predict(xs[0]) : model->predict(xs);
    const double diff = max_abs_diff(y, tensor_of(io["output"]));
    std::cout << "from tfjs: " << e.path().filename().string() << ": max |keel - tfjs| = " << diff << "\n";
    CHECK(diff <= 1e-5);
    ++count;
  }
  CHECK(count >= 5);
}

TEST_CASE("models written by keel, with keel's predictions, for TensorFlow.js to check", "[.tfjs_oracle]") {
  const fs::path out = oracle_dir() / "from_keel";
  fs::create_directories(out);
  const auto write = [&](const std::string& name, models::Model& m, const std::vector<Tensor>& xs,
                         io::TfjsSaveOptions options) {
    io::save_tfjs(m, (out / name).string(), options);
    // A quantized model is compared as keel loads it back: both sides dequantize the same bytes.
    auto loaded = io::load_tfjs((out / name / "model.json").string());
    const Tensor y = xs.size() == 1 ? loaded->predict(xs[0]) : loaded->predict(xs);
    if (options.quantization.empty()) CHECK(max_abs_diff(y, xs.size() == 1 ? m.predict(xs[0]) : m.predict(xs)) == 0.0);
    json inputs = json::array();
    for (const auto& x : xs) inputs.push_back(json_of(x));
    spit(out / name / "io.json", json{{"inputs", inputs}, {"output", json_of(y)}, {"tolerance", 1e-5}}.dump());
  };
  write("seq_conv", *conv_model(), {fixed_input({2, 6, 6, 2})}, {});
  write("seq_conv_uint8", *conv_model(), {fixed_input({2, 6, 6, 2})}, {.quantization = "uint8"});
  write("seq_conv_uint16_shards", *conv_model(), {fixed_input({2, 6, 6, 2})},
        {.quantization = "uint16", .shard_size_bytes = 128});
  write("seq_rnn", *rnn_model(), {fixed_input({2, 5, 3})}, {});
  {  // tfjs's default recurrent activation, Keras 2's hard_sigmoid
    auto m = std::make_shared<models::Sequential>(
        std::initializer_list<layers::LayerRef>{
            layers::InputLayer(Shape{5, 3}),
            layers::LSTM(4, {.recurrent_activation = "hard_sigmoid_keras2", .return_sequences = true}),
            layers::GRU(3, {.recurrent_activation = "hard_sigmoid_keras2", .reset_after = false}),
        },
        "seq_rnn_hard_sigmoid");
    set_fixed_weights(*m);
    write("seq_rnn_hard_sigmoid", *m, {fixed_input({2, 5, 3})}, {});
  }
  write("seq_misc", *misc_model(), {fixed_input({2, 8, 8, 3})}, {});
  write("functional", *functional_model(), {fixed_input({2, 4}), fixed_input({2, 4}) + 0.5}, {});
}
