// Whole-model saving: Model::save / models::load_model round trips (folder and .keel) for
// Sequential, functional, recurrent, normalisation, custom-layer and subclassed models; the layer
// registry's factories; compile state; damaged files; crash safety.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "killed_child.hpp"
#include "scratch.hpp"
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using namespace keel;
using keel_test::Scratch;
using keel_test::read_all;
using keel_test::write_all;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

std::vector<std::string> layer_names(const models::Model& m) {
  std::vector<std::string> out;
  for (const auto& l : m.layers()) out.push_back(l->name() + ":" + l->class_name());
  return out;
}

// Saves `model` to a folder and to a .keel file, loads both, and checks that each loaded model
// has the same layers and gives bit-identical outputs on `inputs`.
void check_round_trip(models::Model& model, const std::vector<Tensor>& inputs, const std::string& tag) {
  Scratch scratch(tag);
  const Tensor expected = inputs.size() == 1 ? model(inputs[0]) : model(inputs);
  for (const std::string path : {scratch / "model_dir", scratch / "model.keel"}) {
    INFO(path);
    model.save(path);
    CHECK((path.ends_with(".keel") ? fs::is_regular_file(path) : fs::is_directory(path)));
    const auto loaded = models::load_model(path);
    REQUIRE(loaded);
    CHECK(loaded->name() == model.name());
    CHECK(loaded->class_name() == model.class_name());
    CHECK(layer_names(*loaded) == layer_names(model));
    REQUIRE(loaded->weights().size() == model.weights().size());
    for (std::size_t i = 0; i < model.weights().size(); ++i) {
      CHECK(loaded->weights()[i]->name() == model.weights()[i]->name());
      CHECK(values(loaded->weights()[i]->value()) == values(model.weights()[i]->value()));
    }
    const Tensor got = inputs.size() == 1 ? (*loaded)(inputs[0]) : (*loaded)(inputs);
    CHECK(got.shape() == expected.shape());
    CHECK(values(got) == values(expected));
  }
  // Nothing but the two saved models is left behind (no temporaries).
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(scratch.dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"model.keel", "model_dir"});
}

// ---- a custom layer and a subclassed model, registered by name ----

class Scale : public layers::Layer {
 public:
  explicit Scale(double factor = 1.0, std::string name = "") : Layer(std::move(name)), factor_(factor) {}
  KEEL_LAYER_BOILERPLATE(Scale)
  void build(const Shape& s) override { w_ = &add_weight("w", Shape{s[s.rank() - 1]}, "random_normal"); }
  Tensor call(const Tensor& x, bool) override { return x * w_->value() * factor_; }
  nlohmann::json get_config() const override {
    auto c = Layer::get_config();
    c["factor"] = factor_;
    return c;
  }
  static std::shared_ptr<Scale> from_config(const nlohmann::json& c) {
    return std::make_shared<Scale>(c.at("factor").get<double>());
  }

 private:
  double factor_;
  Variable* w_ = nullptr;
};
KEEL_REGISTER_LAYER(Scale);

class Unregistered : public layers::Layer {
 public:
  KEEL_LAYER_BOILERPLATE(Unregistered)
};

class TinyNet : public models::Model {
 public:
  explicit TinyNet(int units = 4, std::string name = "tiny_net") : Model(std::move(name)), units_(units) {
    hidden_ = track(std::make_shared<layers::Dense>(units, layers::DenseOptions{.activation = "relu"}));
    out_ = track(std::make_shared<layers::Dense>(2));
  }
  KEEL_LAYER_BOILERPLATE(TinyNet)
  Tensor call(const Tensor& x, bool training) override { return (*out_)((*hidden_)(x, training), training); }
  nlohmann::json get_config() const override {
    auto c = Layer::get_config();
    c["units"] = units_;
    return c;
  }
  static std::shared_ptr<TinyNet> from_config(const nlohmann::json& c) {
    return std::make_shared<TinyNet>(c.at("units").get<int>(), c.at("name").get<std::string>());
  }

