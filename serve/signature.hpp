#pragma once
// A served model's signature: the names, dtypes and shapes (-1 = any size, the batch first) of
// its inputs and outputs, as TF Serving's signature_def "serving_default" lists them.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/core/dtype.hpp"

namespace keel::models { class Model; }

namespace keel::serve {

struct TensorInfo {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::int64_t> dims;  // with the batch dimension (-1); empty + unknown_rank: unknown
  bool unknown_rank = false;
};

struct Signature {
  std::vector<TensorInfo> inputs, outputs;
};

// TensorFlow's DataType names ("DT_FLOAT", ...) for keel's dtypes.
const char* tf_dtype_name(DType d);

// The inputs from the model's config (its InputLayers' batch_shape and dtype, named as
// Model::input_names()); the outputs by running the model once on zeros of batch 1 (which also
// traces its predict step before the first request: TF Serving's warm-up).
Signature signature_of(models::Model& model);

// TF Serving's SignatureDef JSON: {"inputs": {name: TensorInfo}, "outputs": ..., "method_name"}.
nlohmann::json signature_def_json(const Signature& s);

}  // namespace keel::serve
