// `slabserve generate`: load a model, continue one prompt, print the text as it is produced and
// the speed at the end.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "engine/engine.h"
#include "load_progress.h"
#include "placement_flags.h"
#include "quantization_flag.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace slab::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  int max_tokens = 64;
  float temperature = -1.0f;  // negative: the checkpoint's generation_config decides
  float top_p = -1.0f;
  int top_k = -1;
  uint64_t seed = 0;
  bool ignore_eos = false;
  QuantizationFlags quantization;
  PlacementFlags placement;
};

SamplingParams sampling_for(const GenerateOptions& o, const GenerationConfig& defaults) {
  SamplingParams p;
  p.temperature = defaults.do_sample ? defaults.temperature : 0.0f;
  p.top_p = defaults.do_sample ? defaults.top_p : 1.0f;
  p.top_k = defaults.do_sample ? defaults.top_k : 0;
  if (o.temperature >= 0.0f) p.temperature = o.temperature;
  if (o.top_p >= 0.0f) p.top_p = o.top_p;
  if (o.top_k >= 0) p.top_k = o.top_k;
  p.seed = o.seed;
  return p;
}

int run_generate(const GenerateOptions& o) {
  if (o.model.empty()) {
    std::cerr << "error: " << kNoModelMessage << "\n";
    return 2;
  }
  const std::filesystem::path dir = o.model;
  const std::optional<Placement> placement = resolve_placement_or_report(o.placement);
  if (!placement) return 2;
  const Model model = load_model_metadata(dir);
  RunnerOptions runner_options = runner_options_for(*placement);
  if (!apply_quantization_or_report(o.quantization, runner_options)) return 2;
  std::unique_ptr<ModelRunner> runner;
  {
    LoadProgressBar progress;
    runner_options.on_load_progress = progress.callback();
    runner = load_model_runner(dir, runner_options);
  }
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);

  Request request;
  request.prompt = tokenizer->encode(o.prompt, /*add_special_tokens=*/true);
  if (request.prompt.empty()) {
    // An empty prompt starts from BOS.
    const int bos = tokenizer->bos_id().value_or(model.config.bos_token_id);
    if (bos < 0) {
      std::cerr << "error: the prompt is empty and the model defines no BOS token to start from\n";
      return 2;
    }
    request.prompt = {bos};
  }
  request.sampling = sampling_for(o, model.generation);
  request.stop.max_tokens = o.max_tokens;
  request.stop.ignore_eos = o.ignore_eos;
  request.stop.eos_token_ids = model.config.eos_token_ids;
  if (auto eos = tokenizer->eos_id()) request.stop.eos_token_ids.push_back(*eos);

  EngineConfig config;
  config.scheduler.max_num_seqs = 1;
  const int context = static_cast<int>(request.prompt.size()) + o.max_tokens + 1;
  config.num_kv_blocks = (std::min(context, model.config.max_position_embeddings) + config.block_size - 1) / config.block_size;
  Engine engine(*runner, tokenizer.get(), config);

  auto stream = std::make_shared<RequestStream>();
  engine.submit(request, stream);
  std::cout << o.prompt << std::flush;
  RequestOutput last;
  while (!last.finished) {
    std::optional<RequestOutput> out = stream->next(std::chrono::milliseconds(1000));
    if (!out) continue;
    std::cout << out->text << std::flush;
    last = std::move(*out);
  }
  std::cout << std::endl;
  if (last.finish_reason == FinishReason::error) throw std::runtime_error(last.error);

  // The engine's own timestamps: the printing above may lag behind generation.
  const double prefill_s = last.first_token_seconds;
  const double decode_s = last.elapsed_seconds - last.first_token_seconds;
  const int decoded = std::max(0, last.completion_tokens - 1);
  std::fprintf(stderr,
               "prompt: %zu tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s | finish: %s\n",
               request.prompt.size(), request.prompt.size() / std::max(prefill_s, 1e-9), last.completion_tokens,
               decoded / std::max(decode_s, 1e-9), finish_reason_name(last.finish_reason));
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue one prompt and print the text and speed");
  cmd->add_option("--model,-m", options->model, "Hugging Face model folder (config.json, safetensors, tokenizer), or a GGUF file (or a folder holding one)");
  cmd->add_option("--prompt,-p", options->prompt, "Prompt text; empty starts from BOS");
  cmd->add_option("-n,--max-tokens", options->max_tokens, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", options->temperature, "Sampling temperature; 0 is greedy (default: the model's generation_config, else greedy)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", options->top_p, "Nucleus sampling mass")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", options->top_k, "Keep the k most likely tokens; 0 is off")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", options->seed, "Random seed for sampling");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past end-of-sequence tokens");
  add_placement_flags(*cmd, options->placement);
  add_quantization_flags(*cmd, options->quantization);
  return [cmd, options]() { return cmd->parsed() ? run_generate(*options) : -1; };
}

}  // namespace slab::cli
