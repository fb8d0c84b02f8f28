#pragma once
// Streams tokenizer.json: the two huge parts (model.vocab, model.merges) go straight into flat
// vectors, everything else into a small JSON document. Building a full DOM of a 262k-token
// vocabulary and 500k merges costs more than the rest of loading together.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::tok {

struct TokenizerJson {
  nlohmann::json document;  // the whole file minus model.vocab and model.merges
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // (left, right) in rank order
  bool has_vocab = false;
  bool has_merges = false;
};

// Throws std::runtime_error naming the file on unreadable or malformed JSON, or a malformed
// vocabulary entry or merge.
TokenizerJson read_tokenizer_json(const std::filesystem::path& path);

}  // namespace slab::tok
