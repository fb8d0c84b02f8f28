// `slabserve bench`: prefill and decode throughput of the model runner on random token ids, each
// printed beside its limit measured in the same run: decode against the read-bandwidth roofline
// (bytes of packed weights one step streams / measured GB/s), prefill against the BF16 peak.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "kv/contiguous_kv_cache.h"
#include "machine_limits.h"
#include "model/model_runner.h"
#include "placement_flags.h"
#include "runtime/placement.h"
#include "runtime/thread_pool.h"

namespace slab::cli {
namespace {

struct BenchOptions {
  std::string model;
  int prompt_len = 512;
  int decode_tokens = 64;
  int batch = 1;
  int reps = 3;
  PlacementFlags placement;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_bench(const BenchOptions& o) {
  const std::filesystem::path dir = o.model.empty() ? default_model_dir() : std::filesystem::path(o.model);
  if (dir.empty()) {
    std::fprintf(stderr, "error: pass --model DIR\n");
    return 2;
  }
  const std::optional<Placement> placement = resolve_placement_or_report(o.placement);
  if (!placement) return 2;
  const RunnerOptions ro = runner_options_for(*placement);
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<ModelRunner> runner = load_model_runner(dir, ro);
  const double load_s = seconds_since(t0);
  const ModelConfig& c = runner->config();
  ThreadPool& pool = runner->thread_pool();  // created here, on this (the dispatching) thread
  std::printf("model %s (%s): %d layers, hidden %d, vocab %d | %s | %s | loaded and packed in %.1f s\n", dir.c_str(),
              c.model_type.c_str(), c.num_layers, c.hidden_size, c.vocab_size, runner->describe().c_str(),
              describe_thread_bindings(pool.bindings()).c_str(), load_s);

  const int B = o.batch, P = o.prompt_len, D = o.decode_tokens;
  KvGeometry g{c.num_layers, c.num_kv_heads, c.head_dim, 32};
  ContiguousKvCache cache(g, B, P + D + 1, runner->kv_dtype(), runner->numa_node());
  std::mt19937 rng(1234);
  std::vector<int> prompt(static_cast<size_t>(B) * P);
  for (int& t : prompt) t = static_cast<int>(rng() % static_cast<unsigned>(c.vocab_size));
  ForwardBatch prefill;
  prefill.tokens = prompt;
  for (int s = 0; s < B; ++s) prefill.sequences.push_back({s, 0, P});

  // Warm-up (workspace, RoPE tables, page faults), then timed prefills over the same cache slots.
  (void)runner->forward({std::vector<int>(prompt.begin(), prompt.begin() + std::min(P, 16)), {{0, 0, std::min(P, 16)}}, false},
                        cache);
  std::vector<double> prefill_s;
  for (int r = 0; r < o.reps; ++r) {
    t0 = std::chrono::steady_clock::now();
    (void)runner->forward(prefill, cache);
    prefill_s.push_back(seconds_since(t0));
  }
  std::sort(prefill_s.begin(), prefill_s.end());
  const double prefill_med = prefill_s[prefill_s.size() / 2];
  const double weight_bytes = static_cast<double>(runner->decode_weight_bytes());
  const double flops_per_token = weight_bytes;  // 2 flops per BF16 weight (2 bytes) per token
  std::printf("prefill: %d x %d tokens: %.1f tokens/s (median of %d; best %.1f), %.0f GFLOP/s in the linears' share\n", B, P,
              B * P / prefill_med, o.reps, B * P / prefill_s.front(), B * P * flops_per_token / prefill_med / 1e9);

  // Decode: D steps of B tokens each after the prompt.
  std::vector<int> next(static_cast<size_t>(B));
  for (int& t : next) t = static_cast<int>(rng() % static_cast<unsigned>(c.vocab_size));
  std::vector<double> step_s, step_cpu;
  for (int i = 0; i < D; ++i) {
    ForwardBatch step;
    step.tokens = next;
    for (int s = 0; s < B; ++s) step.sequences.push_back({s, P + i, 1});
    t0 = std::chrono::steady_clock::now();
    const double c0 = bench::thread_cpu_seconds();
    const auto logits = runner->forward(step, cache);
    step_s.push_back(seconds_since(t0));
    step_cpu.push_back(bench::thread_cpu_seconds() - c0);
    for (int s = 0; s < B; ++s) {
      const float* row = logits.data() + static_cast<size_t>(s) * c.vocab_size;
      next[static_cast<size_t>(s)] = static_cast<int>(std::max_element(row, row + c.vocab_size) - row);
    }
  }
  std::sort(step_s.begin(), step_s.end());
  const double step_med = step_s[step_s.size() / 2];
  double decode_total = 0;
  for (double s : step_s) decode_total += s;

  // Read bandwidth on the same threads, right after the decode steps (it drifts between runs).
  bench::ReadBandwidthProbe probe(pool, size_t{1} << 30);
  (void)probe.once();
  std::vector<double> bw_wall, bw_cpu;
  for (int r = 0; r < 5; ++r) {
    const bench::Rate rate = probe.once();
    bw_wall.push_back(rate.wall);
    bw_cpu.push_back(rate.cpu);
  }
  const bench::Stat bw = bench::summarize(bw_wall);
  const double bw_cpu_med = bench::summarize(bw_cpu).median;
  const double step_cpu_med = bench::summarize(step_cpu).median;
  const double roofline_steps = bw.median * 1e9 / weight_bytes;
  std::printf("decode: batch %d, %d steps: %.1f tokens/s (median step %.2f ms; mean %.1f tokens/s)\n", B, D,
              B / step_med, step_med * 1e3, B * D / decode_total);
  std::printf("roofline: %.1f MB of packed weights per step / %.1f GB/s measured read bandwidth (min %.1f, max %.1f) = "
              "%.1f tokens/s -> decode at %.1f %% of roofline\n",
              weight_bytes / 1e6, bw.median, bw.min, bw.max, B * roofline_steps, 100.0 * (1.0 / step_med) / roofline_steps);
  // The same ratio from CPU time (the dispatching thread's per step, the busiest probe thread's):
  // on a machine shared with other work, wall time counts their turns on the cores too.
  std::printf("cpu-time view: decode %.1f tokens/s, read bandwidth %.1f GB/s -> decode at %.1f %% of roofline\n",
              B / step_cpu_med, bw_cpu_med, 100.0 * weight_bytes / step_cpu_med / (bw_cpu_med * 1e9));
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Prefill and decode speed of the model runner on random token ids");
  cmd->add_option("--model,-m", o->model, "Hugging Face model folder (config.json, safetensors; no tokenizer needed)");
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens per sequence")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--decode-tokens", o->decode_tokens, "Decode steps")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--batch", o->batch, "Sequences decoded together")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed prefill passes")->check(CLI::PositiveNumber)->capture_default_str();
  add_placement_flags(*cmd, o->placement);
  return [cmd, o]() { return cmd->parsed() ? run_bench(*o) : -1; };
}

}  // namespace slab::cli
