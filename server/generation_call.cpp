#include "generation_call.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "api_error.h"

namespace slab::server {

GenerationCall::GenerationCall(api::Engine& engine, Metrics& metrics, std::string log_id)
    : engine_(engine), metrics_(metrics), log_id_(std::move(log_id)) {
  metrics_.call_started();
}

GenerationCall::~GenerationCall() {
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (!choices_[i].finished) {
      engine_.abort(ids_[i]);
      record_finish(i, FinishReason::abort, 0.0);
    }
  }
  metrics_.call_finished();
}

void GenerationCall::record_finish(size_t choice, FinishReason reason, double queue_seconds) {
  const ChoiceState& c = choices_[choice];
  const double e2e = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  metrics_.observe_request(e2e, queue_seconds, reason);
  spdlog::info("{}/{}: prompt {} tokens ({} cached), output {} tokens, ttft {:.3f}s, {:.1f} tokens/s, finish {}",
               log_id_, choice, c.prompt_tokens, c.cached_tokens, c.completion_tokens, c.ttft_seconds,
               c.completion_tokens > 1 ? (c.completion_tokens - 1) / std::max(e2e - c.ttft_seconds, 1e-9) : 0.0,
               finish_reason_name(reason));
}

void GenerationCall::submit(std::vector<Request> requests) {
  for (Request& r : requests) {
    try {
      ids_.push_back(engine_.submit(std::move(r), stream_));
    } catch (const std::invalid_argument& e) {
      throw ApiError(400, e.what());
    }
    choices_.emplace_back();
    last_token_at_.push_back(started_);
    choice_of_[ids_.back()] = ids_.size() - 1;
  }
}

std::optional<GenerationCall::Event> GenerationCall::next(std::chrono::milliseconds timeout) {
  std::optional<RequestOutput> out = stream_->next(timeout);
  if (!out) return std::nullopt;
  const size_t index = choice_of_.at(out->request_id);
  ChoiceState& c = choices_[index];
  if (!out->tokens.empty()) {
    const auto now = std::chrono::steady_clock::now();
    const double gap = std::chrono::duration<double>(now - last_token_at_[index]).count();
    if (c.completion_tokens == 0) {
      c.ttft_seconds = gap;
      metrics_.observe_time_to_first_token(gap);
    } else {
      metrics_.observe_inter_token_latency(gap);
    }
    last_token_at_[index] = now;
  }
  c.text += out->text;
  c.logprobs.insert(c.logprobs.end(), out->logprobs.begin(), out->logprobs.end());
  c.completion_tokens = out->completion_tokens;
  c.prompt_tokens = out->prompt_tokens;
  c.cached_tokens = out->cached_prompt_tokens;
  if (out->finished) {
    c.finished = true;
    c.finish_reason = out->finish_reason;
    c.error = out->error;
    record_finish(index, c.finish_reason, out->queue_seconds);
  }
  return Event{index, std::move(*out)};
}

bool GenerationCall::all_finished() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const ChoiceState& c) { return c.finished; });
}

json GenerationCall::usage(int prompt_tokens) const {
  int completion = 0;
  int cached = 0;
  for (const ChoiceState& c : choices_) {
    completion += c.completion_tokens;
    cached = std::max(cached, c.cached_tokens);
  }
  return {{"prompt_tokens", prompt_tokens},
          {"total_tokens", prompt_tokens + completion},
          {"completion_tokens", completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

uint64_t new_prefix_group() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

std::string make_response_id(const char* prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  static std::mutex m;
  std::lock_guard lock(m);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%016llx%08llx", prefix, static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return buf;
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace slab::server
