#include "json_fields.h"

#include <limits>

#include "api_error.h"

namespace slab::server {
namespace {

[[noreturn]] void out_of_range(const char* name, double lo, double hi, const json& v) {
  auto num = [](double d) {
    std::string s = std::to_string(d);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  throw ApiError(400, std::string("'") + name + "' must be between " + num(lo) + " and " + num(hi) + ", got " + v.dump(), name);
}

}  // namespace

json parse_json_object(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return parsed;
}

const json* find_field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

float read_number(const json& body, const char* name, float fallback, double lo, double hi) {
  const json* v = find_field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw ApiError(400, std::string("'") + name + "' must be a number", name);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) out_of_range(name, lo, hi, *v);
  return static_cast<float>(d);
}

int64_t read_integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = find_field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) throw ApiError(400, std::string("'") + name + "' must be an integer", name);
  // Unsigned JSON integers above INT64_MAX would wrap in get<int64_t>(); compare them unsigned.
  const bool in_range = v->is_number_unsigned()
                            ? v->get<uint64_t>() <= static_cast<uint64_t>(hi) && static_cast<int64_t>(v->get<uint64_t>()) >= lo
                            : v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
  if (!in_range) out_of_range(name, static_cast<double>(lo), static_cast<double>(hi), *v);
  return v->get<int64_t>();
}

bool read_bool(const json& body, const char* name, bool fallback) {
  const json* v = find_field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw ApiError(400, std::string("'") + name + "' must be a boolean", name);
  return v->get<bool>();
}

std::optional<std::string> read_string(const json& body, const char* name) {
  const json* v = find_field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw ApiError(400, std::string("'") + name + "' must be a string", name);
  return v->get<std::string>();
}

std::vector<int32_t> read_token_ids(const json& list, const char* name) {
  if (!list.is_array()) throw ApiError(400, std::string("'") + name + "' must be a list of token ids", name);
  std::vector<int32_t> ids;
  for (const json& t : list) {
    constexpr uint64_t kMaxId = std::numeric_limits<int32_t>::max();
    const bool valid = t.is_number_unsigned() ? t.get<uint64_t>() <= kMaxId
                                              : t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= static_cast<int64_t>(kMaxId);
    if (!valid) {
      throw ApiError(400, std::string("'") + name + "' must hold non-negative integer token ids", name);
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace slab::server
