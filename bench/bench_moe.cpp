// bench_moe: the mixture-of-experts block and a whole MoE model on random weights, at batch 1,
// 4, 16 and 64 tokens a step.
//
// (1) One sparse layer (model/moe_block.h) of the shape given (default Qwen3-30B-A3B's: hidden
//     2048, 128 experts of 768, top 8), on random normed rows: time per step, the experts the
//     router selected, the bytes of expert weights the step read (each selected expert's packed
//     matrices once, as the dispatcher counts them) against the minimum for those experts and
//     against reading each token's experts apart, and the step against the read-bandwidth
//     roofline of those bytes (measured just before each step on the same threads). Both expert
//     schedules: small experts dealt out whole to threads ("spread", the default) and every
//     expert on all threads.
// (2) A whole random-weight MoE model through ModelRunner: decode steps of B sequences after a
//     short prompt, tokens/s, the bytes read per step (dense projections, routers, head and the
//     experts selected), and the step against the roofline of those bytes.
// Figures are medians over steps; the CPU, kernel set and thread bindings are printed first.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kv/contiguous_kv_cache.h"
#include "machine_limits.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "model/moe_block.h"
#include "model/packed_linear.h"
#include "model/packed_weights.h"
#include "model/weights.h"
#include "runtime/cpu_features.h"
#include "runtime/placement.h"
#include "runtime/thread_pool.h"

namespace slab::bench {
namespace {

struct Options {
  int hidden = 2048, experts = 128, top_k = 8, expert_inter = 768;
  int heads = 32, kv_heads = 4, head_dim = 128, vocab = 32000;
  int model_layers = 2;
  int steps = 20, prompt = 32;
  int threads = 0;
  std::string cpuset;
  std::vector<int> batches{1, 4, 16, 64};
};

// Random BF16 tensors by Hugging Face name, made on first request and kept: a checkpoint with
// no file behind it. Matrices uniform in ±0.05, norms near 1.
class RandomCheckpoint final : public Checkpoint {
 public:
  bool has(const std::string&) const override { return true; }
  TensorView tensor(const std::string& name) const override {
    auto it = views_.find(name);
    if (it != views_.end()) return it->second;
    throw std::runtime_error("random checkpoint: no tensor '" + name + "' made");
  }
  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> out;
    for (const auto& [name, view] : views_) out.push_back(name);
    return out;
  }
  void make(const std::string& name, std::vector<int64_t> shape, bool norm = false) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<kern::bf16_t>& data = store_[name];
    data.resize(n);
    for (kern::bf16_t& v : data) {
      state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
      const float u = static_cast<float>(state_ >> 40) / static_cast<float>(1ULL << 24) - 0.5f;  // [-0.5, 0.5)
      v = kern::f32_to_bf16(norm ? 1.0f + 0.2f * u : 0.1f * u);
    }
    views_[name] = TensorView{name, DType::bf16, std::move(shape), data.data(), "random"};
  }

 private:
  std::map<std::string, std::vector<kern::bf16_t>> store_;
  std::map<std::string, TensorView> views_;
  uint64_t state_ = 42;
};

ModelConfig moe_config(const Options& o, int layers) {
  ModelConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = o.vocab;
  c.hidden_size = o.hidden;
  c.intermediate_size = o.expert_inter;
  c.num_layers = layers;
  c.num_heads = o.heads;
  c.num_kv_heads = o.kv_heads;
  c.head_dim = o.head_dim;
  c.rotary_dim = o.head_dim;
  c.qk_norm = true;
  c.max_position_embeddings = 4096;
  c.num_experts = o.experts;
  c.num_experts_per_tok = o.top_k;
  c.moe_intermediate_size = o.expert_inter;
  c.layer_moe.assign(static_cast<size_t>(layers), true);
  return c;
}

std::unique_ptr<RandomCheckpoint> random_checkpoint(const ModelConfig& c) {
  auto ck = std::make_unique<RandomCheckpoint>();
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  ck->make(c.weight_prefix + "embed_tokens.weight", {c.vocab_size, h});
  ck->make(c.weight_prefix + "norm.weight", {h}, true);
  ck->make(c.lm_head_name, {c.vocab_size, h});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = layer_prefix(c, l);
    ck->make(p + "input_layernorm.weight", {h}, true);
    ck->make(p + "post_attention_layernorm.weight", {h}, true);
    ck->make(p + "self_attn.q_proj.weight", {q, h});
    ck->make(p + "self_attn.k_proj.weight", {kv, h});
    ck->make(p + "self_attn.v_proj.weight", {kv, h});
    ck->make(p + "self_attn.o_proj.weight", {h, q});
    ck->make(p + "self_attn.q_norm.weight", {c.head_dim}, true);
    ck->make(p + "self_attn.k_norm.weight", {c.head_dim}, true);
    ck->make(router_tensor_name(c, l), {c.num_experts, h});
    for (int e = 0; e < c.num_experts; ++e) {
      const ExpertTensorNames n = expert_tensor_names(c, l, e);
      ck->make(n.gate, {c.moe_intermediate_size, h});
      ck->make(n.up, {c.moe_intermediate_size, h});
      ck->make(n.down, {h, c.moe_intermediate_size});
    }
  }
  return ck;
}

