// Tool calls and reasoning in model output (tool_calls.h). The rules follow vLLM's tool and
// reasoning parsers, so that a client sees what it would see from vLLM:
// - hermes: each `<tool_call>JSON</tool_call>` block (or an unclosed one at the end) whose JSON is
//   an object with a string "name" is a call; a block that does not parse stays content.
// - mistral: `[TOOL_CALLS]` followed by a JSON array of call objects (or one object), or by
//   `NAME[ARGS]{...}` (later Mistral tokenizers); text before the marker is content; a marker
//   not followed by valid calls stays content.
// - llama3_json: the whole output (after leading whitespace and an optional <|python_tag|>) is
//   one or more call objects separated by ";", or it is all content.
// - Whitespace right before and right after a valid call is dropped (the "\n" separators and
//   the "\n\n" after content that models write), elsewhere text is kept as written.
// parse_tool_calls is the stream parser fed the whole text, so that a stream and a whole output
// give the same result by construction; decisions wait for the text that settles them.
#include "chat/tool_calls.h"

#include <random>

namespace slab::chat {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_spaces(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

// Where the run of whitespace that ends at `end` begins.
size_t spaces_before(std::string_view text, size_t end) {
  while (end > 0 && is_space(text[end - 1])) --end;
  return end;
}

// Where the longest suffix of `text` that is a proper prefix of `marker` begins (text.size()
// when none): the part that may still become the marker.
size_t partial_marker_start(std::string_view text, std::string_view marker) {
  size_t longest = std::min(text.size(), marker.size() - 1);
  for (size_t length = longest; length > 0; --length) {
    if (text.substr(text.size() - length) == marker.substr(0, length)) return text.size() - length;
  }
  return text.size();
}

// One past the JSON object or array that opens at text[start], by bracket depth outside
// strings; npos while it is not closed. Whether it is valid JSON is for the parser to say.
size_t balanced_end(std::string_view text, size_t start) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string new_call_id() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(generator)];
  return id;
}

// A call object: {"name": string, "arguments" or "parameters": object or JSON text}.
std::optional<ToolCall> call_from_json(const Json& object) {
  if (!object.is_object()) return std::nullopt;
  auto name = object.find("name");
  if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto arguments = object.find("arguments");
  if (arguments == object.end()) arguments = object.find("parameters");
  ToolCall call{new_call_id(), name->get<std::string>(), "{}"};
  if (arguments != object.end() && !arguments->is_null()) {
    if (arguments->is_string()) {
      call.arguments = arguments->get<std::string>();  // already JSON text (some models write it so)
    } else if (arguments->is_object()) {
      call.arguments = arguments->dump();
    } else {
      return std::nullopt;
    }
  }
  return call;
}

Json parse_json(std::string_view text) { return Json::parse(text.begin(), text.end(), nullptr, false); }

