#pragma once
// The HTTP front end: routes, authentication, OpenAI-shaped responses and errors. It turns
// requests into token ids and generation calls and never touches tensors.
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "metrics.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace slab::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  std::string api_key;           // empty: no authentication
  size_t max_request_bytes = 8 << 20;
  // Connection threads: every open connection (a stream in progress, a request waiting for an
  // engine slot, an idle keep-alive) holds one. 0: 2 x max_num_seqs + 16, at least 64, so that
  // all running and many queued requests are served at once (cpp-httplib's own default is 8 on
  // a 2-core machine, which capped concurrent streams at 8 whatever --max-num-seqs said).
  int http_threads = 0;
  EngineConfig engine;
};

// The connection thread count ServerOptions::http_threads resolves to.
int resolved_http_threads(const ServerOptions& options);

// What the handlers serve from; filled in by the loader thread while /health says 503.
struct LoadedModel {
  Model model;  // config and generation defaults; the weights live packed in the runner
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;  // the checkpoint's, or --chat-template
  std::vector<int32_t> eos_token_ids;               // config, generation_config and tokenizer
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Engine> engine;  // last: stops before the runner, model and tokenizer go
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();

  // Publishes the loaded model; requests before this get 503.
  void set_model(std::unique_ptr<LoadedModel> loaded);
  // Blocks serving until stop(); returns false if the address cannot be bound.
  bool listen();
  void stop();
  // SIGTERM: refuse new work (503) and let what runs finish for up to `timeout`, then abort the
  // rest and stop listening.
  void drain_and_stop(std::chrono::seconds timeout);

 private:
  void install_routes();
  const LoadedModel& ready_model() const;  // throws ApiError(503) while loading

  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<LoadedModel> loaded_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> listen_returned_{false};
};

}  // namespace slab::server
