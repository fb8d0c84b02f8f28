#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pcre2_regex.h"

#include <pcre2.h>

#include <stdexcept>

#include "tokenizer/json_file.h"
#include "tokenizer/utf8.h"

namespace slab::tok {
namespace {

// Per-thread match scratch: match data and a JIT stack large enough for long runs of
// whitespace or letters (the default 32 KiB is not).
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  MatchScratch() {
    data = pcre2_match_data_create(16, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (data == nullptr || context == nullptr || jit_stack == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& scratch() {
  thread_local MatchScratch instance;
  return instance;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& file, const std::string& field) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &error, &error_offset, nullptr);
  if (code == nullptr) {
    fail(file, field,
         "regex does not compile at offset " + std::to_string(error_offset) + ": " + pcre2_message(error) +
             " (pattern " + pattern + ")");
  }
  // Without JIT pcre2_match interprets the pattern: slower, same results.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  auto* code = static_cast<const pcre2_code*>(code_);
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw std::runtime_error("tokenizer regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      offset = begin + utf8_char_length(text, begin);  // step over an empty match
    }
  }
}

}  // namespace slab::tok
