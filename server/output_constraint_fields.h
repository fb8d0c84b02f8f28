#pragma once
// The request fields that constrain the output, in the spellings clients send them: OpenAI's
// response_format (text, json_object, json_schema), vLLM's guided_json / guided_regex /
// guided_choice / guided_grammar and structured_outputs, and llama-server's grammar and
// json_schema. At most one may constrain a request; each becomes one GBNF grammar for the
// engine (Request::grammar).
#include <string>
#include <string_view>

#include "json_fields.h"

namespace slab::server {

inline constexpr std::string_view kOutputConstraintFieldNames[] = {
    "response_format", "guided_json",        "guided_regex", "guided_choice",
    "guided_grammar",  "structured_outputs", "grammar",      "json_schema"};

// The GBNF grammar the request's output must follow; empty when unconstrained. Throws
// ApiError(400) naming the field: a wrong shape, two constraints at once, an unsupported JSON
// Schema feature or regex syntax, GBNF that does not parse.
std::string parse_output_constraint(const json& body);

}  // namespace slab::server
