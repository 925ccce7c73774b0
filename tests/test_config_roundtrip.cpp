// Every registered layer, optimizer, loss, metric, learning-rate schedule, regularizer and
// parameterised initializer class survives from_config(get_config()) with each of its fields
// set to a value other than its default: a field missing from get_config, from_config or this
// table fails here instead of breaking save/load silently.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <keel/keel.hpp>

#include "layers/weight_classes.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace keel;
using nlohmann::json;

namespace {

// One class's configs: what its constructor requires, and variants that set every other field
// to a non-default value (several where options exclude each other, like the clip options).
struct Case {
  json required;
  std::vector<json> variants;
  // Keys get_config always writes with one value: Keras' keys for what keel has not (ConvLSTM2D's
  // stateful, a lookup's sparse), which no config can change.
  std::set<std::string> fixed = {};
};

json merged(json a, const json& b) {
  for (const auto& [k, v] : b.items()) a[k] = v;
  return a;
}

const json l1 = {{"class_name", "L1"}, {"config", {{"l1", 0.5}}}};
const json l2 = {{"class_name", "L2"}, {"config", {{"l2", 0.25}}}};
const json l1_l2 = {{"class_name", "L1L2"}, {"config", {{"l1", 0.5}, {"l2", 0.25}}}};

json conv_weights(const char* kernel = "kernel") {
  return {{"activation", "relu"},
          {"use_bias", false},
          {std::string(kernel) + "_initializer", "ones"},
          {"bias_initializer", "ones"},
          {std::string(kernel) + "_regularizer", l1},
          {"bias_regularizer", l2},
          {"activity_regularizer", l1_l2}};
}

json rnn_fields() {
  return {{"activation", "relu"},          {"use_bias", false},
          {"kernel_initializer", "ones"},  {"recurrent_initializer", "zeros"},
          {"bias_initializer", "ones"},    {"kernel_regularizer", l1},
          {"recurrent_regularizer", l2},   {"bias_regularizer", l1_l2},
          {"activity_regularizer", l1},    {"dropout", 0.25},
          {"recurrent_dropout", 0.5},      {"seed", 7},
          {"return_sequences", true},      {"return_state", true},
          {"go_backwards", true},          {"stateful", true},
          {"unroll", true}};
}

const json dense = {{"class_name", "Dense"}, {"config", {{"units", 2}}}};
const json lstm = {{"class_name", "LSTM"}, {"config", {{"units", 2}}}};

const json beta_gamma = {{"epsilon", 0.01},          {"center", false},
                         {"scale", false},           {"beta_initializer", "ones"},
                         {"gamma_initializer", "zeros"}, {"beta_regularizer", l1},
                         {"gamma_regularizer", l2}};

// The function the Lambda case names.
const char* const kLambdaName = "roundtrip_identity";

// The convolution variants, 1-D / 3-D pooling, reshaping, ConvLSTM2D, merging, regularization,
// activation, image and text preprocessing layers, and the later core, normalization and
// attention classes.
void add_more_layer_cases(std::map<std::string, Case>& c) {
  const json same_cf = {{"padding", "same"}, {"data_format", "channels_first"}};
  c["Conv1DTranspose"] = {{{"filters", 4}, {"kernel_size", {3}}},
                          {merged(merged(conv_weights(), same_cf),
                                  {{"strides", {2}}, {"output_padding", {1}}, {"dilation_rate", {2}}})}};
  c["Conv3D"] = {{{"filters", 4}, {"kernel_size", {3, 3, 3}}},
                 {merged(merged(conv_weights(), same_cf),
                         {{"strides", {2, 1, 1}}, {"dilation_rate", {1, 2, 1}}, {"groups", 2}})}};
  c["Conv3DTranspose"] = {{{"filters", 4}, {"kernel_size", {3, 3, 3}}},
                          {merged(merged(conv_weights(), same_cf), {{"strides", {2, 2, 2}},
                                                                    {"output_padding", {1, 1, 1}},
                                                                    {"dilation_rate", {1, 2, 1}}})}};
  const json separable = merged(merged(conv_weights("depthwise"), same_cf),
                                {{"pointwise_initializer", "ones"}, {"pointwise_regularizer", l2}, {"depth_multiplier", 2}});
  c["SeparableConv1D"] = {{{"filters", 4}, {"kernel_size", {3}}},
                          {merged(separable, {{"strides", {2}}, {"dilation_rate", {2}}})}};
  c["SeparableConv2D"] = {{{"filters", 4}, {"kernel_size", {3, 3}}},
                          {merged(separable, {{"strides", {2, 1}}, {"dilation_rate", {1, 2}}})}};
  c["DepthwiseConv1D"] = {{{"kernel_size", {3}}},
                          {merged(merged(conv_weights("depthwise"), same_cf),
                                  {{"strides", {2}}, {"dilation_rate", {2}}, {"depth_multiplier", 2}})}};
  for (const char* cls : {"MaxPooling1D", "AveragePooling1D"})
    c[cls] = {json::object(), {merged(same_cf, {{"pool_size", {3}}, {"strides", {1}}})}};
  for (const char* cls : {"MaxPooling3D", "AveragePooling3D"})
    c[cls] = {json::object(), {merged(same_cf, {{"pool_size", {3, 3, 3}}, {"strides", {1, 2, 1}}})}};
  const json global = {{"data_format", "channels_first"}, {"keepdims", true}};
  for (const char* cls : {"GlobalMaxPooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling3D", "GlobalAveragePooling3D"})
    c[cls] = {json::object(), {global}};
  const json cf = {{"data_format", "channels_first"}};
  c["UpSampling1D"] = {json::object(), {{{"size", 3}}}};
  c["UpSampling2D"] = {json::object(), {merged(cf, {{"size", {2, 3}}, {"interpolation", "bilinear"}})}};
  c["UpSampling3D"] = {json::object(), {merged(cf, {{"size", {1, 2, 3}}})}};
  c["ZeroPadding1D"] = {json::object(), {merged(cf, {{"padding", {1, 2}}})}};
  c["ZeroPadding2D"] = {json::object(), {merged(cf, {{"padding", {{1, 2}, {3, 4}}}})}};
  c["ZeroPadding3D"] = {json::object(), {merged(cf, {{"padding", {{1, 2}, {3, 4}, {0, 2}}}})}};
  c["Cropping1D"] = {json::object(), {{{"cropping", {2, 3}}}}};
  c["Cropping2D"] = {json::object(), {merged(cf, {{"cropping", {{1, 2}, {3, 4}}}})}};
  c["Cropping3D"] = {json::object(), {merged(cf, {{"cropping", {{1, 2}, {3, 4}, {0, 2}}}})}};
  c["RepeatVector"] = {{{"n", 3}}, {json::object()}};
  json conv_lstm = rnn_fields();
  for (const char* k : {"stateful", "unroll"}) conv_lstm.erase(k);  // written false: keel has them not
  c["ConvLSTM2D"] = {{{"filters", 4}, {"kernel_size", {3, 3}}},
                     {merged(merged(conv_lstm, same_cf), {{"strides", {2, 1}},
                                                          {"dilation_rate", {1, 2}},
                                                          {"recurrent_activation", "tanh"},
                                                          {"unit_forget_bias", false}})},
                     {"stateful", "unroll"}};
  for (const char* cls : {"Average", "Subtract", "Maximum", "Minimum", "Identity"})
    c[cls] = {json::object(), {json::object()}};
  c["Dot"] = {{{"axes", {1, 2}}}, {{{"normalize", true}}}};
  c["Lambda"] = {{{"function", kLambdaName}}, {json::object()}};
  const json seed = {{"seed", 7}};
  c["SpatialDropout1D"] = {{{"rate", 0.5}}, {seed}};
  c["SpatialDropout2D"] = {{{"rate", 0.5}}, {merged(cf, seed)}};
  c["SpatialDropout3D"] = {{{"rate", 0.5}}, {merged(cf, seed)}};
  c["GaussianNoise"] = {{{"stddev", 0.5}}, {seed}};
  c["GaussianDropout"] = {{{"rate", 0.5}}, {seed}};
  c["AlphaDropout"] = {{{"rate", 0.5}}, {merged(seed, {{"noise_shape", {nullptr, 1}}})}};
  c["ActivityRegularization"] = {json::object(), {{{"l1", 0.5}, {"l2", 0.25}}}};
  c["PReLU"] = {json::object(),
                {{{"alpha_initializer", "ones"}, {"alpha_regularizer", l1}, {"shared_axes", {1, 2}}}}};
  c["ELU"] = {json::object(), {{{"alpha", 0.5}}}};
  c["ThresholdedReLU"] = {json::object(), {{{"theta", 0.5}}}};
  c["GroupNormalization"] = {json::object(), {merged(beta_gamma, {{"groups", 2}, {"axis", 1}})}};
  c["UnitNormalization"] = {json::object(), {{{"axis", {1, 2}}}}};
  // Per-axis statistics, and one mean and variance for everything.
  c["Normalization"] = {json::object(),
                        {{{"axis", {1, 2}}, {"mean", {0.5, 1.5}}, {"variance", {2.0, 3.0}}, {"invert", true}},
                         {{"axis", nullptr}, {"mean", 0.5}, {"variance", 2.0}}}};
  c["Attention"] = {json::object(), {merged(seed, {{"use_scale", true}, {"score_mode", "concat"}, {"dropout", 0.1}})}};
  c["AdditiveAttention"] = {json::object(), {merged(seed, {{"use_scale", false}, {"dropout", 0.1}})}};
  c["Resizing"] = {{{"height", 2}, {"width", 3}},
                   {merged(cf, {{"interpolation", "nearest"}, {"crop_to_aspect_ratio", true}}),
                    {{"pad_to_aspect_ratio", true}, {"fill_value", 1.0}}},
                   {"fill_mode"}};  // only "constant"
  c["CenterCrop"] = {{{"height", 2}, {"width", 3}}, {cf}};
  const json fill = merged(merged(cf, seed), {{"fill_mode", "constant"}, {"interpolation", "nearest"}, {"fill_value", 1.0}});
  c["RandomRotation"] = {{{"factor", {-0.2, 0.3}}}, {fill}};
  c["RandomZoom"] = {{{"height_factor", 0.1}}, {merged(fill, {{"width_factor", {-0.2, 0.3}}})}};
  c["RandomContrast"] = {{{"factor", 0.2}}, {merged(seed, {{"value_range", {0.0, 1.0}}})}};
  c["RandomBrightness"] = {{{"factor", {-0.2, 0.3}}}, {merged(seed, {{"value_range", {0.0, 1.0}}})}};
  // The lookups: an int-mode vocabulary with every special-token option, and tf_idf's weights.
  const json lookup = {{"max_tokens", 10}, {"num_oov_indices", 2}, {"invert", true}, {"pad_to_max_tokens", true}};
  const json tf_idf = {{"output_mode", "tf_idf"}, {"idf_weights", {0.5, 1.5}}};
  c["StringLookup"] = {json::object(),
                       {merged(lookup, {{"mask_token", ""}, {"oov_token", "[OOV]"}, {"vocabulary", {"a", "b", "c"}}}),
                        merged(tf_idf, {{"vocabulary", {"a", "b"}}})},
                       {"sparse", "encoding"}};
  c["IntegerLookup"] = {json::object(),
                        {merged(lookup, {{"mask_token", 0}, {"oov_token", -2}, {"vocabulary", {5, 6, 7}}}),
                         merged(tf_idf, {{"vocabulary", {5, 6}}})},
                        {"sparse", "vocabulary_dtype"}};
  c["CategoryEncoding"] = {{{"num_tokens", 4}}, {{{"output_mode", "count"}}}, {"sparse"}};
  c["Hashing"] = {{{"num_bins", 3}}, {{{"mask_value", "m"}, {"salt", {1, 2}}, {"output_mode", "multi_hot"}}}, {"sparse"}};
  c["TextVectorization"] = {json::object(),
                            {{{"max_tokens", 10},
                              {"standardize", "lower"},
                              {"split", "character"},
                              {"ngrams", 2},
                              {"output_sequence_length", 5},
                              {"pad_to_max_tokens", true},
                              {"vocabulary", {"a", "b"}}},
                             merged(tf_idf, {{"standardize", nullptr}, {"split", nullptr}, {"ngrams", {1, 3}},
                                             {"vocabulary", {"a", "b"}}})},
                            {"sparse", "ragged", "encoding"}};
}

std::map<std::string, Case> layer_cases() {
  std::map<std::string, Case> c;
  c["InputLayer"] = {{{"batch_shape", {nullptr, 3}}}, {json::object()}};
  c["Dense"] = {{{"units", 3}}, {merged(conv_weights(), {{"activity_regularizer", l1_l2}})}};
  c["Activation"] = {json::object(), {{{"activation", "tanh"}}}};
  c["ReLU"] = {json::object(), {{{"max_value", 6.0}, {"negative_slope", 0.1}, {"threshold", 0.5}}}};
  c["LeakyReLU"] = {json::object(), {{{"negative_slope", 0.1}}}};
  c["Softmax"] = {json::object(), {{{"axis", 1}}}};
  c["Flatten"] = {json::object(), {{{"data_format", "channels_first"}}}};
  c["Reshape"] = {{{"target_shape", {2, 3}}}, {json::object()}};
  c["Permute"] = {{{"dims", {2, 1}}}, {json::object()}};
  c["Dropout"] = {{{"rate", 0.5}}, {{{"noise_shape", {nullptr, 1}}, {"seed", 7}}}};
  c["Masking"] = {json::object(), {{{"mask_value", 1.5}}}};
  c["Add"] = {json::object(), {json::object()}};
  c["Multiply"] = {json::object(), {json::object()}};
  c["Concatenate"] = {json::object(), {{{"axis", 1}}}};
  c["Rescaling"] = {{{"scale", 0.5}}, {{{"offset", 1.0}}}};
  c["Embedding"] = {{{"input_dim", 10}, {"output_dim", 4}},
                    {{{"embeddings_initializer", "ones"},
                      {"embeddings_regularizer", l1},
                      {"activity_regularizer", l2},
                      {"mask_zero", true},
                      {"input_length", 5}}}};
  c["Conv1D"] = {{{"filters", 4}, {"kernel_size", {3}}},
                 {merged(conv_weights(), {{"strides", {2}}, {"padding", "same"}, {"data_format", "channels_first"},
                                          {"dilation_rate", {2}}, {"groups", 2}})}};
  c["Conv2D"] = {{{"filters", 4}, {"kernel_size", {3, 3}}},
                 {merged(conv_weights(), {{"strides", {2, 1}}, {"padding", "same"}, {"data_format", "channels_first"},
                                          {"dilation_rate", {1, 2}}, {"groups", 2}})}};
  c["Conv2DTranspose"] = {{{"filters", 4}, {"kernel_size", {3, 3}}},
                          {merged(conv_weights(), {{"strides", {2, 2}}, {"padding", "same"}, {"output_padding", {1, 1}},
                                                   {"data_format", "channels_first"}, {"dilation_rate", {1, 2}}})}};
  c["DepthwiseConv2D"] = {{{"kernel_size", {3, 3}}},
                          {merged(conv_weights("depthwise"), {{"strides", {2, 1}}, {"padding", "same"},
                                                              {"depth_multiplier", 2}, {"data_format", "channels_first"},
                                                              {"dilation_rate", {1, 2}}})}};
  const json pool = {{"pool_size", {3, 3}}, {"strides", {1, 2}}, {"padding", "same"}, {"data_format", "channels_first"}};
  c["MaxPooling2D"] = {json::object(), {pool}};
  c["AveragePooling2D"] = {json::object(), {pool}};
  const json global = {{"data_format", "channels_first"}, {"keepdims", true}};
  c["GlobalMaxPooling2D"] = {json::object(), {global}};
  c["GlobalAveragePooling2D"] = {json::object(), {global}};
  c["BatchNormalization"] = {json::object(),
                             {merged(beta_gamma, {{"axis", 1}, {"momentum", 0.9},
                                                  {"moving_mean_initializer", "ones"},
                                                  {"moving_variance_initializer", "zeros"}})}};
  c["LayerNormalization"] = {json::object(), {merged(beta_gamma, {{"axis", {1, 2}}})}};
  c["SimpleRNN"] = {{{"units", 3}}, {rnn_fields()}};
  c["LSTM"] = {{{"units", 3}},
               {merged(rnn_fields(), {{"recurrent_activation", "tanh"}, {"unit_forget_bias", false}})}};
  c["GRU"] = {{{"units", 3}}, {merged(rnn_fields(), {{"recurrent_activation", "tanh"}, {"reset_after", false}})}};
  c["Bidirectional"] = {{{"layer", lstm}}, {{{"merge_mode", "sum"}}}};
  c["TimeDistributed"] = {{{"layer", dense}}, {json::object()}};
  c["SpectralNormalization"] = {{{"layer", dense}}, {{{"power_iterations", 2}}}};
  c["PruneLowMagnitude"] = {{{"layer", dense}},
                            {{{"pruning_schedule",
                               {{"class_name", "PolynomialDecay"},
                                {"config",
                                 {{"initial_sparsity", 0.1}, {"final_sparsity", 0.9}, {"power", 2.0},
                                  {"begin_step", 3}, {"end_step", 30}, {"frequency", 7}}}}},
                              {"block_size", {1, 4}},
                              {"block_pooling_type", "MAX"}},
                             {{"sparsity_m_by_n", {2, 4}}}}};
  c["QuantizedLayer"] = {{{"layer", dense}},
                         {{{"dtype_quantized", "float16"}, {"per_channel", false}},
                          {{"activations", "static"}, {"calibration", "percentile"}, {"percentile", 99.5}}}};
  c["MultiHeadAttention"] = {{{"num_heads", 2}, {"key_dim", 4}},
                             {{{"value_dim", 3},
                               {"dropout", 0.1},
                               {"use_bias", false},
                               {"output_shape", {5}},
                               {"attention_axes", {1}},
                               {"kernel_initializer", "ones"},
                               {"bias_initializer", "ones"},
                               {"kernel_regularizer", l1},
                               {"bias_regularizer", l2},
                               {"activity_regularizer", l1_l2},
                               {"seed", 7}}}};
  c["RandomFlip"] = {json::object(), {{{"mode", "horizontal"}, {"seed", 7}, {"data_format", "channels_first"}}}};
  c["RandomCrop"] = {{{"height", 2}, {"width", 3}}, {{{"seed", 7}, {"data_format", "channels_first"}}}};
  c["RandomTranslation"] = {{{"height_factor", 0.1}, {"width_factor", {-0.2, 0.3}}},
                            {{{"fill_mode", "constant"},
                              {"interpolation", "nearest"},
                              {"seed", 7},
                              {"fill_value", 1.0},
                              {"data_format", "channels_first"}}}};
  add_more_layer_cases(c);
  return c;
}

// Keys that are not options: the base Layer's, Keras' keys for what keel has not, and what a
// layer derives (MultiHeadAttention's resolved value_dim, Bidirectional's backward copy).
const std::set<std::string> not_options = {
    "name", "trainable", "dtype", "kernel_constraint", "bias_constraint", "recurrent_constraint",
    "embeddings_constraint", "depthwise_constraint", "beta_constraint", "gamma_constraint", "synchronized",
    "rms_scaling", "zero_output_for_mask", "backward_layer", "gradient_accumulation_steps", "pointwise_constraint",
    "alpha_constraint"};

// Checks one class: each variant's fields come back from get_config, a second round trip changes
// nothing, and together the variants leave no option at its default.
template <class Build>
void check_class(const std::string& cls, const Case& c, Build build) {
  INFO(cls);
  const json defaults = build(c.required);
  std::set<std::string> changed;
  for (const json& variant : c.variants) {
    const json config = merged(c.required, variant);
    const json written = build(config);
    for (const auto& [key, value] : variant.items()) {
      INFO("key " << key);
      CHECK(written.contains(key));
    }
    CHECK(build(written) == written);
    for (const auto& [key, value] : written.items())
      if (!defaults.contains(key) || defaults[key] != value) changed.insert(key);
  }
  for (const auto& [key, value] : defaults.items()) {
    if (not_options.count(key) || c.fixed.count(key) || c.required.contains(key)) continue;
    INFO("field " << key << " keeps its default " << value.dump());
    CHECK(changed.count(key) == 1);
  }
}

// Checks every class a registry holds; a class without a case fails.
template <class Build>
void check_registry(const std::vector<std::string>& registered, const std::map<std::string, Case>& cases,
                    Build build) {
  for (const std::string& cls : registered) {
    INFO(cls << " needs an entry in the cases");
    REQUIRE(cases.count(cls) == 1);
    check_class(cls, cases.at(cls), [&](const json& config) {
      json named = config;
      named["name"] = "roundtrip";
      return build(cls, named);
    });
  }
}

}  // namespace

