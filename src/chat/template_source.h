#pragma once
// Where a checkpoint keeps its chat template: chat_template.jinja beside the weights, or the
// chat_template field of tokenizer_config.json (a string, or a list of named templates of which
// "default" is used); in a GGUF model, its tokenizer.chat_template key.
#include <filesystem>
#include <optional>
#include <string>

namespace slab::chat {

// nullopt when the model ships no template. Throws std::runtime_error naming the file and field
// when one is there but malformed.
std::optional<std::string> read_model_chat_template(const std::filesystem::path& model_dir);

// Reads a template file given on the command line (--chat-template FILE).
std::string read_chat_template_file(const std::filesystem::path& file);

// What --chat-template names: a built-in template (builtin_templates.h) or else a file. Throws
// std::runtime_error naming both possibilities when it is neither.
std::string read_chat_template_option(const std::string& name_or_file);

}  // namespace slab::chat
