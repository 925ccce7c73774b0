// Keras' files: .keras (Keras 3 zip), legacy .h5, .weights.h5 and legacy weights .h5. Models of
// every family keel has are saved in each form and loaded back (predictions equal exactly: the
// same float32 weights, the same kernels); the files' structure is checked against Keras'
// layouts (keras/src/saving/saving_lib.py H5IOStore: "layers/<snake_case(class)>/vars/<i>";
// tf_keras hdf5_format.py: model_config, model_weights/layer_names/weight_names); bad files are
// IOErrors naming the file and object.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "io/hdf5_file.hpp"
#include "io/keras_config.hpp"
#include "io/zip.hpp"
#include "scratch.hpp"

using namespace keel;
using keel_test::read_all;
using keel_test::Scratch;
using keel_test::write_all;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

std::vector<float> values(const Tensor& t) {
  const Tensor c = cast(t, DType::float32).contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.size());
}

// Saves `model` as `file`, loads it and checks that it predicts exactly as before.
void check_file_round_trip(models::Model& model, const std::vector<Tensor>& x, const std::string& file) {
  Scratch scratch("keras_rt_" + file);
  const auto expected = model.predict_all(x);
  model.save(scratch / file);
  auto loaded = models::load_model(scratch / file);
  REQUIRE(loaded->weights().size() == model.weights().size());
  const auto got = loaded->predict_all(x);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(values(got[i]) == values(expected[i]));
  // Nothing but the file is left (the parts folder is removed).
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(scratch.dir)) entries += e.path().filename() == file ? 1 : 100;
  CHECK(entries == 1);
}

json zip_json(const std::string& path, const std::string& member) {
  const std::string bytes = read_all(path);
  json out;
  io::zip::read_archive(bytes, "test", path, [&](const io::zip::Entry& e) {
    if (e.name == member) out = json::parse(std::string(e.data));
  });
  return out;
}

std::string zip_member(const std::string& path, const std::string& member) {
  const std::string bytes = read_all(path);
  std::string out;
  io::zip::read_archive(bytes, "test", path, [&](const io::zip::Entry& e) {
    if (e.name == member) out = std::string(e.data);
  });
  return out;
}

}  // namespace

TEST_CASE("Keras' snake_case names the H5IOStore entries as naming.to_snake_case does", "[io][keras]") {
  CHECK(io::keras::keras_snake_case("Dense") == "dense");
  CHECK(io::keras::keras_snake_case("Conv2D") == "conv2d");
  CHECK(io::keras::keras_snake_case("BatchNormalization") == "batch_normalization");
  CHECK(io::keras::keras_snake_case("LSTM") == "lstm");
  CHECK(io::keras::keras_snake_case("GRUCell") == "gru_cell");
  CHECK(io::keras::keras_snake_case("Conv2DTranspose") == "conv2d_transpose");
  CHECK(io::keras::keras_snake_case("InputLayer") == "input_layer");
}

TEST_CASE("a Sequential MLP round-trips through .keras, .h5 and both weights files", "[io][keras]") {
  random::set_seed(21);
  models::Sequential model{layers::InputLayer(Shape{6}), layers::Dense(8, {.activation = "relu"}),
                           layers::BatchNormalization(), layers::Dropout(0.5), layers::Dense(3)};
  const Tensor x = random::normal({4, 6});
  check_file_round_trip(model, {x}, "mlp.keras");
  check_file_round_trip(model, {x}, "mlp.h5");

  Scratch scratch("keras_weights");
  const auto expected = values(model.predict(x));
  for (const char* file : {"w.weights.h5", "w.h5"}) {
    model.save_weights(scratch / file);
    random::set_seed(99);  // another initialisation: load_weights must replace all of it
    models::Sequential other{layers::InputLayer(Shape{6}), layers::Dense(8, {.activation = "relu"}),
                             layers::BatchNormalization(), layers::Dropout(0.5), layers::Dense(3)};
    CHECK(values(other.predict(x)) != expected);
    other.load_weights(scratch / file);
    CHECK(values(other.predict(x)) == expected);
  }
}

