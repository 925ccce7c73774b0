// The keel half of tests/python/pytorch_oracle.py: hidden test cases ([.pytorch_oracle]) that the
// script runs with KEEL_PYTORCH_ORACLE_DIR naming a folder where torch wrote state_dicts and
// the inputs and outputs of its models; these load them into the equivalent keel models and
// compare predictions, then write files of keel's own that the script reads with torch.load.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdlib>
#include <string>

using namespace keel;

namespace {

std::string oracle_dir() {
  const char* d = std::getenv("KEEL_PYTORCH_ORACLE_DIR");
  REQUIRE(d != nullptr);  // run by tests/python/pytorch_oracle.py only
  return d;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return reduce_max(abs(sub(a.astype(DType::float32), b.astype(DType::float32)))).item<float>();
}

// torch's <name>.pt into `model`, whose prediction on <name>_x.npy must be <name>_y.npy.
void check_model(models::Model& model, const std::string& name) {
  const std::string d = oracle_dir();
  model.load_pytorch_state_dict(io::load_pytorch(d + "/" + name + ".pt"));
  const Tensor y = model.predict(io::load_npy(d + "/" + name + "_x.npy"));
  INFO(name);
  CHECK(max_abs_diff(y, io::load_npy(d + "/" + name + "_y.npy")) < 1e-5f);
}

void write_prediction(models::Model& model, const std::string& name, const Tensor& x) {
  const std::string d = oracle_dir();
  io::save_pytorch(d + "/" + name + ".pt", model.pytorch_state_dict());
  io::save_npy(d + "/" + name + "_x.npy", x);
  io::save_npy(d + "/" + name + "_y.npy", model.predict(x));
}

}  // namespace

TEST_CASE("torch's state_dicts predict in keel what they predict in torch", "[.pytorch_oracle]") {
  models::Sequential linear{layers::InputLayer({4}), layers::Dense(3), layers::ReLU(), layers::Dense(2)};
  check_model(linear, "linear");
  // torch's Conv2d(padding=1) of a 3x3 kernel is Keras' padding "same"; eps as the script's.
  models::Sequential conv{layers::InputLayer({6, 5, 3}), layers::Conv2D(4, 3, {.padding = "same"}),
                          layers::BatchNormalization({.epsilon = 1e-3}), layers::ReLU()};
  check_model(conv, "conv2d");
  models::Sequential conv1d{layers::InputLayer({9, 3}), layers::Conv1D(5, 3, {.strides = 2})};
  check_model(conv1d, "conv1d");
  models::Sequential lstm{layers::InputLayer({5, 3}), layers::LSTM(4)};
  check_model(lstm, "lstm");
  models::Sequential gru{layers::InputLayer({5, 3}), layers::GRU(4)};
  check_model(gru, "gru");
  models::Sequential bilstm{layers::InputLayer({5, 3}), layers::Bidirectional(layers::LSTM(4, {.return_sequences = true}))};
  check_model(bilstm, "bilstm");
  models::Sequential bigru{layers::InputLayer({5, 3}), layers::Bidirectional(layers::GRU(4, {.return_sequences = true}))};
  check_model(bigru, "bigru");
  // nn.LSTM(num_layers=2) + Linear: the "0.*_l1" tensors are the second keel LSTM, and the
  // Linear's "1.*" the Dense after it.
  models::Sequential lstm2{layers::InputLayer({5, 3}), layers::LSTM(4, {.return_sequences = true}), layers::LSTM(4),
                           layers::Dense(2)};
  check_model(lstm2, "lstm2");
  models::Sequential bigru2{layers::InputLayer({5, 3}),
                            layers::Bidirectional(layers::GRU(4, {.return_sequences = true})),
                            layers::Bidirectional(layers::GRU(4, {.return_sequences = true}))};
  check_model(bigru2, "bigru2");
  models::Sequential embedding{layers::InputLayer({3}), layers::Embedding(10, 4),
                               layers::LayerNormalization({.epsilon = 1e-3})};
  check_model(embedding, "embedding");
}

