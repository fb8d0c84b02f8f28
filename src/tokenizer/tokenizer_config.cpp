#include "tokenizer/tokenizer_config.h"

#include "tokenizer/json_file.h"

namespace slab::tok {
namespace {

std::optional<bool> optional_bool(const nlohmann::json& config, const char* key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) fail(file, key, "not a boolean");
  return it->get<bool>();
}

// Special tokens are written either as a string or as an AddedToken object {"content": ...}.
std::optional<std::string> optional_token(const nlohmann::json& config, const char* key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return require_string(*it, "content", file, key);
  fail(file, key, "expected a string or an object with \"content\"");
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::filesystem::path& path) {
  TokenizerConfig config;
  if (!std::filesystem::exists(path)) return config;
  const nlohmann::json json = read_json_file(path);
  const std::string file = path.string();
  if (!json.is_object()) fail(file, "(top level)", "expected an object");
  config.add_bos_token = optional_bool(json, "add_bos_token", file);
  config.add_eos_token = optional_bool(json, "add_eos_token", file);
  config.bos_token = optional_token(json, "bos_token", file);
  config.eos_token = optional_token(json, "eos_token", file);
  config.unk_token = optional_token(json, "unk_token", file);
  return config;
}

}  // namespace slab::tok
