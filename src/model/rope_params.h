#pragma once
// The rotary-embedding settings of a config in the plain form the kernels take.
#include "kernels/reference.h"
#include "model/model_config.h"

namespace slab {

inline ref::RopeFrequencyParams rope_frequency_params(const ModelConfig& config) {
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
  }
  return p;
}

}  // namespace slab
