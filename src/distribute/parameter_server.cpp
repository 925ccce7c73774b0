// ParameterServerStrategy: asynchronous data parallelism with the variables on parameter-server
// processes (strategy.hpp), over the point-to-point mailbox of communicator.hpp.
//
// The protocol, per worker step: the worker posts each server a PUSH of its gradients for the
// variables that server holds (with its step number), then waits for one WEIGHTS answer per
// server and assigns it. A server applies each push with its optimizer when it arrives and
// answers at once, unless the worker is then more than max_staleness steps ahead of the slowest
// worker still training: that answer waits until the slowest catches up (stale synchronous
// parallel, which bounds how old the weights a gradient was computed on can be). A worker at
// the end of fit posts DONE; a server stops when every worker has. A server that hears nothing
// from a worker it is not holding back for timeout_s posts ABORT (naming it) to the workers it
// holds and throws; a worker whose server does not answer within twice timeout_s (at most
// timeout_s + 10 s) throws.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/recorder.hpp"
#include "distribute/collective_kernels.hpp"
#include "distribute/communicator.hpp"
#include "distribute/hooks.hpp"
#include "keel/distribute/strategy.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/optimizers/loss_scale_optimizer.hpp"
#include "keel/optimizers/optimizer.hpp"

namespace keel::distribute {

namespace detail {

namespace {

constexpr int kPush = 9101, kWeights = 9102, kDone = 9103, kAbort = 9104;
using Clock = std::chrono::steady_clock;

// A server's part in the workers' collectives: none (it is not a worker).
class ServerCommunicator final : public Communicator {
 public:
  ServerCommunicator(int workers, int rank) : workers_(workers), rank_(rank) {}
  int size() const override { return workers_; }
  int rank() const override { return -1; }
  void all_reduce(void*, std::size_t, DType, Combine) override { refuse("all_reduce"); }
  void broadcast(void*, std::size_t, int) override { refuse("broadcast"); }
  void barrier() override { refuse("barrier"); }
  std::string transport() const override { return "none (parameter server)"; }

 private:
  [[noreturn]] void refuse(const char* what) const {
    throw ValueError(fmt::format("ParameterServerStrategy.{}: rank {} is a parameter server, which takes no part in "
                                 "the workers' collectives (check is_parameter_server())", what, rank_));
  }
  int workers_, rank_;
};

template <class T>
void put(std::vector<char>& out, T value) {
  const auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

// The bytes of t (on the host, contiguous) appended to out.
void put_tensor(std::vector<char>& out, const Tensor& t) {
  const Tensor h = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
  const std::size_t n = static_cast<std::size_t>(h.size()) * itemsize(h.dtype());
  const auto at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(out.data() + at, h.raw_data(), n);
}

// Reads a message front to back, every read checked against its length.
class Reader {
 public:
  Reader(const Message& m, const char* what) : m_(m), what_(what) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  // A tensor of v's shape and dtype with the next bytes, on the host.
  Tensor tensor_like(const Variable& v) {
    Tensor t;
    {
      DeviceScope host(Device::cpu());
      t = empty(v.shape(), v.dtype());
    }
    const std::size_t n = static_cast<std::size_t>(t.size()) * itemsize(t.dtype());
    if (n) std::memcpy(t.raw_data(), take(n), n);
    return t;
  }
  void end() const {
    if (at_ != m_.bytes.size()) fail(m_.bytes.size() - at_);
  }

 private:
  const char* take(std::size_t n) {
    if (n > m_.bytes.size() - at_) fail(n);
    const char* p = m_.bytes.data() + at_;
    at_ += n;
    return p;
  }
  [[noreturn]] void fail(std::size_t n) const {
    throw RuntimeError(fmt::format("ParameterServerStrategy: a {} message of {} bytes from rank {} does not match this "
                                   "process's variables (at offset {}, {} bytes): do all processes build the same "
                                   "model?", what_, m_.bytes.size(), m_.source, at_, n));
  }
  const Message& m_;
  const char* what_;
  std::size_t at_ = 0;
};

void assign_host(Variable& v, const Tensor& host) { v.assign(v.device().is_cpu() ? host : host.to(v.device())); }

}  // namespace

class ParameterServerState {
 public:
  ParameterServerOptions options;
  int world = 1, rank = 0, workers = 1;
  std::shared_ptr<Communicator> world_comm, worker_comm;
  std::shared_ptr<Mailbox> mailbox;
  ParameterServerStats stats;
  std::int64_t clock = 0;        // a worker's steps in this fit
  std::size_t n_trainable = 0;   // the trainable variables of this fit

