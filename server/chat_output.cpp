#include "chat_output.h"

namespace slab::server {

ChatOutputParser::ChatOutputParser(std::optional<api::ToolCallFormat> tool_format,
                                   std::optional<bool> starts_thinking) {
  if (tool_format) tools_.emplace(*tool_format);
  if (starts_thinking) reasoning_.emplace(*starts_thinking);
}

// Reasoning goes out as it is; the answer part goes through the tool-call parser, if any.
ChatOutputPiece ChatOutputParser::route(api::ReasoningSplitter::Piece piece, bool last) {
  ChatOutputPiece out;
  out.reasoning = std::move(piece.reasoning);
  if (!tools_) {
    out.content = std::move(piece.content);
    return out;
  }
  api::ParsedOutput parsed = tools_->push(piece.content);
  if (last) {
    api::ParsedOutput tail = tools_->finish();
    parsed.content += tail.content;
    for (auto& call : tail.calls) parsed.calls.push_back(std::move(call));
  }
  out.content = std::move(parsed.content);
  out.calls = std::move(parsed.calls);
  return out;
}

ChatOutputPiece ChatOutputParser::push(const std::string& text) {
  api::ReasoningSplitter::Piece piece;
  if (reasoning_) {
    piece = reasoning_->push(text);
  } else {
    piece.content = text;
  }
  return route(std::move(piece), false);
}

ChatOutputPiece ChatOutputParser::finish() {
  return route(reasoning_ ? reasoning_->finish() : api::ReasoningSplitter::Piece{}, true);
}

}  // namespace slab::server
