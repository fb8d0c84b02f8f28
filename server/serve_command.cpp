// `slabserve serve`: load a model in the background, serve the OpenAI-compatible API, stop
// cleanly on SIGINT/SIGTERM.
#include <csignal>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <thread>

#include "commands.h"
#include "http_server.h"

namespace slab::cli {
namespace {

struct ServeOptions {
  std::string model;
  server::ServerOptions server;
};

int run_serve(ServeOptions o) {
  std::filesystem::path dir = o.model.empty() ? default_model_dir() : std::filesystem::path(o.model);
  if (dir.empty()) {
    spdlog::error("no --model given and no default model found; pass --model DIR "
                  "(a Hugging Face folder with config.json, safetensors and a tokenizer)");
    return 2;
  }
  if (o.server.served_model_name.empty()) o.server.served_model_name = std::filesystem::absolute(dir).lexically_normal().filename().string();
  if (o.server.served_model_name.empty()) o.server.served_model_name = dir.string();

  // Signals are taken by one thread with sigwait, so that stopping the server happens outside a
  // signal handler. Blocked before any other thread starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::HttpServer http(o.server);
  int exit_code = 0;
  std::thread loader([&] {
    try {
      auto loaded = std::make_unique<server::LoadedModel>();
      loaded->model = load_model(dir);
      loaded->tokenizer = load_tokenizer(dir);
      const ModelConfig& c = loaded->model.config;
      spdlog::info("model {} ({}): {} layers, hidden {}, {} heads / {} KV heads, vocab {}, context {}",
                   o.server.served_model_name, c.model_type, c.num_layers, c.hidden_size, c.num_heads,
                   c.num_kv_heads, c.vocab_size, c.max_position_embeddings);
      http.set_model(std::move(loaded));
      spdlog::info("ready on http://{}:{}", o.server.host, o.server.port);
    } catch (const std::exception& e) {
      spdlog::error("cannot load the model: {}", e.what());
      exit_code = 1;
      http.stop();
    }
  });
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("signal {}: shutting down", sig);
      http.stop();
    }
  });

  spdlog::info("slabserve {} listening on {}:{} (loading {})", SLAB_VERSION, o.server.host, o.server.port, dir.string());
  if (!http.listen()) {
    if (exit_code == 0) {
      spdlog::error("cannot listen on {}:{}", o.server.host, o.server.port);
      exit_code = 1;
    }
  }
  loader.join();
  // Wake the signal thread if the server stopped for another reason.
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  return exit_code;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  cmd->add_option("--model,-m", options->model, "Hugging Face model folder (config.json, safetensors, tokenizer)");
  cmd->add_option("--host", options->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", options->server.port, "Port to listen on")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--served-model-name", options->server.served_model_name, "Model name clients use (default: the folder name)");
  cmd->add_option("--api-key", options->server.api_key, "Require this key as 'Authorization: Bearer KEY' on /v1 routes")
      ->envname("SLAB_API_KEY");
  cmd->add_option("--max-model-len", options->server.max_model_len, "Context length limit (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-request-bytes", options->server.max_request_bytes, "Largest request body accepted")
      ->capture_default_str();
  return [cmd, options]() { return cmd->parsed() ? run_serve(*options) : -1; };
}

}  // namespace slab::cli