double mb(size_t bytes) { return static_cast<double>(bytes) / 1e6; }

// (1) One sparse layer.
void bench_layer(const Options& o, ThreadPool& pool, kern::Isa isa) {
  const ModelConfig c = moe_config(o, 1);
  PackedModel packed;
  {
    const auto ck = random_checkpoint(c);
    packed = pack_model(c, *ck);
  }
  const PackedLayer& layer = packed.layers.front();
  const size_t expert_each = layer.experts.front().gate_up.bytes() + layer.experts.front().down.bytes();
  std::printf("\n(1) one MoE layer: hidden %d, %d experts of %d, top %d; %.2f MB per expert, router %.2f MB\n",
              o.hidden, o.experts, o.expert_inter, o.top_k, mb(expert_each), mb(layer.router.bytes()));
  std::printf("%5s %8s %9s %8s %10s %10s %10s %11s %9s\n", "batch", "schedule", "step ms", "experts", "read MB",
              "minimum MB", "x minimum", "per-token MB", "roofline");
  ReadBandwidthProbe probe(pool, dram_probe_bytes());
  (void)probe.once();
  MoeScratch scratch;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int T : o.batches) {
    // A fresh set of rows every step, so the router picks other experts each time.
    std::vector<std::vector<kern::bf16_t>> inputs(static_cast<size_t>(o.steps));
    for (auto& in : inputs) {
      in.resize(static_cast<size_t>(T) * o.hidden);
      for (kern::bf16_t& v : in) v = kern::f32_to_bf16(dist(rng));
    }
    std::vector<float> x(static_cast<size_t>(T) * o.hidden, 0.0f);
    std::vector<float> linear_ws(model_linear_workspace_floats(packed, T, 1, pool.size()) + 16);
    for (int spread : {8, 0}) {
      MoeBlockArgs a;
      a.config = &c;
      a.layer = &layer;
      a.x = x.data();
      a.tokens = T;
      a.linear_ws = linear_ws.data();
      a.isa = isa;
      a.quant_isa = quant_isa_for(isa);
      a.spread_max_rows = spread;
      a.xb = inputs.front().data();
      (void)moe_block(a, scratch, pool);  // warm-up: scratch, page faults
      std::vector<double> ms, experts, read, per_token, ratio;
      for (int s = 0; s < o.steps; ++s) {
        a.xb = inputs[static_cast<size_t>(s)].data();
        const Rate bw = probe.once();
        const double t0 = now_seconds();
        const MoeStepStats st = moe_block(a, scratch, pool);
        const double dt = now_seconds() - t0;
        ms.push_back(dt * 1e3);
        experts.push_back(st.active_experts);
        read.push_back(mb(st.expert_bytes));
        per_token.push_back(mb(st.per_token_bytes));
        ratio.push_back(static_cast<double>(st.expert_bytes + layer.router.bytes()) / dt / (bw.wall * 1e9));
      }
      // The minimum for the selected experts is their packed bytes once: what the dispatcher
      // reads by construction (one SwiGLU and one down linear per selected expert).
      const double minimum = summarize(experts).median * mb(expert_each);
      std::printf("%5d %8s %9.3f %8.0f %10.1f %10.1f %10.2f %11.1f %8.1f%%\n", T, spread ? "spread" : "all",
                  summarize(ms).median, summarize(experts).median, summarize(read).median, minimum,
                  summarize(read).median / minimum, summarize(per_token).median, 100.0 * summarize(ratio).median);
    }
  }
}