  bool is_server() const { return rank >= workers; }
  int server_rank(int p) const { return workers + p; }
  int owner(std::size_t i) const { return static_cast<int>(i % static_cast<std::size_t>(options.num_ps)); }

  // A worker's step: push, then wait for every server's answer.
  void push_pull(const Tensor* g, std::size_t n, const std::vector<Variable*>& vars) {
    if (n != n_trainable || vars.size() != n)
      throw ValueError(fmt::format("ParameterServerStrategy: a step with {} gradients, but fit began with {} trainable "
                                   "variables", n, n_trainable));
    for (int p = 0; p < options.num_ps; ++p) {
      std::vector<char> msg;
      put<std::int64_t>(msg, clock);
      for (std::size_t i = static_cast<std::size_t>(p); i < n; i += static_cast<std::size_t>(options.num_ps))
        put<std::uint8_t>(msg, g[i].defined() ? 1 : 0);
      for (std::size_t i = static_cast<std::size_t>(p); i < n; i += static_cast<std::size_t>(options.num_ps)) {
        if (!g[i].defined()) continue;
        if (g[i].shape() != vars[i]->shape())
          throw ShapeError(fmt::format("ParameterServerStrategy: the gradient of '{}' has shape {}, the variable {}",
                                       vars[i]->name(), g[i].shape().to_string(), vars[i]->shape().to_string()));
        put_tensor(msg, g[i].dtype() == vars[i]->dtype() ? g[i] : cast(g[i], vars[i]->dtype()));
      }
      mailbox->post(server_rank(p), kPush, std::move(msg));
    }
    const auto begin = Clock::now();
    // A server holding this worker back for a silent one says so (ABORT) after timeout_s; this
    // worker gives up on the server itself only a grace period later, so that the verdict
    // naming the silent worker arrives first.
    const double patience = options.timeout_s + std::min(options.timeout_s, 10.0);
    for (int p = 0; p < options.num_ps; ++p) {
      const auto m = mailbox->receive(server_rank(p), -1, patience);
      if (!m)
        throw RuntimeError(fmt::format("ParameterServerStrategy: worker {}: parameter server {} (rank {}) did not answer "
                                       "step {} within {} s (timeout_s = {} s and as much again; dead or stuck)",
                                       rank, p, server_rank(p), clock, patience, options.timeout_s));
      if (m->tag == kAbort) throw RuntimeError(std::string(m->bytes.begin(), m->bytes.end()));
      Reader r(*m, "weights");
      for (std::size_t i = static_cast<std::size_t>(p); i < n; i += static_cast<std::size_t>(options.num_ps))
        assign_host(*vars[i], r.tensor_like(*vars[i]));
      r.end();
    }
    stats.wait_s += std::chrono::duration<double>(Clock::now() - begin).count();
    ++stats.steps;
    ++clock;
  }

  void serve(const std::vector<Variable*>& trainable, optimizers::Optimizer& optimizer);
};

namespace {

ParameterServerStrategy* ps_strategy() { return dynamic_cast<ParameterServerStrategy*>(&get_strategy()); }

ParameterServerState& ps_state(const char* op) {
  ParameterServerStrategy* s = ps_strategy();
  if (!s) throw ValueError(fmt::format("{}: no ParameterServerStrategy is in scope", op));
  return s->state();
}

// One server's loop (see the top of this file).
class Server {
 public:
  Server(ParameterServerState& st, const std::vector<Variable*>& trainable, optimizers::Optimizer& optimizer)
      : st_(st), optimizer_(optimizer), w_(static_cast<std::size_t>(st.workers)) {
    for (std::size_t i = static_cast<std::size_t>(st.rank - st.workers); i < trainable.size();
         i += static_cast<std::size_t>(st.options.num_ps))
      owned_.push_back(trainable[i]);
    clocks_.assign(w_, 0);
    sent_version_.assign(w_, 0);
    done_.assign(w_, false);
    held_.assign(w_, false);
    heard_.assign(w_, Clock::now());
  }

