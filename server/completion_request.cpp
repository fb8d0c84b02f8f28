#include "completion_request.h"

#include <limits>

#include "api_error.h"

namespace slab::server {
namespace {

using nlohmann::json;

// Reads an optional field of the given JSON kind; null counts as absent, as in OpenAI's API.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

float read_number(const json& body, const char* name, float fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw ApiError(400, std::string("'") + name + "' must be a number", name);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    throw ApiError(400, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                            std::to_string(hi) + ", got " + v->dump(), name);
  }
  return static_cast<float>(d);
}

int64_t read_integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) throw ApiError(400, std::string("'") + name + "' must be an integer", name);
  // Unsigned JSON integers above INT64_MAX would wrap in get<int64_t>(); compare them unsigned.
  const bool in_range = v->is_number_unsigned()
                            ? v->get<uint64_t>() <= static_cast<uint64_t>(hi) && static_cast<int64_t>(v->get<uint64_t>()) >= lo
                            : v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
  if (!in_range) {
    throw ApiError(400, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                            std::to_string(hi) + ", got " + v->dump(), name);
  }
  return v->get<int64_t>();
}

bool read_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw ApiError(400, std::string("'") + name + "' must be a boolean", name);
  return v->get<bool>();
}

std::vector<int32_t> read_token_ids(const json& list, const char* name) {
  std::vector<int32_t> ids;
  for (const json& t : list) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw ApiError(400, std::string("'") + name + "' must hold non-negative integer token ids", name);
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::vector<Prompt> read_prompts(const json& body) {
  const json* p = field(body, "prompt");
  if (p == nullptr) throw ApiError(400, "'prompt' is required", "prompt");
  if (p->is_string()) return {p->get<std::string>()};
  if (!p->is_array() || p->empty()) {
    throw ApiError(400, "'prompt' must be a string, a list of strings, a list of token ids or a list of lists of token ids", "prompt");
  }
  if ((*p)[0].is_number()) return {read_token_ids(*p, "prompt")};
  std::vector<Prompt> prompts;
  for (const json& item : *p) {
    if (item.is_string()) {
      prompts.emplace_back(item.get<std::string>());
    } else if (item.is_array() && !item.empty()) {
      prompts.emplace_back(read_token_ids(item, "prompt"));
    } else {
      throw ApiError(400, "each item of 'prompt' must be a string or a non-empty list of token ids", "prompt");
    }
  }
  return prompts;
}

}  // namespace

CompletionRequest parse_completion_request(const json& body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  CompletionRequest r;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw ApiError(400, "'model' must be a string", "model");
    r.model = m->get<std::string>();
  }
  r.prompts = read_prompts(body);
  if (field(body, "suffix") != nullptr) throw ApiError(400, "'suffix' is not supported", "suffix");
  if (field(body, "logprobs") != nullptr) r.logprobs = static_cast<int>(read_integer(body, "logprobs", 0, 0, 20));
  if (field(body, "best_of") != nullptr && read_integer(body, "best_of", 1, 1, 1) != 1) {
    throw ApiError(400, "'best_of' other than 1 is not supported", "best_of");
  }
  constexpr int64_t kMaxTokensLimit = std::numeric_limits<int32_t>::max();
  if (field(body, "max_tokens") != nullptr) r.max_tokens = static_cast<int>(read_integer(body, "max_tokens", 16, 0, kMaxTokensLimit));
  r.temperature = read_number(body, "temperature", 1.0f, 0.0, 2.0);
  r.top_p = read_number(body, "top_p", 1.0f, 1e-9, 1.0);
  r.top_k = static_cast<int>(read_integer(body, "top_k", 0, -1, std::numeric_limits<int32_t>::max()));
  if (r.top_k == -1) r.top_k = 0;  // vLLM spells "off" as -1
  r.min_p = read_number(body, "min_p", 0.0f, 0.0, 1.0);
  if (field(body, "seed") != nullptr) {
    r.seed = static_cast<uint64_t>(read_integer(body, "seed", 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  }
  r.n = static_cast<int>(read_integer(body, "n", 1, 1, 16));
  r.stream = read_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw ApiError(400, "'stream_options' must be an object", "stream_options");
    if (!r.stream) throw ApiError(400, "'stream_options' is only allowed when 'stream' is true", "stream_options");
    r.include_usage = read_bool(*so, "include_usage", false);
  }
  r.echo = read_bool(body, "echo", false);
  r.ignore_eos = read_bool(body, "ignore_eos", false);
  if (const json* s = field(body, "stop")) {
    if (s->is_string()) {
      r.stop.push_back(s->get<std::string>());
    } else if (s->is_array() && s->size() <= 16 && std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_string(); })) {
      for (const json& x : *s) r.stop.push_back(x.get<std::string>());
    } else {
      throw ApiError(400, "'stop' must be a string or a list of at most 16 strings", "stop");
    }
  }
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw ApiError(400, "'stop_token_ids' must be a list of token ids", "stop_token_ids");
    r.stop_token_ids = read_token_ids(*ids, "stop_token_ids");
  }
  return r;
}

}  // namespace slab::server
