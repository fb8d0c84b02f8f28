// quant_kl: how far a quantized model's next-token distributions drift from the unquantized
// model's, measured the way llama.cpp's `llama-perplexity --kl-divergence` measures it, so the
// two tools' figures can sit side by side (bench/quant_accuracy.py runs both on the same text).
//
// Positions: the token stream is cut into chunks of --ctx tokens (whole chunks only, the tail is
// dropped); each chunk is run from position 0 with its first token replaced by BOS, and only the
// second half is scored: the logits at positions ctx/2 .. ctx-2, each predicting the next token
// of the chunk, ctx/2 - 1 positions per chunk. The reference runner goes first; its logits for
// the scored positions are kept (FP32, as the model produced them) and every --test runner is
// then loaded in turn and compared position by position.
//
// Per position: KL(ref || test) = sum_v p_ref(v) (log p_ref(v) - log p_test(v)) in nats over
// the full vocabulary, both log-softmaxes in double. Reported: mean KL with its standard error
// (sample variance / (n - 1)), max, 99th percentile (linear between the sorted values), how
// often the two argmaxes agree (llama-perplexity's "Same top p") with its standard error, and
// both perplexities of the text (a check that the reference matches llama.cpp's base model).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kv/contiguous_kv_cache.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "model/packed_quant.h"
#include "tokenizer/tokenizer.h"

