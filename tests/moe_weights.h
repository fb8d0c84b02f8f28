#pragma once
// Two loads of one mixture-of-experts layer (another file layout, GGUF against safetensors) must
// hold the same router and expert matrices, value for value.
#include <catch2/catch.hpp>

#include "model/weights.h"

namespace slab::test {

inline void check_same_moe_layer(const LayerWeights& got, const LayerWeights& want) {
  CHECK(got.router == want.router);
  REQUIRE(got.experts.size() == want.experts.size());
  for (size_t e = 0; e < want.experts.size(); ++e) {
    INFO("expert " << e);
    CHECK(got.experts[e].w_gate == want.experts[e].w_gate);
    CHECK(got.experts[e].w_up == want.experts[e].w_up);
    CHECK(got.experts[e].w_down == want.experts[e].w_down);
  }
}

}  // namespace slab::test
