#include "engine/ngram_proposer.h"

#include <algorithm>

#include "engine/proposer.h"

namespace slab {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int max_tokens) {
  const int len = static_cast<int>(tokens.size());
  if (max_tokens <= 0) return {};
  for (int n = std::min(max_n, len - 1); n >= std::max(min_n, 1); --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest start first: the most recent copy is the likeliest to be continued. A start of
    // len - n would be the suffix itself.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n;
      const int count = std::min(max_tokens, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

void NgramProposer::propose(std::span<DraftSlot> slots) {
  for (DraftSlot& slot : slots) slot.draft = propose_ngram(slot.seq->tokens, ngram_min_, ngram_max_, slot.max_tokens);
}

}  // namespace slab
