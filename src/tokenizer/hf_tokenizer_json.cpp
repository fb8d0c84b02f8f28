// Building an HfTokenizer from tokenizer.json (+ tokenizer_config.json settings).
#include <algorithm>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/json_file.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace slab::tok {
namespace {

constexpr const char* kKnownTopLevelFields[] = {"version",        "truncation", "padding",
                                                "added_tokens",   "normalizer", "pre_tokenizer",
                                                "post_processor", "decoder",    "model"};

bool flag(const nlohmann::json& token, const char* key, const std::string& file, const std::string& field) {
  const auto it = token.find(key);
  if (it == token.end()) return false;
  if (!it->is_boolean()) fail(file, field + "." + key, "not a boolean");
  return it->get<bool>();
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& json, const std::string& file) {
  std::vector<AddedToken> tokens;
  if (json.is_null()) return tokens;
  if (!json.is_array()) fail(file, "added_tokens", "not an array");
  tokens.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& item = json[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!item.is_object()) fail(file, field, "not an object");
    AddedToken token;
    token.content = require_string(item, "content", file, field);
    const auto id = item.find("id");
    if (id == item.end() || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > INT32_MAX) {
      fail(file, field + ".id", "missing or not a non-negative integer");
    }
    token.id = id->get<int32_t>();
    token.special = flag(item, "special", file, field);
    token.lstrip = flag(item, "lstrip", file, field);
    token.rstrip = flag(item, "rstrip", file, field);
    token.single_word = flag(item, "single_word", file, field);
    // Hugging Face's default: special tokens are matched in raw text, others after normalising.
    token.normalized = item.contains("normalized") ? flag(item, "normalized", file, field) : !token.special;
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Adds or removes `id` at the front (or back) of the template to follow an explicit
// add_bos_token / add_eos_token, the way transformers rebuilds the post-processor.
void apply_flag(std::vector<int32_t>& ids, std::optional<bool> wanted, std::optional<int32_t> id, bool at_front) {
  if (!wanted || !id) return;
  const bool present = std::find(ids.begin(), ids.end(), *id) != ids.end();
  if (*wanted && !present) {
    ids.insert(at_front ? ids.begin() : ids.end(), *id);
  } else if (!*wanted && present) {
    ids.erase(std::remove(ids.begin(), ids.end(), *id), ids.end());
  }
}

}  // namespace

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::filesystem::path& tokenizer_json,
                                               const TokenizerConfig& config) {
  return build(read_tokenizer_json(tokenizer_json), tokenizer_json.string(), config);
}

std::unique_ptr<HfTokenizer> HfTokenizer::build(TokenizerJson parsed, const std::string& file,
                                                const TokenizerConfig& config) {
  const nlohmann::json& json = parsed.document;
  if (!json.is_object()) fail(file, "(top level)", "expected an object");
  for (const auto& [key, value] : json.items()) {
    if (std::find(std::begin(kKnownTopLevelFields), std::end(kKnownTopLevelFields), key) ==
        std::end(kKnownTopLevelFields)) {
      fail(file, key, "unknown field");
    }
  }
  // Truncation would cut every encoding; padding to a fixed length would pad a single one.
  if (json.contains("truncation") && !json["truncation"].is_null())
    fail(file, "truncation", "unsupported (must be null)");
  if (json.contains("padding") && !json["padding"].is_null()) {
    const auto& strategy = json["padding"].value("strategy", nlohmann::json());
    if (!(strategy.is_string() && strategy.get<std::string>() == "BatchLongest")) {
      fail(file, "padding", "only null or BatchLongest padding is supported");
    }
  }

  auto tokenizer = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  if (!parsed.has_vocab) fail(file, "model.vocab", "missing or not an object");
  if (!parsed.has_merges) fail(file, "model.merges", "missing or not an array");
  tokenizer->model_ =
      BpeModel::build(json.value("model", nlohmann::json()), std::move(parsed.vocab), parsed.merges, file);
  parsed.merges = {};
  tokenizer->normalizer_ = parse_normalizer(json.value("normalizer", nlohmann::json()), file, "normalizer");
  tokenizer->pre_tokenizer_ = parse_pre_tokenizer(json.value("pre_tokenizer", nlohmann::json()), file, "pre_tokenizer");
  tokenizer->decoder_ = parse_decoder(json.value("decoder", nlohmann::json()), file, "decoder");
  tokenizer->template_ = parse_post_processor(json.value("post_processor", nlohmann::json()), file, "post_processor");

  tokenizer->added_tokens_ = parse_added_tokens(json.value("added_tokens", nlohmann::json()), file);
  std::vector<AddedToken> raw, normalized;
  int32_t max_added_id = -1;
  for (size_t i = 0; i < tokenizer->added_tokens_.size(); ++i) {
    const AddedToken& token = tokenizer->added_tokens_[i];
    (token.normalized ? normalized : raw).push_back(token);
    max_added_id = std::max(max_added_id, token.id);
    tokenizer->added_by_content_.emplace(token.content, token.id);
  }
  tokenizer->raw_added_ = std::make_unique<AddedTokenMatcher>(std::move(raw));
  tokenizer->normalized_added_ = std::make_unique<AddedTokenMatcher>(std::move(normalized));
  tokenizer->added_index_by_id_.assign(static_cast<size_t>(max_added_id + 1), -1);
  for (size_t i = 0; i < tokenizer->added_tokens_.size(); ++i) {
    tokenizer->added_index_by_id_[static_cast<size_t>(tokenizer->added_tokens_[i].id)] = static_cast<int32_t>(i);
  }
  tokenizer->vocab_size_ = std::max(tokenizer->model_->id_limit(), max_added_id + 1);

  for (const int32_t id : tokenizer->template_.prefix) {
    if (id < 0 || id >= tokenizer->vocab_size_) fail(file, "post_processor", "special token id out of range");
  }
  if (config.bos_token) {
    tokenizer->bos_token_ = *config.bos_token;
    tokenizer->bos_id_ = tokenizer->piece_to_id(*config.bos_token);
  }
  if (config.eos_token) {
    tokenizer->eos_token_ = *config.eos_token;
    tokenizer->eos_id_ = tokenizer->piece_to_id(*config.eos_token);
  }
  apply_flag(tokenizer->template_.prefix, config.add_bos_token, tokenizer->bos_id_, true);
  apply_flag(tokenizer->template_.suffix, config.add_eos_token, tokenizer->eos_id_, false);
  return tokenizer;
}

}  // namespace slab::tok
