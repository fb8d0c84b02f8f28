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
  // `settings` is the "model" object of tokenizer.json without its vocab and merges, which come
  // separately (see tokenizer_json_reader.h). Throws naming `file` on anything unsupported.
  static std::unique_ptr<BpeModel> build(const nlohmann::json& settings,
                                         std::vector<std::pair<std::string, int32_t>> vocab,
                                         const std::vector<std::pair<std::string, std::string>>& merges,
                                         const std::string& file);

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
  // Open-addressing map from a token pair to its merge: one flat array, no per-entry allocation,
  // as both loading (500k merges) and encoding hit it constantly.
  class MergeTable {
   public:
    void reserve(size_t count);
    // A pair listed twice keeps its later rank, as Hugging Face's map construction does.
    void insert(int32_t left, int32_t right, MergeResult result);
    const MergeResult* find(int32_t left, int32_t right) const;

   private:
    struct Slot {
      uint64_t key;
      MergeResult result;
    };
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static uint64_t key_of(int32_t left, int32_t right) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
    std::vector<Slot> slots_;
    int shift_ = 64;
    size_t mask_ = 0;
  };
  void add_merge(std::string_view left, std::string_view right, int32_t rank, const std::string& file);
  // Splits the piece into characters (with byte fallback / unknown handling), then merges.
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;

  TokenIdMap vocab_;
  std::vector<const std::string*> id_to_token_;  // into vocab_'s keys; nullptr for gaps
  MergeTable merges_;
  int32_t byte_tokens_[256];
  int32_t ascii_ids_[128];  // id of each one-character ASCII token, -1 where absent
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace slab::tok
