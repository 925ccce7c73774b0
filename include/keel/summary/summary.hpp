#pragma once
// tf.summary for C++: TensorBoard event files written from training loops.
//
//   keel::summary::FileWriter writer("logs/run1");        // tf.summary.create_file_writer
//   keel::summary::scalar(writer, "loss", 0.25, step);
//   keel::summary::histogram(writer, "dense/kernel", w, step);
//   keel::summary::image(writer, "inputs", batch, step);   // [N, H, W, C]: float in [0, 1] or uint8
//   keel::summary::text(writer, "notes", "lr halved", step);
//   writer.flush();
//
// The files are TFRecord streams of TensorBoard's Event protos (encoded with protobuf from the
// schemas in third_party/tensorboard), so TensorBoard, tf.data.TFRecordDataset and
// tensorboard.backend.event_processing read them. Scalars are Summary.Value.simple_value,
// histograms HistogramProto (min, max, num, sum, sum_squares, bucket limits and counts), images
// PNG-encoded Summary.Image, text a string tensor for TensorBoard's text plugin.
#include <cstdint>
#include <memory>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel::summary {

class FileWriter {
 public:
  // Creates logdir (and its parents) and a new events.out.tfevents.* file in it, starting with
  // the file_version record. IOError when the directory or file cannot be made.
  explicit FileWriter(std::string logdir);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void flush();
  const std::string& logdir() const;
  const std::string& path() const;  // the event file

  // One serialised Event proto (what the functions below build), framed as a TFRecord.
  void write_event(const std::string& serialized_event);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void scalar(FileWriter& writer, const std::string& tag, double value, std::int64_t step);
// `buckets` equal-width buckets between the values' min and max (tf.summary.histogram's rule);
// all values equal give one bucket. NaN and infinite values are a ValueError (TensorBoard cannot
// draw them).
void histogram(FileWriter& writer, const std::string& tag, const Tensor& values, std::int64_t step,
               int buckets = 30);
// images [N, H, W, C] with C = 1, 3 or 4 (or [H, W, C] for one image); float values in [0, 1]
// (clipped, scaled by 255 and rounded) or uint8. The first max_outputs become "tag/image/0", ...
void image(FileWriter& writer, const std::string& tag, const Tensor& images, std::int64_t step, int max_outputs = 3);
void text(FileWriter& writer, const std::string& tag, const std::string& value, std::int64_t step);

}  // namespace keel::summary
