#pragma once
// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that lists its matches.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slab::tok {

class Regex {
 public:
  // Throws std::runtime_error naming `file` and `field` when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& file, const std::string& field);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of the non-empty, non-overlapping matches in `text`,
  // leftmost first. `text` must be valid UTF-8. Safe to call from several threads at once.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*; kept opaque so pcre2.h stays out of the headers
};

}  // namespace slab::tok