 private:
  int units_;
  std::shared_ptr<layers::Dense> hidden_, out_;
};
KEEL_REGISTER_LAYER(TinyNet);

std::shared_ptr<models::Sequential> small_classifier() {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{6}), std::make_shared<layers::Dense>(8, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dense>(3)});
  return m;
}

}  // namespace

TEST_CASE("a Sequential CNN round-trips through a folder and a .keel file and predicts identically", "[saving]") {
  random::set_seed(11);
  models::Sequential model{layers::InputLayer(Shape{8, 8, 3}),
                           layers::Rescaling(1.0 / 255),
                           layers::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"}),
                           layers::DepthwiseConv2D(3, {.padding = "same", .depth_multiplier = 2}),
                           layers::MaxPooling2D({2, 2}),
                           layers::Conv2D(6, 3, {.kernel_regularizer = regularizers::l2(0.001)}),
                           layers::AveragePooling2D(1),
                           layers::Flatten(),
                           layers::Dropout(0.25),
                           layers::Dense(5, {.activation = "softmax"})};
  check_round_trip(model, {random::uniform({2, 8, 8, 3}, 0, 255)}, "cnn");
}

TEST_CASE("a Sequential built by calling it on data (no InputLayer) round-trips", "[saving]") {
  random::set_seed(12);
  models::Sequential model{layers::Dense(5, {.activation = "tanh"}), layers::Dense(2)};
  const Tensor x = random::normal({3, 4});
  model(x);
  check_round_trip(model, {x}, "seq_no_input");
}

TEST_CASE("a functional model with two inputs, a residual Add and a shared layer round-trips", "[saving]") {
  random::set_seed(13);
  const Tensor a = models::Input(Shape{16}, DType::float32, "features");
  const Tensor b = models::Input(Shape{8}, DType::float32, "extra");
  auto shared = std::make_shared<layers::Dense>(16, layers::DenseOptions{.activation = "relu", .name = "shared"});
  const Tensor x = (*shared)(a);
  const Tensor y = layers::Dense(16)(b);
  const Tensor s = layers::Add()({x, y});
  const Tensor r = layers::Add({.name = "residual"})({s, a});  // the skip connection
  const Tensor z = (*shared)(r);                                 // the shared layer's second call
  const Tensor c = layers::Concatenate()({z, b});
  const Tensor out = layers::Dense(3, {.name = "head"})(c);
  models::Model model({a, b}, {out}, "two_inputs");
  check_round_trip(model, {random::normal({4, 16}), random::normal({4, 8})}, "functional");

  // The graph is recorded Keras-style: each layer's calls with their inputs by name and call index.
  const auto config = model.get_config();
  CHECK(config["input_layers"] == nlohmann::json::parse(R"([["features", 0, 0], ["extra", 0, 0]])"));
  CHECK(config["output_layers"] == nlohmann::json::parse(R"([["head", 0, 0]])"));
  bool found = false;
  for (const auto& l : config["layers"])
    if (l["name"] == "shared") {
      found = true;
      REQUIRE(l["inbound_nodes"].size() == 2);
      CHECK(l["inbound_nodes"][1]["args"][0]["config"]["keras_history"] ==
            nlohmann::json::parse(R"(["residual", 0, 0])"));
    }
  CHECK(found);
}

TEST_CASE("a functional attention block (MultiHeadAttention, LayerNormalization, Conv1D) round-trips", "[saving]") {
  random::set_seed(14);
  const Tensor x = models::Input(Shape{6, 8});
  const Tensor att = layers::MultiHeadAttention(2, 4)({x, x});
  const Tensor n = layers::LayerNormalization()(layers::Add()({x, att}));
  const Tensor c = layers::Conv1D(4, 3, {.padding = "causal", .activation = "gelu"})(n);
  const Tensor out = layers::Dense(2)(layers::Flatten()(c));
  models::Model model(x, out);
  check_round_trip(model, {random::normal({3, 6, 8})}, "attention");
}

