#include "chat/template_source.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "chat/builtin_templates.h"
#include "runtime/file_io.h"
#include "runtime/gguf_file.h"

namespace slab::chat {
std::string read_chat_template_file(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) throw std::runtime_error(file.string() + ": no such chat template file");
  return read_file(file);
}

std::string read_chat_template_option(const std::string& name_or_file) {
  if (auto builtin = builtin_chat_template(name_or_file)) return std::string(*builtin);
  if (!std::filesystem::is_regular_file(name_or_file))
    throw std::runtime_error("--chat-template " + name_or_file + ": no such file, and not a built-in template (" +
                             builtin_chat_template_list() + ")");
  return read_file(name_or_file);
}

std::optional<std::string> read_model_chat_template(const std::filesystem::path& model_dir) {
  if (const std::optional<std::filesystem::path> gguf = gguf_model_file(model_dir)) {
    return GgufFile::open(*gguf).get_string("tokenizer.chat_template");
  }
  const auto jinja = model_dir / "chat_template.jinja";
  if (std::filesystem::is_regular_file(jinja)) return read_file(jinja);

  const auto config_path = model_dir / "tokenizer_config.json";
  if (!std::filesystem::is_regular_file(config_path)) return std::nullopt;
  const nlohmann::json config = read_json_file(config_path);
  if (!config.is_object()) throw std::runtime_error(config_path.string() + ": not a JSON object");
  auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) return std::nullopt;
  if (field->is_string()) return field->get<std::string>();
  if (field->is_array()) {
    for (const auto& entry : *field) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    throw std::runtime_error(config_path.string() + ": field 'chat_template' lists no template named 'default'");
  }
  throw std::runtime_error(config_path.string() +
                           ": field 'chat_template' must be a string or a list of named templates");
}

}  // namespace slab::chat
