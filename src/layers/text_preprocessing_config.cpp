// The configs of the text preprocessing layers (Keras' keys, in Keras' order) and their
// registration under the Keras class names. Their options hold strings, string lists and
// optional strings that the generic field lists of fields.hpp do not spell, so one pair of
// functions per options struct writes and reads them. The vocabulary written is the current one
// (adapted or given), so from_config rebuilds a layer with the same outputs.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/text_preprocessing.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/config_args.hpp"

namespace keel::layers {

namespace {

using json = nlohmann::json;
using detail::Args;

json optional_json(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

// The idf weights of the vocabulary's entries (the trailing pad_to_max_tokens zeros left out);
// null outside tf_idf and before there is a vocabulary.
json idf_json(const std::string& mode, const std::vector<double>& idf, std::size_t entries) {
  if (mode != "tf_idf" || idf.size() < entries || entries == 0) return nullptr;
  return json(std::vector<double>(idf.begin(), idf.begin() + static_cast<std::ptrdiff_t>(entries)));
}

// A list of strings or numbers; null and a missing key are the empty list.
template <class T>
std::vector<T> read_list(const Args& a, const json& c, const char* key) {
  std::vector<T> out;
  const json* v = a.find(key);
  if (!v) return out;
  if (!v->is_array()) a.bad(key, "a list", *v);
  for (const auto& e : *v) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!e.is_string()) a.bad(key, "a list of strings", *v);
      out.push_back(e.get<std::string>());
    } else if constexpr (std::is_same_v<T, double>) {
      out.push_back(a.number_of(key, e));
    } else {
      out.push_back(a.int64_of(key, e));
    }
  }
  (void)c;
  return out;
}

// Keras writes None for a standardize or split of None; keel spells it "".
std::string read_none_string(const Args& a, const json& c, const char* key, const std::string& def) {
  auto it = c.find(key);
  if (it == c.end()) return def;
  if (it->is_null()) return "";
  return a.text(key, def);
}

template <class O, class Table>
void write_lookup(json& c, const O& o, const Table& vocabulary, const std::vector<double>& idf) {
  c["max_tokens"] = optional_json(o.max_tokens);
  c["num_oov_indices"] = o.num_oov_indices;
  c["mask_token"] = o.mask_token ? json(*o.mask_token) : json(nullptr);
  c["oov_token"] = o.oov_token;
  c["vocabulary"] = vocabulary;
  c["idf_weights"] = idf_json(o.output_mode, idf, vocabulary.size());
  c["invert"] = o.invert;
  c["output_mode"] = o.output_mode;
  c["pad_to_max_tokens"] = o.pad_to_max_tokens;
  c["sparse"] = false;
}

template <class O>
void read_lookup_common(const Args& a, O& o) {
  o.max_tokens = a.opt_int("max_tokens");
  o.num_oov_indices = a.integer("num_oov_indices", o.num_oov_indices);
  o.invert = a.flag("invert", o.invert);
  o.output_mode = a.text("output_mode", o.output_mode);
  o.pad_to_max_tokens = a.flag("pad_to_max_tokens", o.pad_to_max_tokens);
  o.name = a.name();
}

}  // namespace

nlohmann::json StringLookup::get_config() const {
  auto c = Layer::get_config();
  write_lookup(c, options_, table_.tokens.empty() ? decltype(get_vocabulary()){} : get_vocabulary(), table_.idf);
  c["encoding"] = "utf-8";
  return c;
}

nlohmann::json IntegerLookup::get_config() const {
  auto c = Layer::get_config();
  write_lookup(c, options_, table_.tokens.empty() ? decltype(get_vocabulary()){} : get_vocabulary(), table_.idf);
  c["vocabulary_dtype"] = "int64";
  return c;
}

nlohmann::json CategoryEncoding::get_config() const {
  auto c = Layer::get_config();
  c["num_tokens"] = num_tokens_;
  c["output_mode"] = options_.output_mode;
  c["sparse"] = false;
  return c;
}

nlohmann::json Hashing::get_config() const {
  auto c = Layer::get_config();
  c["num_bins"] = num_bins_;
  c["mask_value"] = options_.mask_value ? json(*options_.mask_value) : json(nullptr);
  c["salt"] = options_.salt.empty() ? json(nullptr) : json(options_.salt);
  c["output_mode"] = options_.output_mode;
  c["sparse"] = false;
  return c;
}

