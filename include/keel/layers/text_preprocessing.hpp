#pragma once
// Text and category preprocessing layers, as Keras 3: TextVectorization, StringLookup,
// IntegerLookup, CategoryEncoding, Hashing.
//
// Strings live outside tensors. keel has no string dtype, so text goes in as
// std::vector<std::string> (one string per element of a batch, or one token per element) and
// comes out as int64 ids or float32 encodings. The layers that take strings therefore cannot go
// through Layer::operator()(Tensor); each has its own operator()(const std::vector<std::string>&)
// (and call_rows for a batch of token lists). They are preprocessing: applied outside the model,
// typically in a Dataset map before fit, as Keras recommends for its preprocessing layers:
//
//   layers::TextVectorization vectorize({.max_tokens = 2000, .output_sequence_length = 40});
//   vectorize.adapt(train_texts);
//   auto ds = data::text_dataset_from_directory(dir)
//                 .map([&](const std::vector<std::string>& texts, const Tensor& labels) {
//                   return std::pair{vectorize(texts), labels};
//                 });
//   model.fit(ds);
//
// The integer layers (IntegerLookup, CategoryEncoding, Hashing on integers) are ordinary layers
// on tensors. None of these layers has weights or gradients: their outputs are ids and counts.
// A model's saved config holds the adapted vocabulary (Keras keeps it in the saved variables),
// so layers::from_config(get_config()) gives a layer with the same outputs.
//
// Text is handled as UTF-8 bytes: "lower" lowercases ASCII letters only (TensorFlow lowercases
// every Unicode letter), "strip_punctuation" removes the 32 ASCII punctuation characters of
// Keras' default regex, split = "character" splits into UTF-8 code points.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "keel/data/dataset.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

// FarmHash's Fingerprint64 (farmhashna::Hash64): the hash of tf.strings.to_hash_bucket_fast and
// of Keras' Hashing without a salt. Stable across platforms and releases.
std::uint64_t farmhash_fingerprint64(std::string_view bytes);
// SipHash-2-4 with the 128-bit key (k0, k1): tf.strings.to_hash_bucket_strong, Hashing with a salt.
std::uint64_t siphash64(std::string_view bytes, std::uint64_t k0, std::uint64_t k1);

namespace detail {

// The vocabulary and encoding shared by StringLookup, IntegerLookup and TextVectorization
// (Keras' IndexLookup). K is std::string or std::int64_t.
template <class K>
struct IndexTable {
  std::string layer;  // the class name, for error messages
  std::optional<int> max_tokens;
  int num_oov_indices = 1;
  std::optional<K> mask_token;
  K oov_token{};
  bool invert = false;
  std::string output_mode = "int";  // "int", "one_hot", "multi_hot", "count", "tf_idf"
  bool pad_to_max_tokens = false;
  std::vector<K> tokens;         // the learned or given tokens, specials excluded
  std::vector<double> idf;       // one per index of the output (tf_idf only), specials included
  std::unordered_map<K, std::int64_t> positions;  // token -> its index (rebuilt with tokens)

  void validate() const;  // ValueError for inconsistent options
  bool int_mode() const { return output_mode == "int"; }
  std::int64_t oov_start() const { return mask_token && int_mode() ? 1 : 0; }
  std::int64_t token_start() const { return oov_start() + num_oov_indices; }
  std::int64_t vocabulary_size() const { return token_start() + static_cast<std::int64_t>(tokens.size()); }
  std::int64_t depth() const;  // the width of the encodings
  std::vector<K> vocabulary() const;  // specials first, as get_vocabulary
  // Keras' set_vocabulary: special tokens at the front are recognised and dropped; idf weights
  // (tf_idf) are for the given entries.
  void set_vocabulary(const std::vector<K>& vocabulary, const std::vector<double>& idf_weights);
  // Replaces the vocabulary by the documents' tokens: by count (descending), ties broken by the
  // token (descending), as Keras' np.lexsort((tokens, counts))[::-1]; document frequencies give
  // the idf weights log(1 + documents / (1 + document_count)).
  void adapt(const std::vector<std::vector<K>>& documents);
  // The index of a token: -1 for the mask token outside "int" mode (it is dropped from the
  // encodings).
  std::int64_t index(const K& token) const;
  // Rows of indices -> the layer's output: int64 [rows, length] (int mode, rows padded with 0 to
  // `length`), or float32 [rows, depth] (one_hot needs one index per row).
  Tensor encode(const std::vector<std::vector<std::int64_t>>& rows, std::int64_t length) const;
  K token_at(std::int64_t index) const;  // invert: oov_token for an index outside the vocabulary
};

extern template struct IndexTable<std::string>;
extern template struct IndexTable<std::int64_t>;

// Keras' categorical encoding of integer ids (CategoryEncoding, the lookups' non-int modes):
// rank 0 or 1 is one sample (rank 1 with one_hot: one id per row), rank 2 [batch, ids].
Tensor encode_categorical(const Tensor& ids, std::int64_t depth, const std::string& output_mode,
                          const char* layer);

}  // namespace detail

