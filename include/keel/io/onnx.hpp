#pragma once
// ONNX export of a model's inference graph.
#include <cstdint>
#include <string>
#include <vector>

namespace keel::models {
class Model;
}

namespace keel::io {

struct OnnxExportOptions {
  int opset = 17;             // 13..17
  bool dynamic_batch = true;  // the first axis of every input and output is symbolic ("batch")
  std::vector<std::string> input_names = {};   // default: the model's input names
  std::vector<std::string> output_names = {};  // default: the model's output names
};

// The model's inference graph with its weights as initializers; NHWC layers keep keel's layout,
// with Transposes only at the boundaries of the ops ONNX defines as NCHW. A layer without an
// ONNX equivalent is a ValueError naming it.
void export_onnx(models::Model& model, const std::string& path, OnnxExportOptions options = {});

// What export_onnx wrote: the graph's size and the layout Transposes it had to insert between
// keel's channels-last tensors and ONNX's channels-first Conv/Pool/BatchNormalization.
struct OnnxExportReport {
  std::int64_t nodes = 0;         // ONNX nodes in the graph
  std::int64_t initializers = 0;  // weight and constant tensors
  std::int64_t layout_transposes = 0;
};
OnnxExportReport export_onnx_report(models::Model& model, const std::string& path, OnnxExportOptions options = {});

}  // namespace keel::io
