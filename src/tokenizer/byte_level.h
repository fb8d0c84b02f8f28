#pragma once
// The GPT-2 byte-level alphabet: every byte maps to one printable code point so that BPE over
// arbitrary bytes works on ordinary strings ("Ġ" is the space byte).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace slab::tok {

// Appends the byte-level spelling of each byte of `bytes`.
void append_byte_level(std::string& out, std::string_view bytes);

// The byte a byte-level code point stands for, or nullopt when it is not one of the 256.
std::optional<uint8_t> byte_level_to_byte(char32_t cp);

}  // namespace slab::tok
