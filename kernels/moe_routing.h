#pragma once
// Mixture-of-experts routing: which experts each token runs and with what weight, and the
// grouping of those picks by expert that lets one expert's weights be read once for all the
// tokens routed to it. Scalar only: per token it is a softmax and a top-k over num_experts
// values (8 to 128), a few hundred operations beside the millions of the expert linears.
#include <cstdint>

namespace slab::kern {

// For each of m rows of router logits [m][n_experts]: softmax in FP32 over all experts, the
// top_k most probable experts (largest first; equal probabilities: the lower index first, as
// torch.topk on CPU), and their probabilities as weights, divided by their sum when renormalize.
// Writes experts[m][top_k] and weights[m][top_k].
void moe_route(const float* logits, int m, int n_experts, int top_k, bool renormalize, int32_t* experts,
               float* weights);

// Groups the m × top_k picks by expert, tokens ascending within an expert:
//   offsets[n_experts + 1]: expert e's rows are [offsets[e], offsets[e + 1]) of the grouped order;
//   row_token[m * top_k]:  the token of each grouped row;
//   pick_row[m * top_k]:   the grouped row of pick (token t, slot s) at t * top_k + s.
// Each token picks an expert at most once, so an expert has at most m rows.
void moe_group_by_expert(const int32_t* experts, int m, int top_k, int n_experts, int32_t* offsets, int32_t* row_token,
                         int32_t* pick_row);

}  // namespace slab::kern
