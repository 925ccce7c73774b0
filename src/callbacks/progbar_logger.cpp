// callbacks::ProgbarLogger: fit()'s progress bar as a callback (Keras' ProgbarLogger).
#include <iostream>

#include "keel/callbacks/callback.hpp"
#include "models/progbar.hpp"

namespace keel::callbacks {

struct ProgbarLogger::Bar {
  models::Progbar bar;
};

ProgbarLogger::ProgbarLogger(int verbose, std::ostream* out) : verbose_(verbose), out_(out ? out : &std::cout) {}
ProgbarLogger::~ProgbarLogger() = default;

void ProgbarLogger::on_epoch_begin(int epoch, const Logs&) {
  // fit()'s params: the epoch count for "Epoch i/N", the steps (-1 until a Dataset's first pass).
  const auto epochs = params.count("epochs") ? static_cast<int>(params.at("epochs")) : 0;
  const auto steps = params.count("steps") ? static_cast<std::int64_t>(params.at("steps")) : -1;
  if (verbose_) *out_ << "Epoch " << epoch + 1 << "/" << epochs << std::endl;
  bar_ = std::make_unique<Bar>(Bar{models::Progbar(steps, verbose_, *out_)});
  seen_ = 0;
}

void ProgbarLogger::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  seen_ = batch + 1;
  if (bar_) bar_->bar.update(seen_, logs, false);
}

void ProgbarLogger::on_epoch_end(int, const Logs& logs) {
  if (bar_) bar_->bar.update(seen_, logs, true);
}

}  // namespace keel::callbacks
