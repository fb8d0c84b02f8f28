#pragma once
// Splits template source into text and tag tokens, applying jinja2's whitespace rules as
// transformers configures them (trim_blocks, lstrip_blocks, `-`/`+` markers, one trailing
// newline of the source dropped).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace slab::chat {

struct Token {
  enum class Type : std::uint8_t {
    Text,        // literal output
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    Int,
    Float,
    String,
    Op,  // operator or punctuation, in `text`
    End,
  };
  Type type;
  std::string text;  // Text data, Name, decoded String, Op
  std::int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
};

std::vector<Token> tokenize(std::string_view source);  // throws TemplateError

}  // namespace slab::chat