TEST_CASE("the .keras archive holds Keras 3's config.json, metadata.json and H5IOStore weights", "[io][keras]") {
  random::set_seed(22);
  models::Sequential model{layers::InputLayer(Shape{4}), layers::Dense(3, {.activation = "relu"}), layers::Dense(2),
                           layers::Dense(2)};
  Scratch scratch("keras_layout");
  model.save(scratch / "m.keras");
  const json config = zip_json(scratch / "m.keras", "config.json");
  CHECK(config["module"] == "keras");
  CHECK(config["class_name"] == "Sequential");
  CHECK(config["registered_name"].is_null());
  CHECK(config["build_config"]["input_shape"] == json::array({nullptr, 4}));
  const json& dense = config["config"]["layers"][1];
  CHECK(dense["module"] == "keras.layers");
  CHECK(dense["class_name"] == "Dense");
  CHECK(dense["config"]["dtype"] == json{{"module", "keras"}, {"class_name", "DTypePolicy"},
                                          {"config", {{"name", "float32"}}}, {"registered_name", nullptr}});
  CHECK(dense["config"]["kernel_initializer"] == json{{"module", "keras.initializers"}, {"class_name", "GlorotUniform"},
                                                       {"config", {{"seed", nullptr}}}, {"registered_name", nullptr}});
  CHECK(dense["config"]["bias_initializer"]["class_name"] == "Zeros");
  CHECK(dense["config"]["units"] == 3);
  const json meta = zip_json(scratch / "m.keras", "metadata.json");
  CHECK(meta["keras_version"].get<std::string>().rfind("3.", 0) == 0);
  CHECK(meta.contains("date_saved"));

  // The weights: dense, dense_1, dense_2 by class (not by layer name), kernel then bias.
  const std::string h5bytes = zip_member(scratch / "m.keras", "model.weights.h5");
  auto f = io::hdf5::File::open_image(h5bytes, "test", "model.weights.h5");
  const auto root = f->root();
  CHECK(root.has_group("vars"));
  const auto w = model.get_weights();
  const char* groups[] = {"layers/dense/vars", "layers/dense_1/vars", "layers/dense_2/vars"};
  for (int l = 0; l < 3; ++l) {
    const auto g = root.open_group(groups[l]);
    CHECK(g.children() == std::vector<std::string>{"0", "1"});
    CHECK(values(g.read_dataset("0")) == values(w[2 * l]));
    CHECK(values(g.read_dataset("1")) == values(w[2 * l + 1]));
  }
}

TEST_CASE("the legacy .h5 holds model_config, model_weights, layer_names and weight_names", "[io][keras]") {
  random::set_seed(23);
  const Tensor in = models::Input(Shape{5}, DType::float32, "features");
  const Tensor h = layers::Dense(4, {.activation = "tanh", .name = "hidden"})(in);
  const Tensor out = layers::Dense(1, {.name = "out"})(h);
  models::Model model(in, out, "net");
  Scratch scratch("keras_legacy");
  model.save(scratch / "m.h5");
  auto f = io::hdf5::File::open_read(scratch / "m.h5", "test");
  const auto root = f->root();
  const json mc = json::parse(root.read_string_attr("model_config"));
  CHECK(mc["class_name"] == "Functional");
  CHECK(!mc.contains("module"));
  CHECK(mc["config"]["layers"][0]["class_name"] == "InputLayer");
  CHECK(mc["config"]["layers"][0]["config"]["batch_input_shape"] == json::array({nullptr, 5}));
  // Keras 2's node_data form: [[[layer, node, tensor, kwargs]]].
  CHECK(mc["config"]["layers"][1]["inbound_nodes"] == json::parse(R"([[["features", 0, 0, {}]]])"));
  CHECK(mc["config"]["layers"][1]["config"]["kernel_initializer"] ==
        json{{"class_name", "GlorotUniform"}, {"config", {{"seed", nullptr}}}});
  CHECK(root.read_string_attr("backend") == "tensorflow");
  CHECK(root.read_string_attr("keras_version").rfind("2.", 0) == 0);
  const auto mw = root.open_group("model_weights");
  CHECK(mw.read_string_list_attr("layer_names") == std::vector<std::string>{"features", "hidden", "out"});
  CHECK(mw.open_group("features").read_string_list_attr("weight_names").empty());
  CHECK(mw.open_group("hidden").read_string_list_attr("weight_names") ==
        std::vector<std::string>{"hidden/kernel:0", "hidden/bias:0"});
  CHECK(values(mw.open_group("hidden").read_dataset("hidden/kernel:0")) == values(model.get_weights()[0]));
}

