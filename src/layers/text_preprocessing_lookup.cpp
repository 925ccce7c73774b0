// Vocabularies and categorical encodings: Keras' IndexLookup (shared by StringLookup,
// IntegerLookup and TextVectorization), CategoryEncoding, and the lookup layers themselves.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "keel/layers/text_preprocessing.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/shape.hpp"

namespace keel::layers {

namespace {

std::string show_token(const std::string& t) { return "\"" + t + "\""; }
std::string show_token(std::int64_t t) { return std::to_string(t); }

bool is_integer_dtype(DType d) { return d == DType::int32 || d == DType::int64 || d == DType::uint8; }

// Ids grouped into the samples of an encoding, following Keras' encode_categorical_inputs:
// a scalar or a rank-1 input is one sample, except with one_hot where each id is its own row;
// rank 2 is [batch, ids] ([batch, 1] for one_hot).
struct Samples {
  std::vector<std::vector<std::int64_t>> rows;
  bool single = false;  // the output is [depth], not [rows, depth]
};

Samples group(const Shape& shape, const std::vector<std::int64_t>& v, const std::string& mode, const char* layer) {
  Samples s;
  const auto r = shape.rank();
  if (r > 2 || (mode == "one_hot" && r == 2 && shape[1] != 1))
    throw ValueError(fmt::format("{}: output_mode \"{}\" takes inputs of rank <= {} ({}), got shape {}", layer, mode,
                                 mode == "one_hot" ? 1 : 2, mode == "one_hot" ? "or [batch, 1]" : "[batch, ids]",
                                 shape.to_string()));
  if (mode == "one_hot") {
    s.single = r == 0;
    for (auto id : v) s.rows.push_back({id});
  } else if (r <= 1) {
    s.single = true;
    s.rows.push_back(v);
  } else {
    const auto cols = static_cast<std::size_t>(shape[1]);
    for (std::int64_t b = 0; b < shape[0]; ++b)
      s.rows.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(b * cols), v.begin() + static_cast<std::ptrdiff_t>((b + 1) * cols));
  }
  return s;
}

// float32 [rows, depth] (or [depth]): one_hot / multi_hot set 1, count adds 1, tf_idf is the
// count times idf[index]. Negative ids (a lookup's mask token outside int mode) are dropped when
// `drop_negative`; any other id outside [0, depth) is a ValueError.
Tensor encode_samples(const Samples& s, std::int64_t depth, const std::string& mode, const std::vector<double>* idf,
                      bool drop_negative, const char* layer) {
  const auto n = static_cast<std::int64_t>(s.rows.size());
  if (depth > 0 && n > std::numeric_limits<std::int64_t>::max() / depth)
    throw ValueError(fmt::format("{}: the encoding of {} rows of depth {} is too large", layer, n, depth));
  std::vector<float> out(static_cast<std::size_t>(n * depth), 0.0f);
  for (std::int64_t r = 0; r < n; ++r) {
    const auto& row = s.rows[static_cast<std::size_t>(r)];
    float* o = out.data() + r * depth;
    for (auto id : row) {
      if (id < 0 && drop_negative) continue;
      if (id < 0 || id >= depth)
        throw ValueError(fmt::format("{}: input id {} is outside [0, {}) (num_tokens / the vocabulary size)", layer, id, depth));
      if (mode == "count" || mode == "tf_idf") o[id] += 1.0f; else o[id] = 1.0f;
    }
    if (mode == "tf_idf")
      for (std::int64_t i = 0; i < depth; ++i) o[i] = static_cast<float>(o[i] * (*idf)[static_cast<std::size_t>(i)]);
  }
  return s.single ? constant(out, Shape{depth}) : constant(out, Shape{n, depth});
}

}  // namespace

