#pragma once
// ModelRunner's private state, shared by model_runner.cpp (construction) and forward_bf16.cpp
// (the fast forward pass).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/bf16.h"
#include "model/model_runner.h"
#include "model/packed_weights.h"
#include "runtime/aligned_buffer.h"

namespace slab {

struct ModelRunner::Packed {
  PackedModel model;
};

// A 64-byte aligned array that only grows (contents are not kept when it does).
template <typename T>
class Scratch {
 public:
  T* get(size_t count) {
    if (count > capacity_) {
      buf_ = AlignedBuffer(std::max<size_t>(count, 1) * sizeof(T));
      capacity_ = count;
    }
    return buf_.as<T>();
  }

 private:
  AlignedBuffer buf_;
  size_t capacity_ = 0;
};

// Activations for one step, sized for its token count at first use and grown when a larger
// step comes (allocated once in steady state).
struct ModelRunner::Workspace {
  Scratch<float> x, qkv, attn, gate_up, linear_ws, logits_rows, attn_ws;
  Scratch<kern::bf16_t> xb, attn_b, act_b;
  std::vector<float> inv_freq, rope_cos, rope_sin;  // tables: [position][head_dim / 2]
  int rope_positions = 0;                           // positions the tables cover
};

}  // namespace slab
