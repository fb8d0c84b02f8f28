#pragma once
// Output constraints for Request::grammar: the GBNF grammar an output must follow, and the
// converters that make one from a JSON Schema, "any JSON object", a regular expression or a list
// of choices. A GrammarError (std::invalid_argument) names what is unsupported or wrong; the
// engine's submit() throws it too for a grammar that does not compile.
#include "grammar/json_schema.h"

namespace slab::api {

using slab::grammar::choice_to_gbnf;
using slab::grammar::Grammar;
using slab::grammar::GrammarError;
using slab::grammar::json_object_gbnf;
using slab::grammar::json_schema_to_gbnf;
using slab::grammar::JsonSchemaOptions;
using slab::grammar::regex_to_gbnf;

}  // namespace slab::api
