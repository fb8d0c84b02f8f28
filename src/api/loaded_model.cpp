// Loading a model for serving: config, tokenizer and chat template first (cheap, and the usual
// reasons a folder is refused), then the weights into a ModelRunner, then the Engine over it.
#include "slabserve/model.h"

#include <chrono>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "chat/template_source.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "model/packed_quant.h"
#include "runtime/placement.h"
#include "tokenizer/same_vocabulary.h"

namespace slab::api {

struct LoadedModel::Parts {
  // Declared in the order they are built; destroyed in reverse, so the engine stops before the
  // runner, model and tokenizer it uses go.
  ModelDescription description;
  Model model;  // config and generation defaults; the weights live packed in the runner
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;
  std::string chat_template_source;  // its text, for what it shows (the tool-call format)
  std::vector<int32_t> eos_token_ids;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<ModelRunner> draft_runner;  // speculative decoding with a draft model
  std::unique_ptr<slab::Engine> engine;
  mutable std::optional<Engine> api_engine;
};

namespace {

Placement resolve(const PlacementOptions& p) {
  return resolve_placement(Topology::system(), p.cpuset, p.numa_node, p.threads);
}

std::optional<std::string> read_chat_template_source(const std::filesystem::path& path, const std::string& option) {
  return option.empty() ? chat::read_model_chat_template(path) : chat::read_chat_template_option(option);
}

// Where the runner computes and keeps its memory. The pool's real bindings: the engine started
// it on its loop thread before its constructor returned.
std::string placement_summary(const ModelRunner& runner) {
  const std::string threads = runner.uses_reference() ? "1 thread (the scalar reference path), not pinned"
                                                      : describe_thread_bindings(runner.thread_bindings());
  const std::string memory = runner.numa_node() >= 0
                                 ? "weights and KV cache bound to NUMA node " + std::to_string(runner.numa_node())
                                 : "memory not bound to a NUMA node (first touch)";
  return threads + "; " + memory;
}

SamplingParams default_sampling(const GenerationConfig& g) {
  SamplingParams p;
  p.temperature = g.do_sample ? g.temperature : 0.0f;
  p.top_p = g.do_sample ? g.top_p : 1.0f;
  p.top_k = g.do_sample ? g.top_k : 0;
  return p;
}

constexpr const char* kNgram = "[ngram]";

bool uses_draft_model(const EngineOptions& o) { return !o.speculative_model.empty() && o.speculative_model != kNgram; }

EngineConfig engine_config(const EngineOptions& o) {
  EngineConfig c;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.block_size = o.block_size;
  c.kv_cache_bytes = o.kv_cache_bytes;
  if (o.kv_cache_tokens > 0) c.num_kv_blocks = (o.kv_cache_tokens + o.block_size - 1) / o.block_size;
  c.enable_prefix_caching = o.enable_prefix_caching;
  c.max_model_len = o.max_model_len;
  if (!o.speculative_model.empty()) {
    c.scheduler.speculative = {o.num_speculative_tokens, o.ngram_prompt_lookup_min, o.ngram_prompt_lookup_max,
                               o.speculative_disable_by_batch_size};
  }
  if (uses_draft_model(o)) c.scheduler.speculative.ngram_max = 0;  // the draft model proposes
  return c;
}

// Every speculative option is honoured or refused: none is accepted and then ignored.
std::string check_speculative_options(const EngineOptions& e) {
  if (e.speculative_model.empty()) {
    if (e.num_speculative_tokens != 0 || e.ngram_prompt_lookup_max != 0 || e.ngram_prompt_lookup_min != 1) {
      return "--num-speculative-tokens and --ngram-prompt-lookup-max/-min need --speculative-model "
             "(\"[ngram]\" or a draft model)";
    }
    return {};
  }
  if (e.num_speculative_tokens <= 0) {
    return "--speculative-model " + e.speculative_model + " needs --num-speculative-tokens > 0, got " +
           std::to_string(e.num_speculative_tokens);
  }
  if (e.num_speculative_tokens > 64) {
    return "--num-speculative-tokens " + std::to_string(e.num_speculative_tokens) + ": at most 64";
  }
  if (e.speculative_disable_by_batch_size < 0) {
    return "--speculative-disable-by-batch-size must be >= 0, got " +
           std::to_string(e.speculative_disable_by_batch_size);
  }
  if (uses_draft_model(e)) {
    if (e.ngram_prompt_lookup_max != 0 || e.ngram_prompt_lookup_min != 1) {
      return "--ngram-prompt-lookup-max/-min apply to --speculative-model \"[ngram]\" only, not to a draft model (" +
             e.speculative_model + ")";
    }
    return {};
  }
  if (e.ngram_prompt_lookup_max <= 0) {
    return "--speculative-model \"[ngram]\" needs --ngram-prompt-lookup-max > 0, got " +
           std::to_string(e.ngram_prompt_lookup_max);
  }
  if (e.ngram_prompt_lookup_min <= 0 || e.ngram_prompt_lookup_min > e.ngram_prompt_lookup_max) {
    return "--ngram-prompt-lookup-min " + std::to_string(e.ngram_prompt_lookup_min) + ": must be 1.." +
           std::to_string(e.ngram_prompt_lookup_max) + " (--ngram-prompt-lookup-max)";
  }
  return {};
}

std::string speculative_summary(const EngineOptions& o, const SpeculativeConfig& s) {
  if (s.num_speculative_tokens == 0) return "off";
  const std::string proposer = uses_draft_model(o) ? "draft model " + o.speculative_model + ", "
                                                   : "[ngram] n " + std::to_string(s.ngram_max) + " down to " +
                                                         std::to_string(s.ngram_min) + ", ";
  return proposer + std::to_string(s.num_speculative_tokens) + " tokens" +
         (s.disable_by_batch_size > 0 ? ", off above " + std::to_string(s.disable_by_batch_size) + " running" : "");
}

// The draft model of --speculative-model DIR, packed like the target (same kernels, threads,
// node and quantization), after its vocabulary is checked against the target's.
std::unique_ptr<ModelRunner> load_draft_runner(const LoadOptions& options, const Tokenizer& target_tokenizer,
                                               const Model& target, RunnerOptions runner_options) {
  const std::filesystem::path path = options.engine.speculative_model;
  const std::string what = "--speculative-model " + path.string();
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(what +
                             ": no such file or folder (a draft model's Hugging Face folder or GGUF file, "
                             "or \"[ngram]\" for prompt lookup)");
  }
  const Model draft = load_model_metadata(path);
  // Embedding tables may be padded differently past the tokenizer's tokens (Qwen2.5-0.5B and 7B);
  // the engine then drafts only ids both tables have.
  if (draft.config.vocab_size != target.config.vocab_size && draft.config.vocab_size < target_tokenizer.vocab_size()) {
    throw std::invalid_argument(what + ": the draft's vocabulary has " + std::to_string(draft.config.vocab_size) +
                                " tokens, the target " + options.model + "'s " +
                                std::to_string(target.config.vocab_size) + " and its tokenizer " +
                                std::to_string(target_tokenizer.vocab_size()) +
                                "; a draft must share the vocabulary (padding past the tokenizer's tokens may differ)");
  }
  const std::unique_ptr<Tokenizer> draft_tokenizer = load_tokenizer(path);
  if (std::string diff = vocabulary_difference(target_tokenizer, "the target " + options.model, *draft_tokenizer,
                                               "the draft " + path.string());
      !diff.empty()) {
    throw std::invalid_argument(what + ": its tokenizer differs from the target's: " + diff);
  }
  runner_options.on_load_progress = nullptr;  // the callback reports the target's tensors
  const std::unique_ptr<Checkpoint> checkpoint = open_model_checkpoint(path);
  return std::make_unique<ModelRunner>(draft, *checkpoint, runner_options);
}

}  // namespace

