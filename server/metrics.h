#pragma once
// Prometheus metrics under vLLM's names and meanings, so dashboards built for vLLM work
// unchanged. Gauges and token counters come from the engine's stats at scrape time; latency
// histograms and finish counts are observed by the HTTP handlers as requests complete.
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "slabserve/engine.h"

namespace slab::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_request(double e2e_seconds, double queue_seconds, FinishReason reason);

  std::string render(const api::EngineStats& engine) const;

  // HTTP calls that hold engine requests (a drain waits for these to reach zero).
  void call_started() { calls_in_flight_.fetch_add(1); }
  void call_finished() { calls_in_flight_.fetch_sub(1); }
  int calls_in_flight() const { return calls_in_flight_.load(); }

 private:
  void render_spec_decode(std::string& out, const api::EngineStats& s) const;

  std::string labels_;  // model_name="..."
  mutable std::mutex mutex_;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  Histogram queue_;
  std::map<std::string, uint64_t> finished_;  // by finish reason
  std::atomic<int> calls_in_flight_{0};
};

}  // namespace slab::server
