#include "completion_request.h"

#include "api_error.h"
#include "output_constraint_fields.h"

namespace slab::server {
namespace {

std::vector<Prompt> read_prompts(const json& body) {
  const json* p = find_field(body, "prompt");
  if (p == nullptr) throw ApiError(400, "'prompt' is required", "prompt");
  if (p->is_string()) return {p->get<std::string>()};
  if (!p->is_array() || p->empty()) {
    throw ApiError(400,
                   "'prompt' must be a string, a list of strings, a list of token ids or a list of lists of token ids",
                   "prompt");
  }
  if ((*p)[0].is_number()) return {read_token_ids(*p, "prompt")};
  std::vector<Prompt> prompts;
  for (const json& item : *p) {
    if (item.is_string()) {
      prompts.emplace_back(item.get<std::string>());
    } else if (item.is_array() && !item.empty()) {
      prompts.emplace_back(read_token_ids(item, "prompt"));
    } else {
      throw ApiError(400, "each item of 'prompt' must be a string or a non-empty list of token ids", "prompt");
    }
  }
  return prompts;
}

}  // namespace

constexpr std::string_view kCompletionFieldNames[] = {"model", "prompt", "logprobs", "echo"};

CompletionRequest parse_completion_request(const json& body) {
  reject_unknown_fields(body, {kCompletionFieldNames, kSamplingFieldNames, kOutputConstraintFieldNames},
                        {{"suffix", "insertion (fill-in-the-middle) is not implemented"},
                         {"prompt_logprobs", "prompt log probabilities are not computed"},
                         {"guided_whitespace_pattern", "use structured_outputs.disable_any_whitespace instead"},
                         {"guided_decoding_backend", "there is one structured-output backend"}});
  CompletionRequest r;
  r.model = read_string(body, "model").value_or("");
  r.prompts = read_prompts(body);
  if (find_field(body, "logprobs") != nullptr) r.logprobs = static_cast<int>(read_integer(body, "logprobs", 0, 0, 20));
  r.echo = read_bool(body, "echo", false);
  if (r.echo && r.logprobs) {
    // With echo, OpenAI and vLLM also return the prompt's log probabilities, which are not computed.
    throw ApiError(400, "'echo' together with 'logprobs' is not supported (prompt log probabilities are not computed)",
                   "echo");
  }
  r.sampling = parse_sampling_fields(body, {"max_tokens"});
  r.sampling.grammar = parse_output_constraint(body);
  return r;
}

}  // namespace slab::server