// The calls in a JSON object or array of objects; nullopt unless every one is a call.
std::optional<std::vector<ToolCall>> calls_from_text(std::string_view text, bool allow_array) {
  Json value = parse_json(text);
  if (value.is_discarded()) return std::nullopt;
  std::vector<ToolCall> calls;
  if (value.is_array() && allow_array) {
    for (const Json& element : value) {
      auto call = call_from_json(element);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
  } else {
    auto call = call_from_json(value);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// A call block that starts with its marker at text[start]: where it ends, and its calls
// (nullopt: not valid calls, the block is content).
struct Block {
  size_t end;
  std::optional<std::vector<ToolCall>> calls;
};

// nullopt: the block is not complete yet (more text may settle it).
std::optional<Block> hermes_block(std::string_view text, size_t start, bool final) {
  size_t body = start + kHermesOpen.size();
  size_t close = text.find(kHermesClose, body);
  if (close == std::string_view::npos) {
    if (!final) return std::nullopt;
    return Block{text.size(), calls_from_text(text.substr(body), false)};  // unclosed at the end
  }
  return Block{close + kHermesClose.size(), calls_from_text(text.substr(body, close - body), false)};
}

bool is_function_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

// Mistral's later tokenizers (v11: Mistral Small 3.2, Magistral) write one call per marker as
// `[TOOL_CALLS]NAME[ARGS]{...}`; `name_start` is just after the marker.
std::optional<Block> mistral_named_block(std::string_view text, size_t name_start, bool final) {
  size_t name_end = name_start;
  while (name_end < text.size() && is_function_name_char(text[name_end])) ++name_end;
  std::string_view after_name = text.substr(name_end);
  if (!final &&
      (after_name.empty() || (after_name.size() < kMistralArgs.size() && kMistralArgs.starts_with(after_name)))) {
    return std::nullopt;
  }
  if (name_end == name_start || !after_name.starts_with(kMistralArgs)) return Block{name_start, std::nullopt};
  size_t json_start = skip_spaces(text, name_end + kMistralArgs.size());
  if (json_start == text.size() && !final) return std::nullopt;
  if (json_start == text.size() || text[json_start] != '{') return Block{name_start, std::nullopt};
  size_t json_end = balanced_end(text, json_start);
  if (json_end == std::string_view::npos) {
    if (!final) return std::nullopt;
    return Block{text.size(), std::nullopt};
  }
  Json arguments = parse_json(text.substr(json_start, json_end - json_start));
  if (!arguments.is_object()) return Block{json_end, std::nullopt};
  std::vector<ToolCall> calls;
  calls.push_back({new_call_id(), std::string(text.substr(name_start, name_end - name_start)), arguments.dump()});
  return Block{json_end, std::move(calls)};
}

std::optional<Block> mistral_block(std::string_view text, size_t start, bool final) {
  size_t marker_end = start + kMistralMarker.size();
  size_t json_start = skip_spaces(text, marker_end);
  if (json_start == text.size()) {
    if (!final) return std::nullopt;
    return Block{text.size(), std::nullopt};
  }
  if (text[json_start] != '[' && text[json_start] != '{') return mistral_named_block(text, marker_end, final);
  size_t json_end = balanced_end(text, json_start);
  if (json_end == std::string_view::npos) {
    if (!final) return std::nullopt;
    return Block{text.size(), std::nullopt};
  }
  return Block{json_end, calls_from_text(text.substr(json_start, json_end - json_start), true)};
}

// llama3_json: objects separated by ";" (whitespace around them allowed), nothing else.
std::optional<std::vector<ToolCall>> llama3_calls(std::string_view text) {
  std::vector<ToolCall> calls;
  size_t pos = skip_spaces(text, 0);
  while (pos < text.size()) {
    if (text[pos] != '{') return std::nullopt;
    size_t end = balanced_end(text, pos);
    if (end == std::string_view::npos) return std::nullopt;
    auto call = call_from_json(parse_json(text.substr(pos, end - pos)));
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    pos = skip_spaces(text, end);
    if (pos < text.size()) {
      if (text[pos] != ';') return std::nullopt;
      pos = skip_spaces(text, pos + 1);
    }
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

void append(ParsedOutput& out, ParsedOutput&& more) {
  out.content += more.content;
  for (auto& call : more.calls) out.calls.push_back(std::move(call));
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format_named(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::hermes;
  if (name == "llama3_json") return ToolCallFormat::llama3_json;
  if (name == "mistral") return ToolCallFormat::mistral;
  return std::nullopt;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes: return "hermes";
    case ToolCallFormat::llama3_json: return "llama3_json";
    case ToolCallFormat::mistral: return "mistral";
  }
  return "?";
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view chat_template) {
  auto has = [&](std::string_view needle) { return chat_template.find(needle) != std::string_view::npos; };
  if (has(kHermesOpen)) return ToolCallFormat::hermes;
  if (has(kMistralMarker)) return ToolCallFormat::mistral;
  // Llama 3.1 writes built-in tool calls after <|python_tag|>; 3.1 and 3.2 both ask for custom
  // tools with 'Respond in the format {"name": function name, "parameters": dictionary of
  // argument name and its value}'.
  if (has(kPythonTag) || has("dictionary of argument name and its value")) return ToolCallFormat::llama3_json;
  return std::nullopt;
}

ParsedOutput parse_tool_calls(ToolCallFormat format, std::string_view text) {
  ToolCallStreamParser parser(format);
  ParsedOutput out = parser.push(text);
  append(out, parser.finish());
  return out;
}

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format) : format_(format) {}

ParsedOutput ToolCallStreamParser::push(std::string_view text) {
  pending_ += text;
  return process(false);
}

ParsedOutput ToolCallStreamParser::finish() { return process(true); }

ParsedOutput ToolCallStreamParser::process(bool final) {
  return format_ == ToolCallFormat::llama3_json ? process_llama3(final) : process_marked(final);
}

ParsedOutput ToolCallStreamParser::process_marked(bool final) {
  std::string_view marker = format_ == ToolCallFormat::hermes ? kHermesOpen : kMistralMarker;
  ParsedOutput out;
  for (;;) {
    if (after_call_) {
      pending_.erase(0, skip_spaces(pending_, 0));
      if (pending_.empty()) break;
      after_call_ = false;
    }
    size_t marker_pos = pending_.find(marker);
    if (marker_pos == std::string::npos) {
      // Held back: a possible start of the marker, and the whitespace before it (dropped if a
      // call follows).
      size_t held = final ? pending_.size() : spaces_before(pending_, partial_marker_start(pending_, marker));
      out.content.append(pending_, 0, held);
      pending_.erase(0, held);
      break;
    }
    size_t spaces = spaces_before(pending_, marker_pos);
    auto block = format_ == ToolCallFormat::hermes ? hermes_block(pending_, marker_pos, final)
                                                   : mistral_block(pending_, marker_pos, final);
    if (!block) {
      out.content.append(pending_, 0, spaces);
      pending_.erase(0, spaces);
      break;
    }
    if (block->calls) {
      out.content.append(pending_, 0, spaces);
      for (auto& call : *block->calls) out.calls.push_back(std::move(call));
      after_call_ = true;
    } else {
      out.content.append(pending_, 0, block->end);
    }
    pending_.erase(0, block->end);
  }
  return out;
}

ParsedOutput ToolCallStreamParser::process_llama3(bool final) {
  ParsedOutput out;
  if (lead_ == Lead::undecided) {
    size_t first = skip_spaces(pending_, 0);
    std::string_view rest = std::string_view(pending_).substr(first);
    if (rest.empty()) {
      if (final) lead_ = Lead::content;
    } else if (rest.front() == '{' || rest.starts_with(kPythonTag)) {
      lead_ = Lead::calls;
    } else if (!(kPythonTag.starts_with(rest) && !final)) {
      lead_ = Lead::content;
    }
  }
  if (lead_ == Lead::content) {
    out.content = std::move(pending_);
    pending_.clear();
  } else if (lead_ == Lead::calls && final) {
    // A call only if the whole output is calls: decided at the end, never before.
    std::string_view body = std::string_view(pending_).substr(skip_spaces(pending_, 0));
    if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
    if (auto calls = llama3_calls(body)) {
      out.calls = std::move(*calls);
    } else {
      out.content = std::move(pending_);
    }
    pending_.clear();
    lead_ = Lead::content;
  }
  return out;
}

ReasoningSplitter::ReasoningSplitter(bool starts_thinking) : starts_thinking_(starts_thinking) {}

ReasoningSplitter::Piece ReasoningSplitter::push(std::string_view text) {
  pending_ += text;
  return process(false);
}

ReasoningSplitter::Piece ReasoningSplitter::finish() { return process(true); }

ReasoningSplitter::Piece ReasoningSplitter::process(bool final) {
  Piece out;
  for (;;) {
    switch (state_) {
      case State::start: {
        // "<think>" may open the output (after whitespace); with starts_thinking the prompt
        // opened it already, and a repeated one is dropped (R1 distills sometimes write it).
        size_t first = skip_spaces(pending_, 0);
        std::string_view rest = std::string_view(pending_).substr(first);
        if (rest.starts_with(kThinkOpen)) {
          pending_.erase(0, first + kThinkOpen.size());
          state_ = State::thinking;
          continue;
        }
        if (!final && kThinkOpen.starts_with(rest)) return out;  // rest may still become "<think>"
        state_ = starts_thinking_ ? State::thinking : State::content;
        continue;
      }
      case State::thinking: {
        size_t close = pending_.find(kThinkClose);
        if (close != std::string::npos) {
          out.reasoning.append(pending_, 0, close);
          pending_.erase(0, close + kThinkClose.size());
          state_ = State::after_think;
          continue;
        }
        size_t held = final ? pending_.size() : partial_marker_start(pending_, kThinkClose);
        out.reasoning.append(pending_, 0, held);
        pending_.erase(0, held);
        return out;
      }
      case State::after_think:
        // The "\n\n" Qwen3 writes after "</think>" is not part of the answer (vLLM drops it).
        pending_.erase(0, skip_spaces(pending_, 0));
        if (pending_.empty()) return out;
        state_ = State::content;
        continue;
      case State::content:
        out.content += pending_;
        pending_.clear();
        return out;
    }
  }
}

}  // namespace slab::chat
