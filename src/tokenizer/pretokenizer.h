#pragma once
// tokenizer.json pre-tokenizers: they cut normalised text into the pieces BPE runs on, one at a
// time (Split by a regex or a string, ByteLevel, Sequence).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each piece by the pieces it splits into (in order; empty pieces are dropped).
  virtual void split(std::vector<std::string>& pieces) const = 0;
};

// Null JSON gives nullptr (the whole span is one piece). Throws naming `file` on unknown types.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& json, const std::string& file,
                                                  const std::string& field);

}  // namespace slab::tok
