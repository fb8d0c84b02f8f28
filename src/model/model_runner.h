#pragma once
// The model runner: owns the weights in the kernels' layout, the thread pool and the activation
// workspace, and runs one forward pass over a flattened batch (docs/ARCHITECTURE.md, "How a request flows").
//
// Kernel set, chosen once at construction from cpu_features() (or forced by RunnerOptions):
// avx512_bf16 or avx2 run the BF16 path (weights packed once into linear_bf16 panels with fused
// QKV and fused gate+up; no FP32 copy of any matrix is kept); anything else runs the scalar
// FP32 reference forward(const Model&, ...), which stays the oracle in tests.
//
// Thread pool: created lazily by the first forward() on the thread that calls it, with the
// caller pinned as worker 0. The engine calls forward() on its loop thread, so the loop thread
// is the one pinned; constructing the pool in the constructor would pin the main thread instead,
// and every thread main creates later (HTTP workers, the engine loop) would inherit core 0.
#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/linear_bf16.h"
#include "kv/kv_cache.h"
#include "model/checkpoint.h"
#include "model/forward_work.h"
#include "model/model.h"
#include "model/packed_quant.h"

namespace slab {

class ThreadPool;

// The kinds of step a fast forward pass is made of, for timing where its wall time goes.
enum class ForwardPhase {
  embed,      // token embeddings
  norm,       // the RMSNorms into the linears' BF16 input (and post-norms)
  qkv,        // fused QKV projection
  rope_kv,    // q/k norms, RoPE, the K/V cache write
  attention,  // attention over the cache, its output to BF16
  o_proj,     // output projection + residual
  mlp_up,     // gate+up (+ activation), or a mixture-of-experts block whole
  down,       // down projection + residual
  head,       // final norm, output head, softcap
  count
};
const char* forward_phase_name(ForwardPhase phase);

// Wall seconds the fast forward passes spent in each phase, summed over calls (zeros on the
// reference path). Timed on the dispatching thread around each phase's parallel region(s):
// at many threads it shows whether the linears or the steps around them hold a pass back.
struct ForwardPhaseSeconds {
  std::array<double, static_cast<size_t>(ForwardPhase::count)> seconds{};
  double operator[](ForwardPhase p) const { return seconds[static_cast<size_t>(p)]; }
  double total() const;
  ForwardPhaseSeconds operator-(const ForwardPhaseSeconds& earlier) const;
};

enum class KernelChoice { automatic, avx512_bf16, avx2, reference };

struct RunnerOptions {
  KernelChoice kernels = KernelChoice::automatic;
  int n_threads = 0;  // 0: one per physical core of cpu_list
  bool pin_threads = true;
  std::string cpu_list;           // the pool's cores as a Linux cpu list; "": the process's cpuset
  int numa_node = -1;             // bind packed weights and the KV cache to this node; -1: first touch
  int max_batched_tokens = 0;     // rows the workspace is sized for at the first call (it grows)
  LoadProgress on_load_progress;  // optional: called as the checkpoint's tensors are packed
  // Projections as BF16 or W8/W4 (model/packed_quant.h); the reference path ignores it (FP32).
  WeightQuantization quantization = WeightQuantization::automatic;
  bool quantize_lm_head = false;  // with w8/w8g32/w4/w4g128: the output head and the embedding table as well
  // Linears past the decode sizes (BF16 from 9 rows; quantized from 16-32 rows by format,
  // kernels/linear_quant.h) on the AMX tiles where the CPU has AMX-BF16 and Linux grants the
  // tile state (with the AVX-512 BF16 kernels only): BF16 weights on TDPBF16PS, quantized ones on
  // TDPBSUD where it has AMX-INT8 or dequantized to BF16 on TDPBF16PS; with BF16 KV, attention on
  // TDPBF16PS as well (kernels/attention.h: prefill, and decode for GQA groups of 8 or more);
  // false keeps all of it on AVX-512.
  bool amx = true;
  // The BF16 linears' cache blocking; unset: model/linear_tuning.h's entry for this CPU.
  std::optional<kern::LinearBlocking> blocking;
};

class ModelRunner {
 public:
  // Packs straight from the checkpoint's tensors (fast path) or converts them to FP32 (reference
  // path). `model` gives config and generation defaults; its weights are not used and may be empty.
  ModelRunner(const Model& model, const Checkpoint& checkpoint, const RunnerOptions& options = {});
  // From an already loaded FP32 model, which must outlive the runner (the reference path reads
  // its weights; the fast path packs from them once).
  explicit ModelRunner(const Model& model, const RunnerOptions& options = {});
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Same contract as forward(const Model&, ...): writes the batch's K/V into `cache`, returns
  // logits [rows, vocab] (last token of each sequence, or every token when batch.all_logits).
  std::vector<float> forward(const ForwardBatch& batch, KvCache& cache);
  // Hands a vector forward() returned back for the next forward() to fill. A fresh rows × vocab
  // vector was zero-filled and page-faulted in on the calling thread every step: at 64 rows of a
  // 32k vocabulary ~2-3 ms of serial time per step on Zen 4, which more cores do not shorten.
  void recycle_logits(std::vector<float>&& logits);

