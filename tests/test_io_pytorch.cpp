// io::load_pytorch / io::save_pytorch (torch.save's zip + pickle) and the PyTorch layout of a
// model's weights (Model::pytorch_state_dict / load_pytorch_state_dict). The [.pytorch_oracle]
// cases (tests/test_io_pytorch_oracle.cpp) run under tests/python/pytorch_oracle.py against
// PyTorch itself.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <string>
#include <vector>

#include "io/zip.hpp"
#include "scratch.hpp"

using namespace keel;
using Catch::Matchers::Contains;
using keel_test::read_all;
using keel_test::Scratch;
using keel_test::write_all;

namespace {

// A torch.save-shaped zip ("archive/data.pkl" + storages) around hand-written pickle bytes.
void write_pt(const std::string& path, const std::string& pickle,
              const std::vector<std::pair<std::string, std::string>>& storages = {}) {
  std::vector<io::zip::Member> members{{"archive/data.pkl", pickle}};
  for (const auto& [key, bytes] : storages) members.push_back({"archive/data/" + key, bytes});
  write_all(path, io::zip::write_archive(members, "test", path));
}

std::string u32(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}
std::string str(const std::string& s) { return "X" + u32(static_cast<std::uint32_t>(s.size())) + s; }  // BINUNICODE

// The pickle of {name: tensor}: _rebuild_tensor_v2(storage '0' of `numel` floats, offset, size, stride).
std::string one_tensor_pickle(const std::string& name, int numel, int offset, std::vector<int> size,
                              std::vector<int> stride) {
  auto tuple = [](const std::vector<int>& v) {
    std::string s = "(";
    for (int x : v) s += std::string("K") + static_cast<char>(x);
    return s + "t";
  };
  return std::string("\x80\x02") + "ccollections\nOrderedDict\n)R(" + str(name) +
         "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\nFloatStorage\n" + str("0") +
         str("cpu") + "K" + static_cast<char>(numel) + "tQK" + static_cast<char>(offset) + tuple(size) + tuple(stride) +
         "\x89" + "ccollections\nOrderedDict\n)RtRu.";
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

}  // namespace

TEST_CASE("save_pytorch and load_pytorch round-trip every dtype in torch's zip layout", "[io][pytorch]") {
  Scratch dir("pytorch_roundtrip");
  std::map<std::string, Tensor> t{
      {"a", constant<float>({0, 1, 2, 3, 4, 5}, Shape{2, 3})},
      {"b", constant<std::int64_t>({1, -2, std::int64_t{1} << 40})},
      {"c", constant<bool>({true, false})},
      {"d", constant<float>({0.5f, -2}).astype(DType::float16)},
      {"e", constant<float>({1, 3}).astype(DType::bfloat16)},
      {"f", constant<double>({1e300, -1})},
      {"g", constant<std::int32_t>({-5, 6})},
      {"h", constant<std::uint8_t>({200, 3})},
      {"s", constant(7.0)},
      {"z", zeros(Shape{0, 2})},
      {"t", transpose(constant<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}))},  // non-contiguous: written row-major
  };
  io::save_pytorch(dir / "m.pt", t);
  const auto back = io::load_pytorch(dir / "m.pt");
  REQUIRE(back.size() == t.size());
  for (const auto& [name, v] : t) {
    INFO(name);
    CHECK(back.at(name).dtype() == v.dtype());
    CHECK(back.at(name).shape() == v.shape());
    CHECK(back.at(name).to_vector<double>() == v.to_vector<double>());
  }
  // transpose([[1,2,3],[4,5,6]]) = [[1,4],[2,5],[3,6]]
  CHECK(back.at("t").to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});

  // The layout of torch's writer: "archive/..." members, each one's data at a multiple of 64.
  const std::string bytes = read_all(dir / "m.pt");
  std::vector<std::string> names;
  io::zip::read_archive(bytes, "test", "m.pt", [&](const io::zip::Entry& e) {
    names.push_back(e.name);
    CHECK(e.base % 64 == 0);
  });
  REQUIRE(names.size() == 2 + t.size() + 1);
  CHECK(names.front() == "archive/data.pkl");
  CHECK(names[1] == "archive/byteorder");
  CHECK(names[2] == "archive/data/0");
  CHECK(names.back() == "archive/version");
}

