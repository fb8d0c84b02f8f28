#pragma once
// Typed reads of request-body fields. Every rejection is an ApiError(400) naming the field, so a
// client sees which part of its request is wrong. Bodies are ordered_json: chat templates print
// objects in the order the client sent them, as Python dicts do.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::server {

using json = nlohmann::ordered_json;

// Parses a request body that must be a JSON object, in time linear in its size: keys are
// indexed while an object is built (ordered_json's own insert scans every key, so 100k keys took
// 20 s), nesting deeper than `max_depth` is refused before anything recursive sees it, and a
// repeated key keeps its first position and its last value, as Python's json does. The body may
// have at most 256 fields and any object inside it at most 4096 members.
json parse_json_object(std::string_view body, int max_depth);
inline constexpr int kDefaultMaxJsonDepth = 64;

// Refuses every top-level field of `body` that is not in `accepted`, naming it: a parameter the
// server does not honour is an error, never silently ignored. `unsupported` maps fields that are
// known (OpenAI's or vLLM's) but not implemented to the reason given.
struct UnsupportedField {
  std::string_view name;
  std::string_view reason;
};
void reject_unknown_fields(const json& body, std::initializer_list<std::span<const std::string_view>> accepted,
                           std::initializer_list<UnsupportedField> unsupported = {});

// The field, or null when absent or JSON null (OpenAI treats both as "not given").
const json* find_field(const json& body, const char* name);

float read_number(const json& body, const char* name, float fallback, double lo, double hi);
int64_t read_integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi);
bool read_bool(const json& body, const char* name, bool fallback);
std::optional<std::string> read_string(const json& body, const char* name);
std::vector<int32_t> read_token_ids(const json& list, const char* name);

}  // namespace slab::server
