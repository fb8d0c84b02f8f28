#include "model/moe_block.h"

#include <algorithm>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "kernels/moe_routing.h"
#include "kernels/rowwise_bf16.h"
#include "model/packed_linear.h"
#include "runtime/thread_pool.h"

namespace slab {
namespace {

// The most scratch any of `experts` needs on `threads` threads, rounded up to 64 bytes.
size_t experts_ws_floats(const PackedLayer& l, const std::vector<int>& experts, const int32_t* offsets, int threads) {
  size_t most = 0;
  for (int e : experts) {
    const PackedExpert& pe = l.experts[static_cast<size_t>(e)];
    const int m = offsets[e + 1] - offsets[e];
    most = std::max({most, packed_linear_workspace_floats(pe.gate_up, m, threads),
                     packed_linear_workspace_floats(pe.down, m, threads)});
  }
  return (most + 15) / 16 * 16;
}

// The fields every linear of the block shares: m input rows of width k, scratch, kernel set.
kern::LinearArgs rows_in(const kern::bf16_t* x, int k, int m, float* ws, const MoeBlockArgs& ka) {
  kern::LinearArgs a;
  a.x = x;
  a.ldx = static_cast<size_t>(k);
  a.m = m;
  a.workspace = ws;
  a.isa = ka.isa;
  a.amx = ka.amx;  // BF16 experts of 9 rows and more on the AMX tiles (the flag is ignored below that)
  a.blocking = ka.blocking;
  return a;
}

// One expert on its rows: SwiGLU (fused, or [gate; up] to FP32 then SiLU·up when quantized)
// into act, then down into out. run_on_all is the pool's, or a single thread's own.
template <typename RunOnAll>
void run_expert(const PackedExpert& e, const kern::bf16_t* rows, int m, int hidden, int inter, kern::bf16_t* act,
                float* gate_up, float* out, float* ws, const MoeBlockArgs& ka, int n_threads, RunOnAll&& run_on_all) {
  kern::LinearArgs a = rows_in(rows, hidden, m, ws, ka);
  if (fused_gate_up(e.gate_up)) {
    a.out_bf16 = act;
    a.ldo = static_cast<size_t>(inter);
    a.swiglu = true;
    packed_linear(a, e.gate_up, ka.quant_isa, n_threads, run_on_all);
  } else {
    a.out_f32 = gate_up;
    a.ldo = 2 * static_cast<size_t>(inter);
    packed_linear(a, e.gate_up, ka.quant_isa, n_threads, run_on_all);
    run_on_all([&](int thread, int threads) {
      for (int r = thread; r < m; r += threads) {
        const float* gu = gate_up + static_cast<size_t>(r) * 2 * inter;
        kern::silu_mul_to_bf16(act + static_cast<size_t>(r) * inter, gu, gu + inter, inter, ka.isa);
      }
    });
  }
  kern::LinearArgs d = rows_in(act, inter, m, ws, ka);
  d.out_f32 = out;
  d.ldo = static_cast<size_t>(hidden);
  packed_linear(d, e.down, ka.quant_isa, n_threads, run_on_all);
}

}  // namespace

MoeStepStats moe_block(const MoeBlockArgs& a, MoeScratch& s, ThreadPool& pool) {
  const ModelConfig& c = *a.config;
  const PackedLayer& l = *a.layer;
  const int T = a.tokens, hidden = c.hidden_size, inter = c.moe_intermediate_size;
  const int n_experts = c.num_experts, k = c.num_experts_per_tok, picks = T * k;
  const int n_threads = pool.size();
  auto run_on_all = [&pool](auto&& fn) { pool.run_on_all(fn); };

  // Routing: logits from the BF16 router, then softmax / top-k / weights per token.
  float* logits = s.router_logits.get(static_cast<size_t>(T) * n_experts);
  {
    kern::LinearArgs r = rows_in(a.xb, hidden, T, a.linear_ws, a);
    r.out_f32 = logits;
    r.ldo = static_cast<size_t>(n_experts);
    packed_linear(r, l.router, a.quant_isa, n_threads, run_on_all);
  }
  int32_t* experts = s.experts.get(static_cast<size_t>(picks));
  float* weights = s.weights.get(static_cast<size_t>(picks));
  pool.parallel_for_dynamic(T, pool.dynamic_grain(T), [&](int t, int) {
    kern::moe_route(logits + static_cast<size_t>(t) * n_experts, 1, n_experts, k, c.moe_renormalize,
                    experts + static_cast<size_t>(t) * k, weights + static_cast<size_t>(t) * k);
  });
  int32_t* offsets = s.offsets.get(static_cast<size_t>(n_experts) + 1);
  int32_t* row_token = s.row_token.get(static_cast<size_t>(picks));
  int32_t* pick_row = s.pick_row.get(static_cast<size_t>(picks));
  kern::moe_group_by_expert(experts, T, k, n_experts, offsets, row_token, pick_row);

  // Gather: each expert's rows contiguous.
  kern::bf16_t* rows = s.rows.get(static_cast<size_t>(picks) * hidden);
  pool.parallel_for_dynamic(picks, pool.dynamic_grain(picks), [&](int r, int) {
    std::copy_n(a.xb + static_cast<size_t>(row_token[r]) * hidden, hidden, rows + static_cast<size_t>(r) * hidden);
  });
  kern::bf16_t* act = s.act.get(static_cast<size_t>(picks) * inter);
  float* out = s.expert_out.get(static_cast<size_t>(picks) * hidden);
  const bool fused = fused_gate_up(l.experts.front().gate_up);
  float* gate_up = fused ? nullptr : s.gate_up.get(static_cast<size_t>(picks) * 2 * inter);

  auto rows_of = [&](int e) { return offsets[e + 1] - offsets[e]; };
  MoeStepStats stats;
  std::vector<int> small, large;
  for (int e = 0; e < n_experts; ++e) {
    const int m = rows_of(e);
    if (m == 0) continue;
    ++stats.active_experts;
    const PackedExpert& pe = l.experts[static_cast<size_t>(e)];
    stats.expert_bytes += pe.gate_up.bytes() + pe.down.bytes();
    stats.per_token_bytes += static_cast<size_t>(m) * (pe.gate_up.bytes() + pe.down.bytes());
    (m <= a.spread_max_rows ? small : large).push_back(e);
  }
  // Whole rounds of small experts go one per thread; the remainder (the fewest rows) joins the
  // large ones. Rows add compute to an expert's equal weight stream: most rows first, dealt in
  // snake order (round r left to right, r + 1 right to left) so each thread's rows even out.
  std::stable_sort(small.begin(), small.end(), [&](int x, int y) { return rows_of(x) > rows_of(y); });
  const size_t spread = small.size() / static_cast<size_t>(n_threads) * static_cast<size_t>(n_threads);
  large.insert(large.end(), small.begin() + static_cast<std::ptrdiff_t>(spread), small.end());
  small.resize(spread);

  auto expert_at = [&](int e, auto&& runner, float* ws, int threads) {
    const size_t r0 = static_cast<size_t>(offsets[e]);
    run_expert(l.experts[static_cast<size_t>(e)], rows + r0 * hidden, rows_of(e), hidden, inter, act + r0 * inter,
               fused ? nullptr : gate_up + r0 * 2 * inter, out + r0 * hidden, ws, a, threads, runner);
  };
  if (!large.empty()) {
    float* shared_ws = s.shared_ws.get(experts_ws_floats(l, large, offsets, n_threads));
    for (int e : large) expert_at(e, run_on_all, shared_ws, n_threads);
  }
  if (!small.empty()) {
    const size_t per_thread = experts_ws_floats(l, small, offsets, 1);  // 64-byte aligned shares
    float* thread_ws = s.thread_ws.get(per_thread * static_cast<size_t>(n_threads));
    pool.run_on_all([&](int thread, int threads) {
      auto alone = [](auto&& fn) { fn(0, 1); };
      const size_t n = static_cast<size_t>(threads), me = static_cast<size_t>(thread);
      for (size_t round = 0; round * n < small.size(); ++round) {
        const size_t i = round * n + (round % 2 == 0 ? me : n - 1 - me);
        expert_at(small[i], alone, thread_ws + per_thread * me, 1);
      }
    });
  }

  // Combine: x[t] += sum over its picks of weight · out, summed first as transformers does.
  pool.parallel_for_dynamic(T, pool.dynamic_grain(T), [&](int t, int) {
    float* xt = a.x + static_cast<size_t>(t) * hidden;
    for (int i = 0; i < hidden; ++i) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) {
        const size_t pick = static_cast<size_t>(t) * k + static_cast<size_t>(j);
        sum += weights[pick] * out[static_cast<size_t>(pick_row[pick]) * hidden + static_cast<size_t>(i)];
      }
      xt[i] += sum;
    }
  });
  return stats;
}

}  // namespace slab
