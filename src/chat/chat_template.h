#pragma once
// Chat templates: a Jinja2 interpreter for the chat_template strings that ship with models,
// rendering byte for byte like Python jinja2 set up the way transformers sets it up
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
// raise_exception and strftime_now).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace slab::chat {

// Syntax errors, runtime errors, limit violations and raise_exception(msg) (message verbatim).
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// What the template's own raise_exception(msg) throws: the template refusing the input on purpose.
struct TemplateRaisedError : TemplateError {
  using TemplateError::TemplateError;
};

// AddressSanitizer pads every local with red zones: the renderer's frames grow about ninefold
// (20.9 vs 2.3 KiB per macro call level, measured), so the same template needs that much more
// stack. Sanitizer builds scale the budget by kStackScale (6: a 6 MiB budget still fits the 8 MiB
// default thread stack, and the 200-call limit still comes first for plain recursion).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::size_t kStackScale = 6;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr std::size_t kStackScale = 6;
#else
inline constexpr std::size_t kStackScale = 1;
#endif
#else
inline constexpr std::size_t kStackScale = 1;
#endif

// Bounds that keep a hostile or broken template from running away.
struct RenderLimits {
  std::size_t max_output_bytes = 16u << 20;        // also caps any single string or list built
  std::uint64_t max_loop_iterations = 10'000'000;  // all loops of one render together
  int max_call_depth = 200;                        // macro recursion
  // Stack the renderer may use below render()'s frame: whatever mix of macro recursion, nested
  // blocks and nested expressions a template builds, past this it fails with a TemplateError
  // instead of overflowing. Render on a thread with comfortably more stack than this.
  std::size_t max_stack_bytes = kStackScale << 20;
  std::int64_t max_range_size = 100'000;  // range(n)
};

struct Template;  // parsed form (ast.h)

class ChatTemplate {  // parsed once at model load, rendered per request; render is const and thread-safe
 public:
  explicit ChatTemplate(std::string_view source);  // throws TemplateError on syntax errors
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // context: messages, tools, add_generation_prompt, bos_token, ... kwargs. Object keys keep
  // their order (Python dicts do, and tojson prints them in that order): parse requests into
  // ordered_json; a plain nlohmann::json converts implicitly but arrives with sorted keys.
  std::string render(const nlohmann::ordered_json& context, std::time_t now = std::time(nullptr),
                     const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Template> parsed_;
};

// Renders with transformers' conventions (apply_chat_template): message keys whose value is null
// are dropped, reasoning is aliased (thinking / reasoning_content), the given messages, tools
// (null if none), documents (null), add_generation_prompt, the special-token strings and the
// extra kwargs (which win over special tokens) are the template's variables; `now` is what
// strftime_now formats, in local time.
std::string render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& special_tokens, const nlohmann::ordered_json& kwargs,
                        std::time_t now);

// render_chat for a server request. A request without tools (tools null) whose rendering with
// transformers' tools=None fails for any reason but the template's own raise_exception is rendered
// once more with `tools` left undefined, as llama-server leaves it. Templates written only for tool
// use (Hermes-2-Pro's tool_use loops over `tools` unconditionally) then render, where jinja2 with
// tools=None raises TypeError; if the second attempt fails too, the first error is thrown.
std::string render_chat_request(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                const nlohmann::ordered_json& special_tokens, const nlohmann::ordered_json& kwargs,
                                std::time_t now);

}  // namespace slab::chat
