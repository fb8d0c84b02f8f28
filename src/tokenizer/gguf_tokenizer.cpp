#include "tokenizer/gguf_tokenizer.h"

#include <climits>
#include <cstring>
#include <stdexcept>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace slab::tok {
namespace {

// Protocol-buffer wire format, just what a SentencePiece ModelProto needs: varints, 32-bit
// floats and length-delimited strings / sub-messages.
class ProtoWriter {
 public:
  void varint_field(int field, uint64_t v) {
    tag(field, 0);
    varint(v);
  }
  // int32 fields encode negative values as their 64-bit two's complement.
  void int32_field(int field, int32_t v) { varint_field(field, static_cast<uint64_t>(static_cast<int64_t>(v))); }
  void float_field(int field, float v) {
    tag(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    out_.append(b, 4);
  }
  void bytes_field(int field, std::string_view v) {
    tag(field, 2);
    varint(v.size());
    out_.append(v);
  }
  const std::string& bytes() const { return out_; }

 private:
  void tag(int field, int wire_type) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

// Field numbers of sentencepiece_model.proto.
constexpr int kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr int kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr int kTrainerModelType = 3, kTrainerByteFallback = 35, kTrainerUnkId = 40, kTrainerBosId = 41,
              kTrainerEosId = 42, kTrainerPadId = 43, kTrainerUnkPiece = 45, kTrainerBosPiece = 46,
              kTrainerEosPiece = 47, kTrainerPadPiece = 48, kTrainerAllowWhitespaceOnlyPieces = 26;
constexpr int kNormalizerName = 1, kNormalizerAddDummyPrefix = 3, kNormalizerRemoveExtraWhitespaces = 4,
              kNormalizerEscapeWhitespaces = 5;
constexpr int kModelTypeBpe = 2;
// GGUF's token types are SentencePiece's piece types: 1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte.
constexpr int64_t kTypeNormal = 1, kTypeUnknown = 2, kTypeByte = 6;

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int> types;
};

Vocabulary read_vocabulary(const GgufFile& f) {
  Vocabulary v;
  const GgufValue* tokens = f.get_array("tokenizer.ggml.tokens", {GgufValueType::string});
  if (tokens == nullptr) f.fail_key("tokenizer.ggml.tokens", "missing (the file carries no tokenizer)");
  if (tokens->items.empty() || tokens->items.size() > static_cast<size_t>(INT_MAX))
    f.fail_key("tokenizer.ggml.tokens", "empty");
  for (const GgufValue& t : tokens->items) v.tokens.push_back(t.text);
  const size_t n = v.tokens.size();
  if (const GgufValue* scores = f.get_array("tokenizer.ggml.scores", {GgufValueType::f32, GgufValueType::f64})) {
    if (scores->items.size() != n) {
      f.fail_key("tokenizer.ggml.scores",
                 std::to_string(scores->items.size()) + " scores for " + std::to_string(n) + " tokens");
    }
    for (const GgufValue& s : scores->items) v.scores.push_back(static_cast<float>(s.real));
  } else {
    v.scores.assign(n, 0.0f);
  }
  if (const GgufValue* types = f.get_array("tokenizer.ggml.token_type", {GgufValueType::i32, GgufValueType::u32,
                                                                         GgufValueType::i8, GgufValueType::u8})) {
    if (types->items.size() != n) {
      f.fail_key("tokenizer.ggml.token_type",
                 std::to_string(types->items.size()) + " types for " + std::to_string(n) + " tokens");
    }
    for (const GgufValue& t : types->items) {
      if (t.integer < 1 || t.integer > 6)
        f.fail_key("tokenizer.ggml.token_type", "unknown token type " + std::to_string(t.integer));
      v.types.push_back(static_cast<int>(t.integer));
    }
  } else {
    v.types.assign(n, static_cast<int>(kTypeNormal));
  }
  return v;
}

// A token id key: absent, or an id inside the vocabulary. Writers store "none" as -1 or as
// UINT32_MAX; both read as absent.
std::optional<int> token_id(const GgufFile& f, const char* key, size_t vocab) {
  const std::optional<int64_t> id = f.get_int(key);
  if (!id || *id < 0 || *id == UINT32_MAX) return std::nullopt;
  if (static_cast<size_t>(*id) >= vocab) {
    f.fail_key(key, "token id " + std::to_string(*id) + " is outside the vocabulary (" + std::to_string(vocab) + ")");
  }
  return static_cast<int>(*id);
}

std::unique_ptr<Tokenizer> load_llama(const GgufFile& f) {
  const Vocabulary v = read_vocabulary(f);
  const size_t n = v.tokens.size();
  // SentencePiece wants exactly one unknown piece: the one the metadata names, else the first
  // typed unknown, else id 0, llama.cpp's default for these vocabularies (convert_hf_to_gguf.py
  // types <unk> as control where the HF tokenizer lists it among its added special tokens).
  std::optional<int> unk = token_id(f, "tokenizer.ggml.unknown_token_id", n);
  for (size_t i = 0; i < n && !unk; ++i) {
    if (v.types[i] == kTypeUnknown) unk = static_cast<int>(i);
  }
  if (!unk && n > 0) unk = 0;
  const std::optional<int> bos = token_id(f, "tokenizer.ggml.bos_token_id", n);
  const std::optional<int> eos = token_id(f, "tokenizer.ggml.eos_token_id", n);
  const std::optional<int> pad = token_id(f, "tokenizer.ggml.padding_token_id", n);

  ProtoWriter model;
  bool has_unknown = false, has_bytes = false;
  for (size_t i = 0; i < n; ++i) {
    int type = v.types[i];
    if (static_cast<size_t>(*unk) == i) {
      type = static_cast<int>(kTypeUnknown);
      has_unknown = true;
    } else if (type == kTypeUnknown) {
      type = static_cast<int>(kTypeNormal);
    }
    has_bytes = has_bytes || type == kTypeByte;
    ProtoWriter piece;
    piece.bytes_field(kPiecePiece, v.tokens[i]);
    piece.float_field(kPieceScore, v.scores[i]);
    piece.varint_field(kPieceType, static_cast<uint64_t>(type));
    model.bytes_field(kModelPieces, piece.bytes());
  }
  if (!has_unknown) f.fail_key("tokenizer.ggml.token_type", "no unknown token (SentencePiece needs one)");

  ProtoWriter trainer;
  trainer.varint_field(kTrainerModelType, kModelTypeBpe);
  trainer.varint_field(kTrainerAllowWhitespaceOnlyPieces, 1);
  trainer.varint_field(kTrainerByteFallback, has_bytes ? 1 : 0);
  trainer.int32_field(kTrainerUnkId, unk.value_or(0));
  trainer.int32_field(kTrainerBosId, bos.value_or(-1));
  trainer.int32_field(kTrainerEosId, eos.value_or(-1));
  trainer.int32_field(kTrainerPadId, pad.value_or(-1));
  // The processor finds BOS/EOS by these piece names, not by the ids above.
  if (unk) trainer.bytes_field(kTrainerUnkPiece, v.tokens[static_cast<size_t>(*unk)]);
  if (bos) trainer.bytes_field(kTrainerBosPiece, v.tokens[static_cast<size_t>(*bos)]);
  if (eos) trainer.bytes_field(kTrainerEosPiece, v.tokens[static_cast<size_t>(*eos)]);
  if (pad) trainer.bytes_field(kTrainerPadPiece, v.tokens[static_cast<size_t>(*pad)]);
  model.bytes_field(kModelTrainerSpec, trainer.bytes());

  ProtoWriter normalizer;
  normalizer.bytes_field(kNormalizerName, "identity");
  normalizer.varint_field(kNormalizerAddDummyPrefix,
                          f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true) ? 1 : 0);
  normalizer.varint_field(kNormalizerRemoveExtraWhitespaces,
                          f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false) ? 1 : 0);
  normalizer.varint_field(kNormalizerEscapeWhitespaces, 1);
  model.bytes_field(kModelNormalizerSpec, normalizer.bytes());