namespace detail {

Tensor encode_categorical(const Tensor& ids, std::int64_t depth, const std::string& output_mode, const char* layer) {
  if (!is_integer_dtype(ids.dtype()))
    throw DTypeError(fmt::format("{}: inputs must be integer ids, got a {} tensor of shape {}", layer,
                                 keel::name(ids.dtype()), ids.shape().to_string()));
  return encode_samples(group(ids.shape(), ids.to_vector<std::int64_t>(), output_mode, layer), depth, output_mode,
                        nullptr, false, layer);
}

template <class K>
void IndexTable<K>::validate() const {
  const std::string& m = output_mode;
  if (m != "int" && m != "one_hot" && m != "multi_hot" && m != "count" && m != "tf_idf")
    throw ValueError(fmt::format("{}: output_mode must be \"int\", \"one_hot\", \"multi_hot\", \"count\" or \"tf_idf\", got \"{}\"", layer, m));
  if (num_oov_indices < 0) throw ValueError(fmt::format("{}: num_oov_indices must be >= 0, got {}", layer, num_oov_indices));
  if (max_tokens && *max_tokens <= 1) throw ValueError(fmt::format("{}: max_tokens must be greater than 1, got {}", layer, *max_tokens));
  if (max_tokens && *max_tokens < token_start())
    throw ValueError(fmt::format("{}: max_tokens ({}) leaves no room for the {} special tokens", layer, *max_tokens, token_start()));
  if (pad_to_max_tokens && !max_tokens) throw ValueError(fmt::format("{}: pad_to_max_tokens = true needs max_tokens", layer));
  if (invert && !int_mode()) throw ValueError(fmt::format("{}: invert = true needs output_mode \"int\", got \"{}\"", layer, m));
}

template <class K>
std::int64_t IndexTable<K>::depth() const {
  return pad_to_max_tokens && max_tokens ? std::max<std::int64_t>(*max_tokens, vocabulary_size()) : vocabulary_size();
}

template <class K>
std::vector<K> IndexTable<K>::vocabulary() const {
  std::vector<K> v;
  if (mask_token && int_mode()) v.push_back(*mask_token);
  for (int i = 0; i < num_oov_indices; ++i) v.push_back(oov_token);
  v.insert(v.end(), tokens.begin(), tokens.end());
  return v;
}

namespace {
template <class K>
void finish_idf(IndexTable<K>& t, std::vector<double> weights, bool front_given) {
  // Keras pads the front (the special tokens) with the mean idf, having no document frequency
  // for them, and the back (pad_to_max_tokens) with zeros.
  if (!front_given) {
    const double mean = weights.empty() ? 0.0 : std::accumulate(weights.begin(), weights.end(), 0.0) / weights.size();
    weights.insert(weights.begin(), static_cast<std::size_t>(t.token_start()), mean);
  }
  weights.resize(static_cast<std::size_t>(t.depth()), 0.0);
  t.idf = std::move(weights);
}
template <class K>
void index_tokens(IndexTable<K>& t) {
  t.positions.clear();
  for (std::size_t i = 0; i < t.tokens.size(); ++i) t.positions[t.tokens[i]] = t.token_start() + static_cast<std::int64_t>(i);
}
}  // namespace

template <class K>
void IndexTable<K>::set_vocabulary(const std::vector<K>& vocabulary, const std::vector<double>& idf_weights) {
  if (output_mode == "tf_idf" && idf_weights.empty() && !vocabulary.empty())
    throw ValueError(fmt::format("{}: output_mode \"tf_idf\" with a given vocabulary needs idf_weights", layer));
  if (output_mode != "tf_idf" && !idf_weights.empty())
    throw ValueError(fmt::format("{}: idf_weights are only for output_mode \"tf_idf\", got \"{}\"", layer, output_mode));
  if (!idf_weights.empty() && idf_weights.size() != vocabulary.size())
    throw ValueError(fmt::format("{}: {} idf_weights for a vocabulary of {} entries", layer, idf_weights.size(), vocabulary.size()));
  const std::vector<K> special = [&] {
    std::vector<K> s;
    if (mask_token && int_mode()) s.push_back(*mask_token);
    for (int i = 0; i < num_oov_indices; ++i) s.push_back(oov_token);
    return s;
  }();
  const bool found_special = !special.empty() && vocabulary.size() >= special.size() &&
                             std::equal(special.begin(), special.end(), vocabulary.begin());
  std::vector<K> rest(vocabulary.begin() + (found_special ? static_cast<std::ptrdiff_t>(special.size()) : 0), vocabulary.end());
  std::set<K> seen;
  for (const K& t : rest) {
    if (!seen.insert(t).second) throw ValueError(fmt::format("{}: the vocabulary repeats the token {}", layer, show_token(t)));
    if (mask_token && t == *mask_token)
      throw ValueError(fmt::format("{}: the mask token {} may only be the vocabulary's first entry", layer, show_token(t)));
    if (num_oov_indices > 0 && t == oov_token)
      throw ValueError(fmt::format("{}: the OOV token {} may only follow the mask token at the vocabulary's front", layer, show_token(t)));
  }
  tokens = std::move(rest);
  if (max_tokens && vocabulary_size() > *max_tokens)
    throw ValueError(fmt::format("{}: a vocabulary of {} entries is larger than max_tokens = {}", layer, vocabulary_size(), *max_tokens));
  index_tokens(*this);
  idf.clear();
  if (output_mode == "tf_idf") {
    // Outside int mode the specials are exactly the token_start() OOV slots, so weights given
    // with them already cover the whole front.
    finish_idf(*this, idf_weights, found_special);
  }
}

template <class K>
void IndexTable<K>::adapt(const std::vector<std::vector<K>>& documents) {
  std::map<K, std::int64_t> counts, document_counts;
  for (const auto& doc : documents) {
    std::set<K> in_doc;
    for (const K& t : doc) {
      if ((mask_token && t == *mask_token) || t == oov_token) continue;  // Keras removes the special tokens
      ++counts[t];
      if (in_doc.insert(t).second) ++document_counts[t];
    }
  }
  std::vector<std::pair<K, std::int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first > b.first;
  });
  std::size_t keep = sorted.size();
  if (max_tokens) keep = std::min(keep, static_cast<std::size_t>(*max_tokens - token_start()));
  tokens.clear();
  std::vector<double> weights;
  const double n = static_cast<double>(documents.size());
  for (std::size_t i = 0; i < keep; ++i) {
    tokens.push_back(sorted[i].first);
    weights.push_back(std::log(1.0 + n / (1.0 + static_cast<double>(document_counts[sorted[i].first]))));
  }
  index_tokens(*this);
  idf.clear();
  if (output_mode == "tf_idf") finish_idf(*this, std::move(weights), false);
}

