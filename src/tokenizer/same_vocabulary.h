#pragma once
// Whether two tokenizers speak the same token ids: a speculative draft model's proposals are
// token ids of the target's vocabulary, so they must mean the same text in both.
#include <string>

#include "tokenizer/tokenizer.h"

namespace slab {

// Empty when both have the same size, the same token string for every id, the same special ids
// and the same BOS and EOS ids; else the first difference found, saying which side is which
// with `a_name` and `b_name`.
std::string vocabulary_difference(const Tokenizer& a, const std::string& a_name, const Tokenizer& b,
                                  const std::string& b_name);

}  // namespace slab
