// Per-token sampling time on one thread (the engine samples its batch's rows one after another)
// at vocabularies 32000, 128256, 151936 and 262144 and batches 1, 16, 64, for greedy,
// temperature 0.8 + top_p 0.95, temperature 1 + top_k 40, min_p 0.05, temperature 1 with no
// filter, and greedy + logprobs 5. Each figure sits next to the same work done the old way
// (sort the vocabulary: the sampler before the selection of engine/token_selection.h, kept
// here as the reference) measured in the same run, and next to the bound of reading the
// logits row once at the single-thread read bandwidth measured in the same run.
//
// Logits: N(0, 2) over the vocabulary plus 32 "head" tokens 2..8 above the rest, the shape of
// an LM's output (a few likely tokens, a long tail); --flat leaves the head out, so top-p's
// nucleus holds ~20% of the vocabulary (the worst case for sorting survivors). Each row of a
// batch has its own Sampler and its own logits, all rows distinct, so batch 64 of 262144 streams
// 64 MiB per step; the full-sort sampler goes over the same rows.
//
// Usage: bench_sampler [--quick] [--flat] [--reps N] [--isa scalar|avx2] [--vocab 32000,...]
//                      [--batch 1,16,64]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "machine_limits.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;

namespace {

struct Mode {
  const char* name;
  float temperature;
  float top_p;
  int top_k;
  float min_p;
  int logprobs;
};

const Mode kModes[] = {
    {"greedy", 0.0f, 1.0f, 0, 0.0f, -1},       {"T0.8 top_p0.95", 0.8f, 0.95f, 0, 0.0f, -1},
    {"T1 top_k40", 1.0f, 1.0f, 40, 0.0f, -1},  {"T1 min_p0.05", 1.0f, 1.0f, 0, 0.05f, -1},
    {"T1 no filter", 1.0f, 1.0f, 0, 0.0f, -1}, {"greedy logprobs5", 0.0f, 1.0f, 0, 0.0f, 5},
};

// The sampler as it was before it stopped sorting: a full (partial_)sort of the vocabulary for
// every draw, and a partial sort of a copy for the logprobs' top n. No penalties (none here).
class FullSortSampler {
 public:
  explicit FullSortSampler(const Mode& m) : mode_(m), rng_(42) {}

  int32_t sample(const std::vector<float>& logits) {
    int32_t token;
    if (mode_.temperature <= 0.0f || mode_.top_k == 1) {
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      token = draw(logits);
    }
    if (mode_.logprobs >= 0) {
      const float max = *std::max_element(logits.begin(), logits.end());
      double total = 0.0;
      for (float l : logits) total += std::exp(static_cast<double>(l - max));
      const double log_total = std::log(total);
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      const auto n = static_cast<std::ptrdiff_t>(std::min<size_t>(static_cast<size_t>(mode_.logprobs), order.size()));
      std::partial_sort(order.begin(), order.begin() + n, order.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      for (std::ptrdiff_t i = 0; i < n; ++i) sink_ += static_cast<float>(logits[order[i]] - max - log_total);
    }
    return token;
  }
  double sink_ = 0.0;

 private:
  int32_t draw(const std::vector<float>& logits) {
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    size_t keep = order.size();
    if (mode_.top_k > 0) keep = std::min(keep, static_cast<size_t>(mode_.top_k));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    order.resize(keep);
    std::vector<double> probs(keep);
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      probs[i] = std::exp(static_cast<double>(logits[order[i]] - logits[order[0]]) / mode_.temperature);
      total += probs[i];
    }
    for (double& p : probs) p /= total;
    size_t cut = keep;
    if (mode_.min_p > 0.0f) {
      cut = 1;
      while (cut < keep && probs[cut] >= mode_.min_p * probs[0]) ++cut;
    }
    if (mode_.top_p < 1.0f) {
      double cumulative = 0.0;
      for (size_t i = 0; i < cut; ++i) {
        cumulative += probs[i];
        if (cumulative >= mode_.top_p) {
          cut = i + 1;
          break;
        }
      }
    }
    std::discrete_distribution<size_t> pick(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(cut));
    return order[pick(rng_)];
  }

  Mode mode_;
  std::mt19937_64 rng_;
};

std::vector<float> make_logits(size_t vocab, uint64_t seed, bool flat) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> tail(0.0f, 2.0f);
  std::vector<float> v(vocab);
  for (float& x : v) x = tail(rng);
  if (flat) return v;
  const float top = *std::max_element(v.begin(), v.end());
  std::uniform_real_distribution<float> head(2.0f, 8.0f);
  for (int i = 0; i < 32; ++i) v[rng() % vocab] = top + head(rng);
  return v;
}

struct Timing {
  double wall_ms = 0, cpu_ms = 0;  // per token, medians over repetitions
};

