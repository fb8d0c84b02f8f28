#pragma once
// tokenizer.json decoders: turn the list of token strings back into text.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings; the decoded text is their concatenation afterwards.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Null JSON gives nullptr (tokens are concatenated as they are). Throws naming `file` on unknown
// types.
std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& json, const std::string& file, const std::string& field);

}  // namespace slab::tok
