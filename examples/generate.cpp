// Embeds slabserve: loads a model, continues a prompt greedily and prints the text as it streams.
#include <slabserve/slabserve.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL PROMPT\n";
    return 2;
  }
  slab::api::LoadOptions options;
  options.model = argv[1];  // a Hugging Face folder or a .gguf file
  options.engine.kv_cache_tokens = 4096;
  std::unique_ptr<slab::api::LoadedModel> model = slab::api::LoadedModel::load(options);

  slab::api::Request request;
  request.prompt = model->tokenizer().encode(argv[2], /*add_special_tokens=*/true);
  request.sampling.temperature = 0.0f;  // greedy
  request.stop.max_tokens = 32;
  request.stop.eos_token_ids = model->eos_token_ids();

  auto stream = std::make_shared<slab::api::RequestStream>();
  model->engine().submit(request, stream);
  for (bool finished = false; !finished;) {
    std::optional<slab::api::RequestOutput> event = stream->next(std::chrono::seconds(1));
    if (!event) continue;
    std::cout << event->text << std::flush;
    finished = event->finished;
  }
  std::cout << "\n";
}
