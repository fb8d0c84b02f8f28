// `slabserve serve`: load a model in the background while /health says 503, serve the
// OpenAI-compatible API, and on SIGINT/SIGTERM drain (503 to new work, in-flight requests finish
// within --shutdown-timeout, the rest are aborted) and exit 0.
#include <malloc.h>
#include <sys/resource.h>

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <csignal>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "api_server.h"
#include "commands.h"
#include "load_progress.h"
#include "placement_flags.h"
#include "quantization_flag.h"
#include "speculative_flags.h"

namespace slab::cli {
namespace {

struct ServeOptions {
  api::LoadOptions load;  // load.engine is server.engine, copied in when serving starts
  int shutdown_timeout_s = 30;
  server::ServerOptions server;
};

std::unique_ptr<server::LoadedModel> load_for_serving(const ServeOptions& o) {
  std::unique_ptr<server::LoadedModel> loaded;
  {
    LoadProgressBar progress;
    api::LoadOptions load = o.load;
    load.on_load_progress = progress.callback();
    loaded = api::LoadedModel::load(load);
  }
  if (!loaded->has_chat_template()) {
    spdlog::warn(
        "the model has no chat template: /v1/chat/completions will refuse requests (pass --chat-template FILE "
        "or one of {})",
        api::builtin_chat_template_list());
  }
  const api::ModelDescription& d = loaded->description();
  spdlog::info("model {} ({}; {}): {} layers, hidden {}, {} heads / {} KV heads, vocab {}, context {}, compute: {}",
               o.server.served_model_name, d.architecture, d.weights, d.num_layers, d.hidden_size, d.num_heads,
               d.num_kv_heads, d.vocab_size, d.max_model_len, d.compute);
  spdlog::info("placement: {}; weights {:.1f} MiB, loaded in {:.1f} s", d.placement, d.weight_bytes / double(1 << 20),
               d.load_seconds);
  spdlog::info("weights: {}", d.weight_format);
  spdlog::info(
      "KV cache: {} blocks of {} tokens ({} tokens, {:.1f} MiB {}), prefix caching {}; scheduler: {} sequences, "
      "{} tokens per step",
      d.kv_cache_blocks, d.kv_block_size, d.kv_cache_blocks * d.kv_block_size, d.kv_cache_bytes / double(1 << 20),
      d.kv_dtype, d.prefix_caching ? "on" : "off", d.max_num_seqs, d.max_num_batched_tokens);
  spdlog::info("speculative decoding: {}", d.speculative);
  return loaded;
}

// Connections cost a descriptor each; the usual soft limit of 1024 would cap them below
// --max-connections. Raised to the hard limit, and the connection cap kept under it.
void raise_open_files_limit(server::ServerOptions& options) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  const rlim_t usable = limit.rlim_cur > 128 ? limit.rlim_cur - 128 : 0;  // weights, logs, epoll...
  if (static_cast<rlim_t>(options.max_connections) > usable) {
    spdlog::warn("--max-connections {} is above what the open-files limit ({}) allows; using {}",
                 options.max_connections, limit.rlim_cur, usable);
    options.max_connections = static_cast<int>(usable);
  }
}

int run_serve(ServeOptions o) {
  if (o.load.model.empty()) {
    spdlog::error(kNoModelMessage);
    return 2;
  }
  const std::filesystem::path dir = o.load.model;
  if (o.server.served_model_name.empty()) {
    // The folder's name, or a model file's name without its extension.
    const std::filesystem::path path = std::filesystem::absolute(dir).lexically_normal();
    o.server.served_model_name = (std::filesystem::is_regular_file(path) ? path.stem() : path.filename()).string();
  }
  o.load.engine = o.server.engine;
  if (const std::string error = api::check_load_options(o.load); !error.empty()) {
    // Placement errors go to stderr as "error: ..." like generate's; the others through the log.
    if (api::check_placement(o.load.placement).empty()) {
      spdlog::error(error);
    } else {
      std::cerr << "error: " << error << "\n";
    }
    return 2;
  }

  // Signals are taken by one thread with sigwait, so that stopping the server happens outside a
  // signal handler. Blocked before any other thread starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGUSR1);  // wakes the signal thread when the server stops by itself
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client that disconnects must cost its request, never the process.
  std::signal(SIGPIPE, SIG_IGN);

  raise_open_files_limit(o.server);
  // Blocks freed by a burst of connections and requests stay in glibc's per-thread arenas (a
  // load-and-abuse soak left RSS +45 % above its start; malloc_trim brought it back to +3 %):
  // once the server is quiet, hand them back. (glibc's mmap threshold is left adaptive: fixed at
  // 256 KiB, every step's logits and activations were fresh mappings, page-faulted and zeroed
  // again each step: c=16 decode ran 23.0 instead of 30.9 tokens/s per stream.)
  o.server.on_quiet = [] { ::malloc_trim(0); };

  server::ApiServer http(o.server);
  std::string bind_error;
  if (!http.bind(bind_error)) {
    spdlog::error("cannot listen on {}:{}: {}", o.server.host, o.server.port, bind_error);
    return 1;
  }
  int exit_code = 0;
  std::thread loader([&] {
    try {
      http.set_model(load_for_serving(o));
      spdlog::info("ready on http://{}:{} ({} request workers, up to {} connections)", o.server.host, http.port(),
                   server::resolved_http_threads(o.server), o.server.max_connections);
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
      spdlog::info("signal {}: draining (up to {} s), then shutting down", sig, o.shutdown_timeout_s);
      http.drain_and_stop(std::chrono::seconds(o.shutdown_timeout_s));
    }
  });

  spdlog::info("slabserve {} listening on {}:{} (loading {})", SLAB_VERSION, o.server.host, http.port(), dir.string());
  http.run();
  loader.join();
  // Wake the signal thread if the server stopped for another reason (it ignores a late signal).
  pthread_kill(signal_waiter.native_handle(), SIGUSR1);
  signal_waiter.join();
  return exit_code;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  // --config belongs to the main app (CLI11 reads config files there); fallthrough lets it be
  // written after `serve` as users expect.
  cmd->fallthrough();
  cmd->add_option(
      "--model,-m", options->load.model,
      "Hugging Face model folder (config.json, safetensors, tokenizer), or a GGUF file (or a folder holding one)");
  cmd->add_option("--host", options->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", options->server.port, "Port to listen on")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--served-model-name", options->server.served_model_name,
                  "Model name clients use (default: the folder name)");
  cmd->add_option("--api-key", options->server.api_key,
                  "Require this key as 'Authorization: Bearer KEY' on every route but /health and /version")
      ->envname("SLAB_API_KEY");
  cmd->add_option(
         "--chat-template", options->load.chat_template,
         "Chat template overriding the model's: a Jinja file, or one built in: " + api::builtin_chat_template_list())
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            if (api::chat_template_option_exists(value)) return {};
            return value + ": no such file, and not a built-in chat template (" + api::builtin_chat_template_list() +
                   ")";
          },
          "NAME|FILE"));
  cmd->add_option("--tool-call-parser", options->server.tool_call_parser,
                  "Format the model writes tool calls in: hermes, llama3_json, mistral, or auto (the one its chat "
                  "template shows)")
      ->check(CLI::IsMember({"auto", "hermes", "llama3_json", "mistral"}))
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", options->server.reasoning_parser,
                  "Split <think>...</think> reasoning into reasoning_content: qwen3 or deepseek_r1 (off when absent)")
      ->check(CLI::IsMember({"qwen3", "deepseek_r1"}));
  cmd->add_option("--dtype", options->load.dtype,
                  "Compute dtype: auto or bfloat16 (BF16 kernels where the CPU has AVX2 or AVX-512 BF16), float32 "
                  "(scalar reference)")
      ->capture_default_str();
  cmd->add_option("--http-threads", options->server.http_threads,
                  "Request workers; each request in progress (a stream, one waiting for the engine) holds one, idle "
                  "and half-sent connections none (0: 2 x --max-num-seqs + 16, at least 64)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", options->server.max_request_bytes,
                  "Largest request body accepted, whatever its framing (413 above)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-json-depth", options->server.max_json_depth,
                  "Deepest nesting of objects and arrays accepted in a request body (400 above)")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--max-sequences-per-request", options->server.max_sequences_per_request,
                  "Most sequences one request may create, prompts x n (400 above)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", options->server.max_connections,
                  "Most open connections; beyond, new ones get 503 and are closed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--http-request-timeout", options->server.http_request_timeout_s,
                  "Seconds a client has to send one whole request, header and body (408 after)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--http-idle-timeout", options->server.http_idle_timeout_s,
                  "Seconds an idle keep-alive connection stays open")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag(
      "--metrics-without-key", options->server.metrics_without_key,
      "Serve /metrics without the API key (for scrapers); every other route but /health and /version needs it");
  cmd->add_option("--shutdown-timeout", options->shutdown_timeout_s,
                  "Seconds in-flight requests may finish after SIGTERM/SIGINT before they are aborted")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  api::EngineOptions& engine = options->server.engine;
  cmd->add_option("--max-model-len", engine.max_model_len, "Context length limit (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-num-seqs", engine.max_num_seqs, "Most sequences running at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-batched-tokens", engine.max_num_batched_tokens, "Most new tokens in one step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-size", engine.block_size, "Tokens per KV cache block (a multiple of 16)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option_function<double>(
         "--kv-cache-memory",
         [&engine](double gib) { engine.kv_cache_bytes = static_cast<size_t>(gib * (1ull << 30)); },
         "KV cache size in GiB (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-tokens", engine.kv_cache_tokens, "KV cache size in tokens (overrides --kv-cache-memory)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag_function(
      "--no-prefix-caching", [&engine](std::int64_t) { engine.enable_prefix_caching = false; },
      "Do not reuse cached KV blocks of shared prompt prefixes");
  add_speculative_flags(*cmd, engine);
  add_placement_flags(*cmd, options->load.placement);
  add_quantization_flags(*cmd, options->load);
  return [cmd, options]() { return cmd->parsed() ? run_serve(*options) : -1; };
}

}  // namespace slab::cli