TEST_CASE("recurrent models (Embedding with mask, LSTM, Bidirectional, TimeDistributed, GRU) round-trip", "[saving]") {
  random::set_seed(15);
  models::Sequential model{layers::InputLayer(Shape{7}),
                           layers::Embedding(20, 4, {.mask_zero = true}),
                           layers::Bidirectional(layers::LSTM(5, {.return_sequences = true})),
                           layers::TimeDistributed(layers::Dense(3)),
                           layers::GRU(4, {.return_sequences = true}),
                           layers::SimpleRNN(3),
                           layers::Dense(2)};
  const Tensor ids = constant(std::vector<float>{1, 5, 7, 2, 0, 0, 0, 3, 3, 19, 4, 8, 1, 0}, Shape{2, 7});
  check_round_trip(model, {ids}, "recurrent");
}

TEST_CASE("BatchNormalization's moving statistics survive save and load", "[saving]") {
  random::set_seed(16);
  models::Sequential model{layers::InputLayer(Shape{5}), layers::Dense(6),
                           layers::BatchNormalization({.momentum = 0.5}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  model.fit(random::normal({32, 5}, 3, 2), random::normal({32, 1}), {.batch_size = 8, .epochs = 2, .verbose = 0});
  auto& bn = dynamic_cast<layers::BatchNormalization&>(*model.layers()[1]);
  REQUIRE(values(bn.moving_mean().value()) != std::vector<float>(6, 0.0f));  // training moved them
  check_round_trip(model, {random::normal({4, 5}, 3, 2)}, "batchnorm");
  Scratch scratch("batchnorm_stats");
  model.save(scratch / "bn.keel");
  const auto loaded = models::load_model(scratch / "bn.keel");
  auto& bn2 = dynamic_cast<layers::BatchNormalization&>(*loaded->layers()[1]);
  CHECK(values(bn2.moving_mean().value()) == values(bn.moving_mean().value()));
  CHECK(values(bn2.moving_variance().value()) == values(bn.moving_variance().value()));
  CHECK_FALSE(bn2.moving_mean().trainable());
}

TEST_CASE("a custom layer registered with KEEL_REGISTER_LAYER round-trips", "[saving][registry]") {
  random::set_seed(17);
  CHECK(layers::is_registered("Scale"));
  models::Sequential model{layers::InputLayer(Shape{3}), Scale(2.5), layers::Dense(2)};
  check_round_trip(model, {random::normal({2, 3})}, "custom");
  Scratch scratch("custom_config");
  model.save(scratch / "m");
  const auto loaded = models::load_model(scratch / "m");
  CHECK(loaded->layers()[0]->get_config()["factor"] == 2.5);
}

TEST_CASE("a model holding an unregistered custom layer fails to load with an IOError naming the class", "[saving][registry]") {
  models::Sequential model{layers::InputLayer(Shape{3}), Unregistered(), layers::Dense(2)};
  Scratch scratch("unregistered");
  model.save(scratch / "m.keel");
  CHECK_THROWS_AS(models::load_model(scratch / "m.keel"), IOError);
  CHECK_THROWS_WITH(models::load_model(scratch / "m.keel"),
                    Contains("m.keel member 'config.json'") && Contains("'Unregistered'") && Contains("KEEL_REGISTER_LAYER"));
}

TEST_CASE("a subclassed model loads once its class is registered", "[saving][registry]") {
  random::set_seed(18);
  TinyNet model(5);
  const Tensor x = random::normal({3, 4});
  model(x);
  Scratch scratch("subclassed");
  for (const std::string path : {scratch / "net", scratch / "net.keel"}) {
    model.save(path);
    const auto loaded = models::load_model(path);
    REQUIRE(dynamic_cast<TinyNet*>(loaded.get()));
    CHECK(loaded->name() == "tiny_net");
    CHECK(values((*loaded)(x)) == values(model(x)));
  }
}

TEST_CASE("the registry rebuilds every built-in layer from its config", "[saving][registry]") {
  using namespace layers;
  std::vector<std::shared_ptr<Layer>> all{
      std::make_shared<InputLayer>(Shape{4, 2}),
      std::make_shared<Dense>(7, DenseOptions{.activation = "relu", .use_bias = false, .kernel_initializer = "he_normal",
                                              .kernel_regularizer = regularizers::l2(0.02),
                                              .activity_regularizer = regularizers::l1_l2(0.1, 0.2)}),
      std::make_shared<Activation>("tanh"),
      std::make_shared<ReLU>(ReLUOptions{.max_value = 6.0, .negative_slope = 0.1, .threshold = 0.5}),
      std::make_shared<LeakyReLU>(LeakyReLUOptions{.negative_slope = 0.2}),
      std::make_shared<Softmax>(SoftmaxOptions{.axis = 1}),
      std::make_shared<Flatten>(),
      std::make_shared<Reshape>(Shape{-1, 4}),
      std::make_shared<Permute>(std::vector<int>{2, 1}),
      std::make_shared<Dropout>(0.25, DropoutOptions{.noise_shape = {-1, 1, 4}, .seed = 7}),
      std::make_shared<Add>(),
      std::make_shared<Multiply>(),
      std::make_shared<Concatenate>(ConcatenateOptions{.axis = 1}),
      std::make_shared<Rescaling>(1.0 / 255, RescalingOptions{.offset = -1}),
      std::make_shared<Embedding>(10, 3, EmbeddingOptions{.mask_zero = true, .input_length = 5}),
      std::make_shared<Conv1D>(4, 3, Conv1DOptions{.padding = "causal", .dilation_rate = 2, .activation = "gelu"}),
      std::make_shared<Conv2D>(8, std::array<int, 2>{3, 2},
                               Conv2DOptions{.strides = {2, 1}, .padding = "same", .use_bias = false,
                                             .bias_regularizer = "l1"}),
      std::make_shared<Conv2DTranspose>(4, 3, Conv2DTransposeOptions{.strides = {2, 2}, .output_padding = {1, 1}}),
      std::make_shared<DepthwiseConv2D>(3, DepthwiseConv2DOptions{.padding = "same", .depth_multiplier = 2}),
      std::make_shared<MaxPooling2D>(std::array<int, 2>{3, 3}, MaxPooling2DOptions{.strides = {2, 2}, .padding = "same"}),
      std::make_shared<AveragePooling2D>(2),
      std::make_shared<GlobalAveragePooling2D>(GlobalAveragePooling2DOptions{.keepdims = true}),
      std::make_shared<GlobalMaxPooling2D>(),
      std::make_shared<BatchNormalization>(BatchNormalizationOptions{.axis = 1, .momentum = 0.9, .epsilon = 1e-5,
                                                                     .center = false}),
      std::make_shared<LayerNormalization>(LayerNormalizationOptions{.axis = {1, 2}, .epsilon = 1e-6}),
      std::make_shared<SimpleRNN>(5, SimpleRNNOptions{.activation = "relu", .dropout = 0.1, .return_sequences = true,
                                                      .seed = 3}),
      std::make_shared<LSTM>(6, LSTMOptions{.unit_forget_bias = false, .return_state = true, .go_backwards = true}),
      std::make_shared<GRU>(4, GRUOptions{.recurrent_dropout = 0.2, .reset_after = false}),
      std::make_shared<Bidirectional>(LSTM(3, {.return_sequences = true}), BidirectionalOptions{.merge_mode = "sum"}),
      std::make_shared<TimeDistributed>(Dense(2)),
      std::make_shared<MultiHeadAttention>(2, 4, MultiHeadAttentionOptions{.value_dim = 3, .dropout = 0.1,
                                                                          .output_shape = {5}, .seed = 1}),
      std::make_shared<RandomFlip>("horizontal", RandomFlipOptions{.seed = 3}),
      std::make_shared<RandomCrop>(4, 5),
      std::make_shared<RandomTranslation>(TranslationFactor(-0.2, 0.3), 0.1,
                                          RandomTranslationOptions{.fill_mode = "constant", .fill_value = 0.5}),
  };
  std::set<std::string> classes;
  for (const auto& layer : all) {
    INFO(layer->class_name());
    classes.insert(layer->class_name());
    const nlohmann::json serialized = layers::serialize(*layer);
    const auto rebuilt = layers::deserialize(nlohmann::json::parse(serialized.dump()));  // through text
    REQUIRE(rebuilt);
    CHECK(rebuilt->class_name() == layer->class_name());
    CHECK(rebuilt->get_config() == layer->get_config());
  }
  // Every layer class keel has, and the model classes, are registered.
  const auto registered = layers::registered_layers();
  for (const auto& c : classes) CHECK(std::count(registered.begin(), registered.end(), c) == 1);
  CHECK(classes.size() == 34);
  CHECK(layers::is_registered("Sequential"));
  CHECK(layers::is_registered("Functional"));
}

TEST_CASE("a layer config with a key of the wrong type is a ValueError naming the class and the key", "[saving][registry]") {
  CHECK_THROWS_WITH(layers::from_config("Dense", {{"units", "many"}}), Contains("Dense") && Contains("'units'"));
  CHECK_THROWS_WITH(layers::from_config("Conv2D", {{"filters", 3}}), Contains("kernel_size"));
  CHECK_THROWS_WITH(layers::from_config("Dense", {{"units", 3}, {"kernel_regularizer", {{"class_name", "L3"}}}}),
                    Contains("kernel_regularizer"));
  CHECK_THROWS_WITH(layers::from_config("Dense", {{"units", 3}, {"activation", "no_such_fn"}}), Contains("activation"));
  CHECK_THROWS_WITH(layers::from_config("NoSuchLayer", nlohmann::json::object()), Contains("'NoSuchLayer'"));
  CHECK_THROWS_AS(layers::from_config("Dense", {{"units", 1e30}}), ValueError);
}

TEST_CASE("compile state is restored: training on after loading matches training on without saving", "[saving][compile]") {
  random::set_seed(19);
  const Tensor x = random::normal({40, 6});
  const Tensor y = random::uniform_int({40}, 0, 3);
  auto model = small_classifier();
  model->compile({.optimizer = optimizers::Adam(0.01),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy", metrics::SparseTopKCategoricalAccuracy({.k = 2, .name = "top2"})}});
  model->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0});
  Scratch scratch("compile");
  model->save(scratch / "m.keel");
  const auto loaded = models::load_model(scratch / "m.keel");
  REQUIRE(loaded->compiled());
  CHECK(loaded->optimizer()->class_name() == "Adam");
  CHECK(loaded->optimizer()->iterations() == model->optimizer()->iterations());
  CHECK(loaded->optimizer()->learning_rate() == Approx(0.01));
  CHECK(loaded->loss()->class_name() == "SparseCategoricalCrossentropy");
  CHECK(loaded->loss()->get_config() == model->loss()->get_config());
  // The optimizer's slots came back too: one more epoch from the same random state ends equal.
  // (fit shuffles from the model's own stream, which a loaded model has anew: give it the
  // original's position)
  loaded->seed_generator().set_state(model->seed_generator().state());
  const auto h1 = model->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  const auto h2 = loaded->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  CHECK(h2.history.count("top2") == 1);
  CHECK(h1.history.at("loss") == h2.history.at("loss"));
  for (std::size_t i = 0; i < model->weights().size(); ++i)
    CHECK(values(loaded->weights()[i]->value()) == values(model->weights()[i]->value()));

  // compile = false leaves it uncompiled.
  CHECK_FALSE(models::load_model(scratch / "m.keel", false)->compiled());
}

TEST_CASE("loading a model draws no random numbers", "[saving]") {
  auto model = small_classifier();
  Scratch scratch("rng");
  model->save(scratch / "m");
  random::set_seed(5);
  const auto before = random::get_state();
  models::load_model(scratch / "m");
  const auto after = random::get_state();
  CHECK(before.key == after.key);
  CHECK(before.counter == after.counter);
}

TEST_CASE("a truncated or corrupted .keel file is an IOError naming the file", "[saving][errors]") {
  auto model = small_classifier();
  Scratch scratch("corrupt_keel");
  const std::string good = scratch / "good.keel";
  model->save(good);
  const std::string bytes = read_all(good);
  const std::string bad = scratch / "bad.keel";
  for (std::size_t cut : {std::size_t{0}, std::size_t{10}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    INFO("truncated to " << cut);
    write_all(bad, bytes.substr(0, cut));
    CHECK_THROWS_AS(models::load_model(bad), IOError);
    CHECK_THROWS_WITH(models::load_model(bad), Contains(bad));
  }
  // A flipped byte inside the weights member: its CRC-32 no longer matches.
  std::string flipped = bytes;
  const std::size_t at = flipped.find("\"data_offsets\"");
  REQUIRE(at != std::string::npos);
  flipped[at + 2] = 'X';
  write_all(bad, flipped);
  CHECK_THROWS_WITH(models::load_model(bad), Contains(bad) && Contains("model.safetensors") && Contains("CRC"));
  // Not a zip at all.
  write_all(bad, "{\"class_name\": \"Sequential\"}");
  CHECK_THROWS_WITH(models::load_model(bad), Contains(bad) && Contains("zip"));
  CHECK_THROWS_WITH(models::load_model(scratch / "missing.keel"), Contains("missing.keel"));
}

namespace {

// A .keel written by hand (an independent stored-zip writer) from member bytes, so that members
// can be damaged behind a valid archive.
std::uint32_t crc32_of(const std::string& s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    const std::uint64_t offset = out.size();
    const std::uint32_t crc = crc32_of(data);
    put(out, 0x04034b50, 4), put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 4);
    put(out, crc, 4), put(out, data.size(), 4), put(out, data.size(), 4), put(out, name.size(), 2), put(out, 0, 2);
    out += name + data;
    put(central, 0x02014b50, 4), put(central, 20, 2), put(central, 20, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 4), put(central, crc, 4), put(central, data.size(), 4), put(central, data.size(), 4);
    put(central, name.size(), 2), put(central, 0, 6);  // extra and comment lengths, disk number
    put(central, 0, 2), put(central, 0, 4);            // internal and external attributes
    put(central, offset, 4);
    central += name;
  }
  const std::uint64_t cd = out.size();
  out += central;
  put(out, 0x06054b50, 4), put(out, 0, 4), put(out, members.size(), 2), put(out, members.size(), 2);
  put(out, central.size(), 4), put(out, cd, 4), put(out, 0, 2);
  return out;
}

}  // namespace

TEST_CASE("a .keel written by an independent zip writer loads, and its damaged members are named", "[saving][errors]") {
  random::set_seed(20);
  auto model = small_classifier();
  Scratch scratch("reference_zip");
  model->save(scratch / "dir");
  const std::string config = read_all(scratch / "dir/config.json");
  const std::string weights = read_all(scratch / "dir/model.safetensors");
  const std::string path = scratch / "hand.keel";

  write_all(path, stored_zip({{"config.json", config}, {"model.safetensors", weights}}));
  const Tensor x = random::normal({2, 6});
  CHECK(values((*models::load_model(path))(x)) == values((*model)(x)));

  write_all(path, stored_zip({{"config.json", config}, {"model.safetensors", weights.substr(0, weights.size() - 4)}}));
  CHECK_THROWS_WITH(models::load_model(path), Contains(path + " member 'model.safetensors'"));

  auto j = nlohmann::json::parse(config);
  j["config"]["layers"][1]["config"]["units"] = "eight";
  write_all(path, stored_zip({{"config.json", j.dump()}, {"model.safetensors", weights}}));
  CHECK_THROWS_WITH(models::load_model(path), Contains(path + " member 'config.json'") && Contains("layers[1]") &&
                                                   Contains("'units'"));

  write_all(path, stored_zip({{"model.safetensors", weights}}));
  CHECK_THROWS_WITH(models::load_model(path), Contains(path) && Contains("config.json"));
  write_all(path, stored_zip({{"config.json", config}, {"config.json", config}, {"model.safetensors", weights}}));
  CHECK_THROWS_WITH(models::load_model(path), Contains("duplicate member"));
}

TEST_CASE("a config.json with a bad field is an IOError naming the file and the field", "[saving][errors]") {
  random::set_seed(21);
  Scratch scratch("bad_config");
  const Tensor a = models::Input(Shape{4}, DType::float32, "in");
  const Tensor h = layers::Dense(5, {.name = "hidden"})(a);
  const Tensor out = layers::Dense(2, {.name = "out"})(layers::Add()({h, h}));
  models::Model model(a, out);
  model.compile({.optimizer = "sgd", .loss = "mse"});
  const std::string dir = scratch / "m";
  model.save(dir);
  const std::string file = dir + "/config.json";
  const std::string text = read_all(file);
  const auto original = nlohmann::json::parse(text);

  // `parts` must all appear in the error, and so must the file named (config.json by default).
  const auto expect = [&](const nlohmann::json& j, const std::vector<std::string>& parts,
                          const std::string& named = "") {
    write_all(file, j.dump());
    INFO(j.dump().substr(0, 200));
    try {
      models::load_model(dir);
      FAIL("load_model accepted a bad config");
    } catch (const IOError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Contains(named.empty() ? file : named));
      for (const auto& p : parts) CHECK_THAT(what, Contains(p));
    }
  };
  auto j = original;
  j["config"]["layers"][1]["config"]["units"] = -3;  // "hidden"
  expect(j, {"layers[1] ('hidden')", "units"});
  j = original;
  j["config"].erase("layers");
  expect(j, {"'layers'"});
  j = original;
  j["config"]["layers"][1]["class_name"] = "Nope";
  expect(j, {"layers[1]", "'Nope'"});
  j = original;
  j["config"]["layers"][2]["inbound_nodes"][0]["args"][0][0]["config"]["keras_history"][0] = "ghost";
  expect(j, {"inbound_nodes[0]", "ghost"});
  j = original;
  j["config"]["output_layers"] = nlohmann::json::parse(R"([["out", 7, 0]])");
  expect(j, {"output_layers"});
  j = original;
  j["config"]["layers"][1]["config"]["units"] = 6;  // the weights file no longer fits the model
  expect(j, {}, dir + "/model.safetensors");
  j = original;
  j["compile_config"]["optimizer"]["class_name"] = "Nope";
  expect(j, {"compile_config.optimizer"});
  j = original;
  j["class_name"] = 7;
  expect(j, {"class_name"});

  write_all(file, text.substr(0, text.size() / 2));
  CHECK_THROWS_WITH(models::load_model(dir), Contains(file) && Contains("not valid JSON"));
  write_all(file, text);
  CHECK_NOTHROW(models::load_model(dir));
  // A weights file that does not match: its name and the tensor are named.
  fs::remove(dir + "/model.safetensors");
  io::save_safetensors(dir + "/model.safetensors", {{"hidden/kernel", zeros({4, 5})}});
  CHECK_THROWS_WITH(models::load_model(dir), Contains("model.safetensors"));
}

