#pragma once
// Chat templates built into slabserve, for models that ship none: `--chat-template chatml` and the
// other names here, as llama-server offers them. Each is Jinja source the ordinary engine renders.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace slab::chat {

// The source of the built-in template of that name; nullopt when there is none.
std::optional<std::string_view> builtin_chat_template(std::string_view name);

std::vector<std::string> builtin_chat_template_names();  // chatml, llama2, llama3, mistral, gemma, phi3, qwen
std::string builtin_chat_template_list();                // the same as "chatml, llama2, ..." for messages

}  // namespace slab::chat
