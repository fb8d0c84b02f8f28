#include "tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <vector>

#include "tokenizer/json_file.h"

namespace slab::tok {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Prepends a fixed string to non-empty text (SentencePiece's dummy "▁" prefix).
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    if (pattern_.empty() || text.find(pattern_) == std::string::npos) return;
    std::string out;
    out.reserve(text.size() + text.size() / 2);
    size_t pos = 0;
    for (size_t hit; (hit = text.find(pattern_, pos)) != std::string::npos; pos = hit + pattern_.size()) {
      out.append(text, pos, hit - pos);
      out += content_;
    }
    out.append(text, pos, std::string::npos);
    text = std::move(out);
  }

 private:
  std::string pattern_;
  std::string content_;
};

// Unicode NFC through ICU; the quick check skips the UTF-16 round trip for text already in NFC,
// which is nearly all text.
class NfcNormalizer final : public Normalizer {
 public:
  explicit NfcNormalizer(const std::string& file) {
    UErrorCode status = U_ZERO_ERROR;
    nfc_ = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || nfc_ == nullptr) fail(file, "normalizer", "ICU NFC data unavailable");
  }
  void normalize(std::string& text) const override {
    bool ascii = true;
    for (const char c : text) {
      if (static_cast<unsigned char>(c) >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return;
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString wide = icu::UnicodeString::fromUTF8(text);
    if (nfc_->quickCheck(wide, status) == UNORM_YES && U_SUCCESS(status)) return;
    status = U_ZERO_ERROR;
    const icu::UnicodeString composed = nfc_->normalize(wide, status);
    if (U_FAILURE(status)) return;  // leave the text as it is rather than lose it
    text.clear();
    composed.toUTF8String(text);
  }

 private:
  const icu::Normalizer2* nfc_ = nullptr;
};

std::string string_pattern(const nlohmann::json& json, const std::string& file, const std::string& field) {
  const auto pattern = json.find("pattern");
  if (pattern == json.end() || !pattern->is_object()) fail(file, field + ".pattern", "missing");
  if (pattern->contains("String")) return require_string(*pattern, "String", file, field + ".pattern");
  fail(file, field + ".pattern", "only String patterns are supported here, got " + pattern->dump());
}

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& json, const std::string& file,
                                             const std::string& field) {
  if (json.is_null()) return nullptr;
  const std::string type = require_string(json, "type", file, field);
  if (type == "Sequence") {
    const auto list = json.find("normalizers");
    if (list == json.end() || !list->is_array()) fail(file, field + ".normalizers", "missing");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      auto step = parse_normalizer((*list)[i], file, field + ".normalizers[" + std::to_string(i) + "]");
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(require_string(json, "prepend", file, field));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(string_pattern(json, file, field),
                                               require_string(json, "content", file, field));
  }
  if (type == "NFC") return std::make_unique<NfcNormalizer>(file);
  fail(file, field + ".type", "unsupported normalizer type \"" + type + "\"");
}

}  // namespace slab::tok