TEST_CASE("load_pytorch resolves shared storages, offsets and strides", "[io][pytorch]") {
  Scratch dir("pytorch_views");
  // storage 0..7; the view at offset 1 of size (2, 2), stride (1, 3) reads [[1, 4], [2, 5]].
  write_pt(dir / "v.pt", one_tensor_pickle("v", 8, 1, {2, 2}, {1, 3}), {{"0", floats({0, 1, 2, 3, 4, 5, 6, 7})}});
  const auto t = io::load_pytorch(dir / "v.pt");
  CHECK(t.at("v").shape() == Shape{2, 2});
  CHECK(t.at("v").to_vector<float>() == std::vector<float>{1, 4, 2, 5});
  // Zero strides (an expanded view): [[3, 3, 3]] from offset 3.
  write_pt(dir / "e.pt", one_tensor_pickle("e", 8, 3, {1, 3}, {0, 0}), {{"0", floats({0, 1, 2, 3, 4, 5, 6, 7})}});
  CHECK(io::load_pytorch(dir / "e.pt").at("e").to_vector<float>() == std::vector<float>{3, 3, 3});
}

TEST_CASE("load_pytorch refuses code: globals and opcodes outside a state_dict, naming the offset", "[io][pytorch]") {
  Scratch dir("pytorch_malicious");
  // PROTO 2 at 0; GLOBAL 'os system' at 2; the argument tuple; REDUCE; STOP: what pickle's
  // os.system("ls") exploit looks like.
  write_pt(dir / "os.pt", std::string("\x80\x02") + "cos\nsystem\n" + str("ls") + "\x85R.");
  CHECK_THROWS_AS(io::load_pytorch(dir / "os.pt"), IOError);
  CHECK_THROWS_WITH(io::load_pytorch(dir / "os.pt"),
                    Contains("data.pkl' byte offset 2") && Contains("global 'os.system' is not allowed"));
  // The allowed callables but a disallowed one through STACK_GLOBAL (protocol 4) at offset 24.
  write_pt(dir / "sg.pt", std::string("\x80\x04") + str("builtins") + str("eval") + "\x93.");
  CHECK_THROWS_WITH(io::load_pytorch(dir / "sg.pt"), Contains("byte offset 24") && Contains("builtins.eval"));
  // INST ('i', an opcode of protocol 0 that calls a class) at offset 3.
  write_pt(dir / "inst.pt", std::string("\x80\x02(") + "ios\nsystem\n.");
  CHECK_THROWS_WITH(io::load_pytorch(dir / "inst.pt"), Contains("byte offset 3") && Contains("opcode 0x69"));
  // An unknown opcode byte at offset 3.
  write_pt(dir / "unk.pt", std::string("\x80\x02}\xff."));
  CHECK_THROWS_WITH(io::load_pytorch(dir / "unk.pt"), Contains("byte offset 3") && Contains("opcode 0xff"));
  // REDUCE of a storage type (allowed as a persistent id's type, never as a callable) at 23.
  write_pt(dir / "st.pt", std::string("\x80\x02") + "ctorch\nFloatStorage\n)R.");
  CHECK_THROWS_WITH(io::load_pytorch(dir / "st.pt"), Contains("byte offset 23") && Contains("REDUCE of torch.FloatStorage"));
  // A dict value that is not a tensor.
  write_pt(dir / "int.pt", std::string("\x80\x02}") + str("k") + "K\x05s.");
  CHECK_THROWS_WITH(io::load_pytorch(dir / "int.pt"), Contains("the value of 'k' is of type integer, not a tensor"));
}

