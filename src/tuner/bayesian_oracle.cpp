// keras-tuner's BayesianOptimizationOracle (tuners/bayesian.py): a Gaussian process regressor
// with a Matern 5/2 kernel on the trials' hyperparameters in [0, 1]^d and the confidence-bound
// acquisition mu - beta * sigma, minimised over the unit box.
//
//   k(a, b) = (1 + r + r^2 / 3) exp(-r),  r = sqrt(5) |a - b|   (nu = 5/2, length scale 1)
//   K = k(X, X) + alpha I = L L^T,        alpha_vec = K^-1 y     (y normalised: (y - mean) / std)
//   mu(x) = k(x, X) alpha_vec,  var(x) = 1 - k(x, X) K^-1 k(X, x) (clipped at 0), then un-normalised
//
// The problems are tiny (a few dozen trials, a few hyperparameters): plain loops in double.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "keel/tuner/oracle.hpp"

namespace keel::tuner {

namespace {

using Matrix = std::vector<std::vector<double>>;

double matern52(const std::vector<double>& a, const std::vector<double>& b) {
  double d2 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  const double r = std::sqrt(5.0) * std::sqrt(d2);
  return (1.0 + r + r * r / 3.0) * std::exp(-r);
}

class GaussianProcess {
 public:
  // false when K is not positive definite or the data are not finite (keras-tuner falls back to
  // a random trial then).
  bool fit(Matrix x, std::vector<double> y, double alpha) {
    x_ = std::move(x);
    const std::size_t n = y.size();
    mean_ = 0;
    for (double v : y) mean_ += v;
    mean_ /= static_cast<double>(n);
    double var = 0;
    for (double v : y) var += (v - mean_) * (v - mean_);
    std_ = std::sqrt(var / static_cast<double>(n));
    if (!(std_ > 0) || !std::isfinite(std_)) std_ = 1;  // equal scores: keep the scale
    for (double& v : y) v = (v - mean_) / std_;
    // Cholesky of K + alpha I.
    l_.assign(n, std::vector<double>(n, 0));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        double s = matern52(x_[i], x_[j]) + (i == j ? alpha : 0);
        for (std::size_t k = 0; k < j; ++k) s -= l_[i][k] * l_[j][k];
        if (i == j) {
          if (!(s > 0) || !std::isfinite(s)) return false;
          l_[i][i] = std::sqrt(s);
        } else {
          l_[i][j] = s / l_[j][j];
        }
      }
    alpha_vec_ = solve_upper(solve_lower(y));
    return true;
  }

  // The mean and standard deviation at x (un-normalised).
  std::pair<double, double> predict(const std::vector<double>& x) const {
    std::vector<double> k(x_.size());
    for (std::size_t i = 0; i < x_.size(); ++i) k[i] = matern52(x, x_[i]);
    double mu = 0;
    for (std::size_t i = 0; i < k.size(); ++i) mu += k[i] * alpha_vec_[i];
    // k^T K^-1 k = |L^-1 k|^2
    const std::vector<double> v = solve_lower(k);
    double var = 1;
    for (double e : v) var -= e * e;
    var = std::max(var, 0.0);
    return {std_ * mu + mean_, std::sqrt(var) * std_};
  }

 private:
  std::vector<double> solve_lower(std::vector<double> b) const {
    for (std::size_t i = 0; i < b.size(); ++i) {
      for (std::size_t k = 0; k < i; ++k) b[i] -= l_[i][k] * b[k];
      b[i] /= l_[i][i];
    }
    return b;
  }
  std::vector<double> solve_upper(std::vector<double> b) const {  // L^T x = b
    for (std::size_t i = b.size(); i-- > 0;) {
      for (std::size_t k = i + 1; k < b.size(); ++k) b[i] -= l_[k][i] * b[k];
      b[i] /= l_[i][i];
    }
    return b;
  }
  Matrix x_, l_;
  std::vector<double> alpha_vec_;
  double mean_ = 0, std_ = 1;
};

}  // namespace

BayesianOptimizationOracle::BayesianOptimizationOracle(Objective objective, int max_trials, int num_initial_points,
                                                       double alpha, double beta, std::optional<std::uint64_t> seed)
    : Oracle(std::move(objective), max_trials, seed), num_initial_points_(num_initial_points), alpha_(alpha),
      beta_(beta) {
  if (num_initial_points < 0)
    throw ValueError(fmt::format("BayesianOptimization: num_initial_points must be >= 0, got {}", num_initial_points));
  if (!(alpha > 0)) throw ValueError(fmt::format("BayesianOptimization: alpha must be > 0, got {}", alpha));
  if (!(beta >= 0)) throw ValueError(fmt::format("BayesianOptimization: beta must be >= 0, got {}", beta));
}

