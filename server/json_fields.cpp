#include "json_fields.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

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
  throw ApiError(
      400, std::string("'") + name + "' must be between " + num(lo) + " and " + num(hi) + ", got " + v.dump(), name);
}

}  // namespace

namespace {

// nlohmann's SAX interface, building an ordered_json DOM under the limits parse_json_object
// promises.
// No API body has more than a few dozen fields, nor an object inside it (logit_bias: 300; a tool's
// schema: tens) thousands of members. Refusing at the first key over the limit makes a 100k-key
// body cost microseconds instead of ~10 ms of parsing on the reactor's heels (it doubled the
// time to first token of honest requests in the load-and-abuse soak).
constexpr size_t kMaxBodyFields = 256;
constexpr size_t kMaxObjectMembers = 4096;

class BoundedJsonBuilder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit BoundedJsonBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return add(nullptr) != nullptr; }
  bool boolean(bool v) { return add(v) != nullptr; }
  bool number_integer(number_integer_t v) { return add(v) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return add(v) != nullptr; }
  bool number_float(number_float_t v, const string_t&) { return add(v) != nullptr; }
  bool string(string_t& v) { return add(std::move(v)) != nullptr; }
  bool binary(binary_t& v) { return add(json::binary(std::move(v))) != nullptr; }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = stack_.back();
    auto* object = f.value->get_ptr<json::object_t*>();
    auto [it, inserted] = f.key_index.try_emplace(k, object->size());
    if (inserted) {
      const size_t limit = stack_.size() == 1 ? kMaxBodyFields : kMaxObjectMembers;
      if (object->size() >= limit) {
        error_ = "the request body has an object with more than " + std::to_string(limit) +
                 (stack_.size() == 1 ? " fields" : " members");
        return false;
      }
      // Straight onto the underlying vector: ordered_map's own insert scans for the key first.
      static_cast<json::object_t::Container&>(*object).emplace_back(std::move(k), nullptr);
      pending_ = &object->back().second;
    } else {
      pending_ = &(object->begin() + static_cast<std::ptrdiff_t>(it->second))->second;
    }
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (error_.empty()) error_ = std::string("the request body is not valid JSON: ") + e.what();
    return false;
  }

  json take() { return std::move(root_); }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value;
    std::unordered_map<std::string, size_t> key_index;  // objects only
  };

  json* add(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back().value;
    if (top.is_array()) {
      top.get_ptr<json::array_t*>()->push_back(std::move(v));
      return &top.get_ptr<json::array_t*>()->back();
    }
    *pending_ = std::move(v);
    return pending_;
  }

  bool open(json&& container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_ = "the request body nests objects and arrays deeper than " + std::to_string(max_depth_) +
               " levels (--max-json-depth)";
      return false;
    }
    json* placed = add(std::move(container));
    stack_.push_back(Frame{placed, {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  int max_depth_;
  json root_;
  std::vector<Frame> stack_;
  json* pending_ = nullptr;  // the value slot of the last key
  std::string error_;
};

}  // namespace

json parse_json_object(std::string_view body, int max_depth) {
  BoundedJsonBuilder builder(max_depth);
  if (!json::sax_parse(body, &builder) || !builder.error().empty()) {
    throw ApiError(400, builder.error().empty() ? "the request body is not valid JSON" : builder.error());
  }
  json parsed = builder.take();
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return parsed;
}

void reject_unknown_fields(const json& body, std::initializer_list<std::span<const std::string_view>> accepted,
                           std::initializer_list<UnsupportedField> unsupported) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();  // a plain reference: clang 14 cannot capture bindings
    if (std::any_of(accepted.begin(), accepted.end(), [&](std::span<const std::string_view> names) {
          return std::find(names.begin(), names.end(), key) != names.end();
        })) {
      continue;
    }
    for (const auto& [name, reason] : unsupported) {
      if (name == key) throw ApiError(400, "'" + key + "' is not supported: " + std::string(reason), key);
    }
    throw ApiError(400, "Unrecognized request argument supplied: '" + key + "'", key);
  }
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
  const bool in_range = v->is_number_unsigned() ? v->get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                                      static_cast<int64_t>(v->get<uint64_t>()) >= lo
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
                                              : t.is_number_integer() && t.get<int64_t>() >= 0 &&
                                                    t.get<int64_t>() <= static_cast<int64_t>(kMaxId);
    if (!valid) {
      throw ApiError(400, std::string("'") + name + "' must hold non-negative integer token ids", name);
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace slab::server