TEST_CASE("save refuses to replace a folder that is not a saved model", "[saving][errors]") {
  auto model = small_classifier();
  Scratch scratch("foreign");
  const std::string dir = scratch / "photos";
  fs::create_directories(dir);
  write_all(dir + "/holiday.jpg", "not a model");
  CHECK_THROWS_WITH(model->save(dir), Contains("holiday.jpg"));
  CHECK(read_all(dir + "/holiday.jpg") == "not a model");
  // A saved model folder is replaced.
  model->save(scratch / "m");
  CHECK_NOTHROW(model->save(scratch / "m"));
  CHECK(fs::exists(scratch / "m/config.json"));
}

TEST_CASE("a process killed during a large save leaves the previous model loadable", "[saving][crash]") {
  random::set_seed(22);
  const auto make = [] {
    return std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
        std::make_shared<layers::InputLayer>(Shape{1024}), std::make_shared<layers::Dense>(4096),
        std::make_shared<layers::Dense>(4)});
  };
  const auto old_model = make();
  const auto new_model = make();  // other weights: 17 MB of them
  const Tensor x = random::normal({2, 1024});
  const auto old_out = values((*old_model)(x));
  const auto new_out = values((*new_model)(x));
  REQUIRE(old_out != new_out);
  Scratch scratch("crash");
  int interrupted = 0;
  for (const std::string path : {scratch / "big.keel", scratch / "big_dir"}) {
    old_model->save(path);
    for (int delay_ms : {40, 150, 400}) {
      INFO(path << ", killed after " << delay_ms << " ms");
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        // The child saves the other model over the file again and again until it is killed.
        try {
          for (;;) new_model->save(path);
        } catch (...) {
        }
        ::_exit(1);
      }
      ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
      const int status = keel_test::kill_and_reap(pid);
      CHECK(WIFSIGNALED(status));
      // Whatever moment the kill hit, the path holds a whole model: the previous or the new one.
      const auto loaded = models::load_model(path);
      const auto out = values((*loaded)(x));
      CHECK((out == old_out || out == new_out));
      for (const auto& e : fs::directory_iterator(scratch.dir))
        if (e.path().filename().string().find(".tmp-") != std::string::npos ||
            e.path().filename().string().find(".parts-") != std::string::npos)
          ++interrupted;  // a save was cut short: its temporary is left, the model is not touched
    }
  }
  INFO("temporaries left by interrupted saves: " << interrupted);
  CHECK(interrupted > 0);  // at least one kill landed in the middle of a save
}

