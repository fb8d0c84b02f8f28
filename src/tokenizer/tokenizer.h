#pragma once
// One interface for every tokenizer a checkpoint can ship: SentencePiece tokenizer.model and
// Hugging Face tokenizer.json (byte-level BPE, SentencePiece-style BPE with byte fallback).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace slab {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // add_special_tokens: apply the BOS/EOS rules of tokenizer_config.json (add_bos_token,
  // add_eos_token) / the tokenizer.json post-processor. Special-token text inside `text`
  // (e.g. "<|im_start|>") is always matched as the special token, as Hugging Face does.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // Hugging Face decode semantics (decoders, leading-space handling, byte fallback). Invalid
  // UTF-8 from partial byte tokens is replaced by U+FFFD, as Hugging Face does.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;

  virtual int32_t vocab_size() const = 0;
  // The token's text as stored in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>"), for
  // /tokenize's token strings and logprobs; empty for an out-of-range id.
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual std::optional<int32_t> piece_to_id(std::string_view piece) const = 0;
  virtual bool is_special(int32_t id) const = 0;

  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // Text of special tokens, for chat templates (bos_token, eos_token); empty when absent.
  virtual std::string bos_token() const = 0;
  virtual std::string eos_token() const = 0;

  // The bytes token `id` adds to the text in the middle of a sequence (where SentencePiece keeps
  // a piece's leading space): raw, so a byte token or half of a character stays partial UTF-8
  // rather than U+FFFD; empty for special and control tokens and for ids the vocabulary lacks.
  // Concatenated over ids it equals decode(ids, true) wherever that is valid UTF-8, except at
  // the start of the sequence.
  virtual std::string token_bytes(int32_t id) const = 0;
  // token_bytes() of every id below vocab_size(), for constrained decoding. Computed on the first
  // call (thread-safe); later calls return the same object.
  std::shared_ptr<const std::vector<std::string>> vocabulary_bytes() const;

 private:
  mutable std::once_flag vocabulary_bytes_once_;
  mutable std::shared_ptr<const std::vector<std::string>> vocabulary_bytes_;
};

// Loads the tokenizer of a Hugging Face folder: tokenizer.json when present, else tokenizer.model,
// with tokenizer_config.json's special tokens and BOS/EOS rules; or of a GGUF model path (the
// file, or a folder with one .gguf and no config.json) from its tokenizer.ggml.* metadata. Throws std::runtime_error naming
// the file and field at fault.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir);

// Turns a growing list of token ids into text deltas that are always complete UTF-8, and equal,
// concatenated, to decode(all ids). Works for any tokenizer (SentencePiece leading spaces, byte
// fallback split across tokens, byte-level BPE splitting a multi-byte character).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);
  // Seeds the context (e.g. the prompt) without emitting it.
  void seed(std::span<const int32_t> ids);
  // Appends one token; returns the text that became complete (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held back (an incomplete character at the end of generation).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
};

}  // namespace slab
