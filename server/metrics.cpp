#include "metrics.h"

#include <algorithm>
#include <cstdio>

namespace slab::server {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name + "{" + labels + "} " + number(value) + "\n";
}

// Prometheus label values escape backslash, quote and newline.
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                             0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                             30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

Metrics::Metrics(std::string model_name)
    : labels_("model_name=\"" + escape_label(model_name) + "\""), ttft_(kLatencyBuckets), itl_(kTokenLatencyBuckets),
      e2e_(kRequestBuckets), queue_(kRequestBuckets) {}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds) {
  std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}

void Metrics::observe_request(double e2e_seconds, double queue_seconds, FinishReason reason) {
  std::lock_guard lock(mutex_);
  e2e_.observe(e2e_seconds);
  queue_.observe(queue_seconds);
  ++finished_[finish_reason_name(reason)];
}

// Speculative decoding's counters (vLLM's spec_decode family), only when it is configured.
void Metrics::render_spec_decode(std::string& out, const api::EngineStats& s) const {
  const auto counter = [&](const char* name, const char* help, int64_t value) {
    header(out, name, "counter", help);
    sample(out, name, labels_, static_cast<double>(value));
  };
  counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", s.spec_num_drafts);
  counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", s.spec_num_draft_tokens);
  counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", s.spec_num_accepted_tokens);
  counter("vllm:spec_decode_num_emitted_tokens_total", "Number of emitted tokens.", s.spec_num_emitted_tokens);
  header(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
  for (size_t i = 0; i < s.spec_accepted_per_position.size(); ++i) {
    sample(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
           labels_ + ",position=\"" + std::to_string(i) + "\"", static_cast<double>(s.spec_accepted_per_position[i]));
  }
}

std::string Metrics::render(const api::EngineStats& s) const {
  std::string out;
  header(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  sample(out, "vllm:num_requests_running", labels_, s.num_running);
  header(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sample(out, "vllm:num_requests_waiting", labels_, s.num_waiting);
  header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample(out, "vllm:kv_cache_usage_perc", labels_, s.kv_cache_usage);
  header(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  sample(out, "vllm:prompt_tokens_total", labels_, static_cast<double>(s.prompt_tokens));
  header(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  sample(out, "vllm:generation_tokens_total", labels_, static_cast<double>(s.generation_tokens));
  header(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.");
  sample(out, "vllm:num_preemptions_total", labels_, static_cast<double>(s.num_preemptions));
  header(out, "vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.");
  sample(out, "vllm:prefix_cache_queries_total", labels_, static_cast<double>(s.prefix_query_tokens));
  header(out, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.");
  sample(out, "vllm:prefix_cache_hits_total", labels_, static_cast<double>(s.prefix_hit_tokens));
  // slabserve's own: how much of each engine step ran in parallel on the compute pool.
  header(out, "slabserve:engine_step_seconds_total", "counter", "Wall time of the engine's steps.");
  sample(out, "slabserve:engine_step_seconds_total", labels_, s.step_seconds);
  header(out, "slabserve:engine_parallel_seconds_total", "counter",
         "Wall time of the compute pool's parallel regions within the engine's steps; the rest of the step "
         "time is serial.");
  sample(out, "slabserve:engine_parallel_seconds_total", labels_, s.parallel_seconds);
  if (!s.forward_phase_seconds.empty()) {
    header(out, "slabserve:forward_phase_seconds_total", "counter",
           "Wall time of the model's forward passes by phase (linears, attention, norms, ...).");
    for (const auto& [phase, seconds] : s.forward_phase_seconds) {
      sample(out, "slabserve:forward_phase_seconds_total", labels_ + ",phase=\"" + escape_label(phase) + "\"", seconds);
    }
  }
  if (!s.spec_accepted_per_position.empty()) render_spec_decode(out, s);

  std::lock_guard lock(mutex_);
  header(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = finished_.find(reason);
    sample(out, "vllm:request_success_total", labels_ + ",finished_reason=\"" + reason + "\"",
           it == finished_.end() ? 0.0 : static_cast<double>(it->second));
  }
  header(out, "vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.");
  ttft_.render(out, "vllm:time_to_first_token_seconds", labels_);
  header(out, "vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.");
  itl_.render(out, "vllm:inter_token_latency_seconds", labels_);
  header(out, "vllm:e2e_request_latency_seconds", "histogram", "Histogram of end to end request latency in seconds.");
  e2e_.render(out, "vllm:e2e_request_latency_seconds", labels_);
  header(out, "vllm:request_queue_time_seconds", "histogram", "Histogram of time spent in WAITING phase for request.");
  queue_.render(out, "vllm:request_queue_time_seconds", labels_);
  return out;
}

}  // namespace slab::server
