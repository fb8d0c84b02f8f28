#include "tokenizer/hf_tokenizer.h"

#include "tokenizer/utf8.h"

namespace slab::tok {

const AddedToken* HfTokenizer::added_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= added_index_by_id_.size()) return nullptr;
  const int32_t index = added_index_by_id_[static_cast<size_t>(id)];
  return index < 0 ? nullptr : &added_tokens_[static_cast<size_t>(index)];
}

void HfTokenizer::encode_plain(std::string text, std::vector<int32_t>& ids) const {
  std::vector<std::string> pieces;
  pieces.push_back(std::move(text));
  if (pre_tokenizer_) pre_tokenizer_->split(pieces);
  for (const std::string& piece : pieces) model_->tokenize(piece, ids);
}

std::vector<int32_t> HfTokenizer::encode(std::string_view input, bool add_special_tokens) const {
  // Regexes need valid UTF-8; Hugging Face only ever sees valid strings, so repair first.
  std::string repaired;
  if (!is_valid_utf8(input)) {
    repaired = to_valid_utf8(input);
    input = repaired;
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = template_.prefix;
  for (const TextSegment& segment : raw_added_->split(input)) {
    if (segment.token >= 0) {
      ids.push_back(raw_added_->token(segment.token).id);
      continue;
    }
    std::string text(input.substr(segment.begin, segment.end - segment.begin));
    if (normalizer_) normalizer_->normalize(text);
    if (normalized_added_->empty()) {
      encode_plain(std::move(text), ids);
      continue;
    }
    for (const TextSegment& inner : normalized_added_->split(text)) {
      if (inner.token >= 0) {
        ids.push_back(normalized_added_->token(inner.token).id);
      } else {
        encode_plain(text.substr(inner.begin, inner.end - inner.begin), ids);
      }
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), template_.suffix.begin(), template_.suffix.end());
  return ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const AddedToken* added = added_token(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
    } else if (const std::string* piece = model_->id_to_token(id)) {
      tokens.push_back(*piece);
    }  // ids outside the vocabulary are dropped, as Hugging Face does
  }
  std::string text;
  if (!decoder_) {
    // Without a decoder Hugging Face joins the tokens with spaces.
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text += ' ';
      text += tokens[i];
    }
    return to_valid_utf8(text);
  }
  decoder_->decode_chain(tokens);
  for (const std::string& token : tokens) text += token;
  return to_valid_utf8(text);
}

std::string HfTokenizer::token_bytes(int32_t id) const {
  std::string token;
  if (const AddedToken* added = added_token(id)) {
    if (added->special) return {};
    token = added->content;  // decode runs added tokens through the decoder too
  } else if (const std::string* piece = model_->id_to_token(id)) {
    token = *piece;
  } else {
    return {};
  }
  // Without a decoder Hugging Face joins the tokens with spaces.
  if (!decoder_) return " " + token;
  bool joined = false;
  decoder_->token_bytes(token, joined);
  return token;
}

std::string HfTokenizer::id_to_piece(int32_t id) const {
  if (const AddedToken* added = added_token(id)) return added->content;
  const std::string* piece = model_->id_to_token(id);
  return piece ? *piece : std::string();
}

std::optional<int32_t> HfTokenizer::piece_to_id(std::string_view piece) const {
  if (const auto it = added_by_content_.find(piece); it != added_by_content_.end()) return it->second;
  return model_->token_to_id(piece);
}

bool HfTokenizer::is_special(int32_t id) const {
  const AddedToken* added = added_token(id);
  return added != nullptr && added->special;
}

}  // namespace slab::tok
