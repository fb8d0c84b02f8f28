// The public engine API (include/slabserve/) on the real stories260K model: what load() reports
// against config.json, generation through api::Engine against transformers' greedy tokens
// (tests/fixtures/stories260K_expected.json, scripts/make_fixtures.py), chat rendering against
// Python jinja2 (tests/fixtures/chat/builtin.json), abort, and the options it refuses.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "slabserve/slabserve.h"
#include "test_paths.h"

namespace {

using slab::api::LoadedModel;
using slab::api::LoadOptions;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

// Every event of one request until it finishes: the tokens, and the last event.
struct Collected {
  std::vector<int32_t> tokens;
  slab::api::RequestOutput last;
};

Collected collect(slab::api::RequestStream& stream) {
  Collected out;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!out.last.finished) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::optional<slab::api::RequestOutput> event = stream.next(std::chrono::milliseconds(500));
    if (!event) continue;
    out.tokens.insert(out.tokens.end(), event->tokens.begin(), event->tokens.end());
    out.last = std::move(*event);
  }
  return out;
}

LoadOptions small_options(const std::string& model) {
  LoadOptions options;
  options.model = model;
  options.engine.kv_cache_tokens = 256;
  options.engine.max_num_seqs = 4;
  return options;
}

}  // namespace

TEST_CASE("api: check_load_options names the option at fault", "[engine_api]") {
  LoadOptions options;
  CHECK(slab::api::check_load_options(options).empty());
  options.dtype = "int4";
  CHECK(slab::api::check_load_options(options).rfind("--dtype int4:", 0) == 0);
  options.dtype = "float32";
  options.engine.block_size = 24;
  CHECK(slab::api::check_load_options(options) == "--block-size must be a positive multiple of 16, got 24");
  options.engine.block_size = 32;
  options.placement.cpuset = "100000";
  CHECK(slab::api::check_load_options(options).rfind("--cpuset 100000:", 0) == 0);
  CHECK(slab::api::check_placement(options.placement) == slab::api::check_load_options(options));
  options.placement = {};
  options.placement.threads = -1;
  CHECK(slab::api::check_placement(options.placement).rfind("--threads -1", 0) == 0);
}

TEST_CASE("api: load refuses bad options before reading the model, and a missing model by name", "[engine_api]") {
  LoadOptions options;
  options.model = "/nonexistent/model";
  options.dtype = "int4";
  CHECK_THROWS_AS(LoadedModel::load(options), std::invalid_argument);
  options.dtype = "auto";
  CHECK_THROWS_WITH(LoadedModel::load(options), Catch::Contains("/nonexistent/model"));
}

TEST_CASE("api: a loaded model describes itself as config.json says", "[engine_api]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const json config = read_json(std::filesystem::path(model) / "config.json");
  std::unique_ptr<LoadedModel> loaded = LoadedModel::load(small_options(model));
  const slab::api::ModelDescription& d = loaded->description();
  CHECK(d.path == model);
  CHECK(d.architecture == config.at("model_type").get<std::string>());
  CHECK(d.weights.rfind("safetensors:", 0) == 0);
  CHECK(d.num_layers == config.at("num_hidden_layers").get<int>());
  CHECK(d.hidden_size == config.at("hidden_size").get<int>());
  CHECK(d.num_heads == config.at("num_attention_heads").get<int>());
  CHECK(d.num_kv_heads == config.at("num_key_value_heads").get<int>());
  CHECK(d.vocab_size == config.at("vocab_size").get<int>());
  CHECK(d.max_position_embeddings == config.at("max_position_embeddings").get<int>());
  CHECK(d.bos_token_id == config.at("bos_token_id").get<int>());
  // 256 tokens asked for, in blocks of 32: the context is clamped to what the cache holds.
  CHECK(d.kv_block_size == 32);
  CHECK(d.kv_cache_blocks == 8);
  CHECK(d.max_model_len == 256);
  CHECK(loaded->engine().max_model_len() == 256);
  CHECK(d.max_num_seqs == 4);
  CHECK(d.weight_bytes > 0);
  CHECK(d.kv_cache_bytes > 0);
  CHECK(!d.compute.empty());
  CHECK(!d.placement.empty());
  // generation_config.json asks for no sampling: greedy by default.
  CHECK(d.default_sampling.temperature == 0.0f);

  const std::vector<int32_t>& eos = loaded->eos_token_ids();
  CHECK(std::find(eos.begin(), eos.end(), config.at("eos_token_id").get<int32_t>()) != eos.end());
  REQUIRE(loaded->tokenizer().eos_id().has_value());
  CHECK(std::find(eos.begin(), eos.end(), *loaded->tokenizer().eos_id()) != eos.end());
  CHECK(loaded->tokenizer().vocab_size() == d.vocab_size);
}

