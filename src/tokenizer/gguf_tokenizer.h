#pragma once
// A tokenizer from GGUF metadata alone (tokenizer.ggml.*), built on the tokenizers the project
// already has rather than a third implementation:
//  - model "llama": SentencePiece pieces, scores and types, handed to libsentencepiece as the
//    ModelProto a tokenizer.model file would hold (BPE with byte fallback, identity normaliser);
//  - model "gpt2": byte-level BPE vocabulary and merges, with the pre-tokeniser that
//    tokenizer.ggml.pre names (llama-bpe, qwen2, default), handed to the tokenizer.json tokenizer.
#include <memory>

#include "runtime/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace slab::tok {

// Throws std::runtime_error naming the file and the key at fault (a missing or mistyped array,
// arrays of different lengths, an unsupported tokenizer.ggml.model).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file);

}  // namespace slab::tok
