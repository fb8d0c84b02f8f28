// libFuzzer: the Jinja lexer, parser and evaluator. The input is a template, rendered against a
// fixed conversation (with tools and nested values) under the default limits. TemplateError is
// the expected answer to broken templates; a crash, a hang or another exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::ordered_json;
  static const ordered_json messages = ordered_json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <b>&</b>","x":{"y":[1,2,{"z":null}]}},
          {"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"a":1}}}]},
          {"role":"tool","content":"42"}])");
  static const ordered_json tools = ordered_json::parse(
      R"([{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}])");
  static const ordered_json special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const slab::chat::ChatTemplate tmpl(source);
    slab::chat::RenderLimits limits;
    limits.max_output_bytes = 1 << 20;
    limits.max_loop_iterations = 100000;
    (void)tmpl.render(ordered_json{{"messages", messages},
                                   {"tools", tools},
                                   {"add_generation_prompt", true},
                                   {"bos_token", "<s>"},
                                   {"eos_token", "</s>"}},
                      0, limits);
    (void)slab::chat::render_chat(tmpl, messages, nullptr, false, special, ordered_json::object(), 0);
  } catch (const slab::chat::TemplateError&) {
  }
  return 0;
}
