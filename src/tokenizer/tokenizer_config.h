#pragma once
// The parts of tokenizer_config.json that change tokenisation: BOS/EOS insertion and the text of
// the special tokens chat templates use.
#include <filesystem>
#include <optional>
#include <string>

namespace slab::tok {

struct TokenizerConfig {
  std::optional<bool> add_bos_token;  // absent: the tokenizer's own default
  std::optional<bool> add_eos_token;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
};

// A missing file gives an empty config. Throws naming the file and field when a field has the
// wrong type or the JSON is malformed.
TokenizerConfig read_tokenizer_config(const std::filesystem::path& path);

}  // namespace slab::tok
