#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace slab::tok {
namespace {

constexpr char32_t kRemappedBytes = 68;  // bytes without a printable Latin-1 glyph

struct ByteLevelTables {
  std::array<std::string, 256> byte_to_text;
  std::array<char32_t, 256> byte_to_code_point{};
  std::array<uint8_t, kRemappedBytes> remapped_to_byte{};

  ByteLevelTables() {
    // Printable Latin-1 bytes stand for themselves; the rest (controls, space, soft hyphen...)
    // are moved to U+0100 onwards in byte order, so the map is a bijection on 256 code points.
    char32_t next_free = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      if (!printable) remapped_to_byte[next_free - 0x100] = static_cast<uint8_t>(b);
      byte_to_code_point[b] = printable ? static_cast<char32_t>(b) : next_free++;
      append_utf8(byte_to_text[b], byte_to_code_point[b]);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables instance;
  return instance;
}

}  // namespace

void append_byte_level(std::string& out, std::string_view bytes) {
  const auto& map = tables().byte_to_text;
  for (const char c : bytes) out += map[static_cast<unsigned char>(c)];
}

std::optional<uint8_t> byte_level_to_byte(char32_t cp) {
  if (cp < 0x100) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE);
    if (printable) return static_cast<uint8_t>(cp);
    return std::nullopt;
  }
  if (cp >= 0x100 + kRemappedBytes) return std::nullopt;
  return tables().remapped_to_byte[cp - 0x100];
}

}  // namespace slab::tok
