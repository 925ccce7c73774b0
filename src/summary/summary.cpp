// tf.summary's writers: Event protos (TensorBoard's schemas, compiled with protobuf) framed as
// TFRecords in an events.out.tfevents.* file. An event file is an append-only log that
// TensorBoard reads while it grows, so it is written in place (flushed on flush() and on
// destruction) rather than to a temporary name.
#include "keel/summary/summary.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <vector>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/data/image_files.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"
#include "summary/record_writer.hpp"
#include "tensorboard/compat/proto/event.pb.h"
#include "tensorboard/compat/proto/summary.pb.h"

namespace keel::summary {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// An Event holding `summary` at `step`, serialised.
std::string summary_event(const tensorboard::Summary& summary, std::int64_t step) {
  tensorboard::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  *e.mutable_summary() = summary;
  return e.SerializeAsString();
}

}  // namespace

struct FileWriter::Impl {
  std::string logdir, path;
  std::ofstream out;
};

FileWriter::FileWriter(std::string logdir) : impl_(std::make_unique<Impl>()) {
  impl_->logdir = std::move(logdir);
  detail::make_dirs(impl_->logdir, "summary.FileWriter");
  // TensorFlow's name: events.out.tfevents.<seconds>.<host>.<pid>.<counter>.v2 (the counter keeps
  // two writers opened in one second apart).
  static std::atomic<int> counter{0};
  impl_->path = fmt::format("{}/events.out.tfevents.{}.{}.{}.{}.v2", impl_->logdir,
                            static_cast<long long>(now_seconds()), host_name(), static_cast<long long>(::getpid()),
                            counter++);
  impl_->out.open(impl_->path, std::ios::binary | std::ios::app);
  if (!impl_->out) throw IOError(fmt::format("summary.FileWriter: cannot open {} for writing", impl_->path));
  tensorboard::Event header;
  header.set_wall_time(now_seconds());
  header.set_file_version("brain.Event:2");
  write_event(header.SerializeAsString());
  flush();
}

FileWriter::~FileWriter() {
  if (impl_ && impl_->out.is_open()) impl_->out.flush();
}

void FileWriter::flush() {
  impl_->out.flush();
  if (!impl_->out) throw IOError(fmt::format("summary.FileWriter: cannot write {}", impl_->path));
}

const std::string& FileWriter::logdir() const { return impl_->logdir; }
const std::string& FileWriter::path() const { return impl_->path; }

void FileWriter::write_event(const std::string& serialized_event) {
  const std::string frame = detail::tfrecord(serialized_event);
  if (!impl_->out.write(frame.data(), static_cast<std::streamsize>(frame.size())))
    throw IOError(fmt::format("summary.FileWriter: cannot write {}", impl_->path));
}

void scalar(FileWriter& writer, const std::string& tag, double value, std::int64_t step) {
  tensorboard::Summary s;
  auto* v = s.add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  writer.write_event(summary_event(s, step));
}

void histogram(FileWriter& writer, const std::string& tag, const Tensor& values, std::int64_t step, int buckets) {
  if (!values.defined()) throw ValueError(fmt::format("summary.histogram '{}': the tensor is undefined", tag));
  if (buckets < 1) throw ValueError(fmt::format("summary.histogram '{}': buckets must be >= 1, got {}", tag, buckets));
  const std::vector<double> x = values.to_vector<double>();
  tensorboard::HistogramProto h;
  if (x.empty()) {
    h.set_min(0);
    h.set_max(0);
  } else {
    double lo = x[0], hi = x[0], sum = 0, sum_sq = 0;
    for (double v : x) {
      if (!std::isfinite(v))
        throw ValueError(fmt::format("summary.histogram '{}': the values of shape {} hold {}", tag,
                                     values.shape().to_string(), v));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      sum_sq += v * v;
    }
    h.set_min(lo);
    h.set_max(hi);
    h.set_num(static_cast<double>(x.size()));
    h.set_sum(sum);
    h.set_sum_squares(sum_sq);
    // Equal-width buckets over [lo, hi], each bucket_limit its right edge; the maximum falls in
    // the last bucket. One bucket when every value is equal.
    const int n = hi > lo ? buckets : 1;
    std::vector<double> counts(static_cast<std::size_t>(n), 0.0);
    const double width = (hi - lo) / n;
    for (double v : x) {
      int b = width > 0 ? static_cast<int>((v - lo) / width) : 0;
      counts[static_cast<std::size_t>(std::clamp(b, 0, n - 1))] += 1;
    }
    for (int b = 0; b < n; ++b) {
      h.add_bucket_limit(b == n - 1 ? hi : lo + width * (b + 1));
      h.add_bucket(counts[static_cast<std::size_t>(b)]);
    }
  }
  tensorboard::Summary s;
  auto* v = s.add_value();
  v->set_tag(tag);
  *v->mutable_histo() = h;
  writer.write_event(summary_event(s, step));
}

void image(FileWriter& writer, const std::string& tag, const Tensor& images, std::int64_t step, int max_outputs) {
  if (!images.defined()) throw ValueError(fmt::format("summary.image '{}': the tensor is undefined", tag));
  Tensor batch = images.rank() == 3 ? expand_dims(images, 0) : images;
  if (batch.rank() != 4 || (batch.shape()[3] != 1 && batch.shape()[3] != 3 && batch.shape()[3] != 4))
    throw ShapeError(fmt::format("summary.image '{}': images must be [N, H, W, C] (or [H, W, C]) with C = 1, 3 or 4, "
                                 "got {}", tag, images.shape().to_string()));
  if (batch.dtype() != DType::uint8) {
    if (!is_floating(batch.dtype()))
      throw DTypeError(fmt::format("summary.image '{}': images must be floating point in [0, 1] or uint8, got {}", tag,
                                   name(batch.dtype())));
    // TensorFlow's convert_image_dtype with saturation: round(clip(x, 0, 1) * 255).
    batch = cast(round(mul(clip_by_value(cast(batch, DType::float32), 0.0, 1.0), scalar_like(cast(batch, DType::float32), 255.0))),
                 DType::uint8);
  }
  const std::int64_t n = std::min<std::int64_t>(batch.shape()[0], std::max(0, max_outputs));
  tensorboard::Summary s;
  for (std::int64_t i = 0; i < n; ++i) {
    const Tensor one = slice(batch, {i, 0, 0, 0}, {1, -1, -1, -1});
    auto* v = s.add_value();
    // TensorFlow's tags: "tag/image" when max_outputs is 1, else "tag/image/0", "tag/image/1", ...
    v->set_tag(max_outputs == 1 ? fmt::format("{}/image", tag) : fmt::format("{}/image/{}", tag, i));
    auto* img = v->mutable_image();
    img->set_height(static_cast<int>(batch.shape()[1]));
    img->set_width(static_cast<int>(batch.shape()[2]));
    img->set_colorspace(static_cast<int>(batch.shape()[3]));
    img->set_encoded_image_string(data::encode_png(reshape(one, {batch.shape()[1], batch.shape()[2], batch.shape()[3]})));
  }
  writer.write_event(summary_event(s, step));
}

void text(FileWriter& writer, const std::string& tag, const std::string& value, std::int64_t step) {
  tensorboard::Summary s;
  auto* v = s.add_value();
  v->set_tag(tag);
  // TensorBoard's text plugin reads a DT_STRING tensor marked with plugin_name "text".
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* t = v->mutable_tensor();
  t->set_dtype(tensorboard::DT_STRING);
  t->mutable_tensor_shape();
  t->add_string_val(value);
  writer.write_event(summary_event(s, step));
}

}  // namespace keel::summary
