#include "chat_request.h"

#include <array>
#include <string_view>

#include "api_error.h"
#include "output_constraint_fields.h"

namespace slab::server {
namespace {

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant", "tool"};

// Text parts are joined with newlines, as vLLM does for templates that expect a string.
json flatten_content(const json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array())
    throw ApiError(400, "'" + where + "' must be a string, a list of content parts or null", "messages");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw ApiError(400,
                     "'" + where + "[" + std::to_string(i) +
                         "]' must be {\"type\": \"text\", \"text\": ...}; other content types are not supported",
                     "messages");
    }
    if (i > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

json validate_messages(const json& body) {
  const json* messages = find_field(body, "messages");
  if (messages == nullptr || !messages->is_array())
    throw ApiError(400, "'messages' must be a list of messages", "messages");
  if (messages->empty()) throw ApiError(400, "'messages' must not be empty", "messages");
  json out = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw ApiError(400, "'" + where + "' must be an object", "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw ApiError(400, "'" + where + ".role' must be a string", "messages");
    if (std::find(kRoles.begin(), kRoles.end(), role->get<std::string>()) == kRoles.end()) {
      throw ApiError(400,
                     "'" + where + ".role' must be one of system, developer, user, assistant, tool; got '" +
                         role->get<std::string>() + "'",
                     "messages");
    }
    json message = m;
    if (m.contains("content")) message["content"] = flatten_content(m["content"], i);
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].is_array()) {
      throw ApiError(400, "'" + where + ".tool_calls' must be a list", "messages");
    }
    out.push_back(std::move(message));
  }
  return out;
}

}  // namespace

constexpr std::string_view kTemplateFieldNames[] = {
    "model", "messages", "tools", "add_generation_prompt", "continue_final_message", "chat_template_kwargs"};
constexpr std::string_view kChatFieldNames[] = {
    "logprobs", "top_logprobs", "max_completion_tokens", "tool_choice", "parallel_tool_calls", "store", "modalities"};
constexpr std::string_view kTokenizeFieldNames[] = {"add_special_tokens", "return_token_strs"};

// Each tool must be {"type": "function", "function": {"name": ..., "description"?, "parameters"?,
// "strict"?}}: what the template renders and the grammar of a forced call is built from.
void validate_tools(const json& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    const std::string where = "'tools[" + std::to_string(i) + "]'";
    if (!tool.is_object() || tool.value("type", "") != "function")
      throw ApiError(400, where + " must be {\"type\": \"function\", \"function\": {...}}", "tools");
    const json* function = find_field(tool, "function");
    if (function == nullptr || !function->is_object())
      throw ApiError(400, where + ".function must be an object", "tools");
    const json* name = find_field(*function, "name");
    if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty())
      throw ApiError(400, where + ".function.name must be a non-empty string", "tools");
    const json* parameters = find_field(*function, "parameters");
    if (parameters != nullptr && !parameters->is_object())
      throw ApiError(400, where + ".function.parameters must be a JSON Schema object", "tools");
  }
}

void read_tool_choice(const json& body, ChatRequest& r) {
  const bool tools_given = !r.tools.is_null() && !r.tools.empty();
  const json* choice = find_field(body, "tool_choice");
  r.tool_choice = tools_given ? ChatRequest::ToolChoice::automatic : ChatRequest::ToolChoice::none;
  if (choice != nullptr) {
    if (*choice == "none") {
      r.tool_choice = ChatRequest::ToolChoice::none;
    } else if (*choice == "auto") {
      if (tools_given) r.tool_choice = ChatRequest::ToolChoice::automatic;
    } else if (*choice == "required") {
      r.tool_choice = ChatRequest::ToolChoice::required;
    } else if (choice->is_object() && choice->value("type", "") == "function" && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].contains("name") &&
               (*choice)["function"]["name"].is_string()) {
      r.tool_choice = ChatRequest::ToolChoice::named;
      r.tool_choice_name = (*choice)["function"]["name"].get<std::string>();
    } else {
      throw ApiError(400,
                     "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                     "\"function\": {\"name\": ...}}",
                     "tool_choice");
    }
    if ((r.tool_choice == ChatRequest::ToolChoice::required || r.tool_choice == ChatRequest::ToolChoice::named) &&
        !tools_given) {
      throw ApiError(400, "'tool_choice' " + choice->dump() + " needs 'tools'", "tool_choice");
    }
  }
  r.parallel_tool_calls = read_bool(body, "parallel_tool_calls", true);
}

