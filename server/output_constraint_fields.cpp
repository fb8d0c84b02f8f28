#include "output_constraint_fields.h"

#include <utility>
#include <vector>

#include "api_error.h"
#include "slabserve/output_constraints.h"

namespace slab::server {
namespace {

using api::GrammarError;
using api::JsonSchemaOptions;

// A schema sent as an object, or as JSON text (vLLM accepts both for guided_json).
json read_schema(const json& value, const std::string& field) {
  if (value.is_object() || value.is_boolean()) return value;
  if (value.is_string()) {
    json parsed = json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      throw ApiError(400, "'" + field + "' must be a JSON Schema object (or its JSON text)", field);
    return parsed;
  }
  throw ApiError(400, "'" + field + "' must be a JSON Schema object", field);
}

std::string read_text(const json& value, const std::string& field) {
  if (!value.is_string() || value.get_ref<const std::string&>().empty())
    throw ApiError(400, "'" + field + "' must be a non-empty string", field);
  return value.get<std::string>();
}

// A client's own GBNF, parsed here too (microseconds) so that its errors name the field; the
// engine compiles it again at submit, or finds it in its cache.
std::string checked_gbnf(std::string gbnf) {
  (void)api::Grammar::parse(gbnf);
  return gbnf;
}

std::vector<std::string> read_choices(const json& value, const std::string& field) {
  if (!value.is_array() || value.empty())
    throw ApiError(400, "'" + field + "' must be a non-empty list of strings", field);
  std::vector<std::string> choices;
  for (const json& c : value) {
    if (!c.is_string()) throw ApiError(400, "'" + field + "' must be a non-empty list of strings", field);
    choices.push_back(c.get<std::string>());
  }
  return choices;
}

// response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict", "description"}}. The grammar is enforced whether or not strict is set.
std::string from_response_format(const json& format) {
  const json* type = format.is_object() ? find_field(format, "type") : nullptr;
  if (type == nullptr || !type->is_string())
    throw ApiError(400, "'response_format' must be an object with a 'type'", "response_format");
  if (*type == "text") return "";
  if (*type == "json_object") return api::json_object_gbnf();
  if (*type == "json_schema") {
    const json* spec = find_field(format, "json_schema");
    if (spec == nullptr || !spec->is_object())
      throw ApiError(400, "'response_format.json_schema' must be an object with a 'schema'", "response_format");
    const json* schema = find_field(*spec, "schema");
    // OpenAI makes the schema optional (then any JSON); vLLM requires it. Without one, any JSON
    // object is what a client can rely on.
    if (schema == nullptr) return api::json_object_gbnf();
    return api::json_schema_to_gbnf(read_schema(*schema, "response_format"));
  }
  throw ApiError(400,
                 "'response_format' type " + type->dump() + " is not supported: use text, json_object or json_schema",
                 "response_format");
}

// vLLM's structured_outputs: exactly one of json, regex, choice, grammar, json_object; and
// disable_any_whitespace (compact JSON).
std::string from_structured_outputs(const json& spec) {
  if (!spec.is_object()) throw ApiError(400, "'structured_outputs' must be an object", "structured_outputs");
  JsonSchemaOptions options;
  std::vector<std::pair<std::string, const json*>> given;
  for (const auto& [key, value] : spec.items()) {
    if (value.is_null()) continue;
    if (key == "disable_any_whitespace") {
      if (!value.is_boolean())
        throw ApiError(400, "'structured_outputs.disable_any_whitespace' must be a boolean", "structured_outputs");
      options.allow_whitespace = !value.get<bool>();
    } else if (key == "json" || key == "regex" || key == "choice" || key == "grammar" || key == "json_object") {
      given.emplace_back(key, &value);
    } else {
      throw ApiError(400,
                     "'structured_outputs." + key + "' is not supported (json, regex, choice, grammar, json_object)",
                     "structured_outputs");
    }
  }
  if (given.size() != 1)
    throw ApiError(400, "'structured_outputs' must give exactly one of json, regex, choice, grammar, json_object",
                   "structured_outputs");
  const auto& [key, value] = given.front();
  const std::string field = "structured_outputs." + key;
  if (key == "json") return api::json_schema_to_gbnf(read_schema(*value, field), options);
  if (key == "regex") return api::regex_to_gbnf(read_text(*value, field));
  if (key == "choice") return api::choice_to_gbnf(read_choices(*value, field));
  if (key == "grammar") return checked_gbnf(read_text(*value, field));
  if (!value->is_boolean()) throw ApiError(400, "'" + field + "' must be a boolean", "structured_outputs");
  return value->get<bool>() ? api::json_object_gbnf(options) : "";
}

std::string grammar_for(const std::string& name, const json& value) {
  if (name == "response_format") return from_response_format(value);
  if (name == "guided_json" || name == "json_schema") return api::json_schema_to_gbnf(read_schema(value, name));
  if (name == "guided_regex") return api::regex_to_gbnf(read_text(value, name));
  if (name == "guided_choice") return api::choice_to_gbnf(read_choices(value, name));
  if (name == "structured_outputs") return from_structured_outputs(value);
  return checked_gbnf(read_text(value, name));  // guided_grammar, grammar: GBNF as given
}

}  // namespace

std::string parse_output_constraint(const json& body) {
  std::string chosen_field;
  std::string grammar;
  for (std::string_view field : kOutputConstraintFieldNames) {
    const std::string name(field);
    const json* value = find_field(body, name.c_str());
    if (value == nullptr) continue;
    std::string this_grammar;
    try {
      this_grammar = grammar_for(name, *value);
    } catch (const GrammarError& e) {
      throw ApiError(400, "'" + name + "': " + e.what(), name);
    }
    if (this_grammar.empty()) continue;  // response_format text: no constraint
    if (!grammar.empty()) {
      throw ApiError(400, "'" + chosen_field + "' and '" + name + "' both constrain the output: give one of them",
                     name);
    }
    chosen_field = name;
    grammar = std::move(this_grammar);
  }
  return grammar;
}

}  // namespace slab::server
