#pragma once
// A Hugging Face tokenizer.json tokenizer: added tokens, normaliser, pre-tokeniser, BPE model,
// post-processor template and decoder, run natively.
#include <filesystem>
#include <memory>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace slab::tok {

class HfTokenizer final : public Tokenizer {
 public:
  // Reads tokenizer.json; `config` (from tokenizer_config.json) names BOS/EOS and may override
  // whether they are added. Throws std::runtime_error naming the file and field at fault.
  static std::unique_ptr<HfTokenizer> load(const std::filesystem::path& tokenizer_json, const TokenizerConfig& config);
  // The same from a tokenizer.json already split as read_tokenizer_json() does (or assembled from
  // another source, such as GGUF metadata); `file` names it in errors.
  static std::unique_ptr<HfTokenizer> build(TokenizerJson parsed, const std::string& file,
                                            const TokenizerConfig& config);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  std::string id_to_piece(int32_t id) const override;
  std::optional<int32_t> piece_to_id(std::string_view piece) const override;
  bool is_special(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }
  std::string bos_token() const override { return bos_token_; }
  std::string eos_token() const override { return eos_token_; }
  std::string token_bytes(int32_t id) const override;

 private:
  HfTokenizer() = default;
  // Normalised text between added tokens: pre-tokenise, then BPE each piece.
  void encode_plain(std::string text, std::vector<int32_t>& ids) const;
  const AddedToken* added_token(int32_t id) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  SpecialTokenTemplate template_;
  std::unique_ptr<AddedTokenMatcher> raw_added_;         // matched before normalisation
  std::unique_ptr<AddedTokenMatcher> normalized_added_;  // matched in normalised text
  std::vector<AddedToken> added_tokens_;
  std::vector<int32_t> added_index_by_id_;  // -1 where the id is not an added token
  TokenIdMap added_by_content_;
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_, eos_id_;
  std::string bos_token_, eos_token_;
};

}  // namespace slab::tok
