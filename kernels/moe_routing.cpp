#include "kernels/moe_routing.h"

#include <cmath>

namespace slab::kern {

void moe_route(const float* logits, int m, int n_experts, int top_k, bool renormalize, int32_t* experts,
               float* weights) {
  for (int t = 0; t < m; ++t) {
    const float* row = logits + static_cast<std::ptrdiff_t>(t) * n_experts;
    int32_t* ids = experts + static_cast<std::ptrdiff_t>(t) * top_k;
    float* w = weights + static_cast<std::ptrdiff_t>(t) * top_k;
    float max = row[0];
    for (int e = 1; e < n_experts; ++e) max = std::fmax(max, row[e]);
    float sum = 0.0f;
    for (int e = 0; e < n_experts; ++e) sum += std::exp(row[e] - max);
    // Selection by repeated scans: top_k is small (2 to 8), and a strict > keeps the lower index
    // among equal logits. Softmax is monotonic, so the logits order the probabilities.
    for (int s = 0; s < top_k; ++s) {
      int best = -1;
      for (int e = 0; e < n_experts; ++e) {
        bool taken = false;
        for (int j = 0; j < s; ++j) taken = taken || ids[j] == e;
        if (!taken && (best < 0 || row[e] > row[best])) best = e;
      }
      ids[s] = best;
      w[s] = std::exp(row[best] - max) / sum;
    }
    if (renormalize) {
      float picked = 0.0f;
      for (int s = 0; s < top_k; ++s) picked += w[s];
      for (int s = 0; s < top_k; ++s) w[s] /= picked;
    }
  }
}

void moe_group_by_expert(const int32_t* experts, int m, int top_k, int n_experts, int32_t* offsets, int32_t* row_token,
                         int32_t* pick_row) {
  for (int e = 0; e <= n_experts; ++e) offsets[e] = 0;
  const int picks = m * top_k;
  for (int p = 0; p < picks; ++p) ++offsets[experts[p] + 1];
  for (int e = 0; e < n_experts; ++e) offsets[e + 1] += offsets[e];
  // Fill in token order, so each expert's rows come out with tokens ascending.
  for (int e = n_experts; e > 0; --e) offsets[e] = offsets[e - 1];
  offsets[0] = 0;
  for (int p = 0; p < picks; ++p) {
    const int e = experts[p];
    const int row = offsets[e + 1]++;
    row_token[row] = p / top_k;
    pick_row[p] = row;
  }
}

}  // namespace slab::kern