template <class K>
std::int64_t IndexTable<K>::index(const K& token) const {
  if (mask_token && token == *mask_token) return int_mode() ? 0 : -1;
  auto it = positions.find(token);
  if (it != positions.end()) return it->second;
  if (num_oov_indices == 0)
    throw ValueError(fmt::format("{}: {} is not in the vocabulary and num_oov_indices = 0", layer, show_token(token)));
  if (num_oov_indices == 1) return oov_start();
  std::int64_t slot;
  if constexpr (std::is_same_v<K, std::string>) {
    slot = static_cast<std::int64_t>(farmhash_fingerprint64(token) % static_cast<std::uint64_t>(num_oov_indices));
  } else {
    slot = ((token % num_oov_indices) + num_oov_indices) % num_oov_indices;  // floormod, as Keras
  }
  return oov_start() + slot;
}

template <class K>
Tensor IndexTable<K>::encode(const std::vector<std::vector<std::int64_t>>& rows, std::int64_t length) const {
  if (int_mode()) {
    const auto n = static_cast<std::int64_t>(rows.size());
    if (length > 0 && n > std::numeric_limits<std::int64_t>::max() / length)
      throw ValueError(fmt::format("{}: an output of {} x {} ids is too large", layer, n, length));
    std::vector<std::int64_t> out(static_cast<std::size_t>(n * length), 0);
    for (std::int64_t r = 0; r < n; ++r) {
      const auto& row = rows[static_cast<std::size_t>(r)];
      const auto m = std::min<std::int64_t>(length, static_cast<std::int64_t>(row.size()));
      std::copy(row.begin(), row.begin() + m, out.begin() + r * length);
    }
    return constant(out, Shape{n, length});
  }
  Samples s;
  s.rows = rows;
  if (output_mode == "one_hot")
    for (const auto& row : rows)
      if (row.size() != 1)
        throw ValueError(fmt::format("{}: output_mode \"one_hot\" takes one token per row, got a row of {}", layer, row.size()));
  return encode_samples(s, depth(), output_mode, &idf, true, layer.c_str());
}

