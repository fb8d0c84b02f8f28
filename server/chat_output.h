#pragma once
// One chat choice's generated text turned into OpenAI's message fields as it streams:
// reasoning_content (with a reasoning parser), content, and tool_calls (when the request gave
// tools the model may call).
#include <optional>
#include <string>
#include <vector>

#include "slabserve/tool_calls.h"

namespace slab::server {

struct ChatOutputPiece {
  std::string reasoning;
  std::string content;
  std::vector<api::ToolCall> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class ChatOutputParser {
 public:
  // tool_format: parse tool calls in it (nullopt: all text is content). starts_thinking: split
  // reasoning, the prompt having opened a <think> block or not (nullopt: no reasoning parser).
  ChatOutputParser(std::optional<api::ToolCallFormat> tool_format, std::optional<bool> starts_thinking);
  ChatOutputPiece push(const std::string& text);
  ChatOutputPiece finish();

 private:
  ChatOutputPiece route(api::ReasoningSplitter::Piece piece, bool last);

  std::optional<api::ToolCallStreamParser> tools_;
  std::optional<api::ReasoningSplitter> reasoning_;
};

}  // namespace slab::server
