#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <stdexcept>

#include "tokenizer/added_tokens.h"
#include "tokenizer/decoder.h"

namespace slab::tok {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::filesystem::path& model_file, const TokenizerConfig& config) {
    const auto status = processor_.Load(model_file.string());
    if (!status.ok())
      throw std::runtime_error(model_file.string() + ": cannot load SentencePiece model: " + status.ToString());
    init(config);
  }

  SentencePieceTokenizer(std::string_view serialized_model, const std::string& source, const TokenizerConfig& config) {
    const auto status = processor_.LoadFromSerializedProto(serialized_model);
    if (!status.ok()) throw std::runtime_error(source + ": cannot load SentencePiece model: " + status.ToString());
    init(config);
  }

  // Special pieces and BOS/EOS, once the processor holds the model.
  void init(const TokenizerConfig& config) {
    const int size = processor_.GetPieceSize();
    special_.assign(static_cast<size_t>(size), false);
    std::vector<AddedToken> special_text;
    for (int id = 0; id < size; ++id) {
      if (processor_.IsControl(id) || processor_.IsUnknown(id)) {
        special_[static_cast<size_t>(id)] = true;
        special_text.push_back({processor_.IdToPiece(id), id, true, false, false, false, false});
      }
    }
    matcher_ = std::make_unique<AddedTokenMatcher>(std::move(special_text));
    // transformers' LlamaTokenizer defaults: BOS on, EOS off.
    add_bos_ = config.add_bos_token.value_or(true);
    add_eos_ = config.add_eos_token.value_or(false);
    bos_token_ = config.bos_token.value_or(processor_.bos_id() >= 0 ? processor_.IdToPiece(processor_.bos_id()) : "");
    eos_token_ = config.eos_token.value_or(processor_.eos_id() >= 0 ? processor_.IdToPiece(processor_.eos_id()) : "");
    if (!bos_token_.empty()) bos_id_ = piece_to_id(bos_token_);
    if (!eos_token_.empty()) eos_id_ = piece_to_id(eos_token_);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<int32_t> ids;
    if (add_special_tokens && add_bos_ && bos_id_) ids.push_back(*bos_id_);
    std::vector<int> segment_ids;
    for (const TextSegment& segment : matcher_->split(text)) {
      if (segment.token >= 0) {
        ids.push_back(matcher_->token(segment.token).id);
        continue;
      }
      // Each span between special tokens gets its own dummy-prefix "▁", as in LlamaTokenizer.
      segment_ids.clear();
      const auto status = processor_.Encode(text.substr(segment.begin, segment.end - segment.begin), &segment_ids);
      if (!status.ok()) throw std::runtime_error("SentencePiece encode failed: " + status.ToString());
      ids.insert(ids.end(), segment_ids.begin(), segment_ids.end());
    }
    if (add_special_tokens && add_eos_ && eos_id_) ids.push_back(*eos_id_);
    return ids;
  }

  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override {
    // Runs of ordinary pieces go through SentencePiece (which drops the first run's leading
    // space); special pieces are written as their text unless skipped.
    std::string out;
    std::vector<int> run;
    const auto flush = [&] {
      if (run.empty()) return;
      std::string text;
      const auto status = processor_.Decode(run, &text);
      if (!status.ok()) throw std::runtime_error("SentencePiece decode failed: " + status.ToString());
      out += text;
      run.clear();
    };
    for (const int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) continue;
      if (!special_[static_cast<size_t>(id)]) {
        run.push_back(id);
      } else if (!skip_special_tokens) {
        flush();
        out += processor_.IdToPiece(id);
      }
    }
    flush();
    return out;
  }

  int32_t vocab_size() const override { return processor_.GetPieceSize(); }

  std::string id_to_piece(int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return {};
    return processor_.IdToPiece(id);
  }

  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    const int id = processor_.PieceToId(piece);
    // Unknown pieces come back as the unknown id; tell them apart from "<unk>" itself.
    if (id < 0 || (processor_.IsUnknown(id) && processor_.IdToPiece(id) != piece)) return std::nullopt;
    return id;
  }

  bool is_special(int32_t id) const override {
    return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)];
  }
  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }
  std::string bos_token() const override { return bos_token_; }
  std::string eos_token() const override { return eos_token_; }

  // Control and unknown pieces are special (empty); SentencePiece decodes every other piece,
  // unused and user-defined ones included, as its text.
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size() || special_[static_cast<size_t>(id)]) return {};
    return sentencepiece_piece_bytes(processor_.IdToPiece(id), processor_.IsByte(id));
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
  std::vector<bool> special_;
  std::unique_ptr<AddedTokenMatcher> matcher_;
  bool add_bos_ = true, add_eos_ = false;
  std::optional<int32_t> bos_id_, eos_id_;
  std::string bos_token_, eos_token_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::filesystem::path& model_file,
                                                        const TokenizerConfig& config) {
  return std::make_unique<SentencePieceTokenizer>(model_file, config);
}

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(std::string_view serialized_model, const std::string& source,
                                                        const TokenizerConfig& config) {
  return std::make_unique<SentencePieceTokenizer>(serialized_model, source, config);
}

}  // namespace slab::tok
