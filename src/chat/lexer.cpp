#include "chat/lexer.h"

#include "chat/chat_template.h"
#include "chat/text_util.h"

#include <cctype>

namespace slab::chat {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string rstrip_ws(std::string s) {
  while (!s.empty() && is_ws(s.back())) s.pop_back();
  return s;
}

// lstrip_blocks: drop the spaces and tabs between the start of the line and a block tag.
void lstrip_line(std::string& text, bool line_starting) {
  std::size_t nl = text.rfind('\n');
  std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
  if (l_pos == 0 && !line_starting) return;
  if (l_pos == text.size()) return;
  for (std::size_t i = l_pos; i < text.size(); ++i)
    if (!is_ws(text[i])) return;
  text.resize(l_pos);
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    src_.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {  // jinja2 normalises newlines to \n
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();  // keep_trailing_newline=False
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      std::size_t open = find_tag_open(pos_);
      std::string text = src_.substr(pos_, open == std::string::npos ? std::string::npos : open - pos_);
      if (open == std::string::npos) {
        emit_text(std::move(text));
        break;
      }
      char kind = src_[open + 1];
      char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      bool has_sign = sign == '-' || sign == '+';
      if (sign == '-') {
        text = rstrip_ws(std::move(text));
      } else if (sign != '+' && kind != '{') {
        lstrip_line(text, pos_ == 0 || src_[pos_ - 1] == '\n');
      }
      emit_text(std::move(text));
      count_lines(pos_, open);
      pos_ = open + 2 + (has_sign ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else {
        lex_tag(kind == '{');
      }
    }
    tokens_.push_back(Token{Token::Type::End, "", 0, 0.0, line_});
    return std::move(tokens_);
  }

 private:
  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(what + " (line " + std::to_string(line_) + ")");
  }

  void count_lines(std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  std::size_t find_tag_open(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back(Token{Token::Type::Text, std::move(text), 0, 0.0, line_});
  }

  void push(Token::Type type, std::string text = {}) { tokens_.push_back(Token{type, std::move(text), 0, 0.0, line_}); }

  // After a closing `%}` / `#}` / `}}`: `-` eats all following whitespace, trim_blocks one newline.
  void after_close(char sign, bool is_block_or_comment) {
    if (sign == '-') {
      std::size_t p = pos_;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      count_lines(pos_, p);
      pos_ = p;
    } else if (sign != '+' && is_block_or_comment && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  void lex_comment() {
    std::size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail("Missing end of comment tag");
    char sign = close > pos_ ? src_[close - 1] : '\0';
    count_lines(pos_, close);
    pos_ = close + 2;
    after_close(sign, true);
  }

  void lex_tag(bool is_var) {
    std::size_t first_token = tokens_.size() + 1;
    push(is_var ? Token::Type::VarBegin : Token::Type::BlockBegin);
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size())
        fail(is_var ? "unexpected end of template, expected 'end of print statement'"
                    : "unexpected end of template, expected 'end of statement block'");
      char c = src_[pos_];
      if (depth == 0) {
        std::string_view rest(src_.data() + pos_, src_.size() - pos_);
        std::string_view close = is_var ? "}}" : "%}";
        char sign = '\0';
        if ((c == '-' || (c == '+' && !is_var)) && rest.substr(1, 2) == close) sign = c;
        if (sign || rest.substr(0, 2) == close) {
          pos_ += 2 + (sign ? 1 : 0);
          push(is_var ? Token::Type::VarEnd : Token::Type::BlockEnd);
          after_close(sign, !is_var);
          if (!is_var && tokens_.size() == first_token + 2 && tokens_[first_token].type == Token::Type::Name &&
              tokens_[first_token].text == "raw") {
            tokens_.resize(first_token - 1);
            lex_raw();
          }
          return;
        }
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t b = pos_;
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          ++pos_;
        push(Token::Type::Name, src_.substr(b, pos_ - b));
      } else {
        static const char* const two_char[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two_char)
          if (src_.compare(pos_, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) == std::string_view::npos)
            fail(std::string("unexpected char '") + c + "'");
          op = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') ++depth;
          if (c == ')' || c == ']' || c == '}') {
            if (depth == 0) fail(std::string("unexpected '") + c + "'");
            --depth;
          }
        }
        pos_ += op.size();
        push(Token::Type::Op, op);
      }
    }
  }

  // {% raw %}...{% endraw %}: the body is text, as it is.
  void lex_raw() {
    std::size_t search = pos_;
    while (true) {
      std::size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail("Missing end of raw directive");
      std::size_t p = open + 2;
      char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p++] : '\0';
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      p += 6;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      char close_sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p++] : '\0';
      if (src_.compare(p, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string text = src_.substr(pos_, open - pos_);
      if (sign == '-')
        text = rstrip_ws(std::move(text));
      else if (sign != '+')
        lstrip_line(text, pos_ == 0 || src_[pos_ - 1] == '\n');
      emit_text(std::move(text));
      count_lines(pos_, p + 2);
      pos_ = p + 2;
      after_close(close_sign, true);
      return;
    }
  }

  void lex_string(char quote) {
    std::string out;
    ++pos_;
    while (true) {
      if (pos_ >= src_.size()) fail("unexpected end of string literal");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) fail("unexpected end of string literal");
      char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': ++line_; break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) fail("truncated \\" + std::string(1, e) + " escape");
          char32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            char h = src_[pos_ + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("truncated \\" + std::string(1, e) + " escape");
            cp = cp * 16 + static_cast<char32_t>(
                               std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF) fail("illegal Unicode character");
          pos_ += n;
          utf8_append(out, cp);
          break;
        }
        default:  // Python keeps unknown escapes as they are
          out += '\\';
          out += e;
      }
    }
    push(Token::Type::String, std::move(out));
  }

  void lex_number() {
    std::size_t b = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t save = pos_++;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
      if (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) {
        is_float = true;
        digits();
      } else {
        pos_ = save;
      }
    }
    std::string text;
    for (std::size_t i = b; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Token::Type::Float : Token::Type::Int, text, 0, 0.0, line_};
    try {
      if (is_float)
        t.float_value = std::stod(text);
      else
        t.int_value = std::stoll(text);
    } catch (const std::exception&) {
      if (!is_float) {  // beyond int64: keep it as a float rather than fail
        t.type = Token::Type::Float;
        t.float_value = std::stod(text);
      } else {
        fail("bad number literal " + text);
      }
    }
    tokens_.push_back(std::move(t));
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace slab::chat
