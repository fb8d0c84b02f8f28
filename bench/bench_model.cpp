// bench_model: prefill and decode throughput of the model runner on random token ids, each
// printed beside its limit measured in the same run: decode against the read-bandwidth roofline
// (bytes of packed weights one step streams / measured GB/s), prefill against the BF16 peak.
// Below the engine on purpose (a runner and a contiguous KV cache, no scheduler): the figures
// are the forward pass's alone. Was `slabserve bench`; moved here so that the product binary
// neither sees the runner nor compiles the bandwidth probe.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/contiguous_kv_cache.h"
#include "machine_limits.h"
#include "model/linear_tuning.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "model/packed_quant.h"
#include "runner_peaks.h"
#include "runtime/cpu_features.h"
#include "runtime/placement.h"
#include "runtime/thread_pool.h"

namespace slab::bench {
namespace {

struct BenchOptions {
  std::string model;
  int prompt_len = 512;
  int decode_tokens = 64;
  int batch = 1;
  int reps = 3;
  int threads = 0;
  std::string cpuset;
  int numa_node = -1;
  std::string quantization = "auto";
  bool quantize_lm_head = false;
  bool no_amx = false;
  std::string blocking;  // "": this CPU's entry of model/linear_tuning.h
  std::string kernels = "auto";
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Where a pass's wall time goes (prefill passes, or decode steps), phase by phase (means over the
// timed passes), with the linears' rate from their shapes: at many threads, whether the GEMMs or
// the steps between them fall behind. A mixture of experts' MLP phase gets no rate (its work
// depends on the routing).
void print_phases(const char* what, const ForwardPhaseSeconds& phases, int passes, const ModelConfig& c, int tokens,
                  int head_rows) {
  const double dim = c.hidden_size, q_dim = double{1} * c.num_heads * c.head_dim;
  const double kv_dim = double{1} * c.num_kv_heads * c.head_dim;
  int dense_layers = 0;
  for (int l = 0; l < c.num_layers; ++l) dense_layers += layer_is_moe(c, l) ? 0 : 1;
  const double per_token_layers = 2.0 * tokens * c.num_layers;
  const double mlp = 2.0 * tokens * dense_layers * dim * c.intermediate_size;
  const auto flops = [&](ForwardPhase p) -> double {
    switch (p) {
      case ForwardPhase::qkv: return per_token_layers * dim * (q_dim + 2 * kv_dim);
      case ForwardPhase::o_proj: return per_token_layers * q_dim * dim;
      case ForwardPhase::mlp_up: return dense_layers == c.num_layers ? 2 * mlp : 0;
      case ForwardPhase::down: return dense_layers == c.num_layers ? mlp : 0;
      case ForwardPhase::head: return 2.0 * head_rows * c.vocab_size * dim;
      default: return 0;
    }
  };
  const double total = phases.total();
  std::printf("%s phases (mean ms per pass, share, linears' GFLOP/s):", what);
  for (int i = 0; i < static_cast<int>(ForwardPhase::count); ++i) {
    const auto p = static_cast<ForwardPhase>(i);
    const double s = phases[p] / passes;
    std::printf(" | %s %.1f ms %.0f%%", forward_phase_name(p), s * 1e3, total > 0 ? 100.0 * phases[p] / total : 0.0);
    if (flops(p) > 0 && s > 0) std::printf(" %.0f", flops(p) / s / 1e9);
  }
  std::printf("\n");
}

// The dot-product peaks of the kernels this runner uses, measured on its own threads: the
// ceiling for the prefill linears' rate above (it moves between leases of a shared machine,
// so it is measured in the same run).
void print_peaks(ThreadPool& pool, const ModelRunner& runner) {
  std::printf("peaks on these %d threads: %s\n", pool.size(),
              describe_peaks(measure_runner_peaks(pool, runner)).c_str());
}

int run_bench(const BenchOptions& o) {
  const std::filesystem::path dir = o.model;
  Placement placement;
  try {
    placement = resolve_placement(Topology::system(), o.cpuset, o.numa_node, o.threads);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  RunnerOptions ro;
  ro.n_threads = placement.threads();
  ro.cpu_list = placement.cpu_list();
  ro.numa_node = placement.numa_node;
  const std::optional<WeightQuantization> quantization = parse_weight_quantization(o.quantization);
  if (!quantization || (o.quantize_lm_head && !rtn_quant_format(*quantization))) {
    std::fprintf(stderr, "error: --quantization %s%s: expected %s (--quantize-lm-head: %s)\n", o.quantization.c_str(),
                 o.quantize_lm_head ? " with --quantize-lm-head" : "", weight_quantization_choices(),
                 rtn_quantization_choices());
    return 2;
  }
  ro.quantization = *quantization;
  ro.quantize_lm_head = o.quantize_lm_head;
  ro.amx = !o.no_amx;
  if (!o.blocking.empty()) ro.blocking = parse_linear_blocking(o.blocking);
  // The AVX2 kernels on an AVX-512 machine: a stand-in for the AVX2-only EPYCs (Zen 2/3).
  ro.kernels = o.kernels == "avx2"          ? KernelChoice::avx2
               : o.kernels == "avx512_bf16" ? KernelChoice::avx512_bf16
                                            : KernelChoice::automatic;
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<ModelRunner> runner = load_model_runner(dir, ro);
  const double load_s = seconds_since(t0);
  const ModelConfig& c = runner->config();
  ThreadPool& pool = runner->thread_pool();  // created here, on this (the dispatching) thread
  std::printf("model %s (%s; %s): %d layers, hidden %d, vocab %d | %s | %s | loaded and packed in %.1f s\n",
              dir.c_str(), c.model_type.c_str(), describe_model_weights(dir).c_str(), c.num_layers, c.hidden_size,
              c.vocab_size, runner->describe().c_str(), describe_thread_bindings(pool.bindings()).c_str(), load_s);
  std::printf("weights: %s\n", runner->weight_format().c_str());
  std::printf(
      "linear blocking: %s (%s)\n", describe_linear_blocking(runner->blocking()).c_str(),
      o.blocking.empty() ? ("this CPU's entry: " + linear_tuning_for(cpu_features()).source).c_str() : "--blocking");

  const int B = o.batch, P = o.prompt_len, D = o.decode_tokens;
  KvGeometry g{c.num_layers, c.num_kv_heads, c.head_dim, 32};
  ContiguousKvCache cache(g, B, P + D + 1, runner->kv_dtype(), runner->numa_node());
  std::mt19937 rng(1234);
  std::vector<int> prompt(static_cast<size_t>(B) * P);
  for (int& t : prompt) t = static_cast<int>(rng() % static_cast<unsigned>(c.vocab_size));
  ForwardBatch prefill;
  prefill.tokens = prompt;
  for (int s = 0; s < B; ++s) prefill.sequences.push_back({s, 0, P, cache.block_table(s), 1});

  // Warm-up (workspace, RoPE tables, page faults), then timed prefills over the same cache slots.
  (void)runner->forward({std::vector<int>(prompt.begin(), prompt.begin() + std::min(P, 16)),
                         {{0, 0, std::min(P, 16), cache.block_table(0)}},
                         false},
                        cache);
  // Serial share: the forward's wall time outside the pool's parallel regions, the part more
  // threads do not shorten (a share s on T threads bounds the speed-up on T' by
  // 1 / (s + (1 - s) T / T')).
  std::vector<double> prefill_s, prefill_serial;
  const ForwardPhaseSeconds phases0 = runner->phase_seconds();
  for (int r = 0; r < o.reps; ++r) {
    const double par0 = pool.stats().parallel_seconds;
    t0 = std::chrono::steady_clock::now();
    (void)runner->forward(prefill, cache);
    prefill_s.push_back(seconds_since(t0));
    prefill_serial.push_back(prefill_s.back() - (pool.stats().parallel_seconds - par0));
  }
  const ForwardPhaseSeconds prefill_phases = runner->phase_seconds() - phases0;
  std::sort(prefill_s.begin(), prefill_s.end());
  const double prefill_med = prefill_s[prefill_s.size() / 2];
  const double weight_bytes = static_cast<double>(runner->decode_weight_bytes());
  // 2 flops per weight per token (counted from the shapes: with --quantization a weight is not
  // 2 bytes); the output head runs on each sequence's last token only.
  const double q_dim = double{1} * c.num_heads * c.head_dim, kv_dim = double{1} * c.num_kv_heads * c.head_dim;
  // A sparse layer's MLP: the router and top-k experts per token.
  double layer_weights_sum = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const double mlp = layer_is_moe(c, l)
                           ? c.hidden_size * (c.num_experts + 3.0 * c.num_experts_per_tok * c.moe_intermediate_size)
                           : 3.0 * c.hidden_size * c.intermediate_size;
    layer_weights_sum += c.hidden_size * (2 * q_dim + 2 * kv_dim) + mlp;
  }
  const double prefill_flops = 2.0 * B * P * layer_weights_sum + 2.0 * B * c.vocab_size * c.hidden_size;
  std::printf("prefill: %d x %d tokens: %.1f tokens/s (median of %d; best %.1f), %.0f GFLOP/s in the linears\n", B, P,
              B * P / prefill_med, o.reps, B * P / prefill_s.front(), prefill_flops / prefill_med / 1e9);
  const double prefill_serial_med = summarize(prefill_serial).median;
  std::printf("prefill serial: %.2f ms outside the pool's parallel regions (%.1f %% of the median prefill)\n",
              prefill_serial_med * 1e3, 100.0 * prefill_serial_med / prefill_med);
  print_phases("prefill", prefill_phases, o.reps, c, B * P, B);
  print_peaks(pool, *runner);

  // Decode: D steps of B tokens each after the prompt, each step right after a read-bandwidth
  // sample on the same threads. The shared machine's bandwidth drifts by tens of percent within
  // seconds, so the roofline ratio is taken per step (the step against the sample just before
  // it) and the median of those ratios is reported.
  const size_t probe_bytes = dram_probe_bytes();
  ReadBandwidthProbe probe(pool, probe_bytes);
  (void)probe.once();
  std::vector<int> next(static_cast<size_t>(B));
  for (int& t : next) t = static_cast<int>(rng() % static_cast<unsigned>(c.vocab_size));
  std::vector<double> step_s, step_cpu, step_serial, step_regions, bw_wall, bw_cpu, ratio_wall, ratio_cpu;
  double step_bytes_sum = 0;
  const ForwardPhaseSeconds decode_phases0 = runner->phase_seconds();
  for (int i = 0; i < D; ++i) {
    const Rate bw_sample = probe.once();
    ForwardBatch step;
    step.tokens = next;
    for (int s = 0; s < B; ++s) step.sequences.push_back({s, P + i, 1, cache.block_table(s), 1});
    const ThreadPoolStats pool0 = pool.stats();
    t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    std::vector<float> logits = runner->forward(step, cache);
    step_s.push_back(seconds_since(t0));
    step_serial.push_back(step_s.back() - (pool.stats().parallel_seconds - pool0.parallel_seconds));
    step_regions.push_back(static_cast<double>(pool.stats().dispatched - pool0.dispatched));
    step_cpu.push_back(thread_cpu_seconds() - c0);
    bw_wall.push_back(bw_sample.wall);
    bw_cpu.push_back(bw_sample.cpu);
    // Fraction of the sampled bandwidth the step streamed its weights at.
    // A mixture of experts reads the experts its B tokens selected, each once, not one token's
    // top-k (decode_weight_bytes): per_token_bytes / B is one token's share of those.
    const ModelRunner::MoeStepBytes moe = runner->last_moe_step();
    const double step_bytes = weight_bytes - static_cast<double>(moe.per_token_bytes) / B + moe.expert_bytes;
    step_bytes_sum += step_bytes;
    ratio_wall.push_back(step_bytes / step_s.back() / (bw_sample.wall * 1e9));
    ratio_cpu.push_back(step_bytes / step_cpu.back() / (bw_sample.cpu * 1e9));
    for (int s = 0; s < B; ++s) {
      const float* row = logits.data() + static_cast<size_t>(s) * c.vocab_size;
      next[static_cast<size_t>(s)] = static_cast<int>(std::max_element(row, row + c.vocab_size) - row);
    }
    // Back to the runner, as the engine hands each step's logits back: without it every step
    // zero-filled and page-faulted a fresh rows × vocab vector in its head phase (at batch 64
    // of Qwen2.5's 152k vocabulary, 39 MB a step).
    runner->recycle_logits(std::move(logits));
  }
  const ForwardPhaseSeconds decode_phases = runner->phase_seconds() - decode_phases0;
  const double step_med = summarize(step_s).median;
  double decode_total = 0;
  for (double s : step_s) decode_total += s;
  const Stat bw = summarize(bw_wall);
  const Stat ratio = summarize(ratio_wall);
  std::printf("decode: batch %d, %d steps: %.1f tokens/s (median step %.2f ms; mean %.1f tokens/s)\n", B, D,
              B / step_med, step_med * 1e3, B * D / decode_total);
  const double step_serial_med = summarize(step_serial).median;
  std::printf("decode serial: %.3f ms per step outside the pool's parallel regions (%.1f %% of the median step)\n",
              step_serial_med * 1e3, 100.0 * step_serial_med / step_med);
  // Synchronisation: the step's parallel regions times what an empty one costs on these threads
  // (bench_thread_pool has the detail), the part of the step that is only dispatch and waiting.
  const double regions = summarize(step_regions).median;
  const double region_us = measure_dispatch_us(pool, 5, 2000).median;
  std::printf(
      "decode sync: %.0f dispatched parallel regions per step x %.2f us (an empty region on these threads) = %.3f ms, "
      "%.1f %% of the median step\n",
      regions, region_us, regions * region_us * 1e-3, 100.0 * regions * region_us * 1e-6 / step_med);
  print_phases("decode", decode_phases, D, c, B, B);
  std::printf(
      "roofline: %.1f MB of packed weights per step (mean); read bandwidth %.1f GB/s (%zu MB sweep; median of %zu "
      "samples, min %.1f, max %.1f) = %.1f tokens/s\n",
      step_bytes_sum / D / 1e6, bw.median, probe_bytes >> 20, bw_wall.size(), bw.min, bw.max,
      B * bw.median * 1e9 / (step_bytes_sum / D));
  std::printf(
      "decode at %.1f %% of roofline (median over steps, each against the bandwidth sample taken just before "
      "it; min %.1f %%, max %.1f %%)\n",
      100.0 * ratio.median, 100.0 * ratio.min, 100.0 * ratio.max);
  // The same ratio from CPU time (the dispatching thread's per step, the busiest probe thread's):
  // on a machine shared with other work, wall time counts their turns on the cores too.
  std::printf("cpu-time view: decode %.1f tokens/s, read bandwidth %.1f GB/s -> decode at %.1f %% of roofline\n",
              B / summarize(step_cpu).median, summarize(bw_cpu).median, 100.0 * summarize(ratio_cpu).median);
  return 0;
}

}  // namespace
}  // namespace slab::bench

int main(int argc, char** argv) {
  slab::bench::BenchOptions o;
  CLI::App app{
      "bench_model: prefill and decode speed of the model runner on random token ids, against the machine's limits"};
  app.add_option("--model,-m", o.model,
                 "Hugging Face model folder (config.json, safetensors; no tokenizer needed), or a GGUF file")
      ->required();
  app.add_option("--prompt-len", o.prompt_len, "Prompt tokens per sequence")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--decode-tokens", o.decode_tokens, "Decode steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", o.batch, "Sequences decoded together")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--reps", o.reps, "Timed prefill passes")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", o.threads, "Compute threads, one pinned per physical core (0: all the cores chosen)")
      ->capture_default_str();
  app.add_option("--cpuset", o.cpuset, "OS cpus to compute on, as a Linux cpu list (default: the process's cpuset)");
  app.add_option("--numa-node", o.numa_node, "Compute on and bind memory to NUMA node N (-1: no binding)")
      ->capture_default_str();
  app.add_option("--quantization", o.quantization,
                 "Projection weights: auto, none, w8, w8g32, w4, w4g128 (as slabserve serve)")
      ->capture_default_str();
  app.add_flag("--quantize-lm-head", o.quantize_lm_head,
               "With w8/w8g32/w4/w4g128: the output head and the embedding table as well");
  app.add_option("--kernels", o.kernels, "Kernel set: auto (the best the CPU runs), avx512_bf16 or avx2")
      ->check(CLI::IsMember({"auto", "avx512_bf16", "avx2"}))
      ->capture_default_str();
  app.add_flag("--no-amx", o.no_amx,
               "Keep the linears and attention on AVX-512 where the CPU has AMX (default: the AMX tiles past the "
               "decode sizes: BF16 from 9 rows, quantized from 16-32 rows by format)");
  app.add_option("--blocking", o.blocking,
                 "BF16 linears' cache blocking, e.g. k=512,tile=6x64,prefetch=on,amx=0 (default: this CPU's entry)");
  CLI11_PARSE(app, argc, argv);
  try {
    return slab::bench::run_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
