#pragma once
// What a model writes when it calls tools or thinks aloud, turned into OpenAI's shapes: tool
// calls in the formats of the families served (Hermes/Qwen `<tool_call>` JSON, Llama 3.x JSON
// and `<|python_tag|>`, Mistral `[TOOL_CALLS]`), whole or streamed; the GBNF grammar that forces
// a call (tool_choice "required" or a named function); and `<think>...</think>` reasoning split
// from the answer. Plain text in, plain data out: no engine or HTTP types.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace slab::chat {

enum class ToolCallFormat { hermes, llama3_json, mistral };

// "hermes", "llama3_json", "mistral" (vLLM's --tool-call-parser names); nullopt otherwise.
std::optional<ToolCallFormat> tool_call_format_named(std::string_view name);
const char* tool_call_format_name(ToolCallFormat format);
// The format a chat template writes tool calls in, from its text; nullopt when it shows none.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view chat_template);

struct ToolCall {
  std::string id;  // "call_" + 24 random alphanumerics, as OpenAI's look
  std::string name;
  std::string arguments;  // JSON text of an object, as OpenAI sends it
};

struct ParsedOutput {
  std::string content;          // the text that is not a tool call (may be empty)
  std::vector<ToolCall> calls;  // in the order written
};

// A whole output. Text that looks like a call but does not parse stays content (vLLM does the
// same): a model that fumbles the format produces text, not an error. Whitespace right before
// and right after a valid call is dropped; llama3_json output is calls only if all of it is.
// The markers ([TOOL_CALLS], <|python_tag|>) are special tokens: the text must be detokenized
// with them kept.
ParsedOutput parse_tool_calls(ToolCallFormat format, std::string_view text);

// The same, fed as the text streams: content is released as soon as it cannot be the start of
// a call (held back: a partial marker and the whitespace before it; for llama3_json, output that
// begins like a call, until finish()); a call is released whole when it is complete. Any split
// of a text gives what parse_tool_calls gives on the whole (ids aside).
class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolCallFormat format);
  ParsedOutput push(std::string_view text);
  ParsedOutput finish();  // end of output: whatever is held back

 private:
  // What llama3_json output is, decided by how it begins: a call only if it starts with "{" or
  // <|python_tag|> (after whitespace), and then only as a whole, at finish().
  enum class Lead { undecided, calls, content };
  ParsedOutput process(bool final);
  ParsedOutput process_marked(bool final);
  ParsedOutput process_llama3(bool final);

  ToolCallFormat format_;
  std::string pending_;      // text not yet released: a possible call or its start
  bool after_call_ = false;  // whitespace right after a call is dropped (the separators models write)
  Lead lead_ = Lead::undecided;
};

// The grammar (GBNF) of one call in `format` to any of `tools` (OpenAI's list of {"type":
// "function", "function": {"name", "parameters"}}), or only to `only_function`; with `parallel`,
// one or more calls. Arguments follow each function's parameters schema. Throws
// std::invalid_argument (grammar::GrammarError) naming the tool and what is unsupported.
std::string tool_call_gbnf(ToolCallFormat format, const nlohmann::ordered_json& tools,
                           const std::optional<std::string>& only_function, bool parallel);

// Splits `<think>...</think>` reasoning from the answer as the text streams. `starts_thinking`:
// the prompt already opened the block (DeepSeek-R1 distills' templates end the prompt with
// "<think>\n"), so output is reasoning until "</think>".
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_thinking);
  struct Piece {
    std::string reasoning;
    std::string content;
  };
  Piece push(std::string_view text);
  Piece finish();

 private:
  enum class State { start, thinking, after_think, content };
  Piece process(bool final);

  std::string pending_;
  bool starts_thinking_;
  State state_ = State::start;
};

}  // namespace slab::chat
