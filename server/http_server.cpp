#include "http_server.h"

#include <algorithm>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "api_error.h"
#include "chat_completions.h"
#include "completions.h"
#include "json_fields.h"
#include "tokenize.h"

namespace slab::server {

int resolved_http_threads(const ServerOptions& options) {
  if (options.http_threads > 0) return options.http_threads;
  return std::max(64, 2 * options.engine.scheduler.max_num_seqs + 16);
}
namespace {

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {}) {
  res.status = status;
  res.set_content(error_body(status, message, param).dump(), "application/json");
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(std::move(options)), metrics_(options_.served_model_name), http_(std::make_unique<httplib::Server>()) {
  install_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::set_model(std::unique_ptr<LoadedModel> loaded) {
  loaded_ = std::move(loaded);
  ready_.store(true, std::memory_order_release);
}

const LoadedModel& HttpServer::ready_model() const {
  if (draining_.load()) throw ApiError(503, "the server is shutting down");
  if (!ready_.load(std::memory_order_acquire)) throw ApiError(503, "the model is still loading");
  return *loaded_;
}

void HttpServer::drain_and_stop(std::chrono::seconds timeout) {
  draining_.store(true);
  auto wait_idle = [this](std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (metrics_.calls_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return metrics_.calls_in_flight() == 0;
  };
  if (!wait_idle(timeout) && ready_.load(std::memory_order_acquire)) {
    spdlog::warn("shutdown: {} requests still running after {} s; aborting them", metrics_.calls_in_flight(), timeout.count());
    loaded_->engine->abort_all();
    wait_idle(std::chrono::seconds(5));
  }
  stop();
}

bool HttpServer::listen() {
  const bool ok = http_->listen(options_.host, options_.port);
  listen_returned_.store(true);
  return ok;
}

void HttpServer::stop() {
  // A stop that comes before listen() got going (a model that fails to load at once) must not
  // be lost: wait until the server runs, or listen() gave up, then stop it.
  while (!http_->is_running() && !listen_returned_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

void HttpServer::install_routes() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_request_bytes);
  // Stopping waits for idle keep-alive connections to time out; a short timeout keeps SIGTERM
  // prompt, and clients simply reconnect.
  s.set_keep_alive_timeout(2);
  const int threads = resolved_http_threads(options_);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "Unauthorized: a valid API key is required (Authorization: Bearer ...)");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, 404, "no route " + req.method + " " + req.path);
    } else if (res.status == 413) {
      send_error(res, 413, "the request body is larger than the server accepts (--max-request-bytes)");
    } else {
      send_error(res, res.status, "HTTP error " + std::to_string(res.status));
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e.status, e.what(), e.param);
    } catch (const nlohmann::json::exception& e) {
      // A field of the wrong JSON type in the client's body.
      send_error(res, 400, std::string("invalid request: ") + e.what());
    } catch (const std::exception& e) {
      spdlog::error("internal error: {}", e.what());
      send_error(res, 500, std::string("internal error: ") + e.what());
    } catch (...) {
      send_error(res, 500, "internal error");
    }
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_.load(std::memory_order_acquire) && !draining_.load()) {
      res.status = 200;
    } else {
      send_error(res, 503, draining_.load() ? "the server is shutting down" : "the model is still loading");
    }
  });
  s.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"version", SLAB_VERSION}}.dump(), "application/json");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const LoadedModel& m = ready_model();
    const int max_len = m.engine->max_model_len();
    json model = {{"id", options_.served_model_name}, {"object", "model"}, {"created", 0},
                  {"owned_by", "slabserve"}, {"root", options_.served_model_name}, {"max_model_len", max_len}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completions(ready_model(), options_, metrics_, req, res);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_chat_completions(ready_model(), options_, metrics_, req, res);
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const EngineStats stats = ready_.load(std::memory_order_acquire) ? loaded_->engine->stats() : EngineStats{};
    res.set_content(metrics_.render(stats), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { handle_tokenize(ready_model(), req, res); });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { handle_detokenize(ready_model(), req, res); });
}

}  // namespace slab::server
