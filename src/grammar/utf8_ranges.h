#pragma once
// Code point ranges to UTF-8 byte-range sequences (the construction RE2 and regex-automata's
// Utf8Sequences use): a range of scalar values becomes a few sequences of byte ranges that
// together accept exactly the UTF-8 encodings of those code points and nothing else (no
// overlongs, no surrogates D800-DFFF, nothing above 10FFFF).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar_ir.h"
#include "runtime/utf8_encode.h"

namespace slab::grammar {

using CodePointRange = std::pair<uint32_t, uint32_t>;  // inclusive
using ByteRangeSequence = std::vector<std::pair<uint8_t, uint8_t>>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

std::vector<ByteRangeSequence> utf8_sequences(uint32_t lo, uint32_t hi);

// Sorted, merged ranges; with `negate`, the complement over 0..10FFFF.
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate);

// A character class as alternatives of byte-set sequences: one-byte encodings merged into one
// set, and multi-byte sequences sharing their continuation bytes merged on their first byte.
std::vector<std::vector<ByteSet>> class_alternatives(const std::vector<CodePointRange>& normalized);

using slab::append_utf8;  // runtime/utf8_encode.h

}  // namespace slab::grammar