template <class K>
K IndexTable<K>::token_at(std::int64_t i) const {
  if (mask_token && int_mode() && i == 0) return *mask_token;
  if (i >= token_start() && i < vocabulary_size()) return tokens[static_cast<std::size_t>(i - token_start())];
  return oov_token;
}

template struct IndexTable<std::string>;
template struct IndexTable<std::int64_t>;

}  // namespace detail

// ---- StringLookup ----------------------------------------------------------------------------

StringLookup::StringLookup(StringLookupOptions options) : Layer(options.name), options_(std::move(options)) {
  table_.layer = "StringLookup";
  table_.max_tokens = options_.max_tokens;
  table_.num_oov_indices = options_.num_oov_indices;
  table_.mask_token = options_.mask_token;
  table_.oov_token = options_.oov_token;
  table_.invert = options_.invert;
  table_.output_mode = options_.output_mode;
  table_.pad_to_max_tokens = options_.pad_to_max_tokens;
  table_.validate();
  if (!options_.vocabulary.empty()) table_.set_vocabulary(options_.vocabulary, options_.idf_weights);
}

void StringLookup::set_vocabulary(const std::vector<std::string>& vocabulary, const std::vector<double>& idf_weights) {
  table_.set_vocabulary(vocabulary, idf_weights);
}

void StringLookup::adapt(const std::vector<std::string>& tokens) { table_.adapt({tokens}); }
void StringLookup::adapt_rows(const std::vector<std::vector<std::string>>& rows) { table_.adapt(rows); }

Tensor StringLookup::operator()(const std::vector<std::string>& tokens) const {
  if (options_.invert) throw ValueError("StringLookup: with invert = true the inputs are ids: use inverse(ids)");
  std::vector<std::int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) ids.push_back(table_.index(t));
  const auto n = static_cast<std::int64_t>(ids.size());
  if (table_.int_mode()) return constant(ids, Shape{n});
  Samples s;
  if (options_.output_mode == "one_hot") {
    for (auto id : ids) s.rows.push_back({id});
  } else {
    s.rows.push_back(ids);
    s.single = true;
  }
  return encode_samples(s, table_.depth(), options_.output_mode, &table_.idf, true, "StringLookup");
}

Tensor StringLookup::call_rows(const std::vector<std::vector<std::string>>& rows) const {
  if (options_.invert) throw ValueError("StringLookup: with invert = true the inputs are ids: use inverse(ids)");
  std::vector<std::vector<std::int64_t>> ids(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (table_.int_mode() && rows[r].size() != rows[0].size())
      throw ShapeError(fmt::format("StringLookup.call_rows: output_mode \"int\" needs rows of one length; row 0 has {} tokens, row {} has {}",
                                   rows[0].size(), r, rows[r].size()));
    for (const auto& t : rows[r]) ids[r].push_back(table_.index(t));
  }
  return table_.encode(ids, rows.empty() ? 0 : static_cast<std::int64_t>(rows[0].size()));
}

std::vector<std::string> StringLookup::inverse(const Tensor& ids) const {
  if (!options_.invert) throw ValueError("StringLookup.inverse: the layer was made with invert = false");
  if (!is_integer_dtype(ids.dtype()))
    throw DTypeError(fmt::format("StringLookup.inverse: ids must be integers, got {}", keel::name(ids.dtype())));
  std::vector<std::string> out;
  for (auto i : ids.to_vector<std::int64_t>()) out.push_back(table_.token_at(i));
  return out;
}