TEST_CASE("every registered layer round-trips its config with every field set", "[layers][serialization]") {
  if (!layers::has_lambda(kLambdaName))
    layers::register_lambda(kLambdaName, std::function<Tensor(const Tensor&)>([](const Tensor& x) { return x; }));
  const auto cases = layer_cases();
  for (const std::string& cls : layers::registered_layers()) {
    if (cls == "Sequential" || cls == "Functional") continue;  // the models' case below
    INFO(cls << " needs an entry in layer_cases()");
    REQUIRE(cases.count(cls) == 1);
    check_class(cls, cases.at(cls), [&](const json& config) {
      json named = config;
      named["name"] = "roundtrip";
      return layers::from_config(cls, named)->get_config();
    });
  }
}

TEST_CASE("Sequential and Functional configs round-trip", "[models][serialization]") {
  models::Sequential seq({std::make_shared<layers::Dense>(3, layers::DenseOptions{.activation = "relu"}),
                          std::make_shared<layers::Dense>(1)});
  seq(zeros(Shape{2, 4}));
  const json s = seq.get_config();
  // The rebuilt model's InputLayer writes its batch as null, as the original's does.
  const json rebuilt = layers::from_config("Sequential", s)->get_config();
  CHECK(rebuilt == s);
  CHECK(layers::from_config("Sequential", rebuilt)->get_config() == rebuilt);

  auto inputs = models::Input(Shape{4});
  auto outputs = layers::Dense(2)(layers::Dense(3, {.use_bias = false})(inputs));
  models::Model functional(inputs, outputs);
  const json f = functional.get_config();
  CHECK(layers::from_config("Functional", f)->get_config() == f);
}