  void run() {
    std::size_t finished = 0;
    double stale_sum = 0;
    while (finished < w_) {
      const auto m = st_.mailbox->receive(-1, -1, std::min(0.25, st_.options.timeout_s));
      const auto now = Clock::now();
      if (!m) {
        check_silence(now);
        continue;
      }
      if (m->source < 0 || m->source >= st_.workers)
        throw RuntimeError(fmt::format("ParameterServerStrategy: server rank {} got a message from rank {}, which is "
                                       "not a worker", st_.rank, m->source));
      const auto w = static_cast<std::size_t>(m->source);
      heard_[w] = now;
      if (m->tag == kPush) {
        const std::int64_t staleness = updates_ - sent_version_[w];
        apply(*m);
        ++updates_;
        stale_sum += static_cast<double>(staleness);
        st_.stats.max_staleness = std::max(st_.stats.max_staleness, staleness);
        ++clocks_[w];
        held_[w] = true;
      } else if (m->tag == kDone) {
        if (!done_[w]) ++finished;
        done_[w] = true;
      } else {
        throw RuntimeError(fmt::format("ParameterServerStrategy: server rank {} got a message with tag {} from rank {}",
                                       st_.rank, m->tag, m->source));
      }
      release();
    }
    st_.mailbox->flush(st_.options.timeout_s);
    st_.stats.updates = updates_;
    st_.stats.mean_staleness = updates_ ? stale_sum / static_cast<double>(updates_) : 0;
  }

 private:
  void apply(const Message& m) {
    Reader r(m, "gradients");
    const auto step = r.get<std::int64_t>();
    if (step != clocks_[static_cast<std::size_t>(m.source)])
      throw RuntimeError(fmt::format("ParameterServerStrategy: worker {} pushed step {}, server rank {} expected {}",
                                     m.source, step, st_.rank, clocks_[static_cast<std::size_t>(m.source)]));
    std::vector<std::uint8_t> defined;
    for (std::size_t k = 0; k < owned_.size(); ++k) defined.push_back(r.get<std::uint8_t>());
    std::vector<Tensor> grads(owned_.size());
    for (std::size_t k = 0; k < owned_.size(); ++k)
      if (defined[k]) {
        const Tensor g = r.tensor_like(*owned_[k]);
        grads[k] = owned_[k]->device().is_cpu() ? g : g.to(owned_[k]->device());
      }
    r.end();
    if (!owned_.empty()) optimizer_.apply(grads, owned_);
  }

  // Answers every held worker that is no more than max_staleness steps ahead of the slowest
  // worker still training.
  void release() {
    std::int64_t slowest = std::numeric_limits<std::int64_t>::max();
    for (std::size_t w = 0; w < w_; ++w)
      if (!done_[w]) slowest = std::min(slowest, clocks_[w]);
    for (std::size_t w = 0; w < w_; ++w) {
      if (!held_[w]) continue;
      const std::int64_t lead = clocks_[w] - slowest;  // held workers are training: slowest <= clocks_[w]
      if (lead > st_.options.max_staleness) continue;
      std::vector<char> msg;
      for (Variable* v : owned_) put_tensor(msg, v->peek());
      st_.mailbox->post(static_cast<int>(w), kWeights, std::move(msg));
      held_[w] = false;
      sent_version_[w] = updates_;
      st_.stats.max_clock_lead = std::max(st_.stats.max_clock_lead, lead);
    }
  }

  // A worker that is neither done nor held here and has sent nothing for timeout_s is dead or
  // stuck: the held workers are told, then this server throws.
  void check_silence(Clock::time_point now) {
    for (std::size_t w = 0; w < w_; ++w) {
      if (done_[w] || held_[w]) continue;
      if (std::chrono::duration<double>(now - heard_[w]).count() <= st_.options.timeout_s) continue;
      const std::string why = fmt::format(
          "ParameterServerStrategy: worker {} (rank {}) sent parameter server rank {} nothing for timeout_s = {} s "
          "(dead or stuck)", w, w, st_.rank, st_.options.timeout_s);
      for (std::size_t h = 0; h < w_; ++h)
        if (held_[h]) st_.mailbox->post(static_cast<int>(h), kAbort, std::vector<char>(why.begin(), why.end()));
      try {
        st_.mailbox->flush(std::min(2.0, st_.options.timeout_s));
      } catch (const Error&) {  // a held worker that died too: the error below says enough
      }
      throw RuntimeError(why);
    }
  }

