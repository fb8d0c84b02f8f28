#pragma once
// The OpenAI-compatible API on top of the HTTP layer: routes, authentication, OpenAI-shaped
// errors, the model being served, and the drain on shutdown. Handlers turn requests into token
// ids and generation calls; nothing here touches tensors.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "json_fields.h"
#include "metrics.h"
#include "slabserve/slabserve.h"

namespace slab::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  std::string api_key;               // empty: no authentication
  bool metrics_without_key = false;  // /metrics open to scrapers that have no key
  std::function<void()> on_quiet;    // see http::HttpServerOptions::on_quiet
  size_t max_request_bytes = 8 << 20;
  int max_json_depth = kDefaultMaxJsonDepth;
  // Sequences one request may create (prompts x n): one request of 2,000 prompts x 16 held
  // everyone else's first token for ten minutes.
  int max_sequences_per_request = 256;
  // Connection workers: every request in progress (a stream, a request waiting for an engine
  // slot) holds one; idle and half-sent connections hold none. 0: 2 x max_num_seqs + 16, at
  // least 64.
  int http_threads = 0;
  int max_connections = 4096;
  int http_idle_timeout_s = 5;      // keep-alive connections with no request in progress
  int http_request_timeout_s = 30;  // to receive one whole request, header and body
  api::EngineOptions engine;
  // Tool calls are parsed in this format (vLLM's --tool-call-parser names: hermes, llama3_json,
  // mistral), or "auto": the one the chat template shows.
  std::string tool_call_parser = "auto";
  // "qwen3" or "deepseek_r1": <think>...</think> goes to reasoning_content; "": none.
  std::string reasoning_parser;
};

// The worker count ServerOptions::http_threads resolves to.
int resolved_http_threads(const ServerOptions& options);

// What the handlers serve from; loaded by the loader thread while /health says 503.
using LoadedModel = api::LoadedModel;

// Throws ApiError(404) unless `requested` is empty or the served model's name.
void check_model_name(const std::string& requested, const ServerOptions& options);

class ApiServer {
 public:
  explicit ApiServer(ServerOptions options);
  ~ApiServer();

  // Publishes the loaded model; requests before this get 503.
  void set_model(std::unique_ptr<LoadedModel> loaded);
  // Binds the listening socket; false with `error` set when the address cannot be used.
  bool bind(std::string& error);
  int port() const { return http_->port(); }
  // Serves until stop() or drain_and_stop() has finished.
  void run();
  void stop();
  // SIGTERM: refuse new work (503) and let what runs finish for up to `timeout`, then abort the
  // rest and close every connection, whatever its clients do.
  void drain_and_stop(std::chrono::seconds timeout);

 private:
  http::Router routes();
  const LoadedModel& ready_model() const;  // throws ApiError(503) while loading or draining

  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<LoadedModel> loaded_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace slab::server