  const ModelConfig& config() const { return meta_.config; }
  const GenerationConfig& generation() const { return meta_.generation; }
  bool uses_reference() const { return reference_ != nullptr; }
  // The KV cache dtype forward() needs: FP32 for the reference forward, BF16 for the fast path
  // (the SLAB attention kernels read BF16 K/V). Caches passed to forward() must be allocated so.
  KvDtype kv_dtype() const { return reference_ ? KvDtype::f32 : KvDtype::bf16; }
  kern::Isa isa() const { return isa_; }
  bool amx() const { return amx_; }  // prefill linears on the AMX tiles (BF16; W8/W4 with AMX-INT8)
  const kern::LinearBlocking& blocking() const { return blocking_; }
  // e.g. "bf16 avx512_bf16 kernels, 2 threads" or "float32 scalar reference kernels, 1 thread".
  std::string describe() const;
  // The weights' formats for logs: "projections W8 per-channel 450.0 MiB, lm_head BF16 259.6 MiB
  // (BF16 -> W8 per-channel (RTN) x 96)", or "FP32 (scalar reference path)".
  std::string weight_format() const;
  // Whether any projection runs on the INT8/INT4 kernels.
  bool has_quantized_weights() const;
  // Bytes of packed weights one decode step of one token streams (all layers + lm_head; of a
  // mixture of experts the router and num_experts_per_tok experts); 0 on the reference path.
  size_t decode_weight_bytes() const;
  int num_threads() const;
  // Mixture-of-experts work of the last forward() (zeros for dense models and on the reference
  // path): experts run, summed over layers, the bytes of their packed matrices (each read once
  // per step) and what running every token's experts apart would have read.
  struct MoeStepBytes {
    int active_experts = 0;
    size_t expert_bytes = 0, per_token_bytes = 0;
  };
  MoeStepBytes last_moe_step() const;
  // Per-phase wall time of every fast forward pass so far (take differences around a span).
  const ForwardPhaseSeconds& phase_seconds() const { return phase_seconds_; }
  // What every fast forward pass so far had to do at the least (FLOPs, bytes; model/forward_work.h),
  // by the pass's rows; take differences around a span and bound its time by the machine's peaks.
  const ForwardWorkByRows& forward_work() const { return forward_work_; }
  // The NUMA node weights are bound to and the KV cache should be (-1: none).
  int numa_node() const { return options_.numa_node; }
  // Bytes of weights the runner holds: packed matrices, embedding and norms (FP32 on the reference path).
  size_t weight_bytes() const;
  // The runner's pool (created here if no forward ran yet, on the calling thread, which becomes
  // pinned worker 0), for callers that measure the machine on the same threads (slabserve bench)
  // and for the engine, which starts it on its loop thread.
  ThreadPool& thread_pool();
  // Runs this runner's passes on `owner`'s pool (created there if need be, on the calling
  // thread): a speculative draft model and its target take turns on the same cores, and two
  // pools would spin against each other between passes. Call it before this runner's first pass.
  void share_thread_pool(ModelRunner& owner);
  // The OS cpus each pool thread is pinned to (ThreadPool::bindings()); empty before the pool exists.
  std::vector<std::vector<int>> thread_bindings() const;

 private:
  struct Packed;
  struct Workspace;
  void init(const Checkpoint& checkpoint, const RunnerOptions& options);
  void ensure_pool();
  std::vector<float> forward_fast(const ForwardBatch& batch, KvCache& cache);

  Model meta_;                         // config + generation; weights empty unless owned_fp32_
  const Model* reference_ = nullptr;   // the FP32 model the reference path runs
  std::unique_ptr<Model> owned_fp32_;  // when the runner converted the checkpoint itself
  kern::Isa isa_ = kern::Isa::scalar;
  bool amx_ = false;
  kern::LinearBlocking blocking_;
  RunnerOptions options_;
  std::unique_ptr<Packed> packed_;
  std::unique_ptr<Workspace> ws_;
  std::shared_ptr<ThreadPool> pool_;  // shared with a draft model's runner (share_thread_pool)
  std::vector<float> spare_logits_;   // recycle_logits(): reused by the next forward_fast
  ForwardPhaseSeconds phase_seconds_;
  ForwardWorkByRows forward_work_;
};

// A Hugging Face folder to a runner without the FP32 copy of the weights: config and
// generation defaults from load_model_metadata, tensors packed from the memory-mapped
// checkpoint, which is closed again afterwards.
std::unique_ptr<ModelRunner> load_model_runner(const std::filesystem::path& model_dir,
                                               const RunnerOptions& options = {});

}  // namespace slab
