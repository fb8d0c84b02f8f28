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

// JSON Schema to GBNF (json_schema_to_gbnf): what is supported, and how.
//
// Keywords compiled:
//   type (one or a list), properties, required, additionalProperties, enum, const, anyOf,
//   oneOf, allOf with one member, $ref ("#", "#/$defs/NAME", "#/definitions/NAME"; recursive
//   references become recursive rules), items, prefixItems (and draft-7 array-form items with
//   additionalItems), minItems/maxItems, minLength/maxLength, pattern, format (date, time,
//   date-time, uuid, email, ipv4), integer minimum/maximum/exclusiveMinimum/exclusiveMaximum
//   (exact digit-range grammars; draft-4 boolean exclusive* too), number minimum 0 (no sign)
//   and exclusiveMinimum 0 (positive), uniqueItems false.
// Ignored (annotations): title, description, $schema, $id, $comment, default, examples,
//   deprecated, readOnly, writeOnly, and $defs/definitions themselves (compiled when referenced).
// Anything else throws GrammarError "unsupported JSON Schema feature 'X' at #/pointer".
//
// Decisions:
// - Properties come in schema order (the order of the ordered_json object; a plain
//   nlohmann::json has sorted keys, so that overload orders them by name). Required ones
//   always, optional ones may be left out. additionalProperties false or absent (where
//   properties are declared): no other keys, the strict behaviour of XGrammar and llama.cpp;
//   an object schema declaring no properties and no additionalProperties is any object.
//   additionalProperties true or a schema: any further keys after the declared ones, other than
//   the declared names (so no key repeats). Objects with no declared properties (any object, or
//   additionalProperties alone) may repeat a key: a context-free grammar cannot remember them.
// - oneOf is compiled as anyOf (exclusivity is not enforced). Keywords beside anyOf/oneOf/allOf
//   are merged into each branch; the same keyword on both sides is refused.
// - enum and const compile their values (in the ways JSON writers spell them); other keywords
//   beside them are assumed consistent and not applied.
// - No "type": the type is inferred from the keywords present (properties -> object, items ->
//   array, minLength/pattern/format -> string, minimum... -> number), else any JSON value.
// - "integer" is written without fraction or exponent (1.0 is refused though the schema allows it).
// - pattern is a full match (as if anchored ^...$) of the string's value, compiled by the regex
//   compiler over the JSON-encoded characters; pattern or format together with
//   minLength/maxLength is refused. Lengths count code points (an escaped surrogate pair is one).
// - Whitespace (allow_whitespace): between tokens nothing, one space, or one newline then up to
//   kMaxIndent spaces or tabs (llama.cpp's bound): json.dumps with its default separators, and
//   with indent=2 up to 10 levels of nesting (5 with indent=4), fit; a model cannot loop on
//   whitespace, and one that likes spaces (a small model sampled at temperature 1 put 40 in
//   every gap of the old "\n"? [ \t]{0,40}) cannot spend its context on them. None before or
//   after the value. Without allow_whitespace: none anywhere (compact).
// - Limits (constants in json_schema.cpp): counts (minItems, maxItems, minLength, maxLength) up
//   to kMaxCount, nesting up to kMaxDepth, at most kMaxRules generated rules, integer bounds
//   within +-10^18.
// - Formats: date = RFC 3339 full-date with real month lengths and leap years (years
//   0001-9999); time = RFC 3339 full-time without leap second 60; date-time joins them with T or
//   t; uuid = 8-4-4-4-12 hex digits, either case; email = dot-atom local part @ dot-separated
//   hostname labels (no quoted local parts or IP literals); ipv4 = dotted quad without leading
//   zeros.
//
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