  TokenizerConfig config;
  config.add_bos_token = f.get_bool("tokenizer.ggml.add_bos_token");
  config.add_eos_token = f.get_bool("tokenizer.ggml.add_eos_token");
  if (bos) config.bos_token = v.tokens[static_cast<size_t>(*bos)];
  if (eos) config.eos_token = v.tokens[static_cast<size_t>(*eos)];
  return load_sentencepiece_tokenizer(model.bytes(), f.source() + " (tokenizer.ggml.*)", config);
}

// The pre-tokeniser split of each tokenizer.ggml.pre this loader knows, as the regex of the
// model's tokenizer.json (they differ in how many digits make one piece).
const char* pre_tokenizer_regex(const std::string& pre) {
  if (pre == "llama-bpe" || pre == "llama3") {
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  }
  if (pre == "qwen2") {
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  }
  return nullptr;
}

// Byte-level BPE: the pieces, tokenizer.ggml.merges ("left right", rank order) and the
// pre-tokeniser that tokenizer.ggml.pre names, assembled as the tokenizer.json the existing
// Hugging Face tokenizer reads. Control tokens are its special added tokens, user-defined ones
// its other added tokens.
std::unique_ptr<Tokenizer> load_gpt2(const GgufFile& f) {
  const Vocabulary v = read_vocabulary(f);
  const size_t n = v.tokens.size();
  TokenizerJson parsed;
  parsed.has_vocab = parsed.has_merges = true;
  parsed.vocab.reserve(n);
  nlohmann::json added = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) {
    const int type = v.types[i];
    if (type == 3 || type == 4) {
      added.push_back({{"id", i},
                       {"content", v.tokens[i]},
                       {"special", type == 3},
                       {"normalized", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"single_word", false}});
    } else {
      parsed.vocab.emplace_back(v.tokens[i], static_cast<int32_t>(i));
    }
  }
  const GgufValue* merges = f.get_array("tokenizer.ggml.merges", {GgufValueType::string});
  if (merges == nullptr) f.fail_key("tokenizer.ggml.merges", "missing (a gpt2 tokenizer needs its merges)");
  parsed.merges.reserve(merges->items.size());
  for (size_t i = 0; i < merges->items.size(); ++i) {
    const std::string& m = merges->items[i].text;
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos || space + 1 >= m.size()) {
      f.fail_key("tokenizer.ggml.merges", "entry " + std::to_string(i) + " is not two tokens separated by a space");
    }
    parsed.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }

  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}};
  nlohmann::json pre_tokenizer;
  nlohmann::json normalizer = nullptr;
  if (const char* regex = pre_tokenizer_regex(pre)) {
    nlohmann::json level = byte_level;
    level["use_regex"] = false;
    pre_tokenizer = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}}, level}}};
    if (pre == "qwen2") normalizer = {{"type", "NFC"}};
  } else if (pre == "default" || pre == "gpt2") {
    pre_tokenizer = byte_level;
    pre_tokenizer["use_regex"] = true;
  } else {
    f.fail_key("tokenizer.ggml.pre", "unsupported pre-tokenizer '" + pre + "' (supported: llama-bpe, qwen2, default)");
  }
  parsed.document = {
      {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"ignore_merges", pre == "llama-bpe" || pre == "llama3"}}},
      {"normalizer", normalizer},
      {"pre_tokenizer", pre_tokenizer},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", added}};

  TokenizerConfig config;
  // BOS/EOS only where the metadata asks for them (the post-processor above adds nothing).
  config.add_bos_token = f.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  config.add_eos_token = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  if (const auto bos = token_id(f, "tokenizer.ggml.bos_token_id", n))
    config.bos_token = v.tokens[static_cast<size_t>(*bos)];
  if (const auto eos = token_id(f, "tokenizer.ggml.eos_token_id", n))
    config.eos_token = v.tokens[static_cast<size_t>(*eos)];
  return HfTokenizer::build(std::move(parsed), f.source() + " (tokenizer.ggml.*)", config);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f) {
  const std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) f.fail_key("tokenizer.ggml.model", "missing (the file carries no tokenizer)");
  if (*model == "llama") return load_llama(f);
  if (*model == "gpt2") return load_gpt2(f);
  f.fail_key("tokenizer.ggml.model", "unsupported tokenizer model '" + *model + "' (supported: llama, gpt2)");
}

}  // namespace slab::tok
