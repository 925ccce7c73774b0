// text_dataset_from_directory on a scratch directory tree: Keras' indexing (class subdirectories
// in alphanumeric order, .txt files anywhere below them, sorted), labels, batching, max_length,
// the validation split, shuffling, and the errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <keel/keel.hpp>

#include "scratch.hpp"

using namespace keel;
using Strings = std::vector<std::string>;
namespace fs = std::filesystem;

namespace {

// root/neg/{a,b}.txt, root/pos/c.txt, root/pos/sub/d.txt, and files that must be ignored: a
// non-.txt file, a .txt directly in root, a hidden class directory.
struct Tree {
  keel_test::Scratch scratch{"text_files"};
  Tree() {
    for (const char* d : {"neg", "pos", "pos/sub", ".hidden"}) fs::create_directories(scratch / d);
    keel_test::write_all(scratch / "neg/a.txt", "alpha text");
    keel_test::write_all(scratch / "neg/b.txt", "bravo");
    keel_test::write_all(scratch / "pos/c.txt", "charlie words");
    keel_test::write_all(scratch / "pos/sub/d.txt", "delta");
    keel_test::write_all(scratch / "pos/e.md", "not text");
    keel_test::write_all(scratch / "top.txt", "not in a class");
    keel_test::write_all(scratch / ".hidden/h.txt", "hidden");
  }
  const std::string& dir() const { return scratch.dir; }
};

std::vector<data::TextBatch> collect(const data::Dataset<data::TextBatch>& ds) {
  std::vector<data::TextBatch> out;
  for (const auto& e : ds) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("text_dataset_from_directory indexes classes and files as Keras", "[text_files]") {
  Tree t;
  const auto r = data::text_dataset_from_directory(t.dir(), {.batch_size = 3, .shuffle = false});
  CHECK(r.class_names == Strings{"neg", "pos"});
  REQUIRE(r.file_paths.size() == 4);
  CHECK(fs::path(r.file_paths[0]).filename() == "a.txt");
  CHECK(fs::path(r.file_paths[3]).filename() == "d.txt");  // pos/c.txt before pos/sub/d.txt
  const auto batches = collect(r.dataset);
  REQUIRE(batches.size() == 2);  // 3 + 1
  CHECK(batches[0].first == Strings{"alpha text", "bravo", "charlie words"});
  CHECK(batches[0].second.dtype() == DType::int32);
  CHECK(batches[0].second.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0, 1});
  CHECK(batches[1].first == Strings{"delta"});
  CHECK(batches[1].second.shape() == Shape{1});
  // A second pass gives the same batches (the dataset is re-iterable).
  CHECK(collect(r.dataset)[1].first == Strings{"delta"});
}

TEST_CASE("text_dataset_from_directory label modes, class_names and max_length", "[text_files]") {
  Tree t;
  // categorical: float32 one-hot [batch, 2]; binary: float32 [batch, 1].
  auto cat = collect(data::text_dataset_from_directory(t.dir(), {.label_mode = "categorical", .batch_size = 4, .shuffle = false}).dataset);
  REQUIRE(cat.size() == 1);
  CHECK(cat[0].second.shape() == Shape{4, 2});
  CHECK(cat[0].second.to_vector<float>() == std::vector<float>{1, 0, 1, 0, 0, 1, 0, 1});
  auto bin = collect(data::text_dataset_from_directory(t.dir(), {.label_mode = "binary", .batch_size = 4, .shuffle = false}).dataset);
  CHECK(bin[0].second.shape() == Shape{4, 1});
  CHECK(bin[0].second.to_vector<float>() == std::vector<float>{0, 0, 1, 1});
  // class_names picks and orders the classes: pos first gets label 0.
  auto ordered = data::text_dataset_from_directory(t.dir(), {.class_names = {"pos", "neg"}, .batch_size = 4, .shuffle = false});
  auto ob = collect(ordered.dataset);
  CHECK(ob[0].first[0] == "charlie words");
  CHECK(ob[0].second.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0, 1, 1});
  // max_length truncates each text to that many bytes.
  auto cut = collect(data::text_dataset_from_directory(t.dir(), {.batch_size = 4, .max_length = 3, .shuffle = false}).dataset);
  CHECK(cut[0].first == Strings{"alp", "bra", "cha", "del"});
  // batch_size 0: one text per element, a scalar label.
  auto single = collect(data::text_dataset_from_directory(t.dir(), {.batch_size = 0, .shuffle = false}).dataset);
  REQUIRE(single.size() == 4);
  CHECK(single[2].first == Strings{"charlie words"});
  CHECK(single[2].second.shape() == Shape{});
  // No labels: every .txt below the directory (top.txt included, hidden ones too as Keras' walk).
  auto unlabelled = data::text_dataset_from_directory(t.dir(), {.labels = "", .label_mode = "", .batch_size = 10, .shuffle = false});
  auto ub = collect(unlabelled.dataset);
  CHECK_FALSE(ub[0].second.defined());
  CHECK(std::find(ub[0].first.begin(), ub[0].first.end(), "not in a class") != ub[0].first.end());
  // Explicit labels: one per file of the sorted list.
  auto explicit_labels = data::text_dataset_from_directory(
      t.dir(), {.labels = data::DirectoryLabels(std::vector<std::int64_t>{5, 4, 3, 2, 1, 0}), .batch_size = 10, .shuffle = false});
  CHECK(collect(explicit_labels.dataset)[0].second.to_vector<std::int32_t>() == std::vector<std::int32_t>{5, 4, 3, 2, 1, 0});
}

