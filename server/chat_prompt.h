#pragma once
// Turns a chat request's conversation into prompt text with the model's chat template, as
// transformers' apply_chat_template does (chat::render_chat_request: a request without tools that
// a tool-use-only template cannot render with tools=None renders with `tools` undefined, as
// llama-server renders it).
#include <string>

#include "api_server.h"
#include "chat_request.h"

namespace slab::server {

// Throws ApiError(400) when the model has no template (and none was given with
// --chat-template) or the template refuses the conversation (its message is passed on).
std::string render_chat_prompt(const LoadedModel& loaded, const ChatRequest& request);

}  // namespace slab::server
