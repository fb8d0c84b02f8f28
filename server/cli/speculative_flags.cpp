// Speculative decoding's flags, shared by serve and generate.
#include "speculative_flags.h"

namespace slab::cli {

void add_speculative_flags(CLI::App& cmd, api::EngineOptions& engine) {
  cmd.add_option("--speculative-model", engine.speculative_model,
                 "Speculative decoding's proposer: \"[ngram]\" (prompt lookup), or a draft model's folder or "
                 "GGUF file (same vocabulary as --model)");
  cmd.add_option("--num-speculative-tokens", engine.num_speculative_tokens,
                  "Draft tokens proposed per step (with --speculative-model)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--ngram-prompt-lookup-max", engine.ngram_prompt_lookup_max,
                  "Longest n-gram matched against the context for a draft (with \"[ngram]\")")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--ngram-prompt-lookup-min", engine.ngram_prompt_lookup_min,
                  "Shortest n-gram matched against the context for a draft (with \"[ngram]\")")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--speculative-disable-by-batch-size", engine.speculative_disable_by_batch_size,
                  "Speculate only while at most this many sequences run (0: always)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

}  // namespace slab::cli