// ---- StringLookup / IntegerLookup ----------------------------------------------------------

struct StringLookupOptions {
  std::optional<int> max_tokens = std::nullopt;
  int num_oov_indices = 1;
  std::optional<std::string> mask_token = std::nullopt;
  std::string oov_token = "[UNK]";
  std::vector<std::string> vocabulary = {};
  std::vector<double> idf_weights = {};  // tf_idf with a given vocabulary
  bool invert = false;
  std::string output_mode = "int";  // "int", "one_hot", "multi_hot", "count", "tf_idf"
  bool pad_to_max_tokens = false;
  std::string name = "";
};

// Strings -> indices into a vocabulary: [mask_token (int mode)], num_oov_indices OOV slots, then
// the tokens. An unknown token goes to the OOV slot (to slot farmhash(token) % num_oov_indices
// when there are several, as Keras); with num_oov_indices = 0 it is a ValueError.
class StringLookup : public Layer {
 public:
  explicit StringLookup(StringLookupOptions options = {});
  KEEL_LAYER_BOILERPLATE(StringLookup)
  using Layer::operator();
  using Layer::call;

  // Tokens [n] -> int64 [n]; one_hot: float32 [n, depth]; multi_hot, count, tf_idf: one sample,
  // float32 [depth].
  Tensor operator()(const std::vector<std::string>& tokens) const;
  // A batch of token lists [batch, n] -> int64 [batch, n] (equal lengths) or float32 [batch, depth].
  Tensor call_rows(const std::vector<std::vector<std::string>>& rows) const;
  // invert = true: int ids (any shape) -> their tokens, row-major.
  std::vector<std::string> inverse(const Tensor& ids) const;
  Tensor call(const Tensor& inputs, bool training) override;  // ValueError: takes strings

  void adapt(const std::vector<std::string>& tokens);
  void adapt_rows(const std::vector<std::vector<std::string>>& rows);  // one document per row
  void set_vocabulary(const std::vector<std::string>& vocabulary, const std::vector<double>& idf_weights = {});
  std::vector<std::string> get_vocabulary() const { return table_.vocabulary(); }
  std::int64_t vocabulary_size() const { return table_.vocabulary_size(); }
  const std::vector<double>& idf_weights() const { return table_.idf; }
  nlohmann::json get_config() const override;
  const StringLookupOptions& options() const { return options_; }

 private:
  StringLookupOptions options_;
  detail::IndexTable<std::string> table_;
};

struct IntegerLookupOptions {
  std::optional<int> max_tokens = std::nullopt;
  int num_oov_indices = 1;
  std::optional<std::int64_t> mask_token = std::nullopt;
  std::int64_t oov_token = -1;
  std::vector<std::int64_t> vocabulary = {};
  std::vector<double> idf_weights = {};
  bool invert = false;
  std::string output_mode = "int";
  bool pad_to_max_tokens = false;
  std::string name = "";
};

// Integers -> indices, as StringLookup (several OOV slots: value mod num_oov_indices, as Keras).
// Inputs: integer tensors of any shape in int mode (output int64 of the same shape), rank <= 2
// for the encodings; invert = true maps indices back to the vocabulary's integers.
class IntegerLookup : public Layer {
 public:
  explicit IntegerLookup(IntegerLookupOptions options = {});
  KEEL_LAYER_BOILERPLATE(IntegerLookup)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}

  void adapt(const Tensor& data);  // rank 0 or 1: one document; rank 2: one per row
  void set_vocabulary(const std::vector<std::int64_t>& vocabulary, const std::vector<double>& idf_weights = {});
  std::vector<std::int64_t> get_vocabulary() const { return table_.vocabulary(); }
  std::int64_t vocabulary_size() const { return table_.vocabulary_size(); }
  nlohmann::json get_config() const override;
  const IntegerLookupOptions& options() const { return options_; }

 protected:
  Autocast autocast() const override { return Autocast::none; }  // ids stay integers

 private:
  IntegerLookupOptions options_;
  detail::IndexTable<std::int64_t> table_;
};

// ---- CategoryEncoding --------------------------------------------------------------------

struct CategoryEncodingOptions {
  std::string output_mode = "multi_hot";  // "one_hot", "multi_hot" or "count"
  std::string name = "";
};

