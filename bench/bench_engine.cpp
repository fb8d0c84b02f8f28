// Engine-level serving benchmark (no HTTP): output tokens/s at several concurrencies with fixed
// prompt/output lengths, and the prefix-cache speed-up for requests that share a long prefix.
//
//   bench_engine --model DIR [--concurrency 1,4,16,64] [--prompt-len 128] [--output-len 128]
//                [--prefix-len 1024] [--suffix-len 32] [--temperature 0] [--top-p 1]
//                [--threads N] [--no-amx 1] [--blocking SPEC]
//
// --prefix-len 0 skips the prefix-cache measurement. --blocking sets the BF16 linears' blocking
// as bench_model's does: the keys it names over LinearBlocking's defaults, not over this CPU's
// entry (model/linear_tuning.h), so an A/B passes the entry's keys too.
// The weights are packed once, straight from the checkpoint as `slabserve serve` packs them (a
// GGUF's quantized blocks stay quantized), and every engine below runs on that one runner.
// Prompts are random token ids and generation ignores EOS, so every request produces exactly
// --output-len tokens (vLLM's `bench serve --random-*` convention); greedy unless --temperature.
// "serial %" is the share of the engine's step time outside the thread pool's parallel regions
// (EngineStats): the part more cores do not shorten, which bounds the speed-up on many cores.
// "bound tok/s" is the machine's limit beside the figure: the output tokens over the least time
// the run's forward passes could take on these threads (model/forward_work.h: per pass size, the
// larger of their FLOPs at the kernel set's fastest multiply and their weight and K/V bytes at the
// read bandwidth, both measured here around the row), and "% of bound" the figure against it. The
// bound's ratio between two thread counts is how far the machine lets the figure scale.
// Below each row: the forward passes' time by phase (linears, attention, norms, ...), and the bound's parts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "machine_limits.h"
#include "model/linear_tuning.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "runner_peaks.h"
#include "runtime/thread_pool.h"