TEST_CASE("a saved model whose optimizer state lacks a slot, or has no state at all, is an IOError naming it",
          "[saving][errors][compile]") {
  random::set_seed(23);
  auto model = small_classifier();
  model->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9}), .loss = "mse"});
  model->fit(random::normal({8, 6}), random::normal({8, 3}), {.batch_size = 4, .epochs = 1, .verbose = 0});
  Scratch scratch("slots");
  const std::string dir = scratch / "m";
  model->save(dir);
  const std::string opt = dir + "/optimizer.safetensors";
  auto state = io::load_safetensors(opt);
  const auto meta = io::load_safetensors_metadata(opt);
  CHECK(meta.at("optimizer_built") == "true");
  std::string slot;
  for (const auto& [name, t] : state)
    if (name.ends_with("/kernel/momentum")) slot = name;
  REQUIRE_FALSE(slot.empty());
  const Tensor kept = state.at(slot);
  state.erase(slot);
  io::save_safetensors(opt, state, meta);
  CHECK_THROWS_AS(models::load_model(dir), IOError);
  CHECK_THROWS_WITH(models::load_model(dir), Contains(opt) && Contains(slot) && Contains("missing"));
  CHECK_NOTHROW(models::load_model(dir, false));  // without compiling, the state is not needed
  state[slot] = kept;
  state["dense_99/kernel/momentum"] = zeros({2});
  io::save_safetensors(opt, state, meta);
  CHECK_THROWS_WITH(models::load_model(dir), Contains(opt) && Contains("dense_99/kernel/momentum"));
  state.erase("dense_99/kernel/momentum");
  io::save_safetensors(opt, state, meta);
  CHECK(models::load_model(dir)->optimizer()->iterations() == 2);
  // The state file itself gone, while compile_config still has the optimizer.
  fs::remove(opt);
  CHECK_THROWS_WITH(models::load_model(dir), Contains(opt) && Contains("missing"));
  // A model compiled but never trained saves an optimizer without slots, and loads.
  auto untrained = small_classifier();
  untrained->compile({.optimizer = "adam", .loss = "mse"});
  untrained->save(scratch / "u.keel");
  const auto loaded = models::load_model(scratch / "u.keel");
  CHECK(loaded->optimizer()->iterations() == 0);
}
