#include "api_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "api_error.h"
#include "chat_completions.h"
#include "completions.h"
#include "http/exchange.h"
#include "tokenize.h"

namespace slab::server {
namespace {

// Compares in time that depends only on the lengths, so a client cannot find the key byte by
// byte from response times.
bool constant_time_equals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// "Authorization: Bearer KEY", the scheme in any case (RFC 9110: schemes are case-insensitive).
bool authorized(const http::HttpRequest& request, const std::string& key) {
  const std::optional<std::string_view> header = request.header("Authorization");
  if (!header) return false;
  std::string_view value = *header;
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size() || !http::equals_ignore_case(value.substr(0, kScheme.size()), kScheme))
    return false;
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return constant_time_equals(value, key);
}

void send_error(http::Exchange& exchange, int status, const std::string& message, const std::string& param = {}) {
  const std::string body = error_body(status, message, param).dump(-1, ' ', false, json::error_handler_t::replace);
  if (!exchange.responded()) {
    http::HeaderList headers;
    if (status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
    exchange.respond(status, "application/json", body, headers);
  } else if (exchange.streaming()) {
    // Headers are gone: the error becomes the stream's last event.
    exchange.write("data: " + body + "\n\n");
  }
}

enum class Auth { required, open };

// Every API handler runs inside this: the key check, then errors turned into OpenAI bodies.
template <typename Handler>
http::Handler api_route(const ServerOptions& options, Auth auth, Handler handler) {
  return [&options, auth, handler](http::Exchange& exchange) {
    if (auth == Auth::required && !options.api_key.empty() && !authorized(exchange.request(), options.api_key)) {
      return send_error(exchange, 401, "Unauthorized: a valid API key is required (Authorization: Bearer ...)");
    }
    try {
      handler(exchange);
    } catch (const ApiError& e) {
      send_error(exchange, e.status, e.what(), e.param);
    } catch (const nlohmann::json::exception& e) {
      // A field of the wrong JSON type in the client's body.
      send_error(exchange, 400, std::string("invalid request: ") + e.what());
    } catch (const std::exception& e) {
      spdlog::error("{} {}: internal error: {}", exchange.request().method, exchange.request().path, e.what());
      send_error(exchange, 500, std::string("internal error: ") + e.what());
    }
  };
}

}  // namespace

int resolved_http_threads(const ServerOptions& options) {
  if (options.http_threads > 0) return options.http_threads;
  return std::max(64, 2 * options.engine.max_num_seqs + 16);
}

void check_model_name(const std::string& requested, const ServerOptions& options) {
  if (!requested.empty() && requested != options.served_model_name) {
    throw ApiError(404, "The model '" + requested + "' does not exist.", "model");
  }
}

ApiServer::ApiServer(ServerOptions options) : options_(std::move(options)), metrics_(options_.served_model_name) {
  http::HttpServerOptions h;
  h.host = options_.host;
  h.port = options_.port;
  h.worker_threads = resolved_http_threads(options_);
  h.max_queued = static_cast<size_t>(std::max(1024, 4 * h.worker_threads));
  h.max_connections = static_cast<size_t>(options_.max_connections);
  h.idle_timeout = std::chrono::seconds(options_.http_idle_timeout_s);
  h.request_timeout = std::chrono::seconds(options_.http_request_timeout_s);
  h.limits.max_body_bytes = options_.max_request_bytes;
  h.on_quiet = options_.on_quiet;
  h.error_body = [](int status, const std::string& message) { return error_body(status, message).dump(); };
  http_ = std::make_unique<http::HttpServer>(std::move(h), routes());
}

ApiServer::~ApiServer() = default;

void ApiServer::set_model(std::unique_ptr<LoadedModel> loaded) {
  loaded_ = std::move(loaded);
  ready_.store(true, std::memory_order_release);
}

const LoadedModel& ApiServer::ready_model() const {
  if (draining_.load()) throw ApiError(503, "the server is shutting down");
  if (!ready_.load(std::memory_order_acquire)) throw ApiError(503, "the model is still loading");
  return *loaded_;
}

bool ApiServer::bind(std::string& error) { return http_->bind(error); }

void ApiServer::run() { http_->run(); }

void ApiServer::stop() { http_->stop(); }

void ApiServer::drain_and_stop(std::chrono::seconds timeout) {
  draining_.store(true);
  auto wait_idle = [this](std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (metrics_.calls_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return metrics_.calls_in_flight() == 0;
  };
  if (!wait_idle(timeout) && ready_.load(std::memory_order_acquire)) {
    spdlog::warn("shutdown: {} requests still running after {} s; aborting them", metrics_.calls_in_flight(),
                 timeout.count());
    loaded_->engine().abort_all();
    wait_idle(std::chrono::seconds(2));
  }
  stop();
}

http::Router ApiServer::routes() {
  using http::Exchange;
  using http::RouteKind;
  http::Router r;
  const ServerOptions& o = options_;
  auto json_response = [](Exchange& exchange, const json& body) {
    exchange.respond(200, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace));
  };
  auto model_card = [this](const LoadedModel& m) {
    return json{{"id", options_.served_model_name},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "slabserve"},
                {"root", options_.served_model_name},
                {"max_model_len", m.engine().max_model_len()},
                {"architecture", m.description().architecture},
                {"weights", m.description().weights}};
  };

  r.add("GET", "/health", RouteKind::light, api_route(o, Auth::open, [this](Exchange& exchange) {
          if (draining_.load()) throw ApiError(503, "the server is shutting down");
          if (!ready_.load(std::memory_order_acquire)) throw ApiError(503, "the model is still loading");
          exchange.respond(200, "", "");
        }));
  r.add("GET", "/version", RouteKind::light, api_route(o, Auth::open, [json_response](Exchange& exchange) {
          json_response(exchange, {{"version", SLAB_VERSION}});
        }));
  r.add("GET", "/v1/models", RouteKind::light,
        api_route(o, Auth::required, [this, json_response, model_card](Exchange& exchange) {
          json_response(exchange, {{"object", "list"}, {"data", json::array({model_card(ready_model())})}});
        }));
  r.add("GET", "/v1/models/*", RouteKind::light,
        api_route(o, Auth::required, [this, json_response, model_card](Exchange& exchange) {
          const std::string id = exchange.request().path.substr(std::string_view("/v1/models/").size());
          if (id != options_.served_model_name) throw ApiError(404, "The model '" + id + "' does not exist.", "model");
          json_response(exchange, model_card(ready_model()));
        }));
  r.add("GET", "/metrics", RouteKind::light,
        api_route(o, o.metrics_without_key ? Auth::open : Auth::required, [this](Exchange& exchange) {
          const api::EngineStats stats =
              ready_.load(std::memory_order_acquire) ? loaded_->engine().stats() : api::EngineStats{};
          exchange.respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(stats));
        }));
  r.add("POST", "/v1/completions", RouteKind::work, api_route(o, Auth::required, [this](Exchange& exchange) {
          handle_completions(ready_model(), options_, metrics_, exchange);
        }));
  r.add("POST", "/v1/chat/completions", RouteKind::work, api_route(o, Auth::required, [this](Exchange& exchange) {
          handle_chat_completions(ready_model(), options_, metrics_, exchange);
        }));
  r.add("POST", "/tokenize", RouteKind::work, api_route(o, Auth::required, [this](Exchange& exchange) {
          handle_tokenize(ready_model(), options_, exchange);
        }));
  r.add("POST", "/detokenize", RouteKind::work, api_route(o, Auth::required, [this](Exchange& exchange) {
          handle_detokenize(ready_model(), options_, exchange);
        }));
  return r;
}

}  // namespace slab::server