namespace slab::bench {
namespace {

struct Options {
  std::string model;               // HF folder or GGUF file: the reference and the tokenizer
  std::string reference = "none";  // quantization of the reference runner
  std::vector<std::string> tests;  // "w8", "w4+lm_head", "path/to/file.gguf"...
  std::string text_file, tokens_file;
  int ctx = 512;
  int chunks = -1;  // -1: every whole chunk
  int batch = 0;    // tokens per forward call; 0: the whole chunk
  int threads = 0;
  std::string kernels = "auto";  // the test runners' kernel set (the reference takes the best)
  bool print_tokens = false;
};

// A runner to load: a checkpoint path and how its projections are held.
struct RunnerSpec {
  std::string label, path;
  WeightQuantization quantization = WeightQuantization::none;
  bool quantize_lm_head = false;
};

bool is_gguf_path(const std::string& s) { return s.size() > 5 && s.substr(s.size() - 5) == ".gguf"; }

// "w8", "w4g128+lm_head", "none", or a GGUF path (its Q8_0/Q4_0 blocks repacked as they are,
// everything else decoded to BF16: the automatic mode slabserve serves such a file with).
RunnerSpec parse_spec(const std::string& spec, const std::string& model) {
  RunnerSpec r;
  r.label = spec;
  if (is_gguf_path(spec)) {
    r.path = spec;
    r.quantization = WeightQuantization::automatic;
    return r;
  }
  r.path = model;
  std::string mode = spec;
  const std::string head_suffix = "+lm_head";
  if (mode.size() > head_suffix.size() && mode.substr(mode.size() - head_suffix.size()) == head_suffix) {
    mode.resize(mode.size() - head_suffix.size());
    r.quantize_lm_head = true;
  }
  const std::optional<WeightQuantization> q = parse_weight_quantization(mode);
  if (!q || (r.quantize_lm_head && !rtn_quant_format(*q))) {
    throw std::invalid_argument("--test " + spec + ": expected " + weight_quantization_choices() +
                                " (+lm_head for the last four) or a .gguf file");
  }
  r.quantization = *q;
  return r;
}

std::unique_ptr<ModelRunner> load(const RunnerSpec& spec, int threads, KernelChoice kernels = KernelChoice::automatic) {
  RunnerOptions ro;
  ro.n_threads = threads;
  ro.kernels = kernels;
  ro.quantization = spec.quantization;
  ro.quantize_lm_head = spec.quantize_lm_head;
  auto runner = load_model_runner(spec.path, ro);
  std::printf("%s: %s | %s\n", spec.label.c_str(), runner->weight_format().c_str(), runner->describe().c_str());
  std::fflush(stdout);
  return runner;
}

std::vector<int> read_tokens(const Options& o) {
  std::vector<int> tokens;
  if (!o.tokens_file.empty()) {
    std::ifstream in(o.tokens_file);
    if (!in) throw std::runtime_error("cannot open " + o.tokens_file);
    int t;
    while (in >> t) tokens.push_back(t);
    return tokens;
  }
  std::ifstream in(o.text_file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + o.text_file);
  std::stringstream ss;
  ss << in.rdbuf();
  // With the tokenizer's own BOS rule, as llama-perplexity tokenizes its text (add_special).
  const std::vector<int32_t> ids = load_tokenizer(o.model)->encode(ss.str(), true);
  return {ids.begin(), ids.end()};
}

// The logits of positions [first, ctx - 1) of every chunk, rows of `vocab`, chunk after chunk.
std::vector<float> scored_logits(ModelRunner& runner, const std::vector<int>& tokens, int n_chunks, int ctx, int batch,
                                 int bos) {
  const ModelConfig& c = runner.config();
  const int vocab = c.vocab_size, first = ctx / 2, scored = ctx - 1 - first;
  KvGeometry g{c.num_layers, c.num_kv_heads, c.head_dim, 16};
  ContiguousKvCache cache(g, 1, ctx, runner.kv_dtype(), runner.numa_node());
  std::vector<float> out(static_cast<size_t>(n_chunks) * scored * vocab);
  for (int ch = 0; ch < n_chunks; ++ch) {
    std::vector<int> chunk(tokens.begin() + static_cast<ptrdiff_t>(ch) * ctx,
                           tokens.begin() + static_cast<ptrdiff_t>(ch + 1) * ctx);
    chunk[0] = bos;
    // The cache is overwritten from position 0: each chunk is a fresh sequence.
    for (int pos = 0; pos < ctx; pos += batch) {
      const int n = std::min(batch, ctx - pos);
      const std::vector<int> part(chunk.begin() + pos, chunk.begin() + pos + n);
      const std::vector<float> logits = runner.forward({part, {{0, pos, n, cache.block_table(0)}}, true}, cache);
      for (int i = 0; i < n; ++i) {
        const int p = pos + i;
        if (p < first || p >= ctx - 1) continue;
        std::copy_n(logits.begin() + static_cast<ptrdiff_t>(i) * vocab, vocab,
                    out.begin() + (static_cast<ptrdiff_t>(ch) * scored + (p - first)) * vocab);
      }
    }
  }
  return out;
}

// log-softmax of a row in double.
void log_softmax(const float* logits, int n, std::vector<double>& out) {
  double mx = logits[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(logits[i] - mx);
  const double lse = mx + std::log(sum);
  out.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = logits[i] - lse;
}

int argmax(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

// Mean and its standard error, as llama-perplexity computes them.
std::pair<double, double> mean_and_error(double sum, double sum2, size_t n) {
  const double mean = sum / static_cast<double>(n);
  const double var = sum2 / static_cast<double>(n) - mean * mean;
  return {mean, n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0};
}

double percentile(const std::vector<double>& sorted, double fraction) {
  const double p = fraction * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(p);
  const double t = p - static_cast<double>(i);
  return (1 - t) * sorted[i] + t * sorted[std::min(i + 1, sorted.size() - 1)];
}

struct Comparison {
  std::pair<double, double> kl, same_top, nll, nll_ref;
  double kl_max = 0, kl_p99 = 0;
  size_t positions = 0;
};

Comparison compare(const std::vector<float>& ref, const std::vector<float>& test, const std::vector<int>& tokens,
                   int n_chunks, int ctx, int vocab) {
  const int first = ctx / 2, scored = ctx - 1 - first;
  std::vector<double> lr, lt, kls;
  double kl = 0, kl2 = 0, nll = 0, nll2 = 0, nll_ref = 0, nll_ref2 = 0;
  size_t same = 0;
  for (int ch = 0; ch < n_chunks; ++ch) {
    for (int j = 0; j < scored; ++j) {
      const size_t row = (static_cast<size_t>(ch) * scored + static_cast<size_t>(j)) * static_cast<size_t>(vocab);
      log_softmax(ref.data() + row, vocab, lr);
      log_softmax(test.data() + row, vocab, lt);
      double d = 0.0;
      for (size_t v = 0; v < lr.size(); ++v) d += std::exp(lr[v]) * (lr[v] - lt[v]);
      kls.push_back(d);
      kl += d;
      kl2 += d * d;
      const int next = tokens[static_cast<size_t>(ch) * ctx + first + j + 1];
      const double n_t = -lt[static_cast<size_t>(next)], n_r = -lr[static_cast<size_t>(next)];
      nll += n_t;
      nll2 += n_t * n_t;
      nll_ref += n_r;
      nll_ref2 += n_r * n_r;
      same += argmax(ref.data() + row, vocab) == argmax(test.data() + row, vocab);
    }
  }
  Comparison c;
  c.positions = kls.size();
  c.kl = mean_and_error(kl, kl2, c.positions);
  c.nll = mean_and_error(nll, nll2, c.positions);
  c.nll_ref = mean_and_error(nll_ref, nll_ref2, c.positions);
  const double p = static_cast<double>(same) / static_cast<double>(c.positions);
  c.same_top = {p, std::sqrt(p * (1 - p) / static_cast<double>(c.positions - 1))};
  std::sort(kls.begin(), kls.end());
  c.kl_max = kls.back();
  c.kl_p99 = percentile(kls, 0.99);
  return c;
}

int run(const Options& o) {
  const std::vector<int> tokens = read_tokens(o);
  if (o.print_tokens) {  // for comparing with another tokenizer's ids (quant_accuracy.py)
    for (size_t i = 0; i < tokens.size(); ++i) std::printf(i ? " %d" : "%d", tokens[i]);
    std::printf("\n");
    return 0;
  }
  if (o.tests.empty()) {
    std::fprintf(stderr, "error: give at least one --test\n");
    return 2;
  }
  const int n_max = static_cast<int>(tokens.size()) / o.ctx;
  const int n_chunks = o.chunks < 0 ? n_max : std::min(o.chunks, n_max);
  if (n_chunks < 1 || o.ctx < 4) {
    std::fprintf(stderr, "error: %zu tokens make no whole chunk of --ctx %d\n", tokens.size(), o.ctx);
    return 2;
  }
  const int batch = o.batch > 0 ? o.batch : o.ctx;
  const RunnerSpec ref_spec = parse_spec(o.reference, o.model);
  std::vector<RunnerSpec> tests;
  for (const std::string& t : o.tests) tests.push_back(parse_spec(t, o.model));

  int bos = -1, vocab = 0;
  size_t ref_bytes = 0;
  std::vector<float> ref;
  {
    auto runner = load(ref_spec, o.threads);
    ref_bytes = runner->weight_bytes();
    bos = runner->config().bos_token_id;
    vocab = runner->config().vocab_size;
    if (bos < 0) {
      const auto tk = load_tokenizer(o.model);
      bos = tk->bos_id().value_or(-1);
    }
    if (bos < 0) throw std::runtime_error("the model names no BOS token");
    if (runner->config().max_position_embeddings > 0 && o.ctx > runner->config().max_position_embeddings) {
      std::fprintf(stderr, "error: --ctx %d exceeds the model's %d positions\n", o.ctx,
                   runner->config().max_position_embeddings);
      return 2;
    }
    ref = scored_logits(*runner, tokens, n_chunks, o.ctx, batch, bos);
  }
  std::printf("text: %zu tokens, %d chunks of %d (BOS %d), %d scored positions each, %d tokens per forward call\n",
              tokens.size(), n_chunks, o.ctx, bos, o.ctx - 1 - o.ctx / 2, batch);
  for (const RunnerSpec& spec : tests) {
    std::vector<float> got;
    double bits_per_weight = 0;
    {
      // AVX2 on an AVX-512 machine: the kernels (and the W8 decode's INT16 activations) of the
      // AVX2-only EPYCs.
      auto runner = load(spec, o.threads,
                         o.kernels == "avx2"          ? KernelChoice::avx2
                         : o.kernels == "avx512_bf16" ? KernelChoice::avx512_bf16
                                                      : KernelChoice::automatic);
      // All weights (embedding, norms and head included), relative to the BF16 reference.
      bits_per_weight = 16.0 * static_cast<double>(runner->weight_bytes()) / static_cast<double>(ref_bytes);
      if (runner->config().vocab_size != vocab) {
        std::fprintf(stderr, "error: %s has vocabulary %d, the reference %d\n", spec.label.c_str(),
                     runner->config().vocab_size, vocab);
        return 2;
      }
      got = scored_logits(*runner, tokens, n_chunks, o.ctx, batch, bos);
    }
    const Comparison c = compare(ref, got, tokens, n_chunks, o.ctx, vocab);
    std::printf(
        "%s vs %s: mean KL %.6f ± %.6f nats, max %.6f, 99%% %.6f, same top-1 %.3f ± %.3f %%, PPL %.4f (ref %.4f), "
        "%zu positions, %.2f bits/weight\n",
        spec.label.c_str(), ref_spec.label.c_str(), c.kl.first, c.kl.second, c.kl_max, c.kl_p99, 100 * c.same_top.first,
        100 * c.same_top.second, std::exp(c.nll.first), std::exp(c.nll_ref.first), c.positions, bits_per_weight);
    // One tab-separated line per test for scripts.
    std::printf("RESULT\t%s\t%.8f\t%.8f\t%.8f\t%.8f\t%.6f\t%.6f\t%.6f\t%.6f\t%zu\t%.3f\n", spec.label.c_str(),
                c.kl.first, c.kl.second, c.kl_max, c.kl_p99, c.same_top.first, c.same_top.second, std::exp(c.nll.first),
                std::exp(c.nll_ref.first), c.positions, bits_per_weight);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace slab::bench

int main(int argc, char** argv) {
  slab::bench::Options o;
  CLI::App app{
      "quant_kl: KL divergence of quantized runners' next-token distributions from the unquantized runner's, "
      "positions chosen as llama-perplexity --kl-divergence chooses them"};
  app.add_option("--model,-m", o.model, "Reference checkpoint (HF folder or GGUF file); its tokenizer reads --text")
      ->required();
  app.add_option("--reference", o.reference, "Quantization of the reference runner (none: BF16)")
      ->capture_default_str();
  app.add_option("--test", o.tests,
                 "A runner to compare, repeatable: none, auto, w8, w8g32, w4, w4g128 (+lm_head: the output head too), "
                 "or a .gguf file (loaded as slabserve serves it)");
  auto* text = app.add_option("--text", o.text_file, "Text file, tokenized with BOS as llama-perplexity does");
  auto* ids = app.add_option("--tokens", o.tokens_file, "Token ids (whitespace-separated) instead of --text");
  text->excludes(ids);
  ids->excludes(text);
  app.add_option("--ctx", o.ctx, "Chunk length; the second half of each chunk is scored")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--chunks", o.chunks, "Chunks to score (-1: all whole chunks)")->capture_default_str();
  app.add_option("--batch", o.batch, "Tokens per forward call (0: a whole chunk; <= 8 runs the decode kernels)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Compute threads (0: one per core)")->capture_default_str();
  app.add_option("--kernels", o.kernels,
                 "Kernel set of the test runners: auto (the best the CPU runs), avx512_bf16 or avx2")
      ->check(CLI::IsMember({"auto", "avx512_bf16", "avx2"}))
      ->capture_default_str();
  app.add_flag("--print-tokens", o.print_tokens, "Print the token ids of --text and exit");
  CLI11_PARSE(app, argc, argv);
  if (o.text_file.empty() == o.tokens_file.empty()) {
    std::fprintf(stderr, "error: give --text or --tokens\n");
    return 2;
  }
  try {
    return slab::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
