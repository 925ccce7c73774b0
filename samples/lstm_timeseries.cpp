// The classic "time series prediction with an LSTM" exercise, written with keel's Keras API: a
// noisy sine series, min-max scaled to [0, 1], cut into windows of `look_back` values that
// predict the next one; LSTM(50) + Dense(1), Adam, mean squared error, 20 epochs of batch 1.
//
//   Keras                                              keel
//   MinMaxScaler(feature_range=(0, 1))                 (x - min) / (max - min), by hand
//   X = reshape(X, (samples, look_back, 1))            constant(values, Shape{samples, look_back, 1})
//   Sequential([Input((look_back, 1)), LSTM(50),       models::Sequential{layers::InputLayer({look_back, 1}),
//               Dense(1)])                                 layers::LSTM(50), layers::Dense(1)}
//   model.compile(loss="mean_squared_error",           model.compile({.optimizer = "adam",
//                 optimizer="adam")                                   .loss = "mean_squared_error"})
//   model.fit(X, y, epochs=20, batch_size=1)           model.fit(X, y, {.batch_size = 1, .epochs = 20})
//   scaler.inverse_transform(model.predict(X))         model.predict(X) * (max - min) + min
//
//   lstm_timeseries [--look-back L (3; 50 for the longer-window variant)] [--epochs E (20)]
//                   [--batch-size B (1)] [--points N (1000)] [--out FILE (predictions.csv)] [--seed S]
//
// Prints the train and test RMSE in the series' own units next to two baselines (repeating the
// last value, and the mean), and writes every prediction as CSV (t, split, actual, predicted).
// Exits with status 1 when the model does no better than predicting the mean.
#include <keel/keel.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

using namespace keel;

namespace {

// The series: a daily-temperature-like signal, 20 +- 10 with a period of 50 steps, plus
// Gaussian noise of standard deviation 1 (which no model can predict: the floor of the RMSE).
constexpr double kLevel = 20.0, kAmplitude = 10.0, kPeriod = 50.0, kNoise = 1.0;

struct Flags {
  int look_back = 3;
  int epochs = 20;
  std::int64_t batch_size = 1;  // the classic exercise updates after every window
  std::int64_t points = 1000;
  std::string out = "predictions.csv";
  std::uint64_t seed = 7;
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "lstm_timeseries: %s\n", error);
  std::fprintf(stderr,
               "usage: lstm_timeseries [--look-back L] [--epochs E] [--batch-size B] [--points N] [--out FILE] "
               "[--seed S]\n");
  std::exit(error ? 2 : 0);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    auto integer = [&]() -> std::int64_t {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1) usage((arg + " needs a positive integer, got '" + v + "'").c_str());
      return n;
    };
    if (arg == "--look-back") f.look_back = static_cast<int>(integer());
    else if (arg == "--epochs") f.epochs = static_cast<int>(integer());
    else if (arg == "--batch-size") f.batch_size = integer();
    else if (arg == "--points") f.points = integer();
    else if (arg == "--out") f.out = value();
    else if (arg == "--seed") f.seed = static_cast<std::uint64_t>(integer());
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  // Both parts of the 80/20 split need at least one window.
  if (f.points / 5 <= f.look_back) usage("--points must be more than 5 times --look-back");
  return f;
}

// The classic create_dataset: window i is values[i .. i+look_back), its target values[i+look_back].
// Returns x [windows, look_back, 1] (time steps of one feature, what LSTM expects) and y [windows, 1].
std::pair<Tensor, Tensor> make_windows(const std::vector<float>& values, int look_back) {
  const auto windows = static_cast<std::int64_t>(values.size()) - look_back;
  std::vector<float> x, y;
  for (std::int64_t i = 0; i < windows; ++i) {
    x.insert(x.end(), values.begin() + i, values.begin() + i + look_back);
    y.push_back(values[static_cast<std::size_t>(i + look_back)]);
  }
  return {constant(x, Shape{windows, look_back, 1}), constant(y, Shape{windows, 1})};
}

double rmse(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(sum / static_cast<double>(a.size()));
}

struct Part {
  const char* name;
  std::int64_t first_t;         // the time index of the part's first value
  std::vector<double> actual;   // the targets, original units
  std::vector<double> predicted;
  std::vector<double> last;     // the last value of each window: the persistence forecast
};

