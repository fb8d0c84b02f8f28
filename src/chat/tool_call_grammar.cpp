// The GBNF grammar of a tool call (tool_calls.h): the format's fixed text around each function's
// name, and its arguments compiled from the function's parameters schema by json_schema.h.
// Rules: root, call (any one function's call), call-N (function N's), tool<N>-* (its arguments),
// and the shared JSON primitives.
//
// Several functions' schema grammars share one GBNF: each compiled grammar's own rules (its
// `root` and the rules named after schema parts) get a per-function prefix, "tool<N>-"; the
// shared primitives (json-*, ws) are the same text in every grammar compiled with the same
// options and are written once. json_schema.cpp never names a schema rule "root", "ws" or
// "json-..." (it prefixes such names with "s-"), which is what makes the split safe.
#include <map>
#include <set>

#include "chat/tool_calls.h"
#include "grammar/json_schema.h"

namespace slab::chat {

namespace {

using Json = nlohmann::ordered_json;
using grammar::GrammarError;

struct Rule {
  std::string name;
  std::string body;
};

// "name ::= body" lines as json_schema.cpp writes them (one rule a line).
std::vector<Rule> split_rules(const std::string& gbnf) {
  std::vector<Rule> rules;
  size_t pos = 0;
  while (pos < gbnf.size()) {
    size_t end = gbnf.find('\n', pos);
    if (end == std::string::npos) end = gbnf.size();
    std::string_view line(gbnf.data() + pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    size_t separator = line.find(" ::= ");
    if (separator == std::string_view::npos) throw GrammarError("tool grammar: unexpected line in a schema grammar");
    rules.push_back({std::string(line.substr(0, separator)), std::string(line.substr(separator + 5))});
  }
  return rules;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// The body with rule references renamed; literals ("..."), classes ([...]) and repetition
// counts ({m,n}) are copied untouched, so that a rule named like a word inside them is safe.
std::string rename_references(const std::string& body, const std::map<std::string, std::string>& renames) {
  std::string out;
  size_t i = 0;
  while (i < body.size()) {
    char c = body[i];
    if (c == '"' || c == '[' || c == '{') {
      char close = c == '"' ? '"' : c == '[' ? ']' : '}';
      size_t j = i + 1;
      while (j < body.size() && body[j] != close) j += body[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, body.size());
      out.append(body, i, j - i);
      i = j;
    } else if (is_name_char(c)) {
      size_t j = i;
      while (j < body.size() && is_name_char(body[j])) ++j;
      std::string name = body.substr(i, j - i);
      auto found = renames.find(name);
      out += found == renames.end() ? name : found->second;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

bool is_shared_primitive(const std::string& name) { return name == "ws" || name.rfind("json-", 0) == 0; }

// GBNF literal of raw text.
std::string gbnf_literal(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct Function {
  std::string name;
  const Json* parameters;  // nullptr: any object
};

std::string describe_tool(size_t index, const std::string& name) {
  std::string where = "tools[" + std::to_string(index) + "]";
  return name.empty() ? where : where + " ('" + name + "')";
}

std::vector<Function> functions_of(const Json& tools) {
  if (!tools.is_array() || tools.empty()) throw GrammarError("tools: expected a non-empty array of tools");
  std::vector<Function> functions;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const Json* function = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
    std::string name;
    if (function && function->is_object() && function->contains("name") && (*function)["name"].is_string()) {
      name = (*function)["name"].get<std::string>();
    }
    if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function") {
      throw GrammarError(describe_tool(i, name) + ": a tool must be {\"type\": \"function\", \"function\": {...}}");
    }
    if (name.empty()) throw GrammarError(describe_tool(i, name) + ": the function has no \"name\" string");
    if (!names.insert(name).second) throw GrammarError(describe_tool(i, name) + ": a second function of that name");
    const Json* parameters = nullptr;
    if (function->contains("parameters") && !(*function)["parameters"].is_null()) {
      parameters = &(*function)["parameters"];
      if (!parameters->is_object()) {
        throw GrammarError(describe_tool(i, name) + ": \"parameters\" must be a JSON Schema object");
      }
    }
    functions.push_back({name, parameters});
  }
  return functions;
}

}  // namespace

std::string tool_call_gbnf(ToolCallFormat format, const nlohmann::ordered_json& tools,
                           const std::optional<std::string>& only_function, bool parallel) {
  std::vector<Function> functions = functions_of(tools);
  if (only_function) {
    std::vector<Function> chosen;
    for (const auto& function : functions) {
      if (function.name == *only_function) chosen.push_back(function);
    }
    if (chosen.empty())
      throw GrammarError("tool_choice names function '" + *only_function + "', which is not in tools");
    functions = std::move(chosen);
  }

  const std::string arguments_key = format == ToolCallFormat::llama3_json ? "parameters" : "arguments";
  std::vector<std::string> call_rules;
  std::vector<Rule> own_rules;
  std::vector<Rule> shared_rules;
  std::set<std::string> shared_names;
  for (size_t index = 0; index < functions.size(); ++index) {
    const Function& function = functions[index];
    std::string schema_gbnf;
    try {
      schema_gbnf =
          function.parameters ? grammar::json_schema_to_gbnf(*function.parameters) : grammar::json_object_gbnf();
    } catch (const GrammarError& error) {
      throw GrammarError("tool '" + function.name + "': " + error.what());
    }
    std::string prefix = "tool" + std::to_string(index) + "-";
    std::vector<Rule> rules = split_rules(schema_gbnf);
    std::map<std::string, std::string> renames;
    for (const Rule& rule : rules) {
      if (!is_shared_primitive(rule.name))
        renames[rule.name] = rule.name == "root" ? prefix + "args" : prefix + rule.name;
    }
    for (const Rule& rule : rules) {
      if (is_shared_primitive(rule.name)) {
        if (shared_names.insert(rule.name).second) shared_rules.push_back(rule);
      } else {
        own_rules.push_back({renames.at(rule.name), rename_references(rule.body, renames)});
      }
    }
    // The opening text up to the arguments, as the model writes it (json.dumps spacing).
    std::string opening = "{\"name\": " + Json(function.name).dump() + ", \"" + arguments_key + "\": ";
    if (format == ToolCallFormat::hermes) opening = "<tool_call>\n" + opening;
    std::string closing = format == ToolCallFormat::hermes ? "}\n</tool_call>" : "}";
    std::string call_rule = "call-" + std::to_string(index);
    own_rules.push_back({call_rule, gbnf_literal(opening) + " " + prefix + "args " + gbnf_literal(closing)});
    call_rules.push_back(call_rule);
  }

  std::string call = call_rules.front();
  for (size_t i = 1; i < call_rules.size(); ++i) call += " | " + call_rules[i];
  std::string separator = format == ToolCallFormat::hermes ? "\\n" : format == ToolCallFormat::mistral ? ", " : "; ";
  std::string calls = parallel ? "call ( \"" + separator + "\" call )*" : "call";
  std::string root = format == ToolCallFormat::mistral ? "\"[TOOL_CALLS][\" " + calls + " \"]\"" : calls;

  std::string out = "root ::= " + root + "\ncall ::= " + call + "\n";
  for (const Rule& rule : own_rules) out += rule.name + " ::= " + rule.body + "\n";
  for (const Rule& rule : shared_rules) out += rule.name + " ::= " + rule.body + "\n";
  return out;
}

}  // namespace slab::chat
