#include "tokenizer/tokenizer.h"

namespace slab {

std::shared_ptr<const std::vector<std::string>> Tokenizer::vocabulary_bytes() const {
  std::call_once(vocabulary_bytes_once_, [this] {
    auto bytes = std::make_shared<std::vector<std::string>>(static_cast<size_t>(vocab_size()));
    for (int32_t id = 0; id < vocab_size(); ++id) (*bytes)[static_cast<size_t>(id)] = token_bytes(id);
    vocabulary_bytes_ = std::move(bytes);
  });
  return vocabulary_bytes_;
}

}  // namespace slab
