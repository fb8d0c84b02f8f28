#pragma once
// A SentencePiece tokenizer.model through libsentencepiece, with transformers' LlamaTokenizer
// conventions around it: special-token text (control and unknown pieces) is split out before
// encoding, BOS/EOS from tokenizer_config.json.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace slab::tok {

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::filesystem::path& model_file,
                                                        const TokenizerConfig& config);
// The same from a serialized ModelProto (what a tokenizer.model file holds); `source` names it in
// errors.
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(std::string_view serialized_model, const std::string& source,
                                                        const TokenizerConfig& config);

}  // namespace slab::tok