TEST_CASE("functional CNN, recurrent and multi-input models round-trip through .keras and .h5", "[io][keras]") {
  random::set_seed(24);
  {
    const Tensor img = models::Input(Shape{8, 8, 3}, DType::float32, "image");
    Tensor y = layers::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"})(img);
    y = layers::BatchNormalization()(y);
    y = layers::MaxPooling2D({2, 2})(y);
    y = layers::Conv2D(6, 3)(y);
    y = layers::GlobalAveragePooling2D()(y);
    y = layers::Dense(3, {.activation = "softmax"})(y);
    models::Model cnn(img, y, "cnn");
    const Tensor x = random::uniform({2, 8, 8, 3});
    check_file_round_trip(cnn, {x}, "cnn.keras");
    check_file_round_trip(cnn, {x}, "cnn.h5");
  }
  {
    models::Sequential rnn{layers::InputLayer(Shape{7}),
                           layers::Embedding(20, 4),
                           layers::Bidirectional(layers::LSTM(5, {.return_sequences = true})),
                           layers::TimeDistributed(layers::Dense(3)),
                           layers::GRU(4, {.return_sequences = true}),
                           layers::SimpleRNN(3),
                           layers::Dense(2)};
    const Tensor ids = constant(std::vector<float>{1, 5, 7, 2, 0, 0, 0, 3, 3, 19, 4, 8, 1, 0}, Shape{2, 7});
    check_file_round_trip(rnn, {ids}, "rnn.keras");
    check_file_round_trip(rnn, {ids}, "rnn.h5");
    // The RNN layers' variables live in their cells, as Keras 3 stores them.
    Scratch scratch("keras_rnn_layout");
    rnn.save_weights(scratch / "r.weights.h5");
    auto f = io::hdf5::File::open_read(scratch / "r.weights.h5", "test");
    const auto root = f->root();
    CHECK(root.open_group("layers/bidirectional/forward_layer/cell/vars").children().size() == 3);
    CHECK(root.open_group("layers/bidirectional/backward_layer/cell/vars").children().size() == 3);
    CHECK(root.open_group("layers/time_distributed/layer/vars").children().size() == 2);
    CHECK(root.open_group("layers/gru/cell/vars").children().size() == 3);
    CHECK(root.open_group("layers/simple_rnn/cell/vars").children().size() == 3);
    CHECK(root.open_group("layers/embedding/vars").children().size() == 1);
  }
  {
    const Tensor a = models::Input(Shape{6}, DType::float32, "a");
    const Tensor b = models::Input(Shape{6}, DType::float32, "b");
    const Tensor s = layers::Add()({layers::Dense(6)(a), b});
    const Tensor c = layers::Concatenate()({s, a});
    const Tensor out = layers::Dense(2)(layers::LayerNormalization()(c));
    models::Model two({a, b}, {out}, "two_inputs");
    const std::vector<Tensor> x = {random::normal({3, 6}), random::normal({3, 6})};
    check_file_round_trip(two, x, "two.keras");
    check_file_round_trip(two, x, "two.h5");
  }
}

