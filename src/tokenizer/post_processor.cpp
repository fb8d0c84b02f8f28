#include "tokenizer/post_processor.h"

#include "tokenizer/json_file.h"

namespace slab::tok {
namespace {

SpecialTokenTemplate parse_template_processing(const nlohmann::json& json, const std::string& file,
                                               const std::string& field) {
  const auto single = json.find("single");
  if (single == json.end() || !single->is_array()) fail(file, field + ".single", "missing");
  const auto special_tokens = json.find("special_tokens");
  SpecialTokenTemplate result;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const nlohmann::json& item = (*single)[i];
    const std::string item_field = field + ".single[" + std::to_string(i) + "]";
    if (item.contains("Sequence")) {
      if (seen_sequence) fail(file, item_field, "more than one sequence in the single template");
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) fail(file, item_field, "expected Sequence or SpecialToken");
    const std::string name = require_string(item["SpecialToken"], "id", file, item_field + ".SpecialToken");
    if (special_tokens == json.end() || !special_tokens->contains(name)) {
      fail(file, field + ".special_tokens", "no entry for \"" + name + "\"");
    }
    const nlohmann::json& ids = (*special_tokens)[name]["ids"];
    if (!ids.is_array()) fail(file, field + ".special_tokens." + name + ".ids", "missing");
    for (const auto& id : ids) {
      if (!id.is_number_integer()) fail(file, field + ".special_tokens." + name + ".ids", "not an integer");
      (seen_sequence ? result.suffix : result.prefix).push_back(id.get<int32_t>());
    }
  }
  if (!seen_sequence) fail(file, field + ".single", "template has no sequence");
  return result;
}

}  // namespace

SpecialTokenTemplate parse_post_processor(const nlohmann::json& json, const std::string& file,
                                          const std::string& field) {
  if (json.is_null()) return {};
  const std::string type = require_string(json, "type", file, field);
  if (type == "ByteLevel") return {};  // only adjusts offsets
  if (type == "TemplateProcessing") return parse_template_processing(json, file, field);
  if (type == "Sequence") {
    const auto list = json.find("processors");
    if (list == json.end() || !list->is_array()) fail(file, field + ".processors", "missing");
    // Each step wraps the result of the previous one.
    SpecialTokenTemplate combined;
    for (size_t i = 0; i < list->size(); ++i) {
      SpecialTokenTemplate step =
          parse_post_processor((*list)[i], file, field + ".processors[" + std::to_string(i) + "]");
      step.prefix.insert(step.prefix.end(), combined.prefix.begin(), combined.prefix.end());
      combined.prefix = std::move(step.prefix);
      combined.suffix.insert(combined.suffix.end(), step.suffix.begin(), step.suffix.end());
    }
    return combined;
  }
  fail(file, field + ".type", "unsupported post_processor type \"" + type + "\"");
}

}  // namespace slab::tok
