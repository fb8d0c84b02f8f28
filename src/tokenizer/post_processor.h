#pragma once
// tokenizer.json post-processors, reduced to what a single sequence needs: the special tokens put
// before and after it (TemplateProcessing; ByteLevel only trims offsets).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::tok {

struct SpecialTokenTemplate {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

// Null JSON gives an empty template. Throws naming `file` on unknown types or a template that
// does not contain sequence A exactly once.
SpecialTokenTemplate parse_post_processor(const nlohmann::json& json, const std::string& file,
                                          const std::string& field);

}  // namespace slab::tok
