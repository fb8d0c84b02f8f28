#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_file.h"
#include "tokenizer/utf8.h"

namespace slab::tok {
namespace {

void replace_all(std::string& text, std::string_view pattern, std::string_view content) {
  if (pattern.empty()) return;
  for (size_t hit = text.find(pattern); hit != std::string::npos; hit = text.find(pattern, hit + content.size())) {
    text.replace(hit, pattern.size(), content);
  }
}

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }
  void token_bytes(std::string& token, bool& joined) const override {
    for (const auto& step : steps_) step->token_bytes(token, joined);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// Byte-level code points back to bytes, then lossy UTF-8. A token containing characters outside
// the byte-level alphabet (an added token) contributes its own bytes unchanged.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) append_bytes(bytes, token);
    tokens.assign(1, to_valid_utf8(bytes));
  }
  void token_bytes(std::string& token, bool& joined) const override {
    std::string bytes;
    append_bytes(bytes, token);
    token = std::move(bytes);
    joined = true;
  }

 private:
  static void append_bytes(std::string& out, const std::string& token) {
    const size_t start = out.size();
    for (size_t pos = 0; pos < token.size();) {
      const size_t length = utf8_sequence_length(token, pos);
      const auto byte = length == 0 ? std::nullopt : byte_level_to_byte(utf8_decode_at(token, pos, length));
      if (!byte) {
        out.resize(start);
        out += token;
        return;
      }
      out += static_cast<char>(*byte);
      pos += length;
    }
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) replace_all(token, pattern_, content_);
  }
  void token_bytes(std::string& token, bool&) const override { replace_all(token, pattern_, content_); }

 private:
  std::string pattern_;
  std::string content_;
};

// "<0xAB>" tokens to their bytes; a run of them that is not valid UTF-8 becomes one U+FFFD per
// byte, as Hugging Face does.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    size_t pending_count = 0;
    const auto flush = [&] {
      if (pending_count == 0) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        std::string replacement;
        for (size_t i = 0; i < pending_count; ++i) replacement += "\xEF\xBF\xBD";
        out.push_back(std::move(replacement));
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& token : tokens) {
      if (const auto byte = byte_fallback_byte(token)) {
        pending += static_cast<char>(*byte);
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }
  void token_bytes(std::string& token, bool&) const override {
    if (const auto byte = byte_fallback_byte(token)) token.assign(1, static_cast<char>(*byte));
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    tokens.assign(1, std::move(joined));
  }
  void token_bytes(std::string&, bool& joined) const override { joined = true; }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) strip(token);
  }
  void token_bytes(std::string& token, bool& joined) const override {
    if (!joined) strip(token);
  }

 private:
  void strip(std::string& token) const {
    if (content_.empty()) return;
    size_t begin = 0;
    for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0; ++i)
      begin += content_.size();
    size_t end = token.size();
    for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                       token.compare(end - content_.size(), content_.size(), content_) == 0;
         ++i) {
      end -= content_.size();
    }
    token = token.substr(begin, end - begin);
  }

  std::string content_;
  size_t start_, stop_;
};

std::string string_pattern(const nlohmann::json& json, const std::string& file, const std::string& field) {
  const auto pattern = json.find("pattern");
  if (pattern == json.end() || !pattern->is_object() || !pattern->contains("String")) {
    fail(file, field + ".pattern", "only String patterns are supported");
  }
  return require_string(*pattern, "String", file, field + ".pattern");
}

size_t count_field(const nlohmann::json& json, const char* key, const std::string& file, const std::string& field) {
  const auto it = json.find(key);
  if (it == json.end() || !it->is_number_unsigned()) fail(file, field + "." + key, "missing or not a count");
  return it->get<size_t>();
}

}  // namespace

std::optional<uint8_t> byte_fallback_byte(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = hex(piece[3]), low = hex(piece[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<uint8_t>(high * 16 + low);
}

std::string sentencepiece_piece_bytes(std::string_view piece, bool is_byte) {
  if (is_byte) {
    if (const auto byte = byte_fallback_byte(piece)) return std::string(1, static_cast<char>(*byte));
  }
  std::string bytes(piece);
  replace_all(bytes, "\xE2\x96\x81", " ");  // U+2581 "▁", SentencePiece's space
  return bytes;
}

std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& json, const std::string& file, const std::string& field) {
  if (json.is_null()) return nullptr;
  const std::string type = require_string(json, "type", file, field);
  if (type == "Sequence") {
    const auto list = json.find("decoders");
    if (list == json.end() || !list->is_array()) fail(file, field + ".decoders", "missing");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      auto step = parse_decoder((*list)[i], file, field + ".decoders[" + std::to_string(i) + "]");
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(string_pattern(json, file, field),
                                            require_string(json, "content", file, field));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(require_string(json, "content", file, field),
                                          count_field(json, "start", file, field),
                                          count_field(json, "stop", file, field));
  }
  fail(file, field + ".type", "unsupported decoder type \"" + type + "\"");
}

}  // namespace slab::tok
