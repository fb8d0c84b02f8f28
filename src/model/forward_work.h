#pragma once
// What a forward pass had to do at the least, counted from the batch's shape and the packed
// weights (never timed): the multiply-adds of its linears and of attention, and the bytes of
// weights and cached K/V it had to read at least once. Divided by the machine's measured peaks
// it bounds the pass's time from below, so a served figure can be printed beside the limit the
// machine sets on it (bench_engine), and two thread counts' bounds say how far the machine
// itself lets the figure scale.
#include <array>
#include <cstddef>
#include <cstdint>

namespace slab {

struct ModelConfig;
struct ForwardBatch;
struct PackedModel;

struct ForwardWork {
  double linear_flops = 0;  // 2 × rows × inputs × outputs over every projection run (experts: the rows routed to each)
  double attention_flops = 0;  // 4 × head_dim × query heads × keys attended (QKᵀ and P·V), over tokens and layers
  double weight_bytes = 0;     // packed matrices the pass ran, each once (of a mixture: the experts it ran)
  double kv_bytes = 0;         // K and V of the keys attended, each once per sequence and layer (BF16)
  ForwardWork& operator+=(const ForwardWork& o);
  ForwardWork operator-(const ForwardWork& o) const;
};

// Passes summed by their rows, bucket b holding passes of 2^b to 2^(b+1) - 1 tokens (the last
// one everything larger). Passes of one bucket have about the same FLOPs per weight byte, so
// bounding each bucket's sums by the larger of its compute and memory time comes close to
// bounding every pass alone, and is never above that: a prefill pass and a decode pass summed
// together would hide that the one is compute-bound and the other memory-bound.
struct ForwardWorkByRows {
  static constexpr int kBuckets = 16;
  std::array<ForwardWork, kBuckets> work{};
  std::array<int64_t, kBuckets> passes{};
  static int bucket(int rows);
  void add(int rows, const ForwardWork& w);
  ForwardWorkByRows operator-(const ForwardWorkByRows& earlier) const;
  int64_t total_passes() const;
};

// The work of one pass of `batch` over `model`: `logit_rows` rows through the output head; of
// mixture-of-experts layers every token through num_experts_per_tok experts, whose packed bytes
// the pass read are `expert_bytes` (summed over layers, as the MoE block reports them).
ForwardWork count_forward_work(const ModelConfig& config, const PackedModel& model, const ForwardBatch& batch,
                               int logit_rows, size_t expert_bytes);

// The machine's limits on the pool that runs the passes: the highest multiply-add rate its
// linears' and attention's kernels can reach (FLOP/s, an INT8 product and its add counted as
// two), and streaming read bandwidth (bytes/s).
struct ForwardPeaks {
  double linear_flops_per_s = 0;
  double attention_flops_per_s = 0;
  double read_bytes_per_s = 0;
};

// The least time the passes could take on a machine with these peaks: per bucket, the larger of
// the compute time (linears then attention, which run one after the other) and the time to read
// weights and K/V once. Zero for no work; a zero peak leaves that term out.
struct ForwardBound {
  double seconds = 0;          // the bound
  double compute_seconds = 0;  // the compute terms alone, summed over the buckets
  double memory_seconds = 0;   // the read terms alone
};
ForwardBound forward_time_bound(const ForwardWorkByRows& work, const ForwardPeaks& peaks);

}  // namespace slab