TEST_CASE("torch.save'd tensors of every dtype, shared storages and views", "[.pytorch_oracle]") {
  const auto t = io::load_pytorch(oracle_dir() + "/dtypes.pt");
  auto values = [&](const char* name, DType dtype, Shape shape) {
    INFO(name);
    REQUIRE(t.count(name) == 1);
    CHECK(t.at(name).dtype() == dtype);
    CHECK(t.at(name).shape() == shape);
    return t.at(name).to_vector<double>();
  };
  CHECK(values("f32", DType::float32, Shape{3}) == std::vector<double>{1.5, -2, 3.25});
  CHECK(values("f64", DType::float64, Shape{2, 2}) == std::vector<double>{1, 2, 3, 1e300});
  CHECK(values("f16", DType::float16, Shape{3}) == std::vector<double>{0.5, -1, 65504});
  CHECK(values("bf16", DType::bfloat16, Shape{3}) == std::vector<double>{1, -2.5, 256});
  CHECK(t.at("i64").to_vector<std::int64_t>() == std::vector<std::int64_t>{-1, std::int64_t{1} << 40, 3});
  CHECK(values("i32", DType::int32, Shape{2}) == std::vector<double>{-7, 8});
  CHECK(values("i8", DType::int32, Shape{3}) == std::vector<double>{-128, 127, 0});  // int8 widened to int32
  CHECK(values("u8", DType::uint8, Shape{3}) == std::vector<double>{0, 255, 7});
  CHECK(values("bool", DType::bool_, Shape{3}) == std::vector<double>{1, 0, 1});
  CHECK(values("scalar", DType::float32, Shape{}) == std::vector<double>{42});
  CHECK(values("empty", DType::float32, Shape{0, 3}).empty());
  // base = arange(12).view(3, 4); view = base[1:, 1:3] (offset 5, stride (4, 1)); t = base.t().
  CHECK(values("base", DType::float32, Shape{3, 4}) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(values("view", DType::float32, Shape{2, 2}) == std::vector<double>{5, 6, 9, 10});
  CHECK(values("t", DType::float32, Shape{4, 3}) == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(values("param", DType::float32, Shape{1, 2}) == std::vector<double>{1, 2});
}

TEST_CASE("keel writes files and state_dicts that torch reads", "[.pytorch_oracle]") {
  const std::string d = oracle_dir();
  io::save_pytorch(d + "/keel_dtypes.pt",
                   {{"a", constant<float>({0, 1, 2, 3, 4, 5}, Shape{2, 3})},
                    {"b", constant<std::int64_t>({1, -2, std::int64_t{1} << 40})},
                    {"c", constant<bool>({true, false})},
                    {"d", constant<float>({0.5f, -2}).astype(DType::float16)},
                    {"e", constant<float>({1, 3}).astype(DType::bfloat16)},
                    {"f", constant<double>({1e300, -1})},
                    {"g", constant<std::int32_t>({-5, 6})},
                    {"h", constant<std::uint8_t>({200, 3})},
                    {"s", constant(7.0)},
                    {"z", zeros(Shape{0, 2})}});
  random::set_seed(11);
  models::Sequential linear{layers::InputLayer({4}), layers::Dense(3), layers::ReLU(), layers::Dense(2)};
  write_prediction(linear, "keel_linear", random::normal(Shape{3, 4}));

  models::Sequential rnn{layers::InputLayer({3, 4, 3}), layers::Conv2D(4, 3),
                         layers::BatchNormalization({.epsilon = 1e-3}), layers::Reshape(Shape{2, 4}), layers::LSTM(2)};
  // Non-trivial statistics, so that the mapping of each of the four is checked.
  for (Variable* v : rnn.layers()[1]->weights()) v->assign(random::uniform(Shape{4}, 0.5, 1.5));
  write_prediction(rnn, "keel_rnn", random::normal(Shape{2, 3, 4, 3}));

  models::Sequential gru{layers::InputLayer({5, 4}), layers::GRU(3)};
  gru.layers()[0]->weights()[2]->assign(random::normal(Shape{2, 9}));  // both biases non-zero
  write_prediction(gru, "keel_gru", random::normal(Shape{2, 5, 4}));

  models::Sequential lstm2{layers::InputLayer({5, 3}), layers::LSTM(4, {.return_sequences = true}), layers::LSTM(4),
                           layers::Dense(2)};
  const Tensor x2 = random::normal(Shape{2, 5, 3});
  io::save_pytorch(d + "/keel_lstm2.pt", lstm2.pytorch_state_dict({.stack_recurrent = true}));
  io::save_npy(d + "/keel_lstm2_x.npy", x2);
  io::save_npy(d + "/keel_lstm2_y.npy", lstm2.predict(x2));
}
