// TextCNN (Kim, 2014) on a generated sentiment data set, the Keras way: text files in class
// folders -> text_dataset_from_directory -> TextVectorization (adapted on the training texts,
// applied in a Dataset map) -> Embedding, parallel Conv1D of widths 3, 4 and 5, global max
// pooling, Concatenate, Dropout, Dense.
//
// The sentences come from a small grammar: filler words around exactly one sentiment word
// ("great", "awful", ...); "not" right before it flips the label. The label is learnable only by
// reading a window of words, which is what the convolutions do.
//
//   text_cnn [--train N] [--epochs E] [--seed S] [--data DIR] [--threshold A]
// Prints the test accuracy and exits 1 when it is below the threshold (default 0.85).
#include <keel/keel.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace keel;
namespace fs = std::filesystem;

namespace {

// Keras' GlobalMaxPooling1D: [batch, steps, channels] -> [batch, channels]. (A small layer of
// its own here, so the sample does not depend on the pooling family's header.)
class GlobalMaxPool1D : public layers::Layer {
 public:
  using Layer::Layer;
  KEEL_LAYER_BOILERPLATE(GlobalMaxPool1D)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override { set_built(input_shape); }
  Tensor call(const Tensor& x, bool) override { return reduce_max(x, {1}); }
};

const std::vector<std::string> kPositive = {"great", "wonderful", "excellent", "amazing", "delightful", "superb"};
const std::vector<std::string> kNegative = {"awful", "terrible", "boring", "horrible", "dreadful", "dull"};
const std::vector<std::string> kFiller = {"the", "movie", "was", "really", "quite", "plot", "and", "acting", "a",
                                          "story", "with", "music", "felt", "overall", "i", "thought", "it", "very",
                                          "film", "ending", "seemed", "cast", "this", "so"};

struct Sentence {
  std::string text;
  int label;  // 1 positive, 0 negative
};

Sentence make_sentence(std::mt19937& rng) {
  auto pick = [&](const std::vector<std::string>& words) { return words[rng() % words.size()]; };
  const bool positive_word = rng() % 2 == 0;
  const bool negated = rng() % 10 < 3;
  const int before = 2 + static_cast<int>(rng() % 6), after = 1 + static_cast<int>(rng() % 6);
  std::string s;
  for (int i = 0; i < before; ++i) s.append(pick(kFiller)).append(" ");
  if (negated) s += "not ";
  s += pick(positive_word ? kPositive : kNegative);
  for (int i = 0; i < after; ++i) s.append(" ").append(pick(kFiller));
  // Some capitals and punctuation for the standardization to remove.
  if (rng() % 2) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  s += rng() % 2 ? "." : "!";
  return {s, (positive_word != negated) ? 1 : 0};
}

// neg/ and pos/ folders of one .txt file per sentence.
void write_split(const fs::path& dir, int count, std::mt19937& rng) {
  fs::create_directories(dir / "neg");
  fs::create_directories(dir / "pos");
  for (int i = 0; i < count; ++i) {
    const Sentence s = make_sentence(rng);
    const std::string file = std::to_string(i).append(".txt");
    std::ofstream(dir / (s.label ? "pos" : "neg") / file) << s.text;
  }
}

struct Flags {
  int train = 2000, test = 500, epochs = 4;
  unsigned seed = 1;
  double threshold = 0.85;
  std::string data;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: text_cnn [--train N] [--epochs E] [--seed S] [--data DIR] [--threshold A]\n");
      std::exit(2);
    }
    const std::string v = argv[++i];
    if (a == "--train") f.train = std::stoi(v);
    else if (a == "--epochs") f.epochs = std::stoi(v);
    else if (a == "--seed") f.seed = static_cast<unsigned>(std::stoul(v));
    else if (a == "--data") f.data = v;
    else if (a == "--threshold") f.threshold = std::stod(v);
    else {
      std::fprintf(stderr, "usage: text_cnn [--train N] [--epochs E] [--seed S] [--data DIR] [--threshold A]\n");
      std::exit(2);
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  const bool own_dir = flags.data.empty();
  const fs::path root = own_dir ? fs::temp_directory_path() / ("keel-text-cnn-" + std::to_string(::getpid())) : fs::path(flags.data);
  try {
    random::set_seed(flags.seed);
    std::mt19937 rng(flags.seed);
    write_split(root / "train", flags.train, rng);
    write_split(root / "test", flags.test, rng);

    // ---- data: files -> (texts, labels) batches ----
    const std::int64_t batch = 32, sequence_length = 16;
    auto train = data::text_dataset_from_directory((root / "train").string(), {.batch_size = batch, .seed = flags.seed});
    auto test = data::text_dataset_from_directory((root / "test").string(), {.batch_size = batch, .shuffle = false});
    std::printf("%zu training and %zu test texts, classes: %s, %s\n", train.file_paths.size(), test.file_paths.size(),
                train.class_names[0].c_str(), train.class_names[1].c_str());

    // ---- TextVectorization: learnt on the training texts, applied in the pipeline ----
    layers::TextVectorization vectorize({.max_tokens = 1000, .output_sequence_length = static_cast<int>(sequence_length)});
    vectorize.adapt(train.dataset);
    const auto vocabulary_size = static_cast<int>(vectorize.vocabulary_size());
    std::printf("Vocabulary: %d tokens (first: \"%s\", \"%s\", \"%s\")\n", vocabulary_size,
                vectorize.get_vocabulary()[0].c_str(), vectorize.get_vocabulary()[1].c_str(),
                vectorize.get_vocabulary()[2].c_str());
    const auto to_ids = [&vectorize](const std::vector<std::string>& texts, const Tensor& labels) {
      return std::pair<Tensor, Tensor>(vectorize(texts), labels);
    };
    const auto train_ids = train.dataset.map(to_ids).cache();
    const auto test_ids = test.dataset.map(to_ids).cache();

    // ---- the TextCNN ----
    const Tensor inputs = models::Input(Shape{sequence_length}, DType::int64, "token_ids");
    const Tensor embedded = layers::Embedding(vocabulary_size, 32)(inputs);
    std::vector<Tensor> branches;
    for (int width : {3, 4, 5})
      branches.push_back(GlobalMaxPool1D()(layers::Conv1D(32, width, {.activation = "relu"})(embedded)));
    Tensor h = layers::Concatenate()(branches);
    h = layers::Dropout(0.3)(h);
    const Tensor outputs = layers::Dense(2)(h);
    models::Model model(inputs, outputs, "text_cnn");
    model.summary();
    model.compile({.optimizer = optimizers::Adam(2e-3),
                   .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                   .metrics = {"accuracy"}});
    model.fit(train_ids, {.epochs = flags.epochs, .verbose = 2});

    const auto results = model.evaluate(test_ids, {.verbose = 0});
    const double accuracy = results.at("accuracy");
    std::printf("Test loss: %.4f\n", results.at("loss"));
    std::printf("Test accuracy: %.4f\n", accuracy);
    if (own_dir) fs::remove_all(root);
    if (!(accuracy >= flags.threshold)) {
      std::fprintf(stderr, "text_cnn: test accuracy %.4f is below %.2f\n", accuracy, flags.threshold);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::error_code ignored;
    if (own_dir) fs::remove_all(root, ignored);
    std::fprintf(stderr, "text_cnn: %s\n", e.what());
    return 1;
  }
}
