// Constrained-decoding cost per step: TokenMasker::fill_mask over Qwen3's vocabulary (151,669
// tokens) for llama.cpp's JSON grammar at a few states, the first (cold) call that computes the
// state's context tables and the warm median after, plus the grammar's compile time and the
// masker's construction (sorting the vocabulary). For scale: a decode step of a 0.5B model at
// batch 16 is ~80 ms here, so 16 masks should cost a few percent of that at most.
//
// Usage: bench_grammar [tokenizer.json[.xz]] [--reps N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar_vocab.h"
#include "machine_limits.h"
#include "runtime/cpu_features.h"

using namespace slab;

namespace {

double micros_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

struct Case {
  const char* name;
  const char* prefix;
};

const Case kCases[] = {
    {"after '{'", "{"},
    {"in a string", "{\"name\": \"hello wor"},
    {"between members", "{\"a\": 1, "},
    {"in a number", "{\"a\": 12"},
    {"after a value", "{\"a\": true"},
    {"nested string (depth 5)", "{\"a\": [{\"b\": [{\"c\": \"x"},
};

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(SLAB_TESTDATA_DIR) + "/tokenizers/qwen3/tokenizer.json.xz";
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      path = argv[i];
    }
  }
  std::printf("cpu: %s\n", cpu_features().summary().c_str());
  const auto vocab = std::make_shared<const std::vector<std::string>>(test::load_byte_level_vocab(path));
  std::printf("vocabulary: %s, %zu tokens\n\n", path.c_str(), vocab->size());

  std::vector<double> compile;
  std::shared_ptr<const grammar::Grammar> g;
  for (int i = 0; i < 50; ++i) {
    const auto start = std::chrono::steady_clock::now();
    g = grammar::Grammar::parse(test::kJsonGbnf);
    compile.push_back(micros_since(start));
  }
  std::printf("JSON grammar compile: %.1f us (median of 50)\n", bench::summarize(compile).median);
  const auto build_start = std::chrono::steady_clock::now();
  grammar::TokenMasker shared_masker(g, vocab);
  std::printf("TokenMasker construction (sort the vocabulary): %.1f ms\n\n", micros_since(build_start) / 1000);

  std::vector<uint64_t> mask((vocab->size() + 63) / 64);
  std::printf("%-26s %12s %12s %10s %10s %9s\n", "state", "cold (ms)", "warm (us)", "min (us)", "max (us)", "allowed");
  double warm_total = 0;
  for (const Case& c : kCases) {
    grammar::Matcher m(g);
    if (!m.accept(c.prefix)) {
      std::fprintf(stderr, "prefix refused: %s\n", c.prefix);
      return 1;
    }
    grammar::TokenMasker masker(g, vocab);  // fresh: the first call computes this state's tables
    auto start = std::chrono::steady_clock::now();
    masker.fill_mask(m, mask);
    const double cold = micros_since(start);
    std::vector<double> warm;
    for (int r = 0; r < reps; ++r) {
      start = std::chrono::steady_clock::now();
      masker.fill_mask(m, mask);
      warm.push_back(micros_since(start));
    }
    size_t allowed = 0;
    for (const uint64_t w : mask) allowed += static_cast<size_t>(__builtin_popcountll(w));
    const bench::Stat s = bench::summarize(warm);
    warm_total += s.median;
    std::printf("%-26s %12.2f %12.1f %10.1f %10.1f %9zu\n", c.name, cold / 1000, s.median, s.min, s.max, allowed);
  }
  const double per_step = warm_total / static_cast<double>(std::size(kCases));
  std::printf("\nmean warm fill_mask: %.1f us; 16 sequences: %.2f ms per step (%.2f%% of an 80 ms decode step)\n",
              per_step, 16 * per_step / 1000, 16 * per_step / 1000 / 80 * 100);
  return 0;
}