TEST_CASE("every registered optimizer round-trips its config with every field set", "[optimizers][serialization]") {
  const json common = {{"learning_rate", 0.5}, {"weight_decay", 0.1}, {"use_ema", true},
                       {"ema_momentum", 0.9},  {"ema_overwrite_frequency", 5}, {"loss_scale_factor", 2.0},
                       {"gradient_accumulation_steps", 3}};
  // At most one clip option at a time.
  const std::vector<json> clips = {{{"clipnorm", 1.0}}, {{"clipvalue", 0.5}}, {{"global_clipnorm", 2.0}}};
  const auto with_clips = [&](const json& own) {
    std::vector<json> variants;
    for (const json& clip : clips) variants.push_back(merged(merged(common, own), clip));
    return variants;
  };
  std::map<std::string, Case> cases;
  cases["sgd"] = {json::object(), with_clips({{"momentum", 0.9}, {"nesterov", true}})};
  const json moments = {{"beta_1", 0.8}, {"beta_2", 0.99}, {"epsilon", 1e-5}};
  cases["adam"] = {json::object(), with_clips(merged(moments, {{"amsgrad", true}}))};
  cases["adamw"] = {json::object(), with_clips(merged(moments, {{"amsgrad", true}}))};
  cases["nadam"] = {json::object(), with_clips(moments)};
  cases["rmsprop"] = {json::object(),
                      with_clips({{"rho", 0.8}, {"momentum", 0.5}, {"epsilon", 1e-5}, {"centered", true}})};
  cases["adagrad"] = {json::object(), with_clips({{"initial_accumulator_value", 0.5}, {"epsilon", 1e-5}})};
  cases["adamax"] = {json::object(), with_clips(moments)};
  cases["adadelta"] = {json::object(), with_clips({{"rho", 0.8}, {"epsilon", 1e-5}})};
  cases["ftrl"] = {json::object(),
                   with_clips({{"learning_rate_power", -0.25}, {"initial_accumulator_value", 0.5},
                               {"l1_regularization_strength", 0.1}, {"l2_regularization_strength", 0.2},
                               {"l2_shrinkage_regularization_strength", 0.3}, {"beta", 0.4}})};
  cases["lion"] = {json::object(), with_clips({{"beta_1", 0.8}, {"beta_2", 0.9}})};
  cases["lamb"] = {json::object(), with_clips(moments)};
  cases["adafactor"] = {json::object(), with_clips({{"beta_2_decay", -0.5}, {"epsilon_1", 1e-20}, {"epsilon_2", 1e-2},
                                                    {"clip_threshold", 2.0}, {"relative_step", false}})};
  const json inner = optimizers::serialize(optimizers::SGD(0.1));
  cases["lossscaleoptimizer"] = {{{"inner_optimizer", inner}},
                                 {{{"initial_scale", 128.0}, {"dynamic_growth_steps", 100}}}};
  check_registry(optimizers::registered_optimizers(), cases, [](const std::string& cls, const json& named) {
    return optimizers::from_config(cls, named)->get_config();
  });
}

