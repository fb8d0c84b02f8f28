#pragma once
// The sparse MLP block of the fast forward pass (mixtral, qwen3_moe): route every token of the
// step, group the picks by expert, and run each selected expert once on all the rows routed to
// it, so that its weights are read once per step whatever the batch, not once per token.
//
//   router linear (BF16 in, FP32 logits) -> kern::moe_route (FP32 softmax, top-k, renormalise)
//   -> kern::moe_group_by_expert -> gather the normed BF16 rows expert by expert
//   -> per selected expert: SwiGLU linear (BF16 out) -> down linear (FP32 out)
//   -> per token: x += sum of weight · its experts' rows
//
// Threads, by load: an expert with more than spread_max_rows rows runs on every pool thread
// through the linear's own split (panels, or columns and rows); the small ones (decode) are
// dealt out whole, one expert per thread at a time, in rounds of n_threads (most rows first,
// snake order), so that a thread streams an expert's matrices start to end without meeting the
// others at a barrier; the experts left over after the last full round run on every thread, so
// no thread idles through a round it has no expert for.
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "model/model_config.h"
#include "model/packed_weights.h"
#include "model/scratch.h"

namespace slab {

class ThreadPool;

// The block's activations, grown to the largest step seen.
struct MoeScratch {
  Scratch<float> router_logits, weights, gate_up, expert_out, shared_ws, thread_ws;
  Scratch<int32_t> experts, offsets, row_token, pick_row;
  Scratch<kern::bf16_t> rows, act;
};

struct MoeBlockArgs {
  const ModelConfig* config = nullptr;
  const PackedLayer* layer = nullptr;  // layer->is_moe()
  const kern::bf16_t* xb = nullptr;    // [tokens][hidden]: the MLP's normed input
  float* x = nullptr;                  // [tokens][hidden]: the residual stream, added to
  int tokens = 0;
  float* linear_ws = nullptr;  // model_linear_workspace_floats(...) for `tokens` rows: the router's
  kern::Isa isa = kern::Isa::scalar;
  kern::Isa quant_isa = kern::Isa::scalar;
  bool amx = false;  // LinearArgs::amx for the router and BF16 experts (ModelRunner::amx())
  kern::LinearBlocking blocking;  // LinearArgs::blocking for them (ModelRunner::blocking())
  // Experts with at most this many rows are dealt out whole to threads (above); 0: every expert
  // runs on all threads (bench_moe compares the two).
  int spread_max_rows = 8;
};

// What one step did, for the benchmark: experts run and the bytes of their packed matrices
// (each read once), beside what running each token's experts separately would read.
struct MoeStepStats {
  int active_experts = 0;
  size_t expert_bytes = 0;     // router excluded
  size_t per_token_bytes = 0;  // tokens × top_k expert reads
};

MoeStepStats moe_block(const MoeBlockArgs& args, MoeScratch& scratch, ThreadPool& pool);

}  // namespace slab