TEST_CASE("a compiled model keeps its optimizer, loss and optimizer state through .keras and .h5", "[io][keras]") {
  for (const char* file : {"c.keras", "c.h5"}) {
    random::set_seed(25);
    models::Sequential model{layers::InputLayer(Shape{3}), layers::Dense(4, {.activation = "relu"}), layers::Dense(1)};
    model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
    const Tensor x = random::normal({16, 3}), y = random::normal({16, 1});
    model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
    Scratch scratch(std::string("keras_compiled_") + file);
    model.save(scratch / file);
    auto loaded = models::load_model(scratch / file);
    REQUIRE(loaded->compiled());
    CHECK(loaded->optimizer()->class_name() == "Adam");
    // The optimizer state came along: one more epoch gives the same weights in both.
    model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
    loaded->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
    const auto a = model.get_weights(), b = loaded->get_weights();
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(values(a[i]) == values(b[i]));
    auto plain = models::load_model(scratch / file, false);
    CHECK(!plain->compiled());
  }
}

TEST_CASE("bad Keras files are IOErrors naming the file and the object", "[io][keras]") {
  random::set_seed(26);
  Scratch scratch("keras_errors");
  models::Sequential model{layers::InputLayer(Shape{4}), layers::Dense(3), layers::Dense(2)};
  model.save(scratch / "m.keras");
  model.save_weights(scratch / "w.weights.h5");

  write_all(scratch / "junk.keras", "not a zip at all");
  CHECK_THROWS_AS(models::load_model(scratch / "junk.keras"), IOError);
  write_all(scratch / "junk.h5", "not an HDF5 file");
  CHECK_THROWS_WITH(models::load_model(scratch / "junk.h5"), Contains("junk.h5") && Contains("not an HDF5 file"));
  const std::string h5 = read_all(scratch / "w.weights.h5");
  write_all(scratch / "cut.weights.h5", h5.substr(0, h5.size() / 2));
  CHECK_THROWS_AS(model.load_weights(scratch / "cut.weights.h5"), IOError);

  // A weights file of another architecture: the group and both counts are named.
  models::Sequential wider{layers::InputLayer(Shape{4}), layers::Dense(5), layers::Dense(2)};
  CHECK_THROWS_WITH(wider.load_weights(scratch / "w.weights.h5"), Contains("layers/dense/vars/0") && Contains("[4,5]"));
  models::Sequential deeper{layers::InputLayer(Shape{4}), layers::Dense(3), layers::Dense(2), layers::Dense(2)};
  CHECK_THROWS_WITH(deeper.load_weights(scratch / "w.weights.h5"), Contains("layers/dense_2/vars") && Contains("missing"));
  // The legacy layout counts layers with weights.
  model.save_weights(scratch / "w.h5");
  CHECK_THROWS_WITH(deeper.load_weights(scratch / "w.h5"), Contains("w.h5") && Contains("2 layers") && Contains("3 layers"));

  // An unknown class in a Keras 3 config names the class.
  json config = zip_json(scratch / "m.keras", "config.json");
  config["config"]["layers"][1]["class_name"] = "NoSuchLayer";
  const std::string weights = zip_member(scratch / "m.keras", "model.weights.h5");
  const std::string text = config.dump();
  write_all(scratch / "unknown.keras",
            io::zip::write_archive({{"config.json", text, false}, {"model.weights.h5", weights, false}}, "test", "unknown.keras"));
  CHECK_THROWS_WITH(models::load_model(scratch / "unknown.keras"), Contains("NoSuchLayer") && Contains("unknown.keras"));
  // No weights member while the model has weights.
  write_all(scratch / "noweights.keras", io::zip::write_archive({{"config.json", zip_member(scratch / "m.keras", "config.json"), false}}, "test", "x"));
  CHECK_THROWS_WITH(models::load_model(scratch / "noweights.keras"), Contains("model.weights.h5"));
  // A legacy weights file given to load_model.
  CHECK_THROWS_WITH(models::load_model(scratch / "w.h5"), Contains("model_config"));
}

