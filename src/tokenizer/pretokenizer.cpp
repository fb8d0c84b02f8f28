#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <optional>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_file.h"
#include "tokenizer/pcre2_regex.h"

namespace slab::tok {
namespace {

// What happens to the matched delimiters (Hugging Face's SplitDelimiterBehavior).
enum class DelimiterBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool is_match;
};

// Groups alternating match / non-match spans according to the behaviour.
std::vector<Span> apply_behavior(const std::vector<Span>& spans, DelimiterBehavior behavior) {
  std::vector<Span> out;
  out.reserve(spans.size());
  switch (behavior) {
    case DelimiterBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      break;
    case DelimiterBehavior::kIsolated: out = spans; break;
    case DelimiterBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case DelimiterBehavior::kMergedWithNext: {
      bool next_match = false;  // walking backwards: a match joins the span after it
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.is_match && !next_match && !out.empty()) {
          out.back().begin = s.begin;
        } else {
          out.push_back(s);
        }
        next_match = s.is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case DelimiterBehavior::kContiguous: {
      std::optional<bool> previous;
      for (const Span& s : spans) {
        if (previous == s.is_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous = s.is_match;
      }
      break;
    }
  }
  return out;
}

DelimiterBehavior parse_behavior(const std::string& name, const std::string& file, const std::string& field) {
  if (name == "Removed") return DelimiterBehavior::kRemoved;
  if (name == "Isolated") return DelimiterBehavior::kIsolated;
  if (name == "MergedWithPrevious") return DelimiterBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return DelimiterBehavior::kMergedWithNext;
  if (name == "Contiguous") return DelimiterBehavior::kContiguous;
  fail(file, field, "unknown split behavior \"" + name + "\"");
}

// Cuts each piece at the matches of a regex or a literal string.
class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, std::string literal, DelimiterBehavior behavior, bool invert)
      : regex_(std::move(regex)), literal_(std::move(literal)), behavior_(behavior), invert_(invert) {}

  void split(std::vector<std::string>& pieces) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size() * 4);
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<Span> spans;
    for (const std::string& piece : pieces) {
      matches.clear();
      find_matches(piece, matches);
      spans.clear();
      size_t pos = 0;
      for (const auto& [begin, end] : matches) {
        if (begin > pos) spans.push_back({pos, begin, invert_});
        spans.push_back({begin, end, !invert_});
        pos = end;
      }
      if (pos < piece.size()) spans.push_back({pos, piece.size(), invert_});
      for (const Span& s : apply_behavior(spans, behavior_)) {
        if (s.end > s.begin) out.emplace_back(piece, s.begin, s.end - s.begin);
      }
    }
    pieces = std::move(out);
  }

 private:
  void find_matches(const std::string& piece, std::vector<std::pair<size_t, size_t>>& matches) const {
    if (regex_) {
      regex_->find_all(piece, matches);
      return;
    }
    if (literal_.empty()) return;
    for (size_t hit = piece.find(literal_); hit != std::string::npos;
         hit = piece.find(literal_, hit + literal_.size())) {
      matches.emplace_back(hit, hit + literal_.size());
    }
  }

  std::unique_ptr<Regex> regex_;
  std::string literal_;
  DelimiterBehavior behavior_;
  bool invert_;
};

// The GPT-2 split used when ByteLevel has use_regex set.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Maps every byte of each piece to its byte-level code point (optionally splitting first).
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<SplitPreTokenizer> gpt2_split)
      : add_prefix_space_(add_prefix_space), gpt2_split_(std::move(gpt2_split)) {}

  void split(std::vector<std::string>& pieces) const override {
    if (add_prefix_space_) {
      for (std::string& piece : pieces) {
        if (piece.empty() || piece[0] != ' ') piece.insert(0, 1, ' ');
      }
    }
    if (gpt2_split_) gpt2_split_->split(pieces);
    for (std::string& piece : pieces) {
      std::string mapped;
      mapped.reserve(piece.size() * 2);
      append_byte_level(mapped, piece);
      piece = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPreTokenizer> gpt2_split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(std::vector<std::string>& pieces) const override {
    for (const auto& step : steps_) step->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool optional_bool(const nlohmann::json& json, const char* key, bool fallback, const std::string& file,
                   const std::string& field) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(file, field + "." + key, "not a boolean");
  return it->get<bool>();
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& json, const std::string& file,
                                                  const std::string& field) {
  if (json.is_null()) return nullptr;
  const std::string type = require_string(json, "type", file, field);
  if (type == "Sequence") {
    const auto list = json.find("pretokenizers");
    if (list == json.end() || !list->is_array()) fail(file, field + ".pretokenizers", "missing");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      auto step = parse_pre_tokenizer((*list)[i], file, field + ".pretokenizers[" + std::to_string(i) + "]");
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "Split") {
    const auto pattern = json.find("pattern");
    if (pattern == json.end() || !pattern->is_object()) fail(file, field + ".pattern", "missing");
    std::unique_ptr<Regex> regex;
    std::string literal;
    if (pattern->contains("Regex")) {
      regex = std::make_unique<Regex>(require_string(*pattern, "Regex", file, field + ".pattern"), file,
                                      field + ".pattern.Regex");
    } else if (pattern->contains("String")) {
      literal = require_string(*pattern, "String", file, field + ".pattern");
    } else {
      fail(file, field + ".pattern", "expected Regex or String, got " + pattern->dump());
    }
    const auto behavior = parse_behavior(require_string(json, "behavior", file, field), file, field + ".behavior");
    return std::make_unique<SplitPreTokenizer>(std::move(regex), std::move(literal), behavior,
                                               optional_bool(json, "invert", false, file, field));
  }
  if (type == "ByteLevel") {
    std::unique_ptr<SplitPreTokenizer> gpt2_split;
    if (optional_bool(json, "use_regex", true, file, field)) {
      gpt2_split = std::make_unique<SplitPreTokenizer>(std::make_unique<Regex>(kGpt2Pattern, file, field),
                                                       std::string(), DelimiterBehavior::kIsolated, false);
    }
    // trim_offsets only changes offsets, which encode() does not report.
    return std::make_unique<ByteLevelPreTokenizer>(optional_bool(json, "add_prefix_space", true, file, field),
                                                   std::move(gpt2_split));
  }
  fail(file, field + ".type", "unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace slab::tok