TEST_CASE("every registered loss round-trips its config with every field set", "[losses][serialization]") {
  const json sum = {{"reduction", "sum"}};
  const json crossentropy = merged(sum, {{"from_logits", true}, {"label_smoothing", 0.1}, {"axis", 1}});
  std::map<std::string, Case> cases;
  cases["MeanSquaredError"] = {json::object(), {sum}};
  cases["MeanAbsoluteError"] = {json::object(), {sum}};
  cases["KLDivergence"] = {json::object(), {sum}};
  cases["Huber"] = {json::object(), {merged(sum, {{"delta", 2.0}})}};
  cases["BinaryCrossentropy"] = {json::object(), {crossentropy}};
  cases["CategoricalCrossentropy"] = {json::object(), {crossentropy}};
  cases["SparseCategoricalCrossentropy"] = {json::object(), {merged(sum, {{"from_logits", true}, {"ignore_class", 3}})}};
  for (const char* plain : {"Hinge", "SquaredHinge", "CategoricalHinge", "LogCosh", "Poisson",
                            "MeanSquaredLogarithmicError", "MeanAbsolutePercentageError"})
    cases[plain] = {json::object(), {sum}};
  cases["CosineSimilarity"] = {json::object(), {merged(sum, {{"axis", 1}})}};
  cases["BinaryFocalCrossentropy"] = {json::object(), {merged(crossentropy, {{"apply_class_balancing", true},
                                                                              {"alpha", 0.4}, {"gamma", 1.5}})}};
  cases["CategoricalFocalCrossentropy"] = {json::object(), {merged(crossentropy, {{"alpha", 0.4}, {"gamma", 1.5}})}};
  cases["Dice"] = {json::object(), {merged(sum, {{"axis", {1, 2}}})}};
  cases["Tversky"] = {json::object(), {merged(sum, {{"alpha", 0.3}, {"beta", 0.7}, {"axis", {1}}})}};
  check_registry(losses::registered_losses(), cases, [](const std::string& cls, const json& named) {
    return losses::from_config(cls, named)->get_config();
  });
}

