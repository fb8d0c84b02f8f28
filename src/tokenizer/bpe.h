#pragma once
// The BPE model of tokenizer.json: vocabulary, ranked merges, byte fallback, unknown tokens.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::tok {

// Hash for string keys that also accepts string_view lookups without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // Reads the "model" object of tokenizer.json; throws naming `file` on anything unsupported.
  static std::unique_ptr<BpeModel> from_json(const nlohmann::json& model, const std::string& file);

  // Appends the ids of one pre-tokenised piece.
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr for ids the vocabulary does not define.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The id of "<0xAB>" for byte fallback, or -1.
  int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  struct MergeResult {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void add_merge(std::string_view left, std::string_view right, int32_t rank, const std::string& file);
  // Splits the piece into characters (with byte fallback / unknown handling), then merges.
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;

  TokenIdMap vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, MergeResult> merges_;
  int32_t byte_tokens_[256];
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace slab::tok
