#include "sampling_fields.h"

#include <algorithm>
#include <limits>

#include "api_error.h"

namespace slab::server {

SamplingFields parse_sampling_fields(const json& body, std::initializer_list<const char*> max_tokens_names) {
  SamplingFields f;
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  for (const char* name : max_tokens_names) {
    if (find_field(body, name) != nullptr) {
      f.max_tokens = static_cast<int>(read_integer(body, name, 16, 1, kIntMax));
      break;
    }
  }
  f.temperature = read_number(body, "temperature", 1.0f, 0.0, 2.0);
  f.top_p = read_number(body, "top_p", 1.0f, 1e-9, 1.0);
  f.top_k = static_cast<int>(read_integer(body, "top_k", 0, -1, kIntMax));
  if (f.top_k == -1) f.top_k = 0;  // vLLM spells "off" as -1
  f.min_p = read_number(body, "min_p", 0.0f, 0.0, 1.0);
  f.repetition_penalty = read_number(body, "repetition_penalty", 1.0f, 1e-6, 100.0);
  f.presence_penalty = read_number(body, "presence_penalty", 0.0f, -2.0, 2.0);
  f.frequency_penalty = read_number(body, "frequency_penalty", 0.0f, -2.0, 2.0);
  if (const json* bias = find_field(body, "logit_bias")) {
    if (!bias->is_object())
      throw ApiError(400, "'logit_bias' must map token ids (as strings) to numbers", "logit_bias");
    if (bias->size() > kMaxLogitBiasEntries) {
      throw ApiError(400,
                     "'logit_bias' may hold at most " + std::to_string(kMaxLogitBiasEntries) + " entries, got " +
                         std::to_string(bias->size()),
                     "logit_bias");
    }
    for (const auto& [key, value] : bias->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id > kIntMax || !value.is_number() || value.get<double>() < -100.0 ||
          value.get<double>() > 100.0) {
        throw ApiError(400, "'logit_bias' must map token ids to numbers between -100 and 100; bad entry '" + key + "'",
                       "logit_bias");
      }
      f.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (find_field(body, "seed") != nullptr) {
    f.seed = static_cast<uint64_t>(
        read_integer(body, "seed", 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  }
  f.n = static_cast<int>(read_integer(body, "n", 1, 1, 16));
  f.min_tokens = static_cast<int>(read_integer(body, "min_tokens", 0, 0, kIntMax));
  f.ignore_eos = read_bool(body, "ignore_eos", false);
  if (const json* s = find_field(body, "stop")) {
    if (s->is_string()) {
      f.stop.push_back(s->get<std::string>());
    } else if (s->is_array() && s->size() <= 16 &&
               std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_string(); })) {
      for (const json& x : *s) f.stop.push_back(x.get<std::string>());
    } else {
      throw ApiError(400, "'stop' must be a string or a list of at most 16 strings", "stop");
    }
  }
  if (const json* ids = find_field(body, "stop_token_ids")) f.stop_token_ids = read_token_ids(*ids, "stop_token_ids");
  f.stream = read_bool(body, "stream", false);
  if (const json* so = find_field(body, "stream_options")) {
    if (!so->is_object()) throw ApiError(400, "'stream_options' must be an object", "stream_options");
    if (!f.stream) throw ApiError(400, "'stream_options' is only allowed when 'stream' is true", "stream_options");
    f.include_usage = read_bool(*so, "include_usage", false);
  }
  (void)read_string(body, "user");  // an end-user id for abuse tracking: nothing to honour, but a string
  if (find_field(body, "best_of") != nullptr && read_integer(body, "best_of", 1, 1, 1) != 1) {
    throw ApiError(400, "'best_of' other than 1 is not supported", "best_of");
  }
  return f;
}

Request make_engine_request(const SamplingFields& f, std::vector<int32_t> prompt, int max_model_len,
                            const std::vector<int32_t>& eos_token_ids, uint64_t seed, int logprobs) {
  const int prompt_len = static_cast<int>(prompt.size());
  const int room = max_model_len - prompt_len;
  if (room <= 0) {
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(max_model_len) +
                       " tokens. However, the prompt has " + std::to_string(prompt_len) +
                       " tokens, which leaves no room for the completion. Please reduce the length of the prompt.",
                   "messages");
  }
  const int max_tokens = f.max_tokens.value_or(room);
  if (max_tokens > room) {
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(max_model_len) +
                       " tokens. However, you requested " +
                       std::to_string(static_cast<int64_t>(prompt_len) + max_tokens) + " tokens (" +
                       std::to_string(prompt_len) + " in the messages, " + std::to_string(max_tokens) +
                       " in the completion). Please reduce the length of the messages or completion.",
                   "max_tokens");
  }
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = f.temperature;
  r.sampling.top_p = f.top_p;
  r.sampling.top_k = f.top_k;
  r.sampling.min_p = f.min_p;
  r.sampling.repetition_penalty = f.repetition_penalty;
  r.sampling.presence_penalty = f.presence_penalty;
  r.sampling.frequency_penalty = f.frequency_penalty;
  r.sampling.logit_bias = f.logit_bias;
  r.sampling.seed = seed;
  r.sampling.logprobs = logprobs;
  r.stop.max_tokens = max_tokens;
  r.stop.min_tokens = std::min(f.min_tokens, max_tokens);
  r.stop.ignore_eos = f.ignore_eos;
  r.stop.stop_token_ids = f.stop_token_ids;
  r.stop.stop_strings = f.stop;
  r.stop.eos_token_ids = eos_token_ids;
  r.grammar = f.grammar;
  r.skip_special_tokens = f.skip_special_tokens;
  return r;
}

}  // namespace slab::server
