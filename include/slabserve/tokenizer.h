#pragma once
// The tokenizer of a loaded model, exposed as the engine's own interface (tokenizer/tokenizer.h
// holds no model or KV types): encode, decode, the incremental detokenizer for streaming,
// special tokens; and the UTF-8 helper front ends need for text offsets.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace slab::api {

using slab::IncrementalDetokenizer;
using slab::Tokenizer;
using slab::tok::count_code_points;

}  // namespace slab::api