TEST_CASE("every registered metric round-trips its config with every field set", "[metrics][serialization]") {
  std::map<std::string, Case> cases;
  for (const char* plain : {"Mean", "Accuracy", "CategoricalAccuracy", "SparseCategoricalAccuracy", "MeanSquaredError",
                            "MeanAbsoluteError"})
    cases[plain] = {json::object(), {json::object()}};
  cases["BinaryAccuracy"] = {json::object(), {{{"threshold", 0.7}}}};
  cases["TopKCategoricalAccuracy"] = {json::object(), {{{"k", 3}}}};
  cases["SparseTopKCategoricalAccuracy"] = {json::object(), {{{"k", 3}}}};
  // Thresholds as a list and as a number; top_k and class_id.
  const std::vector<json> confusion = {{{"thresholds", {0.3, 0.6}}, {"class_id", 1}},
                                       {{"thresholds", 0.4}, {"top_k", 2}}};
  cases["Precision"] = {json::object(), confusion};
  cases["Recall"] = {json::object(), confusion};
  cases["AUC"] = {json::object(),
                  {{{"num_thresholds", 50},
                    {"curve", "PR"},
                    {"summation_method", "minoring"},
                    {"multi_label", true},
                    {"num_labels", 2},
                    {"label_weights", {0.5, 1.0}},
                    {"from_logits", true}},
                   {{"thresholds", {0.2, 0.7}}}}};
  cases["BinaryCrossentropy"] = {json::object(), {{{"from_logits", true}, {"label_smoothing", 0.1}}}};
  cases["CategoricalCrossentropy"] = {json::object(),
                                      {{{"from_logits", true}, {"label_smoothing", 0.1}, {"axis", 1}}}};
  cases["SparseCategoricalCrossentropy"] = {json::object(), {{{"from_logits", true}, {"ignore_class", 3}, {"axis", 1}}}};
  for (const char* plain : {"RootMeanSquaredError", "MeanAbsolutePercentageError", "MeanSquaredLogarithmicError",
                            "LogCoshError", "Hinge", "SquaredHinge", "CategoricalHinge", "Sum"})
    cases[plain] = {json::object(), {json::object()}};
  cases["CosineSimilarity"] = {json::object(), {{{"axis", 1}}}};
  cases["R2Score"] = {json::object(), {{{"class_aggregation", "variance_weighted_average"}, {"num_regressors", 2}}}};
  cases["FBetaScore"] = {json::object(), {{{"average", "macro"}, {"beta", 2.0}, {"threshold", 0.3}}}};
  cases["F1Score"] = {json::object(), {{{"average", "micro"}, {"threshold", 0.3}}}};
  for (const char* c : {"TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives"})
    cases[c] = {json::object(), {{{"thresholds", {0.3, 0.6}}}, {{"thresholds", 0.4}}}};
  cases["PrecisionAtRecall"] = {{{"recall", 0.5}}, {{{"recall", 0.7}, {"num_thresholds", 50}, {"class_id", 1}}}};
  cases["RecallAtPrecision"] = {{{"precision", 0.5}}, {{{"precision", 0.7}, {"num_thresholds", 50}, {"class_id", 1}}}};
  cases["SensitivityAtSpecificity"] = {{{"specificity", 0.5}},
                                       {{{"specificity", 0.7}, {"num_thresholds", 50}, {"class_id", 1}}}};
  cases["SpecificityAtSensitivity"] = {{{"sensitivity", 0.5}},
                                       {{{"sensitivity", 0.7}, {"num_thresholds", 50}, {"class_id", 1}}}};
  cases["IoU"] = {{{"num_classes", 3}, {"target_class_ids", {0}}},
                  {{{"num_classes", 4}, {"target_class_ids", {1, 2}}, {"ignore_class", 0}, {"sparse_y_true", false},
                    {"sparse_y_pred", false}, {"axis", 1}}}};
  cases["BinaryIoU"] = {json::object(), {{{"target_class_ids", {1}}, {"threshold", 0.3}}}};
  cases["MeanIoU"] = {{{"num_classes", 3}}, {{{"num_classes", 4}, {"ignore_class", 0}, {"sparse_y_true", false},
                                               {"sparse_y_pred", false}, {"axis", 1}}}};
  cases["OneHotIoU"] = {{{"num_classes", 3}, {"target_class_ids", {0}}},
                        {{{"num_classes", 4}, {"target_class_ids", {1, 2}}, {"ignore_class", 0}, {"sparse_y_pred", true},
                          {"axis", 1}}}};
  cases["OneHotMeanIoU"] = {{{"num_classes", 3}},
                            {{{"num_classes", 4}, {"ignore_class", 0}, {"sparse_y_pred", true}, {"axis", 1}}}};
  check_registry(metrics::registered_metrics(), cases, [](const std::string& cls, const json& named) {
    return metrics::from_config(cls, named)->get_config();
  });
}

