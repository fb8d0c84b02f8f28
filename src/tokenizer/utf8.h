#pragma once
// UTF-8 helpers shared by the tokenizer pieces.
#include <cstddef>
#include <string>
#include <string_view>

#include "runtime/utf8_encode.h"

namespace slab::tok {

// Length of the well-formed UTF-8 sequence starting at text[pos], or 0 when it is malformed
// (truncated, overlong, surrogate, above U+10FFFF).
size_t utf8_sequence_length(std::string_view text, size_t pos);

// Length in bytes of the character starting at text[pos] assuming valid UTF-8 (1 when malformed).
size_t utf8_char_length(std::string_view text, size_t pos);

// Code point of the valid sequence of `length` bytes at text[pos].
char32_t utf8_decode_at(std::string_view text, size_t pos, size_t length);

using slab::append_utf8;  // runtime/utf8_encode.h

bool is_valid_utf8(std::string_view text);

// Characters (code points) of UTF-8 text, as Python's len() counts a str; bytes that start no
// character (continuation bytes) are not counted.
size_t count_code_points(std::string_view text);

// Replaces each maximal ill-formed subsequence with U+FFFD, as Rust's String::from_utf8_lossy
// (and therefore Hugging Face decoding) does.
std::string to_valid_utf8(std::string_view text);

// True when the text ends with U+FFFD (a decode that stopped inside a character).
bool ends_with_replacement_char(std::string_view text);

}  // namespace slab::tok
