#include "chat/chat_template.h"

#include "chat/ast.h"
#include "chat/evaluator.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace slab::chat {

ChatTemplate::ChatTemplate(std::string_view source) : parsed_(parse_template(source)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context, std::time_t now,
                                 const RenderLimits& limits) const {
  Renderer renderer(limits, now);
  try {
    return renderer.render(*parsed_, from_json(context));
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError("template rendering ran out of memory");
  } catch (const std::exception& e) {  // e.g. std::length_error from a huge repeat
    throw TemplateError(std::string("template rendering failed: ") + e.what());
  }
}

namespace {

// transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}.
nlohmann::ordered_json alias_reasoning(const nlohmann::ordered_json& message) {
  const nlohmann::ordered_json* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    auto it = message.find(key);
    if (it != message.end() && !it->is_null()) {
      reasoning = &*it;
      break;
    }
  }
  if (!reasoning) return message;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["thinking"] = *reasoning;
  for (const auto& [k, v] : message.items()) out[k] = v;
  out["reasoning_content"] = *reasoning;
  return out;
}

// Copying a JSON document and converting it (from_json) both recurse once per level: a request
// nesting deeper than values may is refused first, by a walk that does not recurse.
void check_nesting(const nlohmann::ordered_json& j, const char* what) {
  std::vector<std::pair<const nlohmann::ordered_json*, int>> pending{{&j, 0}};
  while (!pending.empty()) {
    auto [node, level] = pending.back();
    pending.pop_back();
    if (level > kMaxValueNesting)
      throw TemplateError(std::string(what) + " nest lists and objects deeper than " +
                          std::to_string(kMaxValueNesting) + " levels");
    if (node->is_structured())
      for (const auto& child : *node) pending.emplace_back(&child, level + 1);
  }
}

// The template's variables as render_chat describes them; `tools` is left out when !with_tools.
nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                    bool with_tools, bool add_generation_prompt,
                                    const nlohmann::ordered_json& special_tokens,
                                    const nlohmann::ordered_json& kwargs) {
  check_nesting(messages, "the messages");
  check_nesting(tools, "the tools");
  check_nesting(kwargs, "the template arguments");
  check_nesting(special_tokens, "the special tokens");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  if (special_tokens.is_object())
    for (const auto& [k, v] : special_tokens.items())
      if (!v.is_null()) context[k] = v;
  if (kwargs.is_object())
    for (const auto& [k, v] : kwargs.items()) context[k] = v;

  nlohmann::ordered_json chat = nlohmann::ordered_json::array();
  if (messages.is_array()) {
    for (const auto& message : messages) {
      if (!message.is_object()) throw TemplateError("Chat messages should be dicts, got " + message.dump());
      nlohmann::ordered_json kept = nlohmann::ordered_json::object();  // apply_chat_template drops None values
      for (const auto& [k, v] : message.items())
        if (!v.is_null()) kept[k] = v;
      chat.push_back(alias_reasoning(kept));
    }
  }
  context["messages"] = std::move(chat);
  if (with_tools)
    context["tools"] = tools;
  else
    context.erase("tools");  // a kwarg of that name must not stand in for it either
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  return context;
}

}  // namespace

std::string render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& special_tokens, const nlohmann::ordered_json& kwargs,
                        std::time_t now) {
  return tmpl.render(chat_context(messages, tools, true, add_generation_prompt, special_tokens, kwargs), now);
}

std::string render_chat_request(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                const nlohmann::ordered_json& special_tokens, const nlohmann::ordered_json& kwargs,
                                std::time_t now) {
  try {
    return render_chat(tmpl, messages, tools, add_generation_prompt, special_tokens, kwargs, now);
  } catch (const TemplateRaisedError&) {
    throw;
  } catch (const TemplateError&) {
    if (!tools.is_null()) throw;
    try {
      return tmpl.render(chat_context(messages, tools, false, add_generation_prompt, special_tokens, kwargs), now);
    } catch (const TemplateError&) {
    }
    throw;  // the first error: the one transformers would report
  }
}

}  // namespace slab::chat