TEST_CASE("api: the engine's greedy tokens from BOS are transformers'", "[engine_api]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const json expected = read_json(slab::test::fixtures_dir() / "stories260K_expected.json");
  const std::vector<int32_t> greedy = expected.at("greedy_tokens").get<std::vector<int32_t>>();
  LoadOptions options = small_options(model);
  SECTION("safetensors folder") {}
  SECTION("GGUF file") {
    const std::filesystem::path gguf = slab::test::testdata_or_skip("models/stories260K-gguf/stories260K.gguf");
    if (gguf.empty()) return;
    options.model = gguf.string();
  }
  SECTION("safetensors folder with its GGUF file as the speculative draft model") {
    const std::filesystem::path gguf = slab::test::testdata_or_skip("models/stories260K-gguf/stories260K.gguf");
    if (gguf.empty()) return;
    options.engine.speculative_model = gguf.string();
    options.engine.num_speculative_tokens = 4;
  }
  std::unique_ptr<LoadedModel> loaded = LoadedModel::load(options);
  if (!options.engine.speculative_model.empty()) {
    CHECK(loaded->description().speculative.rfind("draft model " + options.engine.speculative_model, 0) == 0);
  }

  slab::api::Request request;
  request.prompt = expected.at("prompt").get<std::vector<int32_t>>();
  request.sampling.temperature = 0.0f;
  request.stop.max_tokens = static_cast<int>(greedy.size());
  request.stop.ignore_eos = true;
  auto stream = std::make_shared<slab::api::RequestStream>();
  const int64_t id = loaded->engine().submit(request, stream);
  const Collected got = collect(*stream);
  CHECK(got.last.request_id == id);
  CHECK(got.last.finish_reason == slab::api::FinishReason::length);
  CHECK(got.tokens == greedy);
  CHECK(loaded->tokenizer().decode(got.tokens, /*skip_special_tokens=*/false) ==
        expected.at("text").get<std::string>());
  // Stats are published at the end of the step that sent the last event: wait for that step.
  slab::api::EngineStats stats = loaded->engine().stats();
  for (int i = 0; i < 500 && stats.num_running != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = loaded->engine().stats();
  }
  CHECK(stats.num_running == 0);
  CHECK(stats.generation_tokens == static_cast<int64_t>(greedy.size()));
  if (!options.engine.speculative_model.empty()) {
    // The same weights drafting: nearly every draft is the target's own greedy token.
    CHECK(stats.spec_num_accepted_tokens * 10 > stats.spec_num_draft_tokens * 9);
  }
}

TEST_CASE("api: a draft model of another vocabulary or tokenizer is refused, naming both models",
          "[engine_api][speculative]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  LoadOptions options = small_options(model);
  options.engine.num_speculative_tokens = 4;
  const std::string other_vocab = (slab::test::fixtures_dir() / "models" / "llama_gqa").string();
  options.engine.speculative_model = other_vocab;
  CHECK_THROWS_WITH(LoadedModel::load(options), "--speculative-model " + other_vocab +
                                                    ": the draft's vocabulary has 256 tokens, the target " + model +
                                                    "'s 512 and its tokenizer 512; a draft must share the "
                                                    "vocabulary (padding past the tokenizer's tokens may differ)");
  // The same weights with Llama 2's tokenizer: the model's vocabulary size agrees, the tokenizer's does not.
  const std::filesystem::path llama2 = slab::test::testdata_or_skip("tokenizers/llama2");
  if (llama2.empty()) return;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "slab_test_draft_other_tokenizer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"}) {
    std::filesystem::copy_file(std::filesystem::path(model) / f, dir / f);
  }
  for (const char* f : {"tokenizer.model", "tokenizer_config.json"}) std::filesystem::copy_file(llama2 / f, dir / f);
  options.engine.speculative_model = dir.string();
  CHECK_THROWS_WITH(LoadedModel::load(options), "--speculative-model " + dir.string() +
                                                    ": its tokenizer differs from the target's: the " +
                                                    "vocabulary of the target " + model +
                                                    " has 512 tokens, that of the draft " + dir.string() + " 32000");
  std::filesystem::remove_all(dir);
  options.engine.speculative_model = "/nonexistent/draft";
  CHECK_THROWS_WITH(LoadedModel::load(options), Catch::Contains("--speculative-model /nonexistent/draft: no such"));
}

