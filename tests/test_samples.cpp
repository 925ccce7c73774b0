// The sample programs of samples/, run end to end on tiny settings: each must exit 0, print what
// Keras prints (the summary, the epochs) and reach a stated bound on its final metric.
//
// The programs are found in <build>/samples/ next to this test's <build>/tests/ (or in
// $KEEL_SAMPLES_DIR). A build without samples (KEEL_BUILD_SAMPLES=OFF, as the sanitizer build)
// has none: then each case says so and passes without checking anything.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <keel/keel.hpp>

namespace fs = std::filesystem;

namespace {

fs::path samples_dir() {
  if (const char* dir = std::getenv("KEEL_SAMPLES_DIR")) return dir;
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "samples";
}

// The sample's path, or empty (with a warning) when this build has no such program.
std::string sample(const std::string& name) {
  const fs::path p = samples_dir() / name;
  if (!fs::exists(p)) {
    WARN("sample " << p << " is not built (KEEL_BUILD_SAMPLES=OFF?): not checked");
    return "";
  }
  return p.string();
}

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
};

Result run(const std::string& command) {
  Result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// The number after `label` in the output ("Test accuracy: 0.7100" -> 0.71); NaN when absent.
double number_after(const std::string& output, const std::string& label) {
  std::smatch m;
  const std::regex re(label + R"(\s*([-+0-9.eE]+|nan|inf))");
  if (!std::regex_search(output, m, re)) return std::nan("");
  return std::stod(m[1].str());
}

// A fresh folder for a test's files, removed afterwards.
struct Scratch {
  fs::path path;
  explicit Scratch(const std::string& name) {
    path = fs::temp_directory_path() / ("keel-test-samples-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

bool fashion_mnist_installed() { return fs::exists("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz") ||
                                        fs::exists("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte"); }

}  // namespace

TEST_CASE("cifar10_cnn trains on synthetic CIFAR-10 files and saves its best weights", "[samples]") {
  const std::string exe = sample("cifar10_cnn");
  if (exe.empty()) return;
  Scratch dir("cifar10");
  const fs::path checkpoint = dir.path / "best.weights.safetensors";
  const Result r = run(exe + " --synthetic 1000 --epochs 2 --checkpoint " + checkpoint.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("Model: \"cifar10_cnn\"") != std::string::npos);
  CHECK(r.output.find("Total params: 156,074") != std::string::npos);  // the tutorial's network
  CHECK(r.output.find("Epoch 2/2") != std::string::npos);
  CHECK(r.output.find("val_accuracy:") != std::string::npos);
  CHECK(r.output.find("Throughput: input pipeline") != std::string::npos);
  // Chance is 0.10; on the synthetic classes two short epochs give 0.53-0.58 (seeds 1-3).
  CHECK(number_after(r.output, "Test accuracy:") >= 0.4);
  CHECK(number_after(r.output, "Test loss:") < 1.8);  // ln(10) = 2.30 is knowing nothing
  REQUIRE(fs::exists(checkpoint));
  const auto weights = keel::io::load_safetensors(checkpoint.string());
  CHECK(weights.size() == 10);  // kernel and bias of 3 Conv2D and 2 Dense layers
}

TEST_CASE("cifar10_cnn --bn adds BatchNormalization and Dropout and still learns", "[samples]") {
  const std::string exe = sample("cifar10_cnn");
  if (exe.empty()) return;
  Scratch dir("cifar10-bn");
  // 45 steps: enough for the moving statistics (momentum 0.9) that inference uses to settle.
  const Result r = run(exe + " --synthetic 1000 --epochs 3 --bn --checkpoint " + (dir.path / "bn.safetensors").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("batch_normalization") != std::string::npos);  // the layer names in the summary
  CHECK(r.output.find("dropout") != std::string::npos);
  CHECK(number_after(r.output, "Test accuracy:") >= 0.5);  // 0.69-0.72 over seeds 1-3
}

TEST_CASE("cifar10_cnn reports a missing data folder and a bad flag", "[samples]") {
  const std::string exe = sample("cifar10_cnn");
  if (exe.empty()) return;
  Result r = run(exe + " --data /nonexistent-cifar10-folder");
  CHECK(r.status == 1);
  CHECK(r.output.find("data_batch_1.bin") != std::string::npos);
  r = run(exe + " --epochs");
  CHECK(r.status == 2);
  CHECK(r.output.find("usage:") != std::string::npos);
}

TEST_CASE("lstm_timeseries fits the noisy sine and writes its predictions", "[samples]") {
  const std::string exe = sample("lstm_timeseries");
  if (exe.empty()) return;
  Scratch dir("lstm");
  const fs::path csv = dir.path / "predictions.csv";
  const Result r = run(exe + " --epochs 2 --out " + csv.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("lstm (LSTM)") != std::string::npos);
  CHECK(r.output.find("Epoch 2/2") != std::string::npos);
  // In the series' units: the noise alone is 1.0 and predicting the mean about 7.2.
  const double train_rmse = number_after(r.output, "Train Score:");
  const double test_rmse = number_after(r.output, "Test Score:");
  CHECK(train_rmse < 3.0);
  CHECK(test_rmse < 3.0);
  CHECK(test_rmse > 0.5);  // below the noise would mean the test data leaked
  // 1000 points, look_back 3: 797 training and 197 test windows, one row each, plus the header.
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line == "t,split,actual,predicted");
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  CHECK(rows == 797 + 197);
  CHECK_FALSE(fs::exists(csv.string() + ".tmp"));
}

TEST_CASE("lstm_timeseries --look-back 50 builds 50-step windows", "[samples]") {
  const std::string exe = sample("lstm_timeseries");
  if (exe.empty()) return;
  Scratch dir("lstm50");
  const Result r = run(exe + " --look-back 50 --epochs 1 --batch-size 16 --out " + (dir.path / "p.csv").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("750 training and 150 test windows") != std::string::npos);
  CHECK(number_after(r.output, "Test Score:") < 7.0);
}

TEST_CASE("fashion_mnist trains on a subset of the real data", "[samples]") {
  const std::string exe = sample("fashion_mnist");
  if (exe.empty()) return;
  if (!fashion_mnist_installed()) {
    WARN("dataset-fashion-mnist is not installed: not checked");
    return;
  }
  const Result r = run(exe + " --limit 2000 --epochs 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("2000 training images, 10000 test images") != std::string::npos);
  CHECK(r.output.find("Epoch 1/1") != std::string::npos);
  CHECK(number_after(r.output, "Test accuracy:") >= 0.6);  // about 0.7 after one epoch of 2000
}

TEST_CASE("fashion_mnist says how to install a missing data set", "[samples]") {
  const std::string exe = sample("fashion_mnist");
  if (exe.empty()) return;
  const Result r = run(exe + " --data /nonexistent-fashion-mnist-folder");
  CHECK(r.status == 1);
  CHECK(r.output.find("dataset-fashion-mnist") != std::string::npos);
}

TEST_CASE("distillation trains a teacher and distils it into a student", "[samples]") {
  const std::string exe = sample("distillation");
  if (exe.empty()) return;
  const Result r = run(exe + " --synthetic --limit 1500 --epochs 3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("distillation_loss:") != std::string::npos);
  CHECK(r.output.find("student_loss:") != std::string::npos);
  CHECK(number_after(r.output, "Student accuracy:") > 0.35);  // 0.48-0.61 over seeds 1-4 (the default seed 1: 0.61)
}

TEST_CASE("text_cnn learns the generated sentiment rule from text files", "[samples]") {
  const std::string exe = sample("text_cnn");
  if (exe.empty()) return;
  Scratch dir("text-cnn");
  const Result r = run(exe + " --train 1500 --epochs 4 --data " + (dir.path / "data").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("Model: \"text_cnn\"") != std::string::npos);
  CHECK(r.output.find("1500 training and 500 test texts, classes: neg, pos") != std::string::npos);
  // Chance is 0.5; the keyword (and "not" before it) decides the label.
  CHECK(number_after(r.output, "Test accuracy:") >= 0.85);
}

TEST_CASE("transfer_learning freezes a pretrained base and fine-tunes a new head", "[samples]") {
  const std::string exe = sample("transfer_learning");
  if (exe.empty()) return;
  if (!fashion_mnist_installed()) {
    WARN("dataset-fashion-mnist is not installed: not checked");
    return;
  }
  const Result r = run(exe + " --limit 3000 --epochs 2 --finetune-images 500");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("Frozen base unchanged: yes") != std::string::npos);
  CHECK(r.output.find("Non-trainable params: 108,736") != std::string::npos);  // the frozen base
  CHECK(number_after(r.output, "Fine-tuned accuracy on classes 5-9:") > 0.6);  // about 0.81
}
