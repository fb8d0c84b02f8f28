#pragma once
// Request constraints to GBNF (grammar.h parses the result): JSON Schema (OpenAI's
// response_format json_schema, vLLM's guided_json, llama-server's json_schema), any JSON object
// (response_format json_object), a regular expression (guided_regex, a schema's "pattern") and
// a fixed list of choices (guided_choice).
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace slab::grammar {

struct JsonSchemaOptions {
  // Whitespace the model may put between JSON tokens: none (compact, as json.dumps with
  // separators (",", ":")) or a bounded run (so that a model cannot loop on whitespace).
  bool allow_whitespace = true;
};

// Throws GrammarError naming the unsupported feature and where it is, e.g.
// "unsupported JSON Schema feature 'patternProperties' at #/properties/tags".
// Properties are generated in the schema's key order: pass the request's nlohmann::ordered_json;
// a plain nlohmann::json (sorted keys) orders them by name.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});
std::string json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options = {});
// Any JSON value whose top level is an object.
std::string json_object_gbnf(const JsonSchemaOptions& options = {});
// The whole output matches the pattern (ECMAScript-style syntax as JSON Schema uses; anchors
// ^ and $ at the ends are accepted and implied). Throws GrammarError on unsupported syntax
// (backreferences, lookaround).
std::string regex_to_gbnf(std::string_view pattern);
// Exactly one of the strings.
std::string choice_to_gbnf(const std::vector<std::string>& choices);

}  // namespace slab::grammar