// Integer ids in [0, num_tokens) -> float32 encodings (see detail::encode_categorical for the
// ranks). An id outside the range is a ValueError naming it and the bound.
class CategoryEncoding : public Layer {
 public:
  explicit CategoryEncoding(int num_tokens, CategoryEncodingOptions options = {});
  KEEL_LAYER_BOILERPLATE(CategoryEncoding)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  int num_tokens() const { return num_tokens_; }
  const CategoryEncodingOptions& options() const { return options_; }

 protected:
  Autocast autocast() const override { return Autocast::none; }

 private:
  int num_tokens_;
  CategoryEncodingOptions options_;
};

// ---- Hashing -----------------------------------------------------------------------------

struct HashingOptions {
  // Inputs equal to it go to bin 0 and the others hash into bins 1..num_bins-1. For integer
  // inputs it is compared with the decimal form of the value (Keras hashes integers as strings).
  std::optional<std::string> mask_value = std::nullopt;
  // Set: SipHash-2-4 keyed with {salt[0], salt[1]} (an int s is {s, s} in Keras); unset: FarmHash.
  std::vector<std::uint64_t> salt = {};
  std::string output_mode = "int";  // "int", "one_hot", "multi_hot", "count"
  std::string name = "";
};

// Strings or integers -> bin = hash(value) % num_bins, as tf.strings.to_hash_bucket_fast/strong.
class Hashing : public Layer {
 public:
  explicit Hashing(int num_bins, HashingOptions options = {});
  KEEL_LAYER_BOILERPLATE(Hashing)
  using Layer::operator();
  using Layer::build;
  using Layer::call;

  Tensor operator()(const std::vector<std::string>& values) const;  // [n] -> int64 [n] (or encodings)
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;  // integer tensors
  void check_input_shape(const Shape&) const override {}
  std::int64_t bin(std::string_view value) const;
  nlohmann::json get_config() const override;
  int num_bins() const { return num_bins_; }
  const HashingOptions& options() const { return options_; }

 protected:
  Autocast autocast() const override { return Autocast::none; }

 private:
  Tensor finish(Tensor bins) const;  // the output mode's encoding
  int num_bins_;
  HashingOptions options_;
};

// ---- TextVectorization -------------------------------------------------------------------

// Keras' ngrams argument: an int n (all n-grams of 1..n tokens) or a list of widths.
struct NGrams {
  std::vector<int> widths;
  bool up_to = false;  // given as an int
  NGrams() = default;
  NGrams(int n);  // NOLINT: implicit, so .ngrams = 2 reads like Keras
  NGrams(std::initializer_list<int> w) : widths(w) {}
  explicit NGrams(std::vector<int> w) : widths(std::move(w)) {}
  bool empty() const { return widths.empty(); }
};

struct TextVectorizationOptions {
  std::optional<int> max_tokens = std::nullopt;
  std::string standardize = "lower_and_strip_punctuation";  // "lower", "strip_punctuation", "" (None)
  std::string split = "whitespace";                         // "character", "" (None)
  NGrams ngrams = {};
  std::string output_mode = "int";  // "int", "multi_hot", "count", "tf_idf"
  std::optional<int> output_sequence_length = std::nullopt;  // int mode: pad with 0 / truncate
  bool pad_to_max_tokens = false;
  std::vector<std::string> vocabulary = {};
  std::vector<double> idf_weights = {};
  std::string name = "";
};

// Strings [batch] -> standardize -> split -> n-grams -> StringLookup(mask "", oov "[UNK]").
// int: int64 [batch, output_sequence_length or the longest row]; multi_hot / count / tf_idf:
// float32 [batch, depth] (tf_idf = count * idf).
class TextVectorization : public Layer {
 public:
  explicit TextVectorization(TextVectorizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(TextVectorization)
  using Layer::operator();
  using Layer::call;

  Tensor operator()(const std::vector<std::string>& texts) const;
  Tensor call(const Tensor& inputs, bool training) override;  // ValueError: takes strings

  void adapt(const std::vector<std::string>& texts);
  // A Dataset of text batches (as text_dataset_from_directory's texts, labels ignored).
  void adapt(const data::Dataset<std::vector<std::string>>& texts);
  void adapt(const data::Dataset<std::pair<std::vector<std::string>, Tensor>>& texts_and_labels);
  void set_vocabulary(const std::vector<std::string>& vocabulary, const std::vector<double>& idf_weights = {});
  std::vector<std::string> get_vocabulary() const { return table_.vocabulary(); }
  std::int64_t vocabulary_size() const { return table_.vocabulary_size(); }
  const std::vector<double>& idf_weights() const { return table_.idf; }
  // One text through standardize, split and ngrams: the tokens it is looked up as.
  std::vector<std::string> tokenize(const std::string& text) const;
  nlohmann::json get_config() const override;
  const TextVectorizationOptions& options() const { return options_; }

 private:
  TextVectorizationOptions options_;
  detail::IndexTable<std::string> table_;
};

}  // namespace keel::layers
