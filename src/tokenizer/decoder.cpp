#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_file.h"
#include "tokenizer/utf8.h"

namespace slab::tok {
namespace {

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
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
    std::string token_bytes;
    for (const std::string& token : tokens) {
      token_bytes.clear();
      bool all_mapped = true;
      for (size_t pos = 0; pos < token.size();) {
        const size_t length = utf8_sequence_length(token, pos);
        const auto byte = length == 0 ? std::nullopt : byte_level_to_byte(utf8_decode_at(token, pos, length));
        if (!byte) {
          all_mapped = false;
          break;
        }
        token_bytes += static_cast<char>(*byte);
        pos += length;
      }
      bytes += all_mapped ? token_bytes : token;
    }
    tokens.assign(1, to_valid_utf8(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (pattern_.empty()) return;
    for (std::string& token : tokens) {
      for (size_t hit = token.find(pattern_); hit != std::string::npos;
           hit = token.find(pattern_, hit + content_.size())) {
        token.replace(hit, pattern_.size(), content_);
      }
    }
  }

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
      if (const auto byte = parse_byte_token(token)) {
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

 private:
  static std::optional<uint8_t> parse_byte_token(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int high = hex(token[3]), low = hex(token[4]);
    if (high < 0 || low < 0) return std::nullopt;
    return static_cast<uint8_t>(high * 16 + low);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    tokens.assign(1, std::move(joined));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (std::string& token : tokens) {
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
  }

 private:
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
