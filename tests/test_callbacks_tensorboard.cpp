// callbacks::TensorBoard with every option, read back through TensorBoard's protos: Keras 3's
// tags and steps for epoch and batch scalars (train/ and validation/ runs), learning rate and
// steps per second, weight histograms and images, the layer graph, a profiled batch range and
// the projector's embeddings.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <keel/callbacks/tensorboard.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "event_files.hpp"
#include "scratch.hpp"
#include "tensorboard/compat/proto/graph.pb.h"

using namespace keel;
using keel_test::event_file;
using keel_test::read_events;

namespace {

// tag -> steps it was written at, over the summary events of one run.
std::map<std::string, std::vector<std::int64_t>> tag_steps(const std::vector<tensorboard::Event>& events) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& e : events)
    for (const auto& v : e.summary().value()) out[v.tag()].push_back(e.step());
  return out;
}

}  // namespace

TEST_CASE("TensorBoard writes Keras' epoch and batch scalars to train and validation runs", "[callbacks][tensorboard]") {
  keel_test::Scratch dir("tensorboard_scalars");
  random::set_seed(1);
  models::Sequential model({std::make_shared<layers::Dense>(2), std::make_shared<layers::Dense>(1)});
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  const Tensor x = random::normal({8, 3}), y = random::normal({8, 1});
  // 8 samples in batches of 2: 4 batches per epoch, 3 epochs; global batches 1..12. update_freq 2
  // writes batch_loss after the batches whose index in the epoch is 0 or 2, i.e. global 1, 3, 5, ...
  auto tb = std::make_shared<callbacks::TensorBoard>(
      dir.dir, callbacks::TensorBoardOptions{.write_graph = false, .write_steps_per_second = true, .update_freq = 2});
  model.fit(x, y, {.batch_size = 2, .epochs = 3, .verbose = 0, .callbacks = {tb}, .validation_data = std::make_pair(x, y),
                   .shuffle = false});
  const auto train = read_events(event_file(dir / "train"));
  const auto val = read_events(event_file(dir / "validation"));
  CHECK(train[0].file_version() == "brain.Event:2");
  const auto t = tag_steps(train), v = tag_steps(val);
  CHECK(t.at("epoch_loss") == std::vector<std::int64_t>{0, 1, 2});
  CHECK(t.at("epoch_learning_rate") == std::vector<std::int64_t>{0, 1, 2});
  CHECK(t.at("epoch_steps_per_second").size() == 3);
  CHECK(t.at("batch_loss") == std::vector<std::int64_t>{1, 3, 5, 7, 9, 11});
  CHECK(t.at("batch_steps_per_second").size() == 12);
  CHECK(t.count("epoch_val_loss") == 0);
  CHECK(v.at("epoch_loss") == std::vector<std::int64_t>{0, 1, 2});  // val_loss, prefix dropped
  for (const auto& e : train)
    for (const auto& s : e.summary().value())
      if (s.tag() == "epoch_learning_rate") CHECK(s.simple_value() == Approx(0.01));
}

TEST_CASE("TensorBoard writes weight histograms, weight images and the layer graph of an eager step",
          "[callbacks][tensorboard]") {
  keel_test::Scratch dir("tensorboard_weights");
  random::set_seed(2);
  auto input = models::Input({3});
  auto h = layers::Dense(4, {.name = "hidden"})(input);
  auto out = layers::Dense(1, {.name = "head"})(h);
  models::Model model(input, out);
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse", .run_eagerly = true});
  const Tensor x = random::normal({4, 3}), y = random::normal({4, 1});
  auto tb = std::make_shared<callbacks::TensorBoard>(
      dir.dir, callbacks::TensorBoardOptions{.histogram_freq = 2, .write_images = true});
  model.fit(x, y, {.batch_size = 4, .epochs = 3, .verbose = 0, .callbacks = {tb}});
  const auto events = read_events(event_file(dir / "train"));
  const auto t = tag_steps(events);
  // histogram_freq 2: epochs 0 and 2.
  CHECK(t.at("hidden/kernel/histogram") == std::vector<std::int64_t>{0, 2});
  CHECK(t.at("head/bias/histogram") == std::vector<std::int64_t>{0, 2});
  // A [3, 4] kernel is drawn as it is, wider than tall (Keras transposes only a taller matrix):
  // one 3x4 grey image.
  REQUIRE(t.count("hidden/kernel/image/image") == 1);
  for (const auto& e : events)
    for (const auto& s : e.summary().value()) {
      if (s.tag() == "hidden/kernel/histogram" && e.step() == 0) {
        CHECK(s.histo().num() == 12);
        CHECK(s.histo().bucket_size() == 30);
      }
      if (s.tag() == "hidden/kernel/image/image") {
        CHECK(s.image().height() == 3);
        CHECK(s.image().width() == 4);
      }
    }
  // The graph: input -> hidden -> head, each node's op its layer class.
  const tensorboard::Event* graph = nullptr;
  for (const auto& e : events)
    if (!e.graph_def().empty()) graph = &e;
  REQUIRE(graph != nullptr);
  tensorboard::GraphDef g;
  REQUIRE(g.ParseFromString(graph->graph_def()));
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> nodes;
  for (const auto& n : g.node()) nodes[n.name()] = {n.op(), {n.input().begin(), n.input().end()}};
  REQUIRE(nodes.count("hidden") == 1);
  CHECK(nodes["hidden"].first == "Dense");
  REQUIRE(nodes["hidden"].second.size() == 1);
  CHECK(nodes[nodes["hidden"].second[0]].first == "InputLayer");
  CHECK(nodes["head"].second == std::vector<std::string>{"hidden"});
}

