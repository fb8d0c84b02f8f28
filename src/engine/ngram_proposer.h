#pragma once
// Speculative decoding's n-gram (prompt lookup) proposer: a sequence that is copying from its
// own context (a quoted passage, code being edited, a repeated list) will likely go on as the
// earlier copy did. It needs no model: the draft is the tokens that followed the most recent
// earlier occurrence of the sequence's last n tokens.
#include <cstdint>
#include <span>
#include <vector>

namespace slab {

// For n from max_n down to min_n: the last n tokens of `tokens` (prompt and output so far) are
// looked for earlier in `tokens`, latest occurrence first; the first match found proposes the up
// to `max_tokens` tokens that followed it (fewer when the context ends first). Empty when no
// n-gram recurs or max_tokens <= 0.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int max_tokens);

}  // namespace slab