  ParameterServerState& st_;
  optimizers::Optimizer& optimizer_;
  std::size_t w_;
  std::vector<Variable*> owned_;
  std::vector<std::int64_t> clocks_, sent_version_;
  std::vector<bool> done_, held_;
  std::vector<Clock::time_point> heard_;
  std::int64_t updates_ = 0;
};

// Every process checks that all hold the same numbers (max over the job == min over it).
void check_same_numbers(ParameterServerState& st, const std::vector<std::int64_t>& sig, const char* what) {
  if (!same_on_every_rank(*st.world_comm, sig))
    throw ValueError(fmt::format("ParameterServerStrategy: rank {} has {} {} {}, another process a different "
                                   "number (every process must build the same model)", st.rank, sig[0], what,
                                   sig.size() > 1 ? fmt::format("of {} elements", sig[1]) : std::string()));
}

void broadcast_into(ParameterServerState& st, Variable& v, int root) {
  const Tensor value = broadcast_tensor(st.world_comm, v.peek(), root);
  v.assign(value.device() == v.device() ? value : value.to(v.device()));
}

}  // namespace

void ParameterServerState::serve(const std::vector<Variable*>& trainable, optimizers::Optimizer& optimizer) {
  Server(*this, trainable, optimizer).run();
}

bool parameter_server_mode() { return ps_strategy() != nullptr; }
bool is_parameter_server() {
  const ParameterServerStrategy* s = ps_strategy();
  return s && s->is_parameter_server();
}

std::pair<std::int64_t, std::int64_t> worker_rows(std::int64_t n) { return even_split(n, worker_count(), worker_number()); }

std::int64_t worker_number() { return get_strategy().worker_index(); }
std::int64_t worker_count() { return get_strategy().num_workers(); }

void ps_fit_begin(const std::vector<Variable*>& weights, const std::vector<Variable*>& trainable) {
  ParameterServerState& st = ps_state("fit");
  autograd::NoRecordScope no_record;
  std::int64_t elements = 0;
  for (Variable* v : trainable) elements += v->peek().size();
  check_same_numbers(st, {static_cast<std::int64_t>(trainable.size()), elements}, "trainable variables");
  check_same_numbers(st, {static_cast<std::int64_t>(weights.size())}, "weights");
  for (Variable* v : weights) broadcast_into(st, *v, 0);
  st.n_trainable = trainable.size();
  st.clock = 0;
  st.stats = {};
}

void ps_serve(const std::vector<Variable*>& trainable, optimizers::Optimizer& optimizer) {
  ParameterServerState& st = ps_state("fit");
  autograd::NoRecordScope no_record;
  st.serve(trainable, optimizer);
}

void ps_push_pull(const std::vector<Tensor>& grads, const std::vector<Variable*>& vars,
                  const optimizers::Optimizer& optimizer) {
  ParameterServerState& st = ps_state("train step");
  // global_clipnorm is over all the variables, which several servers share between them: the
  // worker clips its whole gradient first. Each server's own clip then sees a part of a gradient
  // whose norm is at most global_clipnorm, and leaves it as it is.
  const optimizers::CommonOptions& common = optimizer.common_options();
  const double clip = st.options.num_ps > 1 && common.global_clipnorm ? *common.global_clipnorm : 0;
  if (clip > 0 && (common.gradient_accumulation_steps || common.loss_scale_factor ||
                   dynamic_cast<const optimizers::LossScaleOptimizer*>(&optimizer)))
    throw ValueError(fmt::format("ParameterServerStrategy: global_clipnorm over {} parameter servers is applied by "
                                 "the workers, which cannot with gradient_accumulation_steps or a loss scale",
                                 st.options.num_ps));
  std::vector<const Tensor*> inputs;
  for (const Tensor& g : grads) inputs.push_back(&g);
  backend::host_step("PushPullParameters", inputs, [state = &st, vars, n = grads.size(), clip](const Tensor* g) {
    autograd::NoRecordScope no_record;
    if (clip <= 0) return state->push_pull(g, n, vars);
    double sq = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (g[i].defined()) sq += reduce_sum(square(cast(g[i], DType::float64))).item<double>();
    // Keras' clip_by_global_norm factor: clip * min(1 / norm, 1 / clip), NaN for a non-finite norm.
    const double norm = std::sqrt(sq);
    const double scale = std::isfinite(norm) ? clip * std::min(1.0 / norm, 1.0 / clip)
                                             : std::numeric_limits<double>::quiet_NaN();
    std::vector<Tensor> clipped(g, g + n);
    if (scale != 1)
      for (Tensor& t : clipped)
        if (t.defined()) t = t * scale;
    state->push_pull(clipped.data(), n, vars);
  });
}

void ps_fit_end(const std::vector<Variable*>& trainable, const std::vector<Variable*>& non_trainable) {
  ParameterServerState& st = ps_state("fit");
  autograd::NoRecordScope no_record;
  if (!st.is_server()) {
    for (int p = 0; p < st.options.num_ps; ++p) st.mailbox->post(st.server_rank(p), kDone, {});
    st.mailbox->flush(st.options.timeout_s);
  }
  for (std::size_t i = 0; i < trainable.size(); ++i) broadcast_into(st, *trainable[i], st.server_rank(st.owner(i)));
  for (Variable* v : non_trainable) broadcast_into(st, *v, 0);
}

}  // namespace detail

namespace {

std::shared_ptr<detail::ParameterServerState> make_state(const ParameterServerOptions& o) {
  constexpr const char* who = "ParameterServerStrategy";
  if (o.num_ps < 1) throw ValueError(fmt::format("{}: num_ps must be at least 1, got {}", who, o.num_ps));
  if (o.max_staleness < 0)
    throw ValueError(fmt::format("{}: max_staleness must be 0 or more steps, got {}", who, o.max_staleness));
  if (!(o.timeout_s > 0) || !std::isfinite(o.timeout_s))
    throw ValueError(fmt::format("{}: timeout_s must be a positive number of seconds, got {}", who, o.timeout_s));
  if (!detail::mpi_built())
    throw ValueError(fmt::format("{}: keel was built without MPI (configure with -DKEEL_DISTRIBUTED=ON and an MPI "
                                 "installation such as libopenmpi-dev)", who));
  auto st = std::make_shared<detail::ParameterServerState>();
  st->options = o;
  st->world = detail::mpi_world_size();
  st->rank = detail::mpi_world_rank();
  if (st->world < o.num_ps + 1)
    throw ValueError(fmt::format("{}: num_ps = {} parameter server(s) and at least one worker need {} processes, and "
                                 "this job has {} (start it with mpirun -np N)", who, o.num_ps, o.num_ps + 1, st->world));
  st->workers = st->world - o.num_ps;
  // Collective over the whole job, in the same order on every process.
  st->world_comm = detail::make_mpi_communicator(o.timeout_s);
  st->worker_comm = detail::make_mpi_communicator(o.timeout_s, st->workers);
  if (!st->worker_comm) st->worker_comm = std::make_shared<detail::ServerCommunicator>(st->workers, st->rank);
  st->mailbox = detail::make_mpi_mailbox();
  return st;
}

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(ParameterServerOptions options)
    : ParameterServerStrategy(options, make_state(options)) {}

ParameterServerStrategy::ParameterServerStrategy(ParameterServerOptions options,
                                                 std::shared_ptr<detail::ParameterServerState> state)
    : Strategy(state->worker_comm, MultiWorkerOptions{.communication = "mpi", .timeout_s = options.timeout_s}),
      ps_options_(options),
      state_(std::move(state)) {}

ParameterServerStrategy::~ParameterServerStrategy() = default;

int ParameterServerStrategy::worker_index() const { return state_->is_server() ? -1 : state_->rank; }
int ParameterServerStrategy::num_workers() const { return state_->workers; }
bool ParameterServerStrategy::is_parameter_server() const { return state_->is_server(); }
ParameterServerStats ParameterServerStrategy::stats() const { return state_->stats; }

}  // namespace keel::distribute
