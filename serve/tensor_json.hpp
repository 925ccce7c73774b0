#pragma once
// JSON <-> tensors for the predict API, as TF Serving's json_tensor.cc maps them
// (tensorflow_serving/g3doc/api_rest.md):
//   row format      {"instances": [i0, i1, ...]}   each instance one row of every input (an object
//                                                  {name: value} per row for named inputs);
//                   answered {"predictions": [...]} (per row; a list of {name: value} for
//                   several outputs)
//   columnar format {"inputs": value | {name: value}} each input whole (batch first);
//                   answered {"outputs": value | {name: value}}
// Numbers follow the input's dtype: DT_FLOAT/DT_DOUBLE take any JSON number, integer dtypes
// integers in range, DT_BOOL true/false. Every malformed request is a ValueError whose message
// says what and where (it becomes TF Serving's {"error": ...} with status 400).
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/core/tensor.hpp"
#include "signature.hpp"

namespace keel::serve {

struct PredictRequest {
  bool columnar = false;       // "inputs" rather than "instances"
  std::vector<Tensor> inputs;  // in signature order
};

// Nested lists this deep (or deeper) are refused: tensors have at most this rank.
inline constexpr int kMaxJsonRank = 32;

// One tensor from a JSON value (a number, bool, or rectangular nested list of them). `what`
// names the value in messages ("inputs['x']").
Tensor json_to_tensor(const nlohmann::json& value, DType dtype, const std::string& what);

// Checks a tensor against its TensorInfo: rank and every known dimension.
void check_against(const Tensor& t, const TensorInfo& info, const std::string& what);

// The request body (parsed) for a model with signature `sig`.
PredictRequest parse_predict_request(const nlohmann::json& body, const Signature& sig);

// The tensor's values as nested JSON lists (a scalar for rank 0), appended to out. Floats print
// as the shortest text that reads back to the same value; NaN / Infinity / -Infinity as TF
// Serving writes them.
void append_tensor_json(std::string& out, const Tensor& t);

// The whole response body for the outputs of a request.
std::string predict_response_json(const std::vector<Tensor>& outputs, const Signature& sig, bool columnar);

}  // namespace keel::serve