// Writes the CSV to a temporary name and renames it into place, so that a crash never leaves a
// half-written file under the real name.
void write_csv(const std::string& path, const std::vector<Part>& parts, int look_back) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "t,split,actual,predicted\n";
    char line[128];
    for (const Part& p : parts)
      for (std::size_t i = 0; i < p.actual.size(); ++i) {
        std::snprintf(line, sizeof line, "%lld,%s,%.6f,%.6f\n",
                      static_cast<long long>(p.first_t + look_back + static_cast<std::int64_t>(i)), p.name,
                      p.actual[i], p.predicted[i]);
        out << line;
      }
    out.flush();
    if (!out) throw IOError("lstm_timeseries: could not write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

int run(const Flags& flags) {
  random::set_seed(flags.seed);

  // ---- the series, the split, the scaling ----
  const Tensor t = arange(0, static_cast<double>(flags.points));
  const Tensor series =
      kLevel + kAmplitude * sin(t * (2 * std::numbers::pi / kPeriod)) + random::normal({flags.points}, 0, kNoise);
  const std::vector<float> values = series.to_vector<float>();
  const auto train_size = static_cast<std::size_t>(flags.points * 8 / 10);
  const std::vector<float> train_raw(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(train_size));
  const std::vector<float> test_raw(values.begin() + static_cast<std::ptrdiff_t>(train_size), values.end());

  // Min-max scaling to [0, 1] with the training part's range (the test part is "the future": it
  // must not leak into the preprocessing, so its values may fall slightly outside [0, 1]).
  const auto [min_it, max_it] = std::minmax_element(train_raw.begin(), train_raw.end());
  const double lo = *min_it, range = *max_it - *min_it;
  auto scale = [&](std::vector<float> v) {
    for (float& x : v) x = static_cast<float>((x - lo) / range);
    return v;
  };
  auto unscale = [&](const Tensor& scaled) {
    std::vector<double> v = scaled.to_vector<double>();
    for (double& x : v) x = x * range + lo;
    return v;
  };
  const auto [x_train, y_train] = make_windows(scale(train_raw), flags.look_back);
  const auto [x_test, y_test] = make_windows(scale(test_raw), flags.look_back);
  std::printf("series: %lld points (level %.0f, amplitude %.0f, period %.0f, noise %.1f); look_back %d: "
              "%lld training and %lld test windows\n",
              static_cast<long long>(flags.points), kLevel, kAmplitude, kPeriod, kNoise, flags.look_back,
              static_cast<long long>(x_train.shape()[0]), static_cast<long long>(x_test.shape()[0]));

  // ---- the model ----
  models::Sequential model{layers::InputLayer({flags.look_back, 1}), layers::LSTM(50), layers::Dense(1)};
  model.summary();
  model.compile({.optimizer = optimizers::Adam(1e-3), .loss = "mean_squared_error"});

  const auto start = std::chrono::steady_clock::now();
  model.fit(x_train, y_train, {.batch_size = flags.batch_size, .epochs = flags.epochs});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // ---- the predictions, in the series' units ----
  std::vector<Part> parts = {{"train", 0, {}, {}, {}}, {"test", static_cast<std::int64_t>(train_size), {}, {}, {}}};
  const std::pair<Tensor, Tensor> data[] = {{x_train, y_train}, {x_test, y_test}};
  for (std::size_t k = 0; k < 2; ++k) {
    const Tensor& x = data[k].first;
    const std::int64_t n = x.shape()[0];
    parts[k].actual = unscale(data[k].second);
    parts[k].predicted = unscale(model.predict(x, {.batch_size = 256}));
    parts[k].last = unscale(slice(x, {0, flags.look_back - 1, 0}, {n, 1, 1}));
  }
  std::vector<double> train_mean(parts[1].actual.size());
  {
    double sum = 0;
    for (double v : parts[0].actual) sum += v;
    std::fill(train_mean.begin(), train_mean.end(), sum / static_cast<double>(parts[0].actual.size()));
  }
  const double train_rmse = rmse(parts[0].actual, parts[0].predicted);
  const double test_rmse = rmse(parts[1].actual, parts[1].predicted);
  const double persistence_rmse = rmse(parts[1].actual, parts[1].last);
  const double mean_rmse = rmse(parts[1].actual, train_mean);
  write_csv(flags.out, parts, flags.look_back);

  std::printf("Trained %d epochs (batch size %lld) in %.1f s\n", flags.epochs,
              static_cast<long long>(flags.batch_size), seconds);
  std::printf("Train Score: %.2f RMSE\n", train_rmse);
  std::printf("Test Score: %.2f RMSE\n", test_rmse);
  std::printf("Baselines on the test part: last value %.2f RMSE, training mean %.2f RMSE (noise floor %.2f)\n",
              persistence_rmse, mean_rmse, kNoise);
  std::printf("Predictions written to %s\n", flags.out.c_str());
  if (!(test_rmse < mean_rmse)) {
    std::fprintf(stderr, "lstm_timeseries: FAIL: the test RMSE is no better than predicting the mean\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  try {
    return run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lstm_timeseries: %s\n", e.what());
    return 1;
  }
}
