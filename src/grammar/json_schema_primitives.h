#pragma once
// The fixed rules JSON Schema grammars share (json_schema.cpp emits those a schema uses): any
// JSON value, strings, numbers, booleans, null, whitespace and the string formats.
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace slab::grammar::detail {

// (name, body) in the order they are written; bodies refer to `ws`, which the compiler drops
// where whitespace is not allowed.
extern const std::vector<std::pair<std::string, std::string>> kJsonPrimitives;
// The primitives each primitive refers to.
extern const std::map<std::string, std::vector<std::string>> kJsonPrimitiveDependencies;
// format name -> (the expression between the quotes, the primitives it refers to).
extern const std::map<std::string, std::pair<std::string, std::vector<std::string>>> kJsonFormats;

}  // namespace slab::grammar::detail
