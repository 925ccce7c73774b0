// A small reader of the protobuf text format, enough for ModelServerConfig's model_config_list
// (see model_config.hpp). Grammar (text_format.cc): fields are `name: value` or `name { ... }`
// (an optional ':' before '{'), strings in single or double quotes with C escapes, '#' comments.
#include "model_config.hpp"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::serve {

namespace {

struct Token {
  enum Kind { ident, string, colon, open, close, end } kind;
  std::string text;
  int line;
};

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  Token next() {
    skip_space();
    if (i_ >= s_.size()) return {Token::end, "", line_};
    const char c = s_[i_];
    if (c == ':') return ++i_, Token{Token::colon, ":", line_};
    if (c == '{') return ++i_, Token{Token::open, "{", line_};
    if (c == '}') return ++i_, Token{Token::close, "}", line_};
    if (c == '"' || c == '\'') return quoted(c);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_' || s_[j] == '.')) ++j;
      Token t{Token::ident, s_.substr(i_, j - i_), line_};
      i_ = j;
      return t;
    }
    throw ValueError(fmt::format("{}: line {}: unexpected character '{}'", where_, line_, c));
  }

 private:
  void skip_space() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') ++line_, ++i_;
      else if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ';') ++i_;
      else if (c == '#') { while (i_ < s_.size() && s_[i_] != '\n') ++i_; }
      else break;
    }
  }
  Token quoted(char q) {
    const int line = line_;
    std::string out;
    for (++i_; i_ < s_.size(); ++i_) {
      char c = s_[i_];
      if (c == q) { ++i_; return {Token::string, out, line}; }
      if (c == '\n') break;
      if (c == '\\' && i_ + 1 < s_.size()) {
        c = s_[++i_];
        switch (c) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case '\\': case '\'': case '"': out += c; break;
          default: throw ValueError(fmt::format("{}: line {}: unsupported escape '\\{}' in a string", where_, line_, c));
        }
        continue;
      }
      out += c;
    }
    throw ValueError(fmt::format("{}: line {}: unterminated string", where_, line));
  }
  const std::string& s_;
  const std::string& where_;
  std::size_t i_ = 0;
  int line_ = 1;
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& where) : lex_(text, where), where_(where) { advance(); }

  std::vector<ModelSpec> parse() {
    std::vector<ModelSpec> out;
    bool seen_list = false;
    while (tok_.kind != Token::end) {
      const Token field = expect(Token::ident, "a field name");
      if (field.text != "model_config_list")
        throw unsupported(field, "ModelServerConfig", "model_config_list");
      if (seen_list) throw error(field, "model_config_list given twice");
      seen_list = true;
      open_message();
      while (tok_.kind != Token::close) {
        const Token f = expect(Token::ident, "'config' or '}'");
        if (f.text != "config") throw unsupported(f, "ModelConfigList", "config");
        open_message();
        out.push_back(parse_model(f.line));
        advance();  // '}'
      }
      advance();  // '}'
    }
    if (!seen_list) throw ValueError(fmt::format("{}: no model_config_list", where_));
    if (out.empty()) throw ValueError(fmt::format("{}: model_config_list has no config", where_));
    std::set<std::string> names;
    for (const auto& m : out)
      if (!names.insert(m.name).second) throw ValueError(fmt::format("{}: two configs name the model '{}'", where_, m.name));
    return out;
  }

 private:
  ModelSpec parse_model(int line) {
    ModelSpec m;
    std::set<std::string> seen;
    while (tok_.kind != Token::close) {
      const Token f = expect(Token::ident, "a field of config or '}'");
      if (f.text != "name" && f.text != "base_path" && f.text != "model_platform")
        throw unsupported(f, "ModelConfig", "name, base_path, model_platform");
      if (!seen.insert(f.text).second) throw error(f, fmt::format("field '{}' given twice", f.text));
      expect(Token::colon, "':'");
      const Token v = expect(Token::string, "a quoted string");
      if (f.text == "name") m.name = v.text;
      else if (f.text == "base_path") m.base_path = v.text;
      else m.model_platform = v.text;
    }
    if (m.name.empty()) throw ValueError(fmt::format("{}: line {}: config without a name", where_, line));
    if (m.base_path.empty())
      throw ValueError(fmt::format("{}: line {}: config '{}' without a base_path", where_, line, m.name));
    // TF Serving's platform for SavedModels is "tensorflow"; keel's own name is accepted too.
    if (m.model_platform != "tensorflow" && m.model_platform != "keel")
      throw ValueError(fmt::format("{}: line {}: model_platform '{}' of '{}' is not supported (\"tensorflow\" or \"keel\")",
                                   where_, line, m.model_platform, m.name));
    return m;
  }
  void open_message() {
    if (tok_.kind == Token::colon) advance();
    expect(Token::open, "'{'");
  }
  void advance() { tok_ = lex_.next(); }
  Token expect(Token::Kind k, const char* what) {
    if (tok_.kind != k)
      throw error(tok_, fmt::format("expected {}, found '{}'", what, tok_.kind == Token::end ? "end of file" : tok_.text));
    Token t = tok_;
    advance();
    return t;
  }
  ValueError error(const Token& t, const std::string& msg) const {
    return ValueError(fmt::format("{}: line {}: {}", where_, t.line, msg));
  }
  ValueError unsupported(const Token& t, const char* message, const char* supported) const {
    return error(t, fmt::format("field '{}' of {} is not supported by keel-serve (supported: {})", t.text, message,
                                supported));
  }
  Lexer lex_;
  const std::string& where_;
  Token tok_{Token::end, "", 0};
};

}  // namespace

std::vector<ModelSpec> parse_model_config(const std::string& text, const std::string& where) {
  return Parser(text, where).parse();
}

std::vector<ModelSpec> read_model_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("{}: cannot open the model config file", path));
  std::ostringstream s;
  s << in.rdbuf();
  if (s.str().size() > (16u << 20)) throw IOError(fmt::format("{}: implausibly large for a model config", path));
  return parse_model_config(s.str(), path);
}

}  // namespace keel::serve
