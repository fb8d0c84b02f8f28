#pragma once
// tokenizer.json normalizers: the text rewrites applied to each span between added tokens
// before pre-tokenisation. Only the kinds real checkpoints use are implemented.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace slab::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Null JSON gives nullptr (no normalisation). Throws naming `file` on unknown types.
std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& json, const std::string& file,
                                             const std::string& field);

}  // namespace slab::tok