// Median per-token time of `step(row)` over all rows, repeated.
template <class Step>
Timing time_rows(size_t rows, int reps, Step step) {
  std::vector<double> wall, cpu;
  step(0);  // warm-up: first-touch of scratch buffers
  for (int r = 0; r < reps; ++r) {
    const double w0 = bench::now_seconds(), c0 = bench::thread_cpu_seconds();
    for (size_t i = 0; i < rows; ++i) step(i);
    wall.push_back((bench::now_seconds() - w0) * 1e3 / static_cast<double>(rows));
    cpu.push_back((bench::thread_cpu_seconds() - c0) * 1e3 / static_cast<double>(rows));
  }
  return {bench::summarize(wall).median, bench::summarize(cpu).median};
}

std::vector<size_t> parse_list(const char* p) {
  std::vector<size_t> v;
  while (*p) {
    char* end = nullptr;
    v.push_back(std::strtoull(p, &end, 10));
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, flat = false;
  int reps = 7;
  std::string isa_arg;
  std::vector<size_t> vocabs = {32000, 128256, 151936, 262144};
  std::vector<size_t> batches = {1, 16, 64};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
      reps = 3;
    } else if (arg == "--flat") {
      flat = true;
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--isa" && i + 1 < argc) {
      isa_arg = argv[++i];
    } else if (arg == "--vocab" && i + 1 < argc) {
      vocabs = parse_list(argv[++i]);
    } else if (arg == "--batch" && i + 1 < argc) {
      batches = parse_list(argv[++i]);
    } else {
      std::fprintf(
          stderr, "usage: %s [--quick] [--flat] [--reps N] [--isa scalar|avx2] [--vocab 32000,...] [--batch 1,16,64]\n",
          argv[0]);
      return 2;
    }
  }
  const CpuFeatures& cpu = cpu_features();
  const TopologyInfo topo = Topology::system().process_info();
  kern::Isa isa = best_sampling_isa();
  if (isa_arg == "scalar") isa = kern::Isa::scalar;
  if (isa_arg == "avx2" && cpu.has_avx2_kernels()) isa = kern::Isa::avx2;
  ThreadPool pool({.n_threads = 1});  // the sampling thread's own bandwidth
  const size_t l3 = topo.l3_bytes ? topo.l3_bytes : (size_t{32} << 20);
  bench::ReadBandwidthProbe probe(pool, 8 * l3);
  const bench::Stat bw = probe.measure(quick ? 3 : 9);

  std::printf("cpu:      %s\n", cpu.summary().c_str());
  std::printf("topology: %s\n", topo.summary().c_str());
  std::printf("sampling kernel isa: %s; one thread\n", kern::isa_name(isa));
  std::printf("read bandwidth (1 thread, %zu MB): %.1f GB/s  [min %.1f, max %.1f]\n\n", (8 * l3) >> 20, bw.median,
              bw.min, bw.max);
  std::printf("logits: %s\n", flat ? "flat, N(0, 2)" : "N(0, 2) and 32 head tokens 2..8 above");
  std::printf(
      "ms per token, medians of %d repetitions (cpu: from the thread's CPU time). 'sort' = the\n"
      "full-sort sampler on the same rows (median of %d); 'bound' = reading the row's logits\n"
      "once at the bandwidth above.\n\n",
      reps, quick ? 1 : 2);
  std::printf("%-7s %5s %-17s %9s %9s %9s %9s %8s %8s\n", "vocab", "batch", "mode", "ms", "cpu ms", "sort ms",
              "sort cpu", "x faster", "bound ms");
  double sink = 0.0;
  for (size_t vocab : vocabs) {
    const double bound_ms = 4.0 * static_cast<double>(vocab) / (bw.median * 1e9) * 1e3;
    for (size_t batch : batches) {
      std::vector<std::vector<float>> rows(batch);
      for (size_t r = 0; r < batch; ++r) rows[r] = make_logits(vocab, 1000 * vocab + r, flat);
      for (const Mode& mode : kModes) {
        SamplingParams p;
        p.temperature = mode.temperature;
        p.top_p = mode.top_p;
        p.top_k = mode.top_k;
        p.min_p = mode.min_p;
        p.logprobs = mode.logprobs;
        p.seed = 7;
        std::vector<Sampler> samplers;
        for (size_t r = 0; r < batch; ++r) samplers.emplace_back(p, isa);
        const Timing now = time_rows(batch, reps, [&](size_t r) { sink += samplers[r].sample(rows[r], {}, {}).token; });
        FullSortSampler old(mode);
        const Timing sorted = time_rows(batch, quick ? 1 : 2, [&](size_t r) { sink += old.sample(rows[r]); });
        sink += old.sink_;
        std::printf("%-7zu %5zu %-17s %9.3f %9.3f %9.3f %9.3f %8.1f %8.3f\n", vocab, batch, mode.name, now.wall_ms,
                    now.cpu_ms, sorted.wall_ms, sorted.cpu_ms, sorted.cpu_ms / now.cpu_ms, bound_ms);
        std::fflush(stdout);
      }
    }
  }
  std::printf("\n(checksum %g)\n", sink);
  return 0;
}