TEST_CASE("TensorBoard writes the graph the train step was traced into", "[callbacks][tensorboard]") {
  keel_test::Scratch dir("tensorboard_op_graph");
  random::set_seed(2);
  models::Sequential model({std::make_shared<layers::Dense>(4, layers::DenseOptions{.activation = "relu"}),
                            std::make_shared<layers::Dense>(1)});
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});  // traced (run_eagerly false)
  CHECK(model.train_function_graph() == nullptr);  // before the first step
  const Tensor x = random::normal({4, 3}), y = random::normal({4, 1});
  auto tb = std::make_shared<callbacks::TensorBoard>(dir.dir);
  model.fit(x, y, {.batch_size = 2, .epochs = 1, .verbose = 0, .callbacks = {tb}});
  REQUIRE(model.train_function_graph() != nullptr);
  const auto events = read_events(event_file(dir / "train"));
  int graphs = 0;
  tensorboard::GraphDef g;
  for (const auto& e : events)
    if (!e.graph_def().empty()) {
      ++graphs;
      REQUIRE(g.ParseFromString(e.graph_def()));
    }
  CHECK(graphs == 1);  // once, after the first batch
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> nodes;
  for (const auto& n : g.node()) nodes[n.name()] = {n.op(), {n.input().begin(), n.input().end()}};
  // The operations of train_function_graph(), each with its inputs, every input a node itself.
  // Node names carry the operation's scope: fit's phase and the layer it was traced in.
  const auto ops = model.train_function_graph()->operations();
  auto full = [](const graph::Operation& op) { return op.scope.empty() ? op.name : op.scope + "/" + op.name; };
  std::size_t matmuls = 0;
  std::set<std::string> phases;
  for (const auto& op : ops) {
    REQUIRE(nodes.count(full(op)) == 1);
    CHECK(nodes[full(op)].first == op.type);
    matmuls += op.type == "BatchMatMulV2";
    phases.insert(op.scope.substr(0, op.scope.find('/')));
  }
  CHECK(matmuls >= 2);  // the two Dense layers' forward products at least
  for (const char* phase : {"forward", "loss", "backward", "optimizer"}) CHECK(phases.count(phase) == 1);
  for (const auto& [name, node] : nodes)
    for (const auto& in : node.second) CHECK(nodes.count(in) == 1);
  // The first product, in the first layer's scope inside the model's, reads argument 0 (the batch x) and the
  // kernel: a variable the first call made (the model builds in its first step: VarHandleOp) or
  // one made before it (Captured).
  const std::string first_name = "forward/" + model.name() + "/" + model.layers()[0]->name() + "/BatchMatMulV2";
  REQUIRE(nodes.count(first_name) == 1);
  const auto& first = nodes[first_name].second;
  CHECK(std::count(first.begin(), first.end(), "Placeholder_0") == 1);
  REQUIRE(first.size() == 2);
  CHECK((nodes[first[1]].first == "VarHandleOp" || nodes[first[1]].first == "Captured"));
}

TEST_CASE("TensorBoard profiles the batch range and writes the projector's embeddings", "[callbacks][tensorboard]") {
  keel_test::Scratch dir("tensorboard_profile");
  random::set_seed(3);
  models::Sequential model({std::make_shared<layers::Embedding>(10, 2, layers::EmbeddingOptions{.name = "emb"}),
                            std::make_shared<layers::Flatten>(), std::make_shared<layers::Dense>(1)});
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  const Tensor x = random::uniform_int({6, 3}, 0, 10), y = random::normal({6, 1});
  auto tb = std::make_shared<callbacks::TensorBoard>(
      dir.dir, callbacks::TensorBoardOptions{.write_graph = false, .profile_batch = {2, 3}, .embeddings_freq = 1});
  model.fit(x, y, {.batch_size = 2, .epochs = 2, .verbose = 0, .callbacks = {tb}});
  // The profile run: log_dir/plugins/profile/<run>/<host>.trace.json.gz
  const std::string profile = dir / "plugins/profile";
  REQUIRE(std::filesystem::is_directory(profile));
  int traces = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(profile))
    traces += e.path().string().size() > 14 && e.path().string().rfind(".trace.json.gz") == e.path().string().size() - 14;
  CHECK(traces == 1);
  // The projector: one embedding of 10 rows of 2 values.
  const std::string config = keel_test::read_all(dir / "projector_config.pbtxt");
  CHECK_THAT(config, Catch::Contains("tensor_name: \"emb/embeddings\""));
  CHECK_THAT(config, Catch::Contains("tensor_path: \"emb_embeddings.tsv\""));
  const std::string tsv = keel_test::read_all(dir / "emb_embeddings.tsv");
  CHECK(std::count(tsv.begin(), tsv.end(), '\n') == 10);
  CHECK(std::count(tsv.begin(), tsv.end(), '\t') == 10);
}

TEST_CASE("TensorBoard rejects bad options", "[callbacks][tensorboard][errors]") {
  using callbacks::TensorBoardOptions;
  CHECK_THROWS_AS(callbacks::TensorBoard("x", TensorBoardOptions{.update_freq = "sometimes"}), ValueError);
  CHECK_THROWS_AS(callbacks::TensorBoard("x", TensorBoardOptions{.update_freq = 0}), ValueError);
  CHECK_THROWS_AS(callbacks::TensorBoard("x", TensorBoardOptions{.profile_batch = {5, 2}}), ValueError);
  CHECK_THROWS_AS(callbacks::TensorBoard("x", TensorBoardOptions{.histogram_freq = -1}), ValueError);
}
