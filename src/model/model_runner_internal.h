#pragma once
// ModelRunner's private state, shared by model_runner.cpp (construction) and forward_bf16.cpp
// (the fast forward pass).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/rowwise_bf16.h"
#include "model/model_runner.h"
#include "model/moe_block.h"
#include "model/packed_weights.h"
#include "model/scratch.h"

namespace slab {

struct ModelRunner::Packed {
  PackedModel model;
};

// RoPE cos/sin of one frequency set for positions [0, positions): [position][rotary_dim / 2],
// grown (doubling) to cover the furthest position; computed once per position.
struct RopeTable {
  std::vector<float> inv_freq, cos, sin;
  float scale = 1.0f;  // longrope's attention factor, folded into cos and sin
  int positions = 0;

  void cover(int end_pos) {
    if (end_pos <= positions) return;
    const int half = static_cast<int>(inv_freq.size());
    const int want = std::max(end_pos, 2 * positions);
    cos.resize(static_cast<size_t>(want) * half);
    sin.resize(static_cast<size_t>(want) * half);
    kern::rope_tables(cos.data(), sin.data(), inv_freq.data(), half, positions, want, scale);
    positions = want;
  }
};

// Charges the wall time since the previous lap (or construction) to a phase: one clock read per
// phase, ~20 ns against parallel regions of microseconds and more, so it is always on.
class PhaseClock {
 public:
  explicit PhaseClock(ForwardPhaseSeconds& into) : into_(into), last_(std::chrono::steady_clock::now()) {}
  void lap(ForwardPhase phase) {
    const auto now = std::chrono::steady_clock::now();
    into_.seconds[static_cast<size_t>(phase)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  ForwardPhaseSeconds& into_;
  std::chrono::steady_clock::time_point last_;
};

// Activations for one step, sized for its token count at first use and grown when a larger
// step comes (allocated once in steady state).
struct ModelRunner::Workspace {
  Scratch<float> x, qkv, attn, gate_up, linear_ws, logits_rows, attn_ws, delta;
  Scratch<kern::bf16_t> xb, attn_b, act_b;
  // Indexed by RopeSet (rope_params.h): the config's frequencies, longrope's long factors,
  // gemma3's local base (the last two unused by other models).
  RopeTable rope[3];
  MoeScratch moe;  // mixture-of-experts layers only
  ModelRunner::MoeStepBytes moe_last_step;
};

}  // namespace slab
