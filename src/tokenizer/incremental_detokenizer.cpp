#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace slab {

// How many already-emitted tokens the decode window keeps before the new ones, so that
// context-dependent decoding (SentencePiece's leading space, merged bytes) sees its left side.
constexpr size_t kContextTokens = 5;

namespace {

// "<0xAB>": a byte-fallback piece. Hugging Face's ByteFallback decoder renders a whole run of
// them as U+FFFD per byte when the run is not valid UTF-8, so a run can change the text of its
// earlier bytes until it ends (an ASCII byte followed by a stray continuation byte).
bool is_byte_piece(const std::string& piece) {
  return piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>';
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

void IncrementalDetokenizer::seed(std::span<const int32_t> ids) {
  ids_.assign(ids.begin(), ids.end());
  read_offset_ = ids_.size();
  prefix_offset_ = read_offset_ > kContextTokens ? read_offset_ - kContextTokens : 0;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  if (is_byte_piece(tokenizer_.id_to_piece(id))) return {};  // wait for the run to end
  const std::span<const int32_t> all(ids_);
  const std::string prefix_text =
      tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_tokens_);
  const std::string new_text = tokenizer_.decode(all.subspan(prefix_offset_), skip_special_tokens_);
  // Hold back while the window ends inside a character (decode shows it as U+FFFD) or has not
  // grown past what was already emitted.
  if (new_text.size() <= prefix_text.size() || tok::ends_with_replacement_char(new_text)) return {};
  std::string delta = new_text.substr(prefix_text.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return delta;
}

std::string IncrementalDetokenizer::flush() {
  const std::span<const int32_t> all(ids_);
  const std::string prefix_text =
      tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_tokens_);
  const std::string new_text = tokenizer_.decode(all.subspan(prefix_offset_), skip_special_tokens_);
  prefix_offset_ = read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size()) return {};
  return new_text.substr(prefix_text.size());
}

}  // namespace slab