// Fields a client may send that change nothing (their default) are accepted; any other value is
// refused, so no request is answered as if it had been honoured.
void check_chat_only_fields(const json& body) {
  if (read_bool(body, "store", false))
    throw ApiError(400, "'store' is not supported: completions are not stored", "store");
  if (const json* modalities = find_field(body, "modalities")) {
    if (*modalities != json::array({"text"}))
      throw ApiError(400, "'modalities' other than [\"text\"] is not supported", "modalities");
  }
}

ChatRequest parse_chat_request(const json& body, bool for_tokenize) {
  if (for_tokenize) {
    reject_unknown_fields(body, {kTemplateFieldNames, kTokenizeFieldNames});
  } else {
    reject_unknown_fields(
        body, {kTemplateFieldNames, kChatFieldNames, kSamplingFieldNames, kOutputConstraintFieldNames},
        {{"reasoning_effort", "this server has no reasoning-effort control"},
         {"prediction", "predicted outputs are not implemented"},
         {"audio", "audio output is not supported"},
         {"functions", "the legacy function calling is not implemented"},
         {"function_call", "the legacy function calling is not implemented"},
         {"web_search_options", "web search is not available"},
         {"metadata", "completions are not stored"},
         {"service_tier", "there is one service tier"},
         {"prompt_logprobs", "prompt log probabilities are not computed"},
         {"echo", "echoing the prompt in chat completions is not implemented"},
         {"chat_template", "a per-request chat template is not accepted; start the server with --chat-template"},
         {"guided_whitespace_pattern", "use structured_outputs.disable_any_whitespace instead"},
         {"guided_decoding_backend", "there is one structured-output backend"}});
  }
  ChatRequest r;
  r.model = read_string(body, "model").value_or("");
  r.messages = validate_messages(body);
  if (const json* tools = find_field(body, "tools")) {
    if (!tools->is_array()) throw ApiError(400, "'tools' must be a list", "tools");
    validate_tools(*tools);
    r.tools = *tools;
  }
  if (!for_tokenize) {
    check_chat_only_fields(body);
    read_tool_choice(body, r);
  }
  r.add_generation_prompt = read_bool(body, "add_generation_prompt", true);
  r.continue_final_message = read_bool(body, "continue_final_message", false);
  if (r.add_generation_prompt && r.continue_final_message && find_field(body, "add_generation_prompt") != nullptr) {
    throw ApiError(400, "'continue_final_message' and 'add_generation_prompt' cannot both be true",
                   "continue_final_message");
  }
  if (r.continue_final_message) {
    r.add_generation_prompt = false;
    if (r.messages.back().value("role", "") != "assistant") {
      throw ApiError(400, "'continue_final_message' needs the last message to be from the assistant",
                     "continue_final_message");
    }
  }
  if (const json* kwargs = find_field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw ApiError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.chat_template_kwargs = *kwargs;
  }
  if (for_tokenize) return r;
  r.logprobs = read_bool(body, "logprobs", false);
  r.top_logprobs = static_cast<int>(read_integer(body, "top_logprobs", 0, 0, 20));
  if (r.top_logprobs > 0 && !r.logprobs)
    throw ApiError(400, "'top_logprobs' needs 'logprobs' to be true", "top_logprobs");
  r.sampling = parse_sampling_fields(body, {"max_completion_tokens", "max_tokens"});
  r.sampling.grammar = parse_output_constraint(body);
  return r;
}

}  // namespace slab::server