TEST_CASE("load_pytorch checks truncation, storages and the archive", "[io][pytorch]") {
  Scratch dir("pytorch_bad");
  const std::string good = one_tensor_pickle("w", 4, 0, {2, 2}, {2, 1});
  write_pt(dir / "ok.pt", good, {{"0", floats({1, 2, 3, 4})}});
  CHECK(io::load_pytorch(dir / "ok.pt").at("w").to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  // The pickle cut inside the length of the key's BINUNICODE (the X at offset 30, its length at 31..34).
  write_pt(dir / "cut.pt", good.substr(0, 34), {{"0", floats({1, 2, 3, 4})}});
  CHECK_THROWS_WITH(io::load_pytorch(dir / "cut.pt"), Contains("truncated") && Contains("byte offset"));
  // No STOP at all.
  write_pt(dir / "nostop.pt", good.substr(0, good.size() - 1), {{"0", floats({1, 2, 3, 4})}});
  CHECK_THROWS_WITH(io::load_pytorch(dir / "nostop.pt"), Contains("ends before STOP"));
  // A storage of 4 floats whose member holds 3.
  write_pt(dir / "short.pt", good, {{"0", floats({1, 2, 3})}});
  CHECK_THROWS_WITH(io::load_pytorch(dir / "short.pt"), Contains("needs 16 bytes") && Contains("holds 12"));
  // A view past the end of its storage: offset 1 + (2-1)*2 + (2-1)*1 = 4 >= 4 elements.
  write_pt(dir / "past.pt", one_tensor_pickle("w", 4, 1, {2, 2}, {2, 1}), {{"0", floats({1, 2, 3, 4})}});
  CHECK_THROWS_WITH(io::load_pytorch(dir / "past.pt"), Contains("reads past the end of the storage"));
  // The storage member is missing.
  write_pt(dir / "nomember.pt", good);
  CHECK_THROWS_WITH(io::load_pytorch(dir / "nomember.pt"), Contains("no member 'archive/data/0'"));
  // Not a zip; a zip without data.pkl; a truncated file.
  write_all(dir / "junk.pt", "not a zip at all");
  CHECK_THROWS_AS(io::load_pytorch(dir / "junk.pt"), IOError);
  write_all(dir / "empty.pt", io::zip::write_archive({{"x/other", "1"}}, "test", "empty.pt"));
  CHECK_THROWS_WITH(io::load_pytorch(dir / "empty.pt"), Contains("no '<archive>/data.pkl' member"));
  io::save_pytorch(dir / "full.pt", {{"a", ones(Shape{8})}});
  const std::string full = read_all(dir / "full.pt");
  write_all(dir / "trunc.pt", full.substr(0, full.size() - 10));
  CHECK_THROWS_AS(io::load_pytorch(dir / "trunc.pt"), IOError);
  CHECK_THROWS_AS(io::load_pytorch(dir / "missing.pt"), IOError);
}

TEST_CASE("pytorch_state_dict names and lays out weights as torch.nn does", "[io][pytorch]") {
  models::Sequential model{layers::InputLayer({2}), layers::Dense(3), layers::ReLU(), layers::Dense(1)};
  auto& dense = *model.layers()[0];
  // kernel [in=2, out=3] = [[1, 2, 3], [4, 5, 6]] -> Linear.weight [3, 2] = [[1, 4], [2, 5], [3, 6]]
  dense.weights()[0]->assign(constant<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  const auto sd = model.pytorch_state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, v] : sd) keys.push_back(k);
  // The ReLU at index 1 has no weights but keeps its index, as in nn.Sequential.
  CHECK(keys == std::vector<std::string>{"0.bias", "0.weight", "2.bias", "2.weight"});
  CHECK(sd.at("0.weight").shape() == Shape{3, 2});
  CHECK(sd.at("0.weight").to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(sd.at("2.weight").shape() == Shape{1, 3});
}

TEST_CASE("load_pytorch_state_dict maps Conv2D, BatchNormalization, LSTM and GRU", "[io][pytorch]") {
  // Conv2D: torch weight [O=2, I=1, kh=1, kw=2] = [[[[1, 2]]], [[[3, 4]]]] -> kernel [1, 2, 1, 2]
  // with kernel[0][w][0][o] = weight[o][0][0][w]: [[[[1, 3]], [[2, 4]]]] = 1, 3, 2, 4.
  models::Sequential conv{layers::InputLayer({3, 3, 1}), layers::Conv2D(2, {1, 2}), layers::BatchNormalization()};
  conv.load_pytorch_state_dict({{"0.weight", constant<float>({1, 2, 3, 4}, Shape{2, 1, 1, 2})},
                                {"0.bias", constant<float>({0.5f, -0.5f})},
                                {"1.weight", constant<float>({2, 3})},
                                {"1.bias", constant<float>({0, 1})},
                                {"1.running_mean", constant<float>({0.25f, 0.5f})},
                                {"1.running_var", constant<float>({4, 9})},
                                {"1.num_batches_tracked", constant(12.0, DType::int64)}});
  CHECK(conv.layers()[0]->weights()[0]->peek().to_vector<float>() == std::vector<float>{1, 3, 2, 4});
  auto bn = conv.layers()[1]->weights();
  std::map<std::string, std::vector<float>> by_name;
  for (Variable* v : bn) by_name[v->name().substr(v->name().rfind('/') + 1)] = v->peek().to_vector<float>();
  CHECK(by_name["gamma"] == std::vector<float>{2, 3});
  CHECK(by_name["moving_variance"] == std::vector<float>{4, 9});
  const auto back = conv.pytorch_state_dict();
  CHECK(back.at("0.weight").to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(back.at("1.num_batches_tracked").dtype() == DType::int64);

  // LSTM(1 unit, 1 feature): torch gates i, f, g, o = keel's i, f, c, o; bias = b_ih + b_hh.
  models::Sequential lstm{layers::InputLayer({2, 1}), layers::LSTM(1)};
  lstm.load_pytorch_state_dict({{"0.weight_ih_l0", constant<float>({1, 2, 3, 4}, Shape{4, 1})},
                                {"0.weight_hh_l0", constant<float>({5, 6, 7, 8}, Shape{4, 1})},
                                {"0.bias_ih_l0", constant<float>({1, 1, 1, 1})},
                                {"0.bias_hh_l0", constant<float>({0.5f, 1, 1.5f, 2})}});
  auto lw = lstm.layers()[0]->weights();  // kernel [1, 4], recurrent_kernel [1, 4], bias [4]
  CHECK(lw[0]->peek().to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(lw[1]->peek().to_vector<float>() == std::vector<float>{5, 6, 7, 8});
  CHECK(lw[2]->peek().to_vector<float>() == std::vector<float>{1.5f, 2, 2.5f, 3});
  // x = 1 for two steps, all weights as above:
  //   step 1 (h = c = 0): z = [1, 2, 3, 4] + [1.5, 2, 2.5, 3] = [2.5, 4, 5.5, 7]
  //     c1 = sigmoid(2.5) * tanh(5.5), h1 = sigmoid(7) * tanh(c1)
  //   step 2: z = [1, 2, 3, 4] + h1 * [5, 6, 7, 8] + bias, c2 = sigmoid(z_f) c1 + sigmoid(z_i) tanh(z_g)
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double c1 = sig(2.5) * std::tanh(5.5), h1 = sig(7) * std::tanh(c1);
  const double zi = 2.5 + 5 * h1, zf = 4 + 6 * h1, zg = 5.5 + 7 * h1, zo = 7 + 8 * h1;
  const double c2 = sig(zf) * c1 + sig(zi) * std::tanh(zg), h2 = sig(zo) * std::tanh(c2);
  CHECK(lstm.predict(ones(Shape{1, 2, 1})).to_vector<float>()[0] == Approx(h2).epsilon(1e-5));

  // GRU(1 unit): torch blocks r, z, n -> keel z, r, h; bias rows b_ih, b_hh.
  models::Sequential gru{layers::InputLayer({2, 1}), layers::GRU(1)};
  gru.load_pytorch_state_dict({{"0.weight_ih_l0", constant<float>({1, 2, 3}, Shape{3, 1})},
                               {"0.weight_hh_l0", constant<float>({4, 5, 6}, Shape{3, 1})},
                               {"0.bias_ih_l0", constant<float>({7, 8, 9})},
                               {"0.bias_hh_l0", constant<float>({10, 11, 12})}});
  auto gw = gru.layers()[0]->weights();
  CHECK(gw[0]->peek().to_vector<float>() == std::vector<float>{2, 1, 3});
  CHECK(gw[1]->peek().to_vector<float>() == std::vector<float>{5, 4, 6});
  CHECK(gw[2]->peek().to_vector<float>() == std::vector<float>{8, 7, 9, 11, 10, 12});
  const auto gsd = gru.pytorch_state_dict();
  CHECK(gsd.at("0.bias_hh_l0").to_vector<float>() == std::vector<float>{10, 11, 12});
}

TEST_CASE("stacked recurrent layers map to one torch RNN of num_layers > 1", "[io][pytorch]") {
  // keel LSTM(3, return_sequences), LSTM(3), Dense(2) = torch nn.LSTM(2, 3, num_layers=2) at
  // index 0 ("0.*_l0", "0.*_l1") and Linear(3, 2) at index 1 (the Dense moves down one index).
  random::set_seed(5);
  auto make = [] {
    return models::Sequential{layers::InputLayer({4, 2}), layers::LSTM(3, {.return_sequences = true}),
                              layers::LSTM(3), layers::Dense(2)};
  };
  auto a = make();
  const auto flat = a.pytorch_state_dict();  // default: one module per keel layer
  CHECK(flat.count("1.weight_ih_l0") == 1);
  CHECK(flat.count("2.weight") == 1);
  const auto stacked = a.pytorch_state_dict({.stack_recurrent = true});
  std::vector<std::string> keys;
  for (const auto& [k, v] : stacked) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.bias_hh_l0", "0.bias_hh_l1", "0.bias_ih_l0", "0.bias_ih_l1",
                                         "0.weight_hh_l0", "0.weight_hh_l1", "0.weight_ih_l0", "0.weight_ih_l1",
                                         "1.bias", "1.weight"});
  // Layer 1's input is layer 0's 3 outputs: weight_ih_l1 is [4 gates * 3, 3].
  CHECK(stacked.at("0.weight_ih_l0").shape() == Shape{12, 2});
  CHECK(stacked.at("0.weight_ih_l1").shape() == Shape{12, 3});
  CHECK(stacked.at("0.weight_ih_l1").to_vector<float>() == flat.at("1.weight_ih_l0").to_vector<float>());

  // Either naming loads into a fresh model (the stacked one found from the "_l1" names) and
  // predicts what the first model predicts.
  const Tensor x = random::normal(Shape{2, 4, 2});
  const auto want = a.predict(x).to_vector<float>();
  for (const auto* sd : {&stacked, &flat}) {
    auto b = make();
    b.load_pytorch_state_dict(*sd);
    CHECK(b.predict(x).to_vector<float>() == want);
  }
  // Different units do not stack: a torch RNN's layers all have hidden_size units.
  models::Sequential mixed{layers::InputLayer({4, 2}), layers::LSTM(3, {.return_sequences = true}), layers::LSTM(5)};
  CHECK(mixed.pytorch_state_dict({.stack_recurrent = true}).count("1.weight_ih_l0") == 1);
  // Bidirectional GRUs stack as nn.GRU(bidirectional=True, num_layers=2).
  models::Sequential bi{layers::InputLayer({4, 2}),
                        layers::Bidirectional(layers::GRU(3, {.return_sequences = true})),
                        layers::Bidirectional(layers::GRU(3, {.return_sequences = true}))};
  const auto bsd = bi.pytorch_state_dict({.stack_recurrent = true});
  CHECK(bsd.count("0.weight_hh_l1_reverse") == 1);
  CHECK(bsd.at("0.weight_ih_l1").shape() == Shape{9, 6});  // input: both directions' 3 outputs
  models::Sequential bi2{layers::InputLayer({4, 2}),
                         layers::Bidirectional(layers::GRU(3, {.return_sequences = true})),
                         layers::Bidirectional(layers::GRU(3, {.return_sequences = true}))};
  bi2.load_pytorch_state_dict(bsd);
  CHECK(bi2.predict(x).to_vector<float>() == bi.predict(x).to_vector<float>());
  // A go_backwards LSTM alone runs the other way from every torch RNN: refused, not mis-mapped.
  models::Sequential back{layers::InputLayer({4, 2}), layers::LSTM(3, {.go_backwards = true})};
  CHECK_THROWS_WITH(back.pytorch_state_dict(), Contains("go_backwards"));
}

TEST_CASE("load_pytorch_state_dict names the first mismatch", "[io][pytorch]") {
  models::Sequential model{layers::InputLayer({2}), layers::Dense(3), layers::Dense(1)};
  auto sd = model.pytorch_state_dict();
  auto missing = sd;
  missing.erase("1.bias");
  CHECK_THROWS_AS(model.load_pytorch_state_dict(missing), ValueError);
  CHECK_THROWS_WITH(model.load_pytorch_state_dict(missing), Contains("missing '1.bias'"));
  auto extra = sd;
  extra["5.weight"] = ones(Shape{1});
  CHECK_THROWS_WITH(model.load_pytorch_state_dict(extra), Contains("unexpected '5.weight'"));
  auto wrong = sd;
  wrong["0.weight"] = ones(Shape{2, 3});  // the kernel's layout, not torch's [3, 2]
  CHECK_THROWS_WITH(model.load_pytorch_state_dict(wrong, {.strict = false}),
                    Contains("'0.weight' has shape [2,3]") && Contains("needs [3,2]") && Contains("Dense, index 0"));
  // Non-strict: what is there is loaded, the rest kept; unknown names ignored.
  const auto before = model.layers()[1]->weights()[0]->peek().to_vector<float>();
  missing["0.weight"] = full(Shape{3, 2}, 2.0);
  missing["5.weight"] = ones(Shape{1});
  model.load_pytorch_state_dict(missing, {.strict = false});
  CHECK(model.layers()[0]->weights()[0]->peek().to_vector<float>() == std::vector<float>(6, 2.0f));
  CHECK(model.layers()[1]->weights()[0]->peek().to_vector<float>() == before);
  // A failed strict load changes nothing.
  auto half_bad = sd;
  half_bad["0.weight"] = full(Shape{3, 2}, 9.0);
  half_bad.erase("1.weight");
  CHECK_THROWS_AS(model.load_pytorch_state_dict(half_bad), ValueError);
  CHECK(model.layers()[0]->weights()[0]->peek().to_vector<float>() == std::vector<float>(6, 2.0f));

  models::Sequential unbuilt{layers::Dense(3)};
  CHECK_THROWS_WITH(unbuilt.pytorch_state_dict(), Contains("not built"));
  layers::GRUOptions reset_before;
  reset_before.reset_after = false;
  models::Sequential gru_before{layers::InputLayer({2, 1}), layers::GRU(1, reset_before)};
  CHECK_THROWS_WITH(gru_before.pytorch_state_dict(), Contains("reset_after"));
  models::Sequential other{layers::InputLayer({4, 4, 1}), layers::DepthwiseConv2D(3)};
  CHECK_THROWS_WITH(other.pytorch_state_dict(), Contains("no PyTorch equivalent"));
}

TEST_CASE("a keel model's state_dict goes through a torch.save file and back", "[io][pytorch]") {
  Scratch dir("pytorch_model");
  random::set_seed(3);
  auto make = [] {
    return models::Sequential{layers::InputLayer({5, 4}), layers::Conv1D(3, 2), layers::LayerNormalization(),
                              layers::LSTM(2)};
  };
  models::Sequential a = make(), b = make();
  io::save_pytorch(dir / "a.pt", a.pytorch_state_dict());
  b.load_pytorch_state_dict(io::load_pytorch(dir / "a.pt"));
  const Tensor x = random::normal(Shape{2, 5, 4});
  CHECK(reduce_max(abs(sub(a.predict(x), b.predict(x)))).item<float>() == 0.0f);
}