std::string check_placement(const PlacementOptions& placement) {
  try {
    (void)resolve(placement);
    return {};
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

std::string check_load_options(const LoadOptions& options) {
  if (options.dtype != "auto" && options.dtype != "bfloat16" && options.dtype != "float32") {
    return "--dtype " + options.dtype +
           ": expected auto, bfloat16 (the fastest kernels the CPU runs) or float32 (the scalar reference)";
  }
  const std::optional<WeightQuantization> quantization = parse_weight_quantization(options.quantization);
  if (!quantization) {
    return "--quantization " + options.quantization + ": expected " + weight_quantization_choices();
  }
  if (options.quantize_lm_head && !rtn_quant_format(*quantization)) {
    return std::string("--quantize-lm-head needs --quantization ") + rtn_quantization_choices();
  }
  if (options.dtype == "float32" && rtn_quant_format(*quantization)) {
    return "--quantization " + options.quantization +
           " runs on the quantized kernels; --dtype float32 (the scalar "
           "reference) has none";
  }
  const EngineOptions& e = options.engine;
  if (e.block_size <= 0 || e.block_size % 16 != 0) {
    return "--block-size must be a positive multiple of 16, got " + std::to_string(e.block_size);
  }
  if (e.max_num_seqs <= 0) return "--max-num-seqs must be positive, got " + std::to_string(e.max_num_seqs);
  if (e.max_num_batched_tokens <= 0) {
    return "--max-num-batched-tokens must be positive, got " + std::to_string(e.max_num_batched_tokens);
  }
  if (std::string error = check_speculative_options(e); !error.empty()) return error;
  return check_placement(options.placement);
}

LoadedModel::LoadedModel(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
LoadedModel::~LoadedModel() = default;

std::unique_ptr<LoadedModel> LoadedModel::load(const LoadOptions& options) {
  if (std::string error = check_load_options(options); !error.empty()) throw std::invalid_argument(error);
  const Placement placement = resolve(options.placement);
  const std::filesystem::path path = options.model;
  auto parts = std::make_unique<Parts>();
  parts->model = load_model_metadata(path);
  parts->description.weights = describe_model_weights(path);
  parts->tokenizer = load_tokenizer(path);
  if (std::optional<std::string> source = read_chat_template_source(path, options.chat_template)) {
    try {
      parts->chat_template.emplace(*source);
      parts->chat_template_source = *source;
    } catch (const chat::TemplateError& e) {
      throw std::runtime_error("the chat template " +
                               (options.chat_template.empty() ? "in " + path.string() : options.chat_template) +
                               " does not parse: " + e.what());
    }
  }

  const auto load_start = std::chrono::steady_clock::now();
  RunnerOptions runner_options;
  runner_options.n_threads = placement.threads();
  runner_options.cpu_list = placement.cpu_list();
  runner_options.numa_node = placement.numa_node;
  if (options.dtype == "float32") runner_options.kernels = KernelChoice::reference;
  runner_options.max_batched_tokens = options.engine.max_num_batched_tokens;
  runner_options.on_load_progress = options.on_load_progress;
  runner_options.quantization = *parse_weight_quantization(options.quantization);  // checked above
  runner_options.quantize_lm_head = options.quantize_lm_head;
  runner_options.amx = options.amx;
  {
    const std::unique_ptr<Checkpoint> checkpoint = open_model_checkpoint(path);
    parts->runner = std::make_unique<ModelRunner>(parts->model, *checkpoint, runner_options);
  }
  if (uses_draft_model(options.engine)) {
    parts->draft_runner = load_draft_runner(options, *parts->tokenizer, parts->model, runner_options);
  }
#ifdef __GLIBC__
  // Packing freed many matrix-sized staging buffers below glibc's (raised) mmap threshold; give
  // that heap back now rather than keep it resident for the server's lifetime (~250 MiB for a
  // 1.1B Q4_K_M file).
  malloc_trim(0);
#endif
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  parts->eos_token_ids = parts->model.config.eos_token_ids;
  if (std::optional<int32_t> eos = parts->tokenizer->eos_id()) parts->eos_token_ids.push_back(*eos);
  const EngineConfig config = engine_config(options.engine);
  parts->engine =
      std::make_unique<slab::Engine>(*parts->runner, parts->tokenizer.get(), config, parts->draft_runner.get());
  parts->api_engine.emplace(*parts->engine);

  const ModelConfig& c = parts->model.config;
  const slab::Engine& e = *parts->engine;
  ModelDescription& d = parts->description;
  d.path = options.model;
  d.architecture = c.model_type;
  d.num_layers = c.num_layers;
  d.hidden_size = c.hidden_size;
  d.num_heads = c.num_heads;
  d.num_kv_heads = c.num_kv_heads;
  d.vocab_size = c.vocab_size;
  d.max_position_embeddings = c.max_position_embeddings;
  d.bos_token_id = c.bos_token_id;
  d.compute = parts->runner->describe();
  d.placement = placement_summary(*parts->runner);
  d.weight_bytes = parts->runner->weight_bytes();
  d.weight_format = parts->runner->weight_format();
  d.quantized = parts->runner->has_quantized_weights();
  // /v1/models shows `weights`: say that the projections run quantized, and how.
  if (d.quantized) d.weights += "; runs as " + d.weight_format;
  d.load_seconds = load_s;
  d.max_model_len = e.max_model_len();
  d.kv_cache_blocks = e.num_kv_blocks();
  d.kv_block_size = e.block_size();
  d.kv_cache_bytes = e.kv_cache_bytes();
  d.kv_dtype = kv_dtype_name(e.kv_dtype());
  d.prefix_caching = config.enable_prefix_caching;
  d.max_num_seqs = config.scheduler.max_num_seqs;
  d.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  d.speculative = speculative_summary(options.engine, config.scheduler.speculative);
  if (e.draft_kv_cache_bytes() > 0) {
    d.speculative += ", draft KV cache " + std::to_string(e.draft_kv_cache_bytes() >> 20) + " MiB";
  }
  d.default_sampling = default_sampling(parts->model.generation);
  return std::unique_ptr<LoadedModel>(new LoadedModel(std::move(parts)));
}

const ModelDescription& LoadedModel::description() const { return parts_->description; }
const Tokenizer& LoadedModel::tokenizer() const { return *parts_->tokenizer; }
const std::vector<int32_t>& LoadedModel::eos_token_ids() const { return parts_->eos_token_ids; }
bool LoadedModel::has_chat_template() const { return parts_->chat_template.has_value(); }
const std::string& LoadedModel::chat_template_source() const { return parts_->chat_template_source; }
Engine& LoadedModel::engine() const { return *parts_->api_engine; }

std::string LoadedModel::render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt, const nlohmann::ordered_json& kwargs,
                                     std::time_t now) const {
  if (!parts_->chat_template) throw std::logic_error("the model has no chat template");
  const nlohmann::ordered_json special_tokens = {{"bos_token", parts_->tokenizer->bos_token()},
                                                 {"eos_token", parts_->tokenizer->eos_token()}};
  try {
    return chat::render_chat_request(*parts_->chat_template, messages, tools, add_generation_prompt, special_tokens,
                                     kwargs, now);
  } catch (const chat::TemplateRaisedError& e) {
    throw ChatTemplateError(e.what(), /*raised=*/true);
  } catch (const chat::TemplateError& e) {
    throw ChatTemplateError(e.what(), /*raised=*/false);
  }
}

std::vector<std::string> builtin_chat_template_names() { return chat::builtin_chat_template_names(); }
std::string builtin_chat_template_list() { return chat::builtin_chat_template_list(); }
bool chat_template_option_exists(const std::string& name_or_file) {
  return chat::builtin_chat_template(name_or_file).has_value() || std::filesystem::is_regular_file(name_or_file);
}

}  // namespace slab::api
