// TextVectorization: standardize -> split -> n-grams -> a vocabulary lookup, as Keras 3.
#include <fmt/core.h>

#include <algorithm>

#include "keel/layers/text_preprocessing.hpp"
#include "keel/ops/creation.hpp"

namespace keel::layers {

namespace {

// Keras' DEFAULT_STRIP_REGEX r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']': ',-\.' is a range
// that holds '-', so the class is exactly the 32 ASCII punctuation characters.
bool is_punctuation(unsigned char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}
// tf.strings.split's separators: ASCII whitespace.
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// The byte length of the UTF-8 sequence that starts with c (1 for a stray continuation byte, so
// malformed text still splits into something instead of failing).
std::size_t utf8_length(unsigned char c) {
  if (c >= 0xf0 && c < 0xf8) return 4;
  if (c >= 0xe0) return c < 0xf0 ? 3 : 1;
  if (c >= 0xc0) return 2;
  return 1;
}

}  // namespace

NGrams::NGrams(int n) : up_to(true) {
  if (n < 1) throw ValueError(fmt::format("TextVectorization: ngrams must be a positive integer, got {}", n));
  for (int w = 1; w <= n; ++w) widths.push_back(w);
}

TextVectorization::TextVectorization(TextVectorizationOptions options) : Layer(options.name), options_(std::move(options)) {
  const std::string& st = options_.standardize;
  if (st != "lower_and_strip_punctuation" && st != "lower" && st != "strip_punctuation" && !st.empty())
    throw ValueError(fmt::format("TextVectorization: standardize must be \"lower_and_strip_punctuation\", \"lower\", "
                                 "\"strip_punctuation\" or \"\" (None), got \"{}\"", st));
  const std::string& sp = options_.split;
  if (sp != "whitespace" && sp != "character" && !sp.empty())
    throw ValueError(fmt::format("TextVectorization: split must be \"whitespace\", \"character\" or \"\" (None), got \"{}\"", sp));
  for (int w : options_.ngrams.widths)
    if (w < 1) throw ValueError(fmt::format("TextVectorization: n-gram widths must be positive, got {}", w));
  const std::string& m = options_.output_mode;
  if (m != "int" && m != "multi_hot" && m != "count" && m != "tf_idf")
    throw ValueError(fmt::format("TextVectorization: output_mode must be \"int\", \"multi_hot\", \"count\" or \"tf_idf\", got \"{}\"", m));
  if (options_.output_sequence_length && m != "int")
    throw ValueError(fmt::format("TextVectorization: output_sequence_length is only for output_mode \"int\", got \"{}\"", m));
  if (options_.output_sequence_length && *options_.output_sequence_length < 0)
    throw ValueError(fmt::format("TextVectorization: output_sequence_length must be >= 0, got {}", *options_.output_sequence_length));
  // Keras' TextVectorization is a StringLookup with mask "" (padding, index 0) and one "[UNK]".
  table_.layer = "TextVectorization";
  table_.max_tokens = options_.max_tokens;
  table_.num_oov_indices = 1;
  table_.mask_token = std::string();
  table_.oov_token = "[UNK]";
  table_.output_mode = m;
  table_.pad_to_max_tokens = options_.pad_to_max_tokens;
  table_.validate();
  if (!options_.vocabulary.empty()) table_.set_vocabulary(options_.vocabulary, options_.idf_weights);
}

std::vector<std::string> TextVectorization::tokenize(const std::string& text) const {
  std::string s;
  s.reserve(text.size());
  const std::string& st = options_.standardize;
  const bool lower = st == "lower_and_strip_punctuation" || st == "lower";
  const bool strip = st == "lower_and_strip_punctuation" || st == "strip_punctuation";
  for (unsigned char c : text) {
    if (strip && is_punctuation(c)) continue;
    s.push_back(static_cast<char>(lower && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
  }
  std::vector<std::string> tokens;
  if (options_.split == "whitespace") {
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(static_cast<unsigned char>(s[i]))) ++i;
      std::size_t j = i;
      while (j < s.size() && !is_space(static_cast<unsigned char>(s[j]))) ++j;
      if (j > i) tokens.push_back(s.substr(i, j - i));
      i = j;
    }
  } else if (options_.split == "character") {
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t n = std::min(utf8_length(static_cast<unsigned char>(s[i])), s.size() - i);
      tokens.push_back(s.substr(i, n));
      i += n;
    }
  } else {
    tokens.push_back(s);
  }
  if (options_.ngrams.empty()) return tokens;
  // tf.strings.ngrams(tokens, widths, separator=" "): every width in turn, in order of position;
  // a text shorter than a width has none of that width.
  std::vector<std::string> grams;
  for (int w : options_.ngrams.widths) {
    const auto width = static_cast<std::size_t>(w);
    for (std::size_t i = 0; i + width <= tokens.size(); ++i) {
      std::string g = tokens[i];
      for (std::size_t k = 1; k < width; ++k) g += " " + tokens[i + k];
      grams.push_back(std::move(g));
    }
  }
  return grams;
}

Tensor TextVectorization::operator()(const std::vector<std::string>& texts) const {
  std::vector<std::vector<std::int64_t>> rows(texts.size());
  std::int64_t longest = 0;
  for (std::size_t r = 0; r < texts.size(); ++r) {
    for (const auto& t : tokenize(texts[r])) rows[r].push_back(table_.index(t));
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(rows[r].size()));
  }
  return table_.encode(rows, options_.output_sequence_length ? *options_.output_sequence_length : longest);
}

Tensor TextVectorization::call(const Tensor& inputs, bool) {
  throw ValueError(fmt::format("TextVectorization: keel tensors hold no strings (got a tensor of shape {}); call the "
                               "layer on a std::vector<std::string>, in a Dataset map before the model",
                               inputs.shape().to_string()));
}

void TextVectorization::adapt(const std::vector<std::string>& texts) {
  std::vector<std::vector<std::string>> documents;
  documents.reserve(texts.size());
  for (const auto& t : texts) documents.push_back(tokenize(t));
  table_.adapt(documents);
}

void TextVectorization::adapt(const data::Dataset<std::vector<std::string>>& texts) {
  std::vector<std::string> all;
  for (const auto& batch : texts) all.insert(all.end(), batch.begin(), batch.end());
  adapt(all);
}

void TextVectorization::adapt(const data::Dataset<std::pair<std::vector<std::string>, Tensor>>& texts_and_labels) {
  std::vector<std::string> all;
  for (const auto& [batch, labels] : texts_and_labels) all.insert(all.end(), batch.begin(), batch.end());
  adapt(all);
}

void TextVectorization::set_vocabulary(const std::vector<std::string>& vocabulary, const std::vector<double>& idf_weights) {
  table_.set_vocabulary(vocabulary, idf_weights);
}

}  // namespace keel::layers
