// `slabserve generate`: load a model, continue one prompt, print the text as it is produced and
// the speed at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "commands.h"
#include "load_progress.h"
#include "placement_flags.h"
#include "quantization_flag.h"
#include "speculative_flags.h"
#include "slabserve/slabserve.h"

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
  api::PlacementOptions placement;
  api::LoadOptions quantization;  // only its quantization fields are set by flags
  api::EngineOptions speculative;  // only its speculative decoding fields are set by flags
};

api::SamplingParams sampling_for(const GenerateOptions& o, const api::SamplingParams& defaults) {
  api::SamplingParams p = defaults;
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
  if (!check_placement_or_report(o.placement)) return 2;
  api::LoadOptions load;
  load.model = o.model;
  load.placement = o.placement;
  load.quantization = o.quantization.quantization;
  load.quantize_lm_head = o.quantization.quantize_lm_head;
  load.amx = o.quantization.amx;
  load.engine.speculative_model = o.speculative.speculative_model;
  load.engine.num_speculative_tokens = o.speculative.num_speculative_tokens;
  load.engine.ngram_prompt_lookup_max = o.speculative.ngram_prompt_lookup_max;
  load.engine.ngram_prompt_lookup_min = o.speculative.ngram_prompt_lookup_min;
  load.engine.speculative_disable_by_batch_size = o.speculative.speculative_disable_by_batch_size;
  if (const std::string error = api::check_load_options(load); !error.empty()) {
    std::cerr << "error: " << error << "\n";
    return 2;
  }
  // One sequence whose context is known up to the prompt's tokens, at most one per byte plus
  // the special tokens the tokenizer adds: a KV cache of that many tokens, and that context.
  load.engine.max_num_seqs = 1;
  load.engine.kv_cache_tokens = static_cast<int>(o.prompt.size()) + o.max_tokens + 16;
  load.engine.max_model_len = load.engine.kv_cache_tokens;
  std::unique_ptr<api::LoadedModel> model;
  {
    LoadProgressBar progress;
    load.on_load_progress = progress.callback();
    model = api::LoadedModel::load(load);
  }
  const api::Tokenizer& tokenizer = model->tokenizer();

  api::Request request;
  request.prompt = tokenizer.encode(o.prompt, /*add_special_tokens=*/true);
  if (request.prompt.empty()) {
    // An empty prompt starts from BOS.
    const int bos = tokenizer.bos_id().value_or(model->description().bos_token_id);
    if (bos < 0) {
      std::cerr << "error: the prompt is empty and the model defines no BOS token to start from\n";
      return 2;
    }
    request.prompt = {bos};
  }
  request.sampling = sampling_for(o, model->description().default_sampling);
  request.stop.max_tokens = o.max_tokens;
  request.stop.ignore_eos = o.ignore_eos;
  request.stop.eos_token_ids = model->eos_token_ids();

  auto stream = std::make_shared<api::RequestStream>();
  model->engine().submit(request, stream);
  std::cout << o.prompt << std::flush;
  api::RequestOutput last;
  while (!last.finished) {
    std::optional<api::RequestOutput> out = stream->next(std::chrono::milliseconds(1000));
    if (!out) continue;
    std::cout << out->text << std::flush;
    last = std::move(*out);
  }
  std::cout << std::endl;
  if (last.finish_reason == api::FinishReason::error) throw std::runtime_error(last.error);

  // The engine's own timestamps: the printing above may lag behind generation.
  const double prefill_s = last.first_token_seconds;
  const double decode_s = last.elapsed_seconds - last.first_token_seconds;
  const int decoded = std::max(0, last.completion_tokens - 1);
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s | finish: %s\n",
               request.prompt.size(), request.prompt.size() / std::max(prefill_s, 1e-9), last.completion_tokens,
               decoded / std::max(decode_s, 1e-9), api::finish_reason_name(last.finish_reason));
  if (!load.engine.speculative_model.empty()) {
    // The last step's counters are published just after its final event: wait for them.
    api::EngineStats stats = model->engine().stats();
    for (int i = 0; i < 1000 && stats.num_running > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      stats = model->engine().stats();
    }
    std::fprintf(stderr, "speculative: %lld of %lld draft tokens accepted in %lld drafts; %lld forward steps\n",
                 static_cast<long long>(stats.spec_num_accepted_tokens),
                 static_cast<long long>(stats.spec_num_draft_tokens), static_cast<long long>(stats.spec_num_drafts),
                 static_cast<long long>(stats.steps));
  }
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue one prompt and print the text and speed");
  cmd->add_option(
      "--model,-m", options->model,
      "Hugging Face model folder (config.json, safetensors, tokenizer), or a GGUF file (or a folder holding one)");
  cmd->add_option("--prompt,-p", options->prompt, "Prompt text; empty starts from BOS");
  cmd->add_option("-n,--max-tokens", options->max_tokens, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", options->temperature,
                  "Sampling temperature; 0 is greedy (default: the model's generation_config, else greedy)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", options->top_p, "Nucleus sampling mass")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", options->top_k, "Keep the k most likely tokens; 0 is off")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", options->seed, "Random seed for sampling");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past end-of-sequence tokens");
  add_placement_flags(*cmd, options->placement);
  add_quantization_flags(*cmd, options->quantization);
  add_speculative_flags(*cmd, options->speculative);
  return [cmd, options]() { return cmd->parsed() ? run_generate(*options) : -1; };
}

}  // namespace slab::cli