TEST_CASE("api: an aborted request ends with FinishReason::abort and submit refuses what can never run",
          "[engine_api]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  std::unique_ptr<LoadedModel> loaded = LoadedModel::load(small_options(model));
  slab::api::Engine& engine = loaded->engine();

  slab::api::Request request;
  request.prompt = {1};
  request.stop.max_tokens = 250;
  request.stop.ignore_eos = true;
  auto stream = std::make_shared<slab::api::RequestStream>();
  const int64_t id = engine.submit(request, stream);
  engine.abort(id);
  const Collected got = collect(*stream);
  CHECK(got.last.finish_reason == slab::api::FinishReason::abort);
  CHECK(got.tokens.size() < 250);

  slab::api::Request empty;
  CHECK_THROWS_AS(engine.submit(empty, stream), std::invalid_argument);
  slab::api::Request outside = request;
  outside.prompt = {loaded->description().vocab_size};
  CHECK_THROWS_AS(engine.submit(outside, stream), std::invalid_argument);
}

TEST_CASE("api: chat rendering with a built-in template is Python jinja2's, and without one it is refused",
          "[engine_api]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  LoadOptions options = small_options(model);
  {
    std::unique_ptr<LoadedModel> plain = LoadedModel::load(options);
    CHECK_FALSE(plain->has_chat_template());  // stories260K ships none
    CHECK_THROWS_AS(plain->render_chat(ojson::array(), nullptr, true, ojson::object()), std::logic_error);
  }
  CHECK(slab::api::chat_template_option_exists("chatml"));
  CHECK_FALSE(slab::api::chat_template_option_exists("/nonexistent/template.jinja"));
  const std::vector<std::string> names = slab::api::builtin_chat_template_names();
  CHECK(std::find(names.begin(), names.end(), "chatml") != names.end());

  options.chat_template = "chatml";
  std::unique_ptr<LoadedModel> loaded = LoadedModel::load(options);
  REQUIRE(loaded->has_chat_template());
  std::ifstream conversations_in(slab::test::fixtures_dir() / "chat" / "conversations.json");
  std::ifstream builtin_in(slab::test::fixtures_dir() / "chat" / "builtin.json");
  REQUIRE(conversations_in.good());
  REQUIRE(builtin_in.good());
  const ojson conversations = ojson::parse(conversations_in);
  const ojson builtin = ojson::parse(builtin_in);
  const auto now = conversations.at("now").get<std::time_t>();
  int checked = 0;
  for (const ojson& tmpl : builtin.at("templates")) {
    if (tmpl.at("name") != "chatml") continue;
    for (const ojson& c : tmpl.at("cases")) {
      for (const ojson& conversation : conversations.at("conversations")) {
        if (conversation.at("name") != c.at("conversation")) continue;
        INFO(conversation.at("name").get<std::string>());
        CHECK(loaded->render_chat(conversation.at("messages"), conversation.at("tools"),
                                  c.at("add_generation_prompt").get<bool>(), conversation.at("kwargs"),
                                  now) == c.at("output").get<std::string>());
        ++checked;
      }
    }
  }
  CHECK(checked >= 4);
}

TEST_CASE("api: speculative decoding options are checked and none is ignored", "[engine_api][speculative]") {
  LoadOptions options;
  slab::api::EngineOptions& e = options.engine;
  e.num_speculative_tokens = 4;
  CHECK(slab::api::check_load_options(options).find("need --speculative-model") != std::string::npos);
  e.speculative_model = "/models/draft";
  CHECK(slab::api::check_load_options(options).empty());  // a draft model: its folder is read at load
  e.ngram_prompt_lookup_max = 3;
  CHECK(slab::api::check_load_options(options) ==
        "--ngram-prompt-lookup-max/-min apply to --speculative-model \"[ngram]\" only, not to a draft model "
        "(/models/draft)");
  e.ngram_prompt_lookup_max = 0;
  e.speculative_model = "[ngram]";
  CHECK(slab::api::check_load_options(options).find("--ngram-prompt-lookup-max > 0") != std::string::npos);
  e.ngram_prompt_lookup_max = 3;
  CHECK(slab::api::check_load_options(options).empty());
  e.ngram_prompt_lookup_min = 4;
  CHECK(slab::api::check_load_options(options).rfind("--ngram-prompt-lookup-min 4:", 0) == 0);
  e.ngram_prompt_lookup_min = 1;
  e.num_speculative_tokens = 0;
  CHECK(slab::api::check_load_options(options).find("--num-speculative-tokens > 0") != std::string::npos);
  e.num_speculative_tokens = 2;
  e.speculative_disable_by_batch_size = -1;
  CHECK(slab::api::check_load_options(options).rfind("--speculative-disable-by-batch-size", 0) == 0);
}
