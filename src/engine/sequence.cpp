#include "engine/sequence.h"

namespace slab {

Sequence::Sequence(int64_t seq_id, Request req, std::shared_ptr<RequestStream> output_stream,
                   const Tokenizer* tokenizer, uint64_t arrival_order)
    : id(seq_id), request(std::move(req)), stream(std::move(output_stream)), arrival(arrival_order),
      tokens(request.prompt), prompt_len(static_cast<int>(request.prompt.size())), sampler(request.sampling),
      stop_matcher(request.stop.stop_strings), submitted_at(std::chrono::steady_clock::now()) {
  if (tokenizer != nullptr) {
    detokenizer.emplace(*tokenizer, request.skip_special_tokens);
    detokenizer->seed(request.prompt);
  }
}

}  // namespace slab