Oracle::Populated BayesianOptimizationOracle::populate_space(const std::string&) {
  std::vector<const Trial*> completed;
  for (const auto& id : start_order_) {
    const Trial& t = trials_.at(id);
    if (t.status == "COMPLETED" && t.score && std::isfinite(*t.score)) completed.push_back(&t);
  }
  const auto space = nonfixed_space();
  const int initial = num_initial_points_ > 0 ? num_initial_points_ : 3 * static_cast<int>(space_.space().size());
  auto random_trial = [&]() -> Populated {
    auto values = random_values();
    if (!values) return {"STOPPED", {}};
    return {"RUNNING", std::move(*values)};
  };
  if (static_cast<int>(completed.size()) < initial || space.empty()) return random_trial();

  // The trials as points of [0, 1]^d; the scores framed as a minimisation.
  Matrix x;
  std::vector<double> y;
  for (const Trial* t : completed) {
    std::vector<double> v;
    for (const HyperParameter* hp : space)
      v.push_back(hp->value_to_prob(t->hyperparameters.contains(hp->name) ? t->hyperparameters.value(hp->name)
                                                                          : hp->default_value));
    x.push_back(std::move(v));
    y.push_back(objective_.maximize() ? -*t->score : *t->score);
  }
  GaussianProcess gp;
  if (!gp.fit(x, y, alpha_)) return random_trial();

  const std::size_t d = space.size();
  auto acquisition = [&](const std::vector<double>& p) {
    const auto [mu, sigma] = gp.predict(p);
    return mu - beta_ * sigma;
  };
  // 50 random starts (keras-tuner's num_restarts), each refined by projected gradient descent
  // with central-difference gradients and a backtracking step, inside the unit box.
  std::mt19937_64 gen(seed_ + 7919 * static_cast<std::uint64_t>(trials_.size()));
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  double best_val = std::numeric_limits<double>::infinity();
  std::vector<double> best_x(d, 0.5);
  for (int restart = 0; restart < 50; ++restart) {
    std::vector<double> p(d);
    for (auto& e : p) e = uniform(gen);
    double f = acquisition(p), step = 0.1;
    for (int iter = 0; iter < 40 && step > 1e-5; ++iter) {
      std::vector<double> g(d);
      const double h = 1e-4;
      for (std::size_t i = 0; i < d; ++i) {
        std::vector<double> a = p, b = p;
        a[i] = std::min(1.0, p[i] + h);
        b[i] = std::max(0.0, p[i] - h);
        g[i] = (acquisition(a) - acquisition(b)) / (a[i] - b[i]);
      }
      double norm = 0;
      for (double e : g) norm += e * e;
      norm = std::sqrt(norm);
      if (!(norm > 0)) break;
      std::vector<double> q(d);
      for (std::size_t i = 0; i < d; ++i) q[i] = std::clamp(p[i] - step * g[i] / norm, 0.0, 1.0);
      const double fq = acquisition(q);
      if (fq < f) {
        p = std::move(q);
        f = fq;
        step *= 1.5;
      } else {
        step *= 0.5;
      }
    }
    if (f < best_val) {
      best_val = f;
      best_x = p;
    }
  }
  // Back to values (Fixed ones keep theirs).
  Values values;
  std::size_t k = 0;
  for (const auto& hp : space_.space())
    values.emplace_back(hp.name, hp.kind == HyperParameter::Kind::Fixed ? hp.default_value : hp.prob_to_value(best_x[k++]));
  return {"RUNNING", std::move(values)};
}

nlohmann::json BayesianOptimizationOracle::get_state() const {
  nlohmann::json s = Oracle::get_state();
  s["num_initial_points"] = num_initial_points_;
  s["alpha"] = alpha_;
  s["beta"] = beta_;
  return s;
}

void BayesianOptimizationOracle::set_state(const nlohmann::json& state) {
  Oracle::set_state(state);
  try {
    num_initial_points_ = state.at("num_initial_points").get<int>();
    alpha_ = state.at("alpha").get<double>();
    beta_ = state.at("beta").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(std::string("BayesianOptimization.set_state: malformed oracle state: ") + e.what());
  }
}

}  // namespace keel::tuner