namespace {

using clock_type = std::chrono::steady_clock;

struct Options {
  std::string model;
  std::vector<int> concurrency = {1, 4, 16, 64};
  int prompt_len = 128;
  int output_len = 128;
  int prefix_len = 1024;
  int suffix_len = 32;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int threads = 0;  // 0: one per core of the process's cpuset
  bool no_amx = false;
  std::string blocking;  // --blocking: the BF16 linears' blocking (model/linear_tuning.h's form)
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  return out;
}

struct RunResult {
  double seconds = 0;
  int output_tokens = 0;
  std::vector<double> ttft;  // per request
  std::vector<double> tpot;  // per request: (e2e - ttft) / (tokens - 1)
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Submits all requests at once and waits for every one.
RunResult run(slab::Engine& engine, const std::vector<slab::Request>& requests) {
  auto stream = std::make_shared<slab::RequestStream>();
  std::map<int64_t, size_t> index;
  const auto start = clock_type::now();
  for (const slab::Request& r : requests) index[engine.submit(r, stream)] = index.size();
  std::vector<double> first(requests.size(), -1), last(requests.size(), 0);
  std::vector<int> tokens(requests.size(), 0);
  size_t done = 0;
  while (done < requests.size()) {
    std::optional<slab::RequestOutput> out = stream->next(std::chrono::milliseconds(600000));
    if (!out) {
      std::fprintf(stderr, "bench_engine: no progress for 10 minutes\n");
      std::exit(1);
    }
    const size_t i = index.at(out->request_id);
    const double t = std::chrono::duration<double>(clock_type::now() - start).count();
    if (!out->tokens.empty() && first[i] < 0) first[i] = t;
    tokens[i] = out->completion_tokens;
    if (out->finished) {
      last[i] = t;
      ++done;
    }
  }
  RunResult r;
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (size_t i = 0; i < requests.size(); ++i) {
    r.output_tokens += tokens[i];
    r.ttft.push_back(first[i]);
    if (tokens[i] > 1) r.tpot.push_back((last[i] - first[i]) / (tokens[i] - 1));
  }
  return r;
}

// The stats once the engine is idle: the last request's final token reaches the stream before
// its step's time and work are added to the stats, so read them only after the step published
// that nothing runs or waits any more.
slab::EngineStats settled_stats(const slab::Engine& engine) {
  for (;;) {
    slab::EngineStats s = engine.stats();
    if (s.num_running == 0 && s.num_waiting == 0) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

slab::Request random_request(std::mt19937& rng, int vocab, const std::vector<int32_t>& prefix, int len, int output_len,
                             const Options& o) {
  slab::Request r;
  r.prompt = prefix;
  while (static_cast<int>(r.prompt.size()) < len) r.prompt.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  r.sampling.temperature = o.temperature;
  r.sampling.top_p = o.top_p;
  r.stop.max_tokens = output_len;
  r.stop.ignore_eos = true;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model")
      o.model = value;
    else if (flag == "--concurrency")
      o.concurrency = parse_list(value);
    else if (flag == "--prompt-len")
      o.prompt_len = std::stoi(value);
    else if (flag == "--output-len")
      o.output_len = std::stoi(value);
    else if (flag == "--prefix-len")
      o.prefix_len = std::stoi(value);
    else if (flag == "--suffix-len")
      o.suffix_len = std::stoi(value);
    else if (flag == "--temperature")
      o.temperature = std::stof(value);
    else if (flag == "--top-p")
      o.top_p = std::stof(value);
    else if (flag == "--threads")
      o.threads = std::stoi(value);
    else if (flag == "--no-amx")
      o.no_amx = value != "0";
    else if (flag == "--blocking")
      o.blocking = value;
    else {
      std::fprintf(stderr, "bench_engine: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (o.model.empty()) {
    std::fprintf(stderr,
                 "usage: bench_engine --model DIR [--concurrency 1,4,16,64] [--prompt-len N] [--output-len N]\n"
                 "                    [--prefix-len N] [--suffix-len N] [--temperature T] [--top-p P]\n"
                 "                    [--threads N] [--no-amx 1] [--blocking k=512,amxprefill=128,...]\n");
    return 2;
  }
  slab::RunnerOptions runner_options;
  runner_options.n_threads = o.threads;
  runner_options.amx = !o.no_amx;
  if (!o.blocking.empty()) {
    try {
      runner_options.blocking = slab::parse_linear_blocking(o.blocking);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "bench_engine: --blocking: %s\n", e.what());
      return 2;
    }
  }
  const auto load_start = clock_type::now();
  const std::unique_ptr<slab::ModelRunner> runner = slab::load_model_runner(o.model, runner_options);
  const double load_s = std::chrono::duration<double>(clock_type::now() - load_start).count();
  const slab::ModelConfig& model_config = runner->config();
  const int vocab = model_config.vocab_size;
  std::mt19937 rng(1234);
  const int max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());

  slab::EngineConfig config;
  config.scheduler.max_num_seqs = std::max(max_c, 8);
  config.kv_cache_bytes = size_t{4} << 30;
  std::printf("model %s (%s): %d layers, hidden %d, vocab %d | %s | loaded and packed in %.1f s\n", o.model.c_str(),
              slab::describe_model_weights(o.model).c_str(), model_config.num_layers, model_config.hidden_size, vocab,
              runner->describe().c_str(), load_s);
  std::printf("weights: %s\n", runner->weight_format().c_str());
  std::printf("blocking: %s (%s)\n", slab::describe_linear_blocking(runner->blocking()).c_str(),
              o.blocking.empty() ? "this CPU's entry" : "--blocking");
  std::printf("sampling: %s\n",
              o.temperature > 0
                  ? ("temperature " + std::to_string(o.temperature) + ", top_p " + std::to_string(o.top_p)).c_str()
                  : "greedy");
  {
    slab::Engine engine(*runner, nullptr, config);
    // The machine's limits, measured on a pool of the runner's size on the same cores while the
    // engine is idle (its workers parked): made after the engine, whose loop thread must not
    // inherit this thread's pinning to the first core.
    slab::ThreadPoolOptions limits_options;
    limits_options.n_threads = runner->num_threads();
    slab::ThreadPool limits_pool(limits_options);
    const std::vector<slab::bench::InstructionPeak> peaks = slab::bench::measure_runner_peaks(limits_pool, *runner);
    const size_t probe_bytes = slab::bench::dram_probe_bytes();
    slab::bench::ReadBandwidthProbe bandwidth(limits_pool, probe_bytes);
    std::printf("limits on these %d threads: %s; read bandwidth (%zu MB sweep) measured before and after each row\n",
                limits_pool.size(), slab::bench::describe_peaks(peaks).c_str(), probe_bytes >> 20);
    std::printf("%-12s %10s %12s %14s %12s %12s %10s %9s %12s %11s\n", "concurrency", "requests", "seconds",
                "output tok/s", "TTFT p50 s", "TPOT p50 ms", "serial ms", "serial %", "bound tok/s", "% of bound");
    run(engine, {random_request(rng, vocab, {}, o.prompt_len, 4, o)});  // warm-up: pages in the weights
    for (int c : o.concurrency) {
      std::vector<slab::Request> requests;
      for (int i = 0; i < c; ++i) requests.push_back(random_request(rng, vocab, {}, o.prompt_len, o.output_len, o));
      const slab::EngineStats before = settled_stats(engine);
      const double gb_before = bandwidth.measure(3).median;
      const RunResult r = run(engine, requests);
      const slab::EngineStats after = settled_stats(engine);
      const double gb_s = (gb_before + bandwidth.measure(3).median) / 2;
      const slab::ForwardBound bound =
          slab::forward_time_bound(after.forward_work - before.forward_work, slab::bench::forward_peaks(peaks, gb_s));
      const double step_s = after.step_seconds - before.step_seconds;
      const double serial_s = step_s - (after.parallel_seconds - before.parallel_seconds);
      const int64_t steps = after.steps - before.steps;
      std::printf("%-12d %10d %12.2f %14.1f %12.3f %12.1f %10.3f %8.1f%% %12.1f %10.1f%%\n", c, c, r.seconds,
                  r.output_tokens / r.seconds, median(r.ttft), 1000 * median(r.tpot),
                  steps > 0 ? 1000 * serial_s / static_cast<double>(steps) : 0.0,
                  step_s > 0 ? 100 * serial_s / step_s : 0.0, bound.seconds > 0 ? r.output_tokens / bound.seconds : 0.0,
                  100 * bound.seconds / r.seconds);
      // Where the forward passes' time went at this concurrency (prefill and decode steps alike).
      const slab::ForwardPhaseSeconds phases = after.forward_phase_seconds - before.forward_phase_seconds;
      if (phases.total() > 0) {
        std::printf("%-12s forward phases, share of %.2f s:", "", phases.total());
        for (int i = 0; i < static_cast<int>(slab::ForwardPhase::count); ++i) {
          const auto p = static_cast<slab::ForwardPhase>(i);
          std::printf(" %s %.0f%%", slab::forward_phase_name(p), 100 * phases[p] / phases.total());
        }
        std::printf("\n");
      }
      const slab::ForwardWorkByRows work = after.forward_work - before.forward_work;
      std::printf("%-12s bound %.2f s over %lld passes (compute alone %.2f s, reads alone %.2f s at %.1f GB/s)\n", "",
                  bound.seconds, static_cast<long long>(work.total_passes()), bound.compute_seconds,
                  bound.memory_seconds, gb_s);
      // The work itself, so a bound at another machine's peaks can be worked out from this run.
      for (int b = 0; b < slab::ForwardWorkByRows::kBuckets; ++b) {
        const slab::ForwardWork& w = work.work[static_cast<size_t>(b)];
        if (work.passes[static_cast<size_t>(b)] == 0) continue;
        std::printf(
            "%-12s passes of %d-%d rows: %lld, linears %.1f GFLOP, attention %.1f GFLOP, weights %.1f GB, "
            "K/V %.2f GB\n",
            "", 1 << b, (2 << b) - 1, static_cast<long long>(work.passes[static_cast<size_t>(b)]), w.linear_flops / 1e9,
            w.attention_flops / 1e9, w.weight_bytes / 1e9, w.kv_bytes / 1e9);
      }
      std::fflush(stdout);
    }
  }

  // Prefix caching: 8 requests share a long prefix; the cache is warmed by one of them first.
  if (o.prefix_len == 0) return 0;  // --prefix-len 0: the concurrency rows only
  std::vector<int32_t> prefix;
  for (int i = 0; i < o.prefix_len; ++i) prefix.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  std::vector<slab::Request> shared;
  for (int i = 0; i < 8; ++i) shared.push_back(random_request(rng, vocab, prefix, o.prefix_len + o.suffix_len, 16, o));
  double seconds[2] = {0, 0};
  for (bool caching : {false, true}) {
    slab::EngineConfig c = config;
    c.enable_prefix_caching = caching;
    slab::Engine engine(*runner, nullptr, c);
    run(engine, {random_request(rng, vocab, prefix, o.prefix_len + o.suffix_len, 1, o)});
    seconds[caching] = run(engine, shared).seconds;
  }
  std::printf(
      "prefix cache: 8 requests sharing a %d-token prefix (+%d own, 16 out): %.2f s without, %.2f s with: %.2fx\n",
      o.prefix_len, o.suffix_len, seconds[0], seconds[1], seconds[0] / seconds[1]);
  return 0;
}
