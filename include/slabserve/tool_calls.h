#pragma once
// Tool calls and reasoning in a model's output (chat/tool_calls.h): the formats of the families
// served, their parsers (whole and streamed), the grammar that forces a call, and the
// <think> splitter.
#include "chat/tool_calls.h"

namespace slab::api {

using slab::chat::detect_tool_call_format;
using slab::chat::parse_tool_calls;
using slab::chat::ParsedOutput;
using slab::chat::ReasoningSplitter;
using slab::chat::tool_call_format_name;
using slab::chat::tool_call_format_named;
using slab::chat::tool_call_gbnf;
using slab::chat::ToolCall;
using slab::chat::ToolCallFormat;
using slab::chat::ToolCallStreamParser;

}  // namespace slab::api
