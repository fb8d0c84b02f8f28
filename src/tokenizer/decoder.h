#pragma once
// tokenizer.json decoders: turn the list of token strings back into text.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings; the decoded text is their concatenation afterwards.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // Rewrites one token into the bytes it adds in the middle of a decoded text: raw bytes (no
  // U+FFFD for partial UTF-8) and untouched by trimming of the text's ends. `joined` says whether
  // an earlier step has joined the tokens into one text (Fuse, ByteLevel): steps after that act on
  // the whole text, so a Strip then only trims its ends, never a token in its middle. Exact when
  // no Replace after the join matches across token boundaries (none in published tokenizers).
  virtual void token_bytes(std::string& token, bool& joined) const = 0;
};

// The byte of a byte-fallback piece "<0xAB>", or nullopt for any other text.
std::optional<uint8_t> byte_fallback_byte(std::string_view piece);

// The bytes a SentencePiece piece adds in the middle of a text: a byte piece (`is_byte`) is its
// one raw byte, any other piece its text with "▁" as a space.
std::string sentencepiece_piece_bytes(std::string_view piece, bool is_byte);

// Null JSON gives nullptr (tokens are concatenated as they are). Throws naming `file` on unknown
// types.
std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& json, const std::string& file, const std::string& field);

}  // namespace slab::tok