TEST_CASE("every registered learning-rate schedule round-trips its config with every field set",
          "[schedules][serialization]") {
  const json decay = {{"initial_learning_rate", 0.1}, {"decay_steps", 10}};
  const json with_rate = merged(decay, {{"decay_rate", 0.5}});
  std::map<std::string, Case> cases;
  cases["ExponentialDecay"] = {with_rate, {{{"staircase", true}}}};
  cases["InverseTimeDecay"] = {with_rate, {{{"staircase", true}}}};
  cases["PiecewiseConstantDecay"] = {{{"boundaries", {10}}, {"values", {0.1, 0.01}}}, {json::object()}};
  cases["CosineDecay"] = {decay, {{{"alpha", 0.1}, {"warmup_target", 0.2}, {"warmup_steps", 5}}}};
  cases["CosineDecayRestarts"] = {{{"initial_learning_rate", 0.1}, {"first_decay_steps", 10}},
                                  {{{"t_mul", 1.5}, {"m_mul", 0.5}, {"alpha", 0.1}}}};
  cases["PolynomialDecay"] = {decay, {{{"end_learning_rate", 0.001}, {"power", 2.0}, {"cycle", true}}}};
  check_registry(optimizers::schedules::registered_schedules(), cases, [](const std::string& cls, const json& named) {
    const json serialized = {{"class_name", cls}, {"config", named}};
    return optimizers::schedules::serialize(*optimizers::schedules::deserialize(serialized))["config"];
  });
}

