#include "model/forward_work.h"

#include <algorithm>

#include "model/model.h"
#include "model/model_config.h"
#include "model/packed_weights.h"

namespace slab {
namespace {

double matrix_flops(const PackedMatrix& m, double rows) { return 2.0 * rows * m.n * m.k; }

// Keys that tokens start..start+n-1 attend, each position p seeing p + 1 keys, or at most
// `window` of them (0: no window).
double keys_attended(int64_t start, int64_t n, int64_t window) {
  double keys = 0;
  if (window <= 0) return static_cast<double>(n) * static_cast<double>(2 * start + n + 1) / 2;  // Σ (p + 1)
  for (int64_t p = start; p < start + n; ++p) keys += static_cast<double>(std::min(p + 1, window));
  return keys;
}

}  // namespace

ForwardWork& ForwardWork::operator+=(const ForwardWork& o) {
  linear_flops += o.linear_flops;
  attention_flops += o.attention_flops;
  weight_bytes += o.weight_bytes;
  kv_bytes += o.kv_bytes;
  return *this;
}

ForwardWork ForwardWork::operator-(const ForwardWork& o) const {
  return {linear_flops - o.linear_flops, attention_flops - o.attention_flops, weight_bytes - o.weight_bytes,
          kv_bytes - o.kv_bytes};
}

int ForwardWorkByRows::bucket(int rows) {
  int b = 0;
  while (b + 1 < kBuckets && rows >= (2 << b)) ++b;
  return b;
}

void ForwardWorkByRows::add(int rows, const ForwardWork& w) {
  const int b = bucket(rows);
  work[static_cast<size_t>(b)] += w;
  ++passes[static_cast<size_t>(b)];
}

ForwardWorkByRows ForwardWorkByRows::operator-(const ForwardWorkByRows& earlier) const {
  ForwardWorkByRows d;
  for (size_t b = 0; b < kBuckets; ++b) {
    d.work[b] = work[b] - earlier.work[b];
    d.passes[b] = passes[b] - earlier.passes[b];
  }
  return d;
}

int64_t ForwardWorkByRows::total_passes() const {
  int64_t n = 0;
  for (int64_t p : passes) n += p;
  return n;
}

ForwardWork count_forward_work(const ModelConfig& c, const PackedModel& model, const ForwardBatch& batch,
                               int logit_rows, size_t expert_bytes) {
  ForwardWork w;
  const double rows = static_cast<double>(batch.tokens.size());
  const double kv_row_bytes = 2.0 * c.num_kv_heads * c.head_dim * 2;  // K and V, BF16
  for (int l = 0; l < static_cast<int>(model.layers.size()); ++l) {
    const PackedLayer& layer = model.layers[static_cast<size_t>(l)];
    w.linear_flops += matrix_flops(layer.qkv, rows) + matrix_flops(layer.o, rows);
    w.weight_bytes += static_cast<double>(layer.qkv.bytes() + layer.o.bytes());
    if (layer.is_moe()) {
      const PackedExpert& e = layer.experts.front();
      const double routed = rows * c.num_experts_per_tok;
      w.linear_flops +=
          matrix_flops(layer.router, rows) + matrix_flops(e.gate_up, routed) + matrix_flops(e.down, routed);
      w.weight_bytes += static_cast<double>(layer.router.bytes());
    } else {
      w.linear_flops += matrix_flops(layer.gate_up, rows) + matrix_flops(layer.down, rows);
      w.weight_bytes += static_cast<double>(layer.gate_up.bytes() + layer.down.bytes());
    }
    const int64_t window = layer_window(c, l);
    for (const BatchSequence& s : batch.sequences) {
      w.attention_flops += 4.0 * c.head_dim * c.num_heads * keys_attended(s.start_pos, s.num_tokens, window);
      // Keys the sequence's tokens see at all: from the first token's window start to its end.
      const int64_t end = s.start_pos + s.num_tokens;
      const int64_t first = window > 0 ? std::max<int64_t>(0, s.start_pos + 1 - window) : 0;
      w.kv_bytes += kv_row_bytes * static_cast<double>(end - first);
    }
  }
  w.weight_bytes += static_cast<double>(expert_bytes);
  if (logit_rows > 0) {
    w.linear_flops += matrix_flops(model.lm_head, logit_rows);
    w.weight_bytes += static_cast<double>(model.lm_head.bytes());
  }
  return w;
}

ForwardBound forward_time_bound(const ForwardWorkByRows& work, const ForwardPeaks& peaks) {
  auto over = [](double amount, double rate) { return rate > 0 ? amount / rate : 0.0; };
  ForwardBound bound;
  for (const ForwardWork& w : work.work) {
    const double compute =
        over(w.linear_flops, peaks.linear_flops_per_s) + over(w.attention_flops, peaks.attention_flops_per_s);
    const double memory = over(w.weight_bytes + w.kv_bytes, peaks.read_bytes_per_s);
    bound.seconds += std::max(compute, memory);
    bound.compute_seconds += compute;
    bound.memory_seconds += memory;
  }
  return bound;
}

}  // namespace slab
