#pragma once
// Typed reads of request-body fields. Every rejection is an ApiError(400) naming the field, so a
// client sees which part of its request is wrong. Bodies are ordered_json: chat templates print
// objects in the order the client sent them, as Python dicts do.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::server {

using json = nlohmann::ordered_json;

// Parses a request body that must be a JSON object.
json parse_json_object(const std::string& body);

// The field, or null when absent or JSON null (OpenAI treats both as "not given").
const json* find_field(const json& body, const char* name);

float read_number(const json& body, const char* name, float fallback, double lo, double hi);
int64_t read_integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi);
bool read_bool(const json& body, const char* name, bool fallback);
std::optional<std::string> read_string(const json& body, const char* name);
std::vector<int32_t> read_token_ids(const json& list, const char* name);

}  // namespace slab::server