TEST_CASE("every regularizer and parameterised initializer class round-trips with its fields set",
          "[layers][serialization]") {
  // Each through a Dense layer's config, its fields set to values that are no class's default.
  for (const auto& c : layers::detail::kRegularizerClasses) {
    INFO("regularizer class " << c.class_name);
    const regularizers::Regularizer r(c.has_l1 ? 0.25 : 0.0, c.has_l2 ? 0.125 : 0.0);
    const json config = layers::Dense(2, {.kernel_regularizer = r}).get_config();
    const json& written = config["kernel_regularizer"];
    CHECK(written["class_name"] == c.class_name);
    CHECK(written["config"].contains("l1") == c.has_l1);
    CHECK(written["config"].contains("l2") == c.has_l2);
    CHECK(layers::from_config("Dense", config)->get_config() == config);
  }
  for (const auto& c : layers::detail::kInitializerClasses) {
    INFO("initializer class " << c.class_name);
    REQUIRE(std::string(c.class_name) == "Constant");  // a new class needs its own constructor here
    const json config = layers::Dense(2, {.kernel_initializer = initializers::Constant(0.375)}).get_config();
    CHECK(config["kernel_initializer"]["class_name"] == c.class_name);
    CHECK(config["kernel_initializer"]["config"][c.field] == 0.375);
    CHECK(layers::from_config("Dense", config)->get_config() == config);
  }
}