// (2) A whole random-weight MoE model.
void bench_model(const Options& o, const RunnerOptions& ro) {
  const ModelConfig c = moe_config(o, o.model_layers);
  Model meta;
  meta.config = c;
  std::unique_ptr<ModelRunner> runner;
  {
    const auto ck = random_checkpoint(c);
    runner = std::make_unique<ModelRunner>(meta, *ck, ro);
  }
  ThreadPool& pool = runner->thread_pool();
  std::printf(
      "\n(2) whole model: %d layers, hidden %d, %d heads (%d KV) of %d, %d experts of %d, top %d, vocab %d | "
      "%s | %s\n",
      c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.num_experts, c.moe_intermediate_size,
      c.num_experts_per_tok, c.vocab_size, runner->describe().c_str(), runner->weight_format().c_str());
  std::printf("%5s %9s %9s %10s %12s %12s %9s\n", "batch", "step ms", "tokens/s", "experts", "read MB/step",
              "per-token MB", "roofline");
  ReadBandwidthProbe probe(pool, dram_probe_bytes());
  (void)probe.once();
  std::mt19937 rng(11);
  // Bytes a step reads besides the experts: one token's decode bytes less its experts (one token
  // runs exactly top-k experts a layer; the warm-up step says how many bytes those are).
  size_t fixed_bytes = 0;
  {
    KvGeometry g{c.num_layers, c.num_kv_heads, c.head_dim, 32};
    ContiguousKvCache cache(g, 1, 32, runner->kv_dtype());
    (void)runner->forward({{1}, {{0, 0, 1, cache.block_table(0)}}, false}, cache);
    fixed_bytes = runner->decode_weight_bytes() - runner->last_moe_step().expert_bytes;
  }
  for (int B : o.batches) {
    KvGeometry g{c.num_layers, c.num_kv_heads, c.head_dim, 32};
    ContiguousKvCache cache(g, B, o.prompt + o.steps + 2, runner->kv_dtype());
    ForwardBatch prefill;
    for (int s = 0; s < B; ++s) {
      for (int t = 0; t < o.prompt; ++t) prefill.tokens.push_back(static_cast<int>(rng() % unsigned(o.vocab)));
      prefill.sequences.push_back({s, 0, o.prompt, cache.block_table(s), 1});
    }
    (void)runner->forward(prefill, cache);
    std::vector<double> ms, experts, read, per_token, ratio;
    for (int i = 0; i < o.steps; ++i) {
      ForwardBatch step;
      for (int s = 0; s < B; ++s) {
        step.tokens.push_back(static_cast<int>(rng() % static_cast<unsigned>(o.vocab)));
        step.sequences.push_back({s, o.prompt + i, 1, cache.block_table(s), 1});
      }
      const Rate bw = probe.once();
      const double t0 = now_seconds();
      runner->recycle_logits(runner->forward(step, cache));  // as the engine does: no fresh logits a step
      const double dt = now_seconds() - t0;
      const ModelRunner::MoeStepBytes st = runner->last_moe_step();
      const size_t bytes = fixed_bytes + st.expert_bytes;
      ms.push_back(dt * 1e3);
      experts.push_back(st.active_experts);
      read.push_back(mb(bytes));
      per_token.push_back(mb(fixed_bytes + st.per_token_bytes));
      ratio.push_back(static_cast<double>(bytes) / dt / (bw.wall * 1e9));
    }
    std::printf("%5d %9.2f %9.1f %10.0f %12.1f %12.1f %8.1f%%\n", B, summarize(ms).median,
                B * 1e3 / summarize(ms).median, summarize(experts).median, summarize(read).median,
                summarize(per_token).median, 100.0 * summarize(ratio).median);
  }
  std::printf(
      "read MB/step: dense projections, routers and head (%.1f MB) plus the experts selected, each once; "
      "per-token MB: the same with each token's experts read apart\n",
      mb(fixed_bytes));
}

}  // namespace
}  // namespace slab::bench

int main(int argc, char** argv) {
  slab::bench::Options o;
  CLI::App app{"bench_moe: a mixture-of-experts layer and a whole random-weight MoE model against the roofline"};
  app.add_option("--hidden", o.hidden)->capture_default_str();
  app.add_option("--experts", o.experts)->capture_default_str();
  app.add_option("--top-k", o.top_k)->capture_default_str();
  app.add_option("--expert-inter", o.expert_inter, "Each expert's intermediate size")->capture_default_str();
  app.add_option("--heads", o.heads)->capture_default_str();
  app.add_option("--kv-heads", o.kv_heads)->capture_default_str();
  app.add_option("--head-dim", o.head_dim)->capture_default_str();
  app.add_option("--vocab", o.vocab)->capture_default_str();
  app.add_option("--model-layers", o.model_layers, "Layers of the whole model (0: skip it)")->capture_default_str();
  app.add_option("--steps", o.steps, "Timed steps per batch size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--prompt", o.prompt, "Prompt tokens before the decode steps")->capture_default_str();
  app.add_option("--batches", o.batches, "Tokens (layer) or sequences (model) a step")->capture_default_str();
  app.add_option("--threads", o.threads, "Compute threads, one pinned per physical core (0: all)")
      ->capture_default_str();
  app.add_option("--cpuset", o.cpuset, "OS cpus to compute on (default: the process's cpuset)");
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace slab;
    const Placement placement = resolve_placement(Topology::system(), o.cpuset, -1, o.threads);
    RunnerOptions ro;
    ro.n_threads = placement.threads();
    ro.cpu_list = placement.cpu_list();
    const CpuFeatures& f = cpu_features();
    const kern::Isa isa = f.has_avx512_bf16_kernels() ? kern::Isa::avx512_bf16
                          : f.has_avx2_kernels()      ? kern::Isa::avx2
                                                      : kern::Isa::scalar;
    if (isa == kern::Isa::scalar)
      throw std::runtime_error("this CPU has neither the AVX-512 BF16 nor the AVX2 kernels");
    std::printf("cpu: %s | kernels %s | %d threads\n", f.brand.c_str(), kern::isa_name(isa), placement.threads());
    {
      ThreadPoolOptions po;
      po.n_threads = placement.threads();
      const std::string cpus = placement.cpu_list();
      po.cpu_list = cpus.c_str();
      ThreadPool pool(po);
      std::printf("threads: %s\n", describe_thread_bindings(pool.bindings()).c_str());
      slab::bench::bench_layer(o, pool, isa);
    }
    if (o.model_layers > 0) slab::bench::bench_model(o, ro);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
