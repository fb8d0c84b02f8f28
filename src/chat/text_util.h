#pragma once
// UTF-8 and Python str helpers: templates index, slice and strip strings by code point.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace slab::chat {

std::u32string utf8_decode(std::string_view s);  // invalid bytes decode as U+FFFD
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
std::int64_t utf8_length(std::string_view s);

bool py_isspace(char32_t c);
char32_t ascii_upper(char32_t c);
char32_t ascii_lower(char32_t c);
char32_t unicode_upper(char32_t c);
char32_t unicode_lower(char32_t c);
bool py_isalpha(char32_t c);  // ASCII letters and non-ASCII code points above U+00BF
bool py_isdigit(char32_t c);

// str.strip family: chars == nullptr strips whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const std::string* sep, std::int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, std::int64_t maxsplit);
std::string py_replace(std::string_view s, std::string_view old, std::string_view with, std::int64_t count);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title
std::string py_capitalize(std::string_view s);  // str.capitalize
std::int64_t py_count(std::string_view s, std::string_view sub);
std::vector<std::string> py_splitlines(std::string_view s);
// str.find on code point positions.
std::int64_t py_find(std::string_view s, std::string_view sub, bool reverse);

}  // namespace slab::chat