TEST_CASE("Keras 2 (tf.keras) configs translate: Model, batch_input_shape, node_data, VarianceScaling", "[io][keras]") {
  const json legacy = json::parse(R"({"class_name": "Model", "config": {"name": "m", "layers": [
      {"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
       "config": {"batch_input_shape": [null, 3], "dtype": "float32", "name": "x"}},
      {"class_name": "Dense", "name": "d", "inbound_nodes": [[["x", 0, 0, {}]]],
       "config": {"name": "d", "units": 2, "kernel_initializer": {"class_name": "VarianceScaling",
                  "config": {"scale": 2.0, "mode": "fan_in", "distribution": "normal", "seed": null}}}},
      {"class_name": "BatchNormalization", "name": "bn", "inbound_nodes": [[["d", 0, 0, {}]]],
       "config": {"name": "bn", "axis": [1]}}],
      "input_layers": [["x", 0, 0]], "output_layers": [["bn", 0, 0]]}})");
  const json k = io::keras::from_keras2(legacy);
  CHECK(k["class_name"] == "Functional");
  CHECK(k["config"]["layers"][0]["config"]["batch_shape"] == json::array({nullptr, 3}));
  CHECK(k["config"]["layers"][1]["config"]["kernel_initializer"] == "he_normal");
  CHECK(k["config"]["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"] == json::array({"x", 0, 0}));
  CHECK(k["config"]["layers"][2]["config"]["axis"] == 1);
  auto model = std::dynamic_pointer_cast<models::Model>(layers::from_config("Functional", k["config"]));
  REQUIRE(model);
  CHECK(model->count_params() == 3 * 2 + 2 + 4 * 2);
  // A Keras 2 Sequential whose first layer carries batch_input_shape gets an InputLayer; Keras
  // 2's hard_sigmoid (clip(0.2 x + 0.5, 0, 1), standalone Keras 2's LSTM default) is keel's
  // hard_sigmoid_keras2.
  const json seq = io::keras::from_keras2(json::parse(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
      {"class_name": "Dense", "config": {"name": "d", "units": 2, "batch_input_shape": [null, 5],
                                         "activation": "hard_sigmoid"}}]}})"));
  CHECK(seq["config"]["layers"][1]["config"]["activation"] == "hard_sigmoid_keras2");
  auto s = std::dynamic_pointer_cast<models::Model>(layers::from_config("Sequential", seq["config"]));
  REQUIRE(s);
  CHECK(s->count_params() == 12);
  const auto p = s->predict(constant(std::vector<float>{-5.f, 0.f, 1.f, 2.f, 3.f}, {1, 5})).to_vector<float>();
  for (float v : p) CHECK((v >= 0.f && v <= 1.f));
  // Written back, it is Keras 2's hard_sigmoid again; keel's (Keras 3's) hard_sigmoid has no
  // Keras 2 name and is refused rather than saved as the other function.
  const json back = io::keras::to_keras2(layers::serialize(*s));
  CHECK(back.dump().find("\"activation\":\"hard_sigmoid\"") != std::string::npos);
  models::Sequential k3({layers::InputLayer(Shape{3}), layers::Dense(2, {.activation = "hard_sigmoid"})});
  CHECK_THROWS_WITH(io::keras::to_keras2(layers::serialize(k3)), Contains("has no tf.keras 2 equivalent"));
  // Malformed node data is a ValueError naming the layer.
  json bad = legacy;
  bad["config"]["layers"][1]["inbound_nodes"] = json::parse(R"([[["x"]]])");
  CHECK_THROWS_WITH(io::keras::from_keras2(bad), Contains("layer 'd'"));
}