nlohmann::json TextVectorization::get_config() const {
  auto c = Layer::get_config();
  c["max_tokens"] = optional_json(options_.max_tokens);
  c["standardize"] = options_.standardize.empty() ? json(nullptr) : json(options_.standardize);
  c["split"] = options_.split.empty() ? json(nullptr) : json(options_.split);
  const NGrams& g = options_.ngrams;
  c["ngrams"] = g.empty() ? json(nullptr) : g.up_to ? json(g.widths.back()) : json(g.widths);
  c["output_mode"] = options_.output_mode;
  c["output_sequence_length"] = optional_json(options_.output_sequence_length);
  c["pad_to_max_tokens"] = options_.pad_to_max_tokens;
  // Nothing learned yet: no vocabulary (the special tokens alone would read back the same).
  const std::vector<std::string> vocabulary = table_.tokens.empty() ? std::vector<std::string>{} : get_vocabulary();
  c["vocabulary"] = vocabulary;
  c["idf_weights"] = idf_json(options_.output_mode, table_.idf, vocabulary.size());
  c["sparse"] = false;
  c["ragged"] = false;
  c["encoding"] = "utf-8";
  return c;
}

void detail::register_text_preprocessing_layers(Factories& f) {
  f["StringLookup"] = [](const json& c) {
    const Args a(c, "StringLookup");
    StringLookupOptions o;
    read_lookup_common(a, o);
    if (a.has("mask_token")) o.mask_token = a.text("mask_token", "");
    o.oov_token = a.text("oov_token", o.oov_token);
    o.vocabulary = read_list<std::string>(a, c, "vocabulary");
    o.idf_weights = read_list<double>(a, c, "idf_weights");
    return std::make_shared<StringLookup>(o);
  };
  f["IntegerLookup"] = [](const json& c) {
    const Args a(c, "IntegerLookup");
    IntegerLookupOptions o;
    read_lookup_common(a, o);
    if (const json* m = a.find("mask_token")) o.mask_token = a.int64_of("mask_token", *m);
    if (const json* t = a.find("oov_token")) o.oov_token = a.int64_of("oov_token", *t);
    o.vocabulary = read_list<std::int64_t>(a, c, "vocabulary");
    o.idf_weights = read_list<double>(a, c, "idf_weights");
    return std::make_shared<IntegerLookup>(o);
  };
  f["CategoryEncoding"] = [](const json& c) {
    const Args a(c, "CategoryEncoding");
    return std::make_shared<CategoryEncoding>(
        a.required_int("num_tokens"), CategoryEncodingOptions{.output_mode = a.text("output_mode", "multi_hot"), .name = a.name()});
  };
  f["Hashing"] = [](const json& c) {
    const Args a(c, "Hashing");
    HashingOptions o;
    if (const json* m = a.find("mask_value")) o.mask_value = m->is_string() ? m->get<std::string>() : m->dump();
    if (const json* s = a.find("salt")) {
      if (s->is_array()) {
        for (const auto& e : *s) o.salt.push_back(static_cast<std::uint64_t>(a.int64_of("salt", e)));
      } else {
        const auto v = static_cast<std::uint64_t>(a.int64_of("salt", *s));
        o.salt = {v, v};  // Keras: an int salt keys both halves
      }
    }
    o.output_mode = a.text("output_mode", o.output_mode);
    o.name = a.name();
    return std::make_shared<Hashing>(a.required_int("num_bins"), o);
  };
  f["TextVectorization"] = [](const json& c) {
    const Args a(c, "TextVectorization");
    TextVectorizationOptions o;
    o.max_tokens = a.opt_int("max_tokens");
    o.standardize = read_none_string(a, c, "standardize", o.standardize);
    o.split = read_none_string(a, c, "split", o.split);
    if (const json* g = a.find("ngrams")) {
      if (g->is_array()) {
        std::vector<int> widths;
        for (const auto& e : *g) widths.push_back(a.int_of("ngrams", e));
        o.ngrams = NGrams(widths);
      } else {
        o.ngrams = NGrams(a.int_of("ngrams", *g));
      }
    }
    o.output_mode = a.text("output_mode", o.output_mode);
    o.output_sequence_length = a.opt_int("output_sequence_length");
    o.pad_to_max_tokens = a.flag("pad_to_max_tokens", o.pad_to_max_tokens);
    o.vocabulary = read_list<std::string>(a, c, "vocabulary");
    o.idf_weights = read_list<double>(a, c, "idf_weights");
    o.name = a.name();
    return std::make_shared<TextVectorization>(o);
  };
}

}  // namespace keel::layers
