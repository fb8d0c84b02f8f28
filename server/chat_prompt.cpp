#include "chat_prompt.h"

#include <ctime>

#include "api_error.h"

namespace slab::server {

std::string render_chat_prompt(const LoadedModel& loaded, const ChatRequest& request) {
  if (!loaded.has_chat_template()) {
    throw ApiError(400, "this model has no chat template; start the server with --chat-template FILE or one of " +
                            api::builtin_chat_template_list() + ", or use /v1/completions");
  }
  std::string text;
  try {
    text = loaded.render_chat(request.messages, request.tools, request.add_generation_prompt,
                              request.chat_template_kwargs, std::time(nullptr));
  } catch (const api::ChatTemplateError& e) {
    throw ApiError(400, std::string("chat template error: ") + e.what(), "messages");
  }
  if (request.continue_final_message) {
    // Cut everything the template appends after the final message, so generation continues it.
    const json& content = request.messages.back()["content"];
    const std::string final_text = content.is_string() ? content.get<std::string>() : std::string();
    const size_t at = final_text.empty() ? std::string::npos : text.rfind(final_text);
    if (at == std::string::npos) {
      throw ApiError(400,
                     "'continue_final_message': the final message's content does not appear in the rendered prompt",
                     "continue_final_message");
    }
    text.resize(at + final_text.size());
  }
  return text;
}

}  // namespace slab::server