TEST_CASE("text_dataset_from_directory splits and shuffles reproducibly", "[text_files]") {
  Tree t;
  // validation_split 0.25 of 4 files: the last one is the validation subset.
  auto both = data::text_dataset_from_directory(t.dir(), {.batch_size = 8, .shuffle = false, .validation_split = 0.25, .subset = "both"});
  CHECK(both.file_paths.size() == 3);
  REQUIRE(both.validation_file_paths.size() == 1);
  CHECK(collect(both.validation)[0].first == Strings{"delta"});
  auto val = data::text_dataset_from_directory(t.dir(), {.batch_size = 8, .shuffle = false, .validation_split = 0.25, .subset = "validation"});
  CHECK(val.file_paths == both.validation_file_paths);
  // A seed fixes the file order; training and validation never overlap.
  const data::TextDatasetOptions o{.batch_size = 8, .seed = 7, .validation_split = 0.5, .subset = "both"};
  auto a = data::text_dataset_from_directory(t.dir(), o);
  auto b = data::text_dataset_from_directory(t.dir(), o);
  CHECK(a.file_paths == b.file_paths);
  Strings files = a.file_paths;
  files.insert(files.end(), a.validation_file_paths.begin(), a.validation_file_paths.end());
  std::sort(files.begin(), files.end());
  CHECK(std::unique(files.begin(), files.end()) == files.end());
  CHECK(files.size() == 4);
  // Labels stay with their texts through the shuffles.
  for (const auto& [texts, labels] : a.dataset) {
    const auto l = labels.to_vector<std::int32_t>();
    for (std::size_t i = 0; i < texts.size(); ++i) CHECK(l[i] == (texts[i] == "alpha text" || texts[i] == "bravo" ? 0 : 1));
  }
}

TEST_CASE("text_dataset_from_directory feeds TextVectorization", "[text_files]") {
  Tree t;
  auto r = data::text_dataset_from_directory(t.dir(), {.batch_size = 2, .shuffle = false});
  layers::TextVectorization vectorize({.output_sequence_length = 3});
  vectorize.adapt(r.dataset);
  // Tokens: alpha text bravo charlie words delta, once each: descending order.
  CHECK(vectorize.get_vocabulary() == Strings{"", "[UNK]", "words", "text", "delta", "charlie", "bravo", "alpha"});
  auto ids = r.dataset.map([&](const Strings& texts, const Tensor& labels) { return std::pair<Tensor, Tensor>(vectorize(texts), labels); });
  std::int64_t rows = 0;
  for (const auto& [x, y] : ids) {
    CHECK(x.shape()[1] == 3);
    rows += x.shape()[0];
  }
  CHECK(rows == 4);
}

TEST_CASE("text_dataset_from_directory reports bad arguments", "[text_files]") {
  Tree t;
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir() + "/missing"), IOError);
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.validation_split = 0.2}), ValueError);  // no subset
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.validation_split = 0.2, .subset = "training"}), ValueError);  // no seed
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.seed = 1, .validation_split = 1.5, .subset = "training"}), ValueError);
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.class_names = {"neg", "nope"}}), ValueError);
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.label_mode = "sparse"}), ValueError);
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.batch_size = -1}), ValueError);
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.labels = data::DirectoryLabels(std::vector<std::int64_t>{1, 2})}), ValueError);
  fs::create_directories(t.scratch / "three");
  keel_test::write_all(t.scratch / "three/x.txt", "x");
  CHECK_THROWS_AS(data::text_dataset_from_directory(t.dir(), {.label_mode = "binary"}), ValueError);  // 3 classes
  keel_test::Scratch empty("text_files_empty");
  CHECK_THROWS_AS(data::text_dataset_from_directory(empty.dir), ValueError);  // no .txt files
}