Tensor StringLookup::call(const Tensor& inputs, bool) {
  throw ValueError(fmt::format("StringLookup: keel tensors hold no strings (got a tensor of shape {}); call the layer "
                               "on a std::vector<std::string>, in a Dataset map before the model",
                               inputs.shape().to_string()));
}

// ---- IntegerLookup ---------------------------------------------------------------------------

IntegerLookup::IntegerLookup(IntegerLookupOptions options) : Layer(options.name), options_(std::move(options)) {
  table_.layer = "IntegerLookup";
  table_.max_tokens = options_.max_tokens;
  table_.num_oov_indices = options_.num_oov_indices;
  table_.mask_token = options_.mask_token;
  table_.oov_token = options_.oov_token;
  table_.invert = options_.invert;
  table_.output_mode = options_.output_mode;
  table_.pad_to_max_tokens = options_.pad_to_max_tokens;
  table_.validate();
  if (!options_.vocabulary.empty()) table_.set_vocabulary(options_.vocabulary, options_.idf_weights);
}

void IntegerLookup::set_vocabulary(const std::vector<std::int64_t>& vocabulary, const std::vector<double>& idf_weights) {
  table_.set_vocabulary(vocabulary, idf_weights);
}

void IntegerLookup::adapt(const Tensor& data) {
  if (!is_integer_dtype(data.dtype()))
    throw DTypeError(fmt::format("IntegerLookup.adapt: data must be integers, got {}", keel::name(data.dtype())));
  const std::vector<std::int64_t> v = data.to_vector<std::int64_t>();
  if (data.shape().rank() <= 1) {
    table_.adapt({v});
    return;
  }
  const Shape& s = data.shape();
  const std::int64_t rows = s[0], cols = s[0] == 0 ? 0 : data.size() / s[0];
  std::vector<std::vector<std::int64_t>> docs;
  for (std::int64_t r = 0; r < rows; ++r) docs.emplace_back(v.begin() + r * cols, v.begin() + (r + 1) * cols);
  table_.adapt(docs);
}

void IntegerLookup::build(const Shape& input_shape) { set_built(input_shape); }

Tensor IntegerLookup::call(const Tensor& inputs, bool) {
  if (!is_integer_dtype(inputs.dtype()))
    throw DTypeError(fmt::format("IntegerLookup: inputs must be integers, got a {} tensor of shape {}",
                                 keel::name(inputs.dtype()), inputs.shape().to_string()));
  const std::vector<std::int64_t> v = inputs.to_vector<std::int64_t>();
  std::vector<std::int64_t> out;
  out.reserve(v.size());
  if (options_.invert) {
    for (auto i : v) out.push_back(table_.token_at(i));
    return constant(out, inputs.shape());
  }
  for (auto x : v) out.push_back(table_.index(x));
  if (table_.int_mode()) return constant(out, inputs.shape());
  return encode_samples(group(inputs.shape(), out, options_.output_mode, "IntegerLookup"), table_.depth(),
                        options_.output_mode, &table_.idf, true, "IntegerLookup");
}

// ---- CategoryEncoding --------------------------------------------------------------------------

CategoryEncoding::CategoryEncoding(int num_tokens, CategoryEncodingOptions options)
    : Layer(options.name), num_tokens_(num_tokens), options_(std::move(options)) {
  if (num_tokens_ < 1) throw ValueError(fmt::format("CategoryEncoding: num_tokens must be at least 1, got {}", num_tokens_));
  const std::string& m = options_.output_mode;
  if (m != "one_hot" && m != "multi_hot" && m != "count")
    throw ValueError(fmt::format("CategoryEncoding: output_mode must be \"one_hot\", \"multi_hot\" or \"count\", got \"{}\"", m));
}

void CategoryEncoding::build(const Shape& input_shape) { set_built(input_shape); }

Tensor CategoryEncoding::call(const Tensor& inputs, bool) {
  return detail::encode_categorical(inputs, num_tokens_, options_.output_mode, "CategoryEncoding");
}

}  // namespace keel::layers
