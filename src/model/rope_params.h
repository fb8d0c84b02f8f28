#pragma once
// The rotary-embedding settings of a config in the plain form the kernels take.
#include "kernels/reference.h"
#include "model/model_config.h"

namespace slab {

// Values of each head that rotate (configs built in code may leave rotary_dim 0: all of them).
inline int rotary_dim_of(const ModelConfig& config) {
  return config.rotary_dim > 0 ? config.rotary_dim : config.head_dim;
}

// longrope: whether a forward step whose furthest position of the sequence is end_pos - 1 uses
// the long factors. transformers decides per forward call from max(position_ids) + 1 >
// original_max_position_embeddings and keeps the cached keys as they were rotated; the engine
// decides per sequence and step the same way, so a prompt prefilled in one step and decoded one
// token a step gets exactly transformers' generate() (a chunked prefill gets what transformers
// gives for the same chunks).
inline bool uses_long_rope(const ModelConfig& config, int end_pos) {
  return config.rope_scaling.type == RopeScalingType::longrope &&
         end_pos > config.rope_scaling.original_max_position_embeddings;
}

inline ref::RopeFrequencyParams rope_frequency_params(const ModelConfig& config, bool long_factors = false) {
  ref::RopeFrequencyParams p;
  p.theta = config.rope_theta;
  p.factor = config.rope_scaling.factor;
  p.low_freq_factor = config.rope_scaling.low_freq_factor;
  p.high_freq_factor = config.rope_scaling.high_freq_factor;
  p.original_max_position_embeddings = config.rope_scaling.original_max_position_embeddings;
  switch (config.rope_scaling.type) {
    case RopeScalingType::none: p.scaling = ref::RopeScalingKind::none; break;
    case RopeScalingType::linear: p.scaling = ref::RopeScalingKind::linear; break;
    case RopeScalingType::llama3: p.scaling = ref::RopeScalingKind::llama3; break;
    case RopeScalingType::longrope:
      p.scaling = ref::RopeScalingKind::longrope;
      p.ext_factors = long_factors ? config.rope_scaling.long_factor.data() : config.rope_scaling.short_factor.data();
      break;
  }
  return p;
}

// The frequency sets a model uses, by index: the config's, longrope's long factors, and the
// local (sliding-layer) base of gemma3. Unused sets are computed anyway (a few floats).
enum RopeSet { kRopeGlobal = 0, kRopeLong = 1, kRopeLocal = 2, kRopeSets = 3 };

inline ref::RopeFrequencyParams rope_set_params(const ModelConfig& config, int set) {
  if (set != kRopeLocal) return rope_frequency_params(config, set == kRopeLong);
  ref::RopeFrequencyParams p;
  p.theta = config.rope_local_theta > 0.0f ? config.rope_local_theta : config.rope_theta;
  return p;
}

// The set layer `layer` uses for a sequence whose step ends at end_pos.
inline int rope_set_for(const ModelConfig& config, int layer, int end_pos) {
  if (layer_uses_local_rope(config, layer)) return kRopeLocal;
  return uses_long_rope(config, end_pos) ? kRopeLong : kRopeGlobal;
}

// cos/sin multiplier of a set: longrope's attention factor on the global sets only.
inline float rope_set_scale(const ModelConfig& config, int set) {
  return set == kRopeLocal ? 1.0f : config.rope_scaling.attention_factor;
}

}  // namespace slab
