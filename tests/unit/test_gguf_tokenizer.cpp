// The tokenizer built from GGUF metadata alone, against sentencepiece's own outputs on the corpus
// (tests/fixtures/tokenizer/stories260K.json) and against the tokenizer.model of the same model.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "chat/template_source.h"
#include "gguf_writer.h"
#include "runtime/gguf_file.h"
#include "safetensors_writer.h"
#include "test_paths.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

using Catch::Contains;
using namespace slab;
using namespace slab::test;

namespace {

GgufFile parse(const std::string& bytes) {
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "tok.gguf");
}

}  // namespace

TEST_CASE("stories260K: the GGUF tokenizer tokenizes the corpus as sentencepiece and tokenizer.model do",
          "[gguf][tokenizer]") {
  const auto gguf = testdata_or_skip("models/stories260K-gguf/stories260K.gguf");
  const auto folder = testdata_or_skip("models/stories260K");
  if (gguf.empty() || folder.empty()) return;
  const auto from_gguf = load_tokenizer(gguf);
  const auto from_model = load_tokenizer(folder);
  REQUIRE(from_gguf->vocab_size() == from_model->vocab_size());
  CHECK(from_gguf->bos_id() == from_model->bos_id());
  CHECK(from_gguf->eos_id() == from_model->eos_id());
  CHECK(from_gguf->bos_token() == "<s>");
  CHECK(from_gguf->eos_token() == "</s>");
  for (int32_t id = 0; id < from_gguf->vocab_size(); ++id) {
    INFO("id " << id);
    CHECK(from_gguf->id_to_piece(id) == from_model->id_to_piece(id));
    CHECK(from_gguf->is_special(id) == from_model->is_special(id));
  }

  std::ifstream in(fixtures_dir() / "tokenizer" / "stories260K.json");
  const nlohmann::json fixture = nlohmann::json::parse(in);
  REQUIRE(fixture["cases"].size() > 40);
  for (const auto& item : fixture["cases"]) {
    const std::string text = item["text"].get<std::string>();
    INFO("text: " << nlohmann::json(text).dump());
    const auto ids = item["ids"].get<std::vector<int32_t>>();
    CHECK(from_gguf->encode(text, true) == ids);
    CHECK(from_gguf->encode(text, false) == item["ids_no_special"].get<std::vector<int32_t>>());
    CHECK(from_gguf->decode(ids, false) == item["decoded"].get<std::string>());
    CHECK(from_gguf->decode(ids, true) == item["decoded_skip_special"].get<std::string>());
    CHECK(from_gguf->encode(text, true) == from_model->encode(text, true));
  }
}

TEST_CASE("gguf tokenizer: broken vocabularies are refused naming the key", "[gguf][tokenizer]") {
  SECTION("no tokenizer at all") {
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(GgufBuilder().bytes())),
                        Contains("tok.gguf") && Contains("'tokenizer.ggml.model'") && Contains("missing"));
  }
  SECTION("an unsupported model") {
    GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "t5");
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(g.bytes())),
                        Contains("'tokenizer.ggml.model'") && Contains("t5"));
  }
  SECTION("scores and tokens of different lengths") {
    GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "llama").kv_str_array("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
    g.kv_pod_array<float>("tokenizer.ggml.scores", 6, {0.0f, 1.0f});
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(g.bytes())),
                        Contains("'tokenizer.ggml.scores'") && Contains("2 scores for 3 tokens"));
  }
  SECTION("a BOS id outside the vocabulary") {
    GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "llama").kv_str_array("tokenizer.ggml.tokens", {"<unk>", "a"});
    g.kv_u32("tokenizer.ggml.bos_token_id", 9);
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(g.bytes())),
                        Contains("'tokenizer.ggml.bos_token_id'") && Contains("outside"));
  }
  SECTION("a gpt2 vocabulary with an unknown pre-tokenizer or a malformed merge") {
    GgufBuilder unknown_pre, bad_merge;
    unknown_pre.kv_str("tokenizer.ggml.model", "gpt2")
        .kv_str("tokenizer.ggml.pre", "deepseek-coder")
        .kv_str_array("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .kv_str_array("tokenizer.ggml.merges", {"a b"});
    bad_merge.kv_str("tokenizer.ggml.model", "gpt2")
        .kv_str_array("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .kv_str_array("tokenizer.ggml.merges", {"ab"});
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(unknown_pre.bytes())),
                        Contains("'tokenizer.ggml.pre'") && Contains("deepseek-coder"));
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(bad_merge.bytes())),
                        Contains("'tokenizer.ggml.merges'") && Contains("entry 0"));
  }
  SECTION("tokens that are not strings") {
    GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "llama").kv_pod_array<int32_t>("tokenizer.ggml.tokens", 5, {1, 2});
    REQUIRE_THROWS_WITH(tok::load_gguf_tokenizer(parse(g.bytes())),
                        Contains("'tokenizer.ggml.tokens'") && Contains("string"));
  }
}

TEST_CASE("gguf tokenizer: a hand-made llama vocabulary encodes by piece scores, BOS from the metadata",
          "[gguf][tokenizer]") {
  // Pieces merge by score: "▁ab" (score -1) beats "▁a" + "b"; "c" falls back to its byte piece.
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<int32_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  const int32_t first = static_cast<int32_t>(tokens.size());  // "▁", then "a", "b", "▁a", "▁ab"
  for (const char* piece : {"\xe2\x96\x81", "a", "b",
                            "\xe2\x96\x81"
                            "a",
                            "\xe2\x96\x81"
                            "ab"})
    tokens.push_back(piece);
  for (float score : {-5.0f, -6.0f, -7.0f, -2.0f, -1.0f}) scores.push_back(score);
  for (int i = 0; i < 5; ++i) types.push_back(1);
  // As written by hand (<unk> typed unknown), and as llama.cpp's convert_hf_to_gguf.py writes a
  // Llama 2 tokenizer whose <unk> is an added special token: typed control, no unknown_token_id
  // (the id-0 default llama.cpp applies; refused before, found by compare.py --gguf).
  for (const int32_t unk_type : {2, 3}) {
    INFO("<unk> typed " << unk_type);
    types[0] = unk_type;
    GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "llama")
        .kv_str_array("tokenizer.ggml.tokens", tokens)
        .kv_pod_array<float>("tokenizer.ggml.scores", 6, scores)
        .kv_pod_array<int32_t>("tokenizer.ggml.token_type", 5, types)
        .kv_u32("tokenizer.ggml.bos_token_id", 1)
        .kv_u32("tokenizer.ggml.eos_token_id", 2)
        .kv_bool("tokenizer.ggml.add_bos_token", false);
    const auto t = tok::load_gguf_tokenizer(parse(g.bytes()));
    const int32_t byte_c = 3 + 0x63, ab = first + 4;
    CHECK(t->encode("ab", true) == std::vector<int32_t>{ab});
    CHECK(t->encode("abc", false) == std::vector<int32_t>{ab, byte_c});
    CHECK(t->encode("<s>ab", false) == std::vector<int32_t>{1, ab});
    CHECK(t->decode(std::vector<int32_t>{ab, byte_c, 2}, true) == "abc");
    CHECK(t->bos_id() == 1);
    CHECK(t->eos_id() == 2);
  }
}

TEST_CASE("gguf: the chat template comes from tokenizer.chat_template", "[gguf]") {
  TempDir tmp;
  GgufBuilder with, without;
  with.kv_str("tokenizer.chat_template", "{{ messages[0]['content'] }}");
  write_file(tmp / "with" / "m.gguf", with.bytes());
  write_file(tmp / "without" / "m.gguf", without.bytes());
  CHECK(chat::read_model_chat_template(tmp / "with") == "{{ messages[0]['content'] }}");
  CHECK(chat::read_model_chat_template(tmp / "with" / "m.gguf") == "{{ messages[0]['content'] }}");
  CHECK_FALSE(chat::read_model_chat_template(tmp / "without").has_value());
}

namespace {

// A Hugging Face tokenizer.json as the GGUF converter stores it: every token by id (special
// added tokens typed control, other added tokens user-defined), merges as "left right".
std::string gguf_from_tokenizer_json(const nlohmann::json& t, const std::string& pre, bool add_bos,
                                     const std::string& bos, const std::string& eos) {
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> (text, type)
  for (const auto& [text, id] : t["model"]["vocab"].items()) by_id[id.get<int64_t>()] = {text, 1};
  for (const auto& a : t["added_tokens"])
    by_id[a["id"].get<int64_t>()] = {a["content"].get<std::string>(), a["special"].get<bool>() ? 3 : 4};
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (const auto& [id, entry] : by_id) {
    if (id != static_cast<int64_t>(tokens.size())) FAIL("token ids are not contiguous at " << id);
    tokens.push_back(entry.first);
    types.push_back(entry.second);
  }
  std::vector<std::string> merges;
  for (const auto& m : t["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  auto id_of = [&](const std::string& text) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == text) return static_cast<uint32_t>(i);
    }
    FAIL("no token " << text);
    return 0u;
  };
  GgufBuilder g;
  g.kv_str("tokenizer.ggml.model", "gpt2")
      .kv_str("tokenizer.ggml.pre", pre)
      .kv_str_array("tokenizer.ggml.tokens", tokens)
      .kv_pod_array<int32_t>("tokenizer.ggml.token_type", 5, types)
      .kv_str_array("tokenizer.ggml.merges", merges)
      .kv_u32("tokenizer.ggml.eos_token_id", id_of(eos))
      .kv_bool("tokenizer.ggml.add_bos_token", add_bos);
  if (!bos.empty()) g.kv_u32("tokenizer.ggml.bos_token_id", id_of(bos));
  return g.bytes();
}

}  // namespace

TEST_CASE("gguf tokenizer: gpt2 vocabularies of llama-bpe and qwen2 tokenize the corpus as Hugging Face does",
          "[gguf][tokenizer]") {
  struct Case {
    const char* name;
    const char* pre;
    bool add_bos;
    const char* bos;
    const char* eos;
  };
  for (const Case c : {Case{"llama3.1", "llama-bpe", true, "<|begin_of_text|>", "<|eot_id|>"},
                       Case{"qwen3", "qwen2", false, "", "<|im_end|>"}}) {
    DYNAMIC_SECTION(c.name) {
      const auto folder = testdata_or_skip(std::string("tokenizers/") + c.name);
      if (folder.empty()) return;
      TempDir tmp;
      const std::string command =
          "xz -dc '" + (folder / "tokenizer.json.xz").string() + "' > '" + (tmp / "t.json").string() + "'";
      REQUIRE(std::system(command.c_str()) == 0);
      const nlohmann::json t = nlohmann::json::parse(read_file(tmp / "t.json"));
      write_file(tmp / "t.gguf", gguf_from_tokenizer_json(t, c.pre, c.add_bos, c.bos, c.eos));
      const auto tokenizer = load_tokenizer(tmp / "t.gguf");
      CHECK(tokenizer->eos_token() == c.eos);
      // Control tokens became special added tokens, user-defined ones plain added tokens: each
      // token adds the same bytes as from tokenizer.json.
      const auto from_json = tok::HfTokenizer::load(tmp / "t.json", tok::TokenizerConfig{});
      CHECK(*tokenizer->vocabulary_bytes() == *from_json->vocabulary_bytes());

      std::ifstream in(fixtures_dir() / "tokenizer" / (std::string(c.name) + ".json"));
      const nlohmann::json fixture = nlohmann::json::parse(in);
      REQUIRE(fixture["cases"].size() > 40);
      for (const auto& item : fixture["cases"]) {
        const std::string text = item["text"].get<std::string>();
        INFO("text: " << nlohmann::json(text).dump());
        const auto ids = item["ids"].get<std::vector<int32_t>>();
        CHECK(tokenizer->encode(text, true) == ids);
        CHECK(tokenizer->encode(text, false) == item["ids_no_special"].get<std::vector<int32_t>>());
        CHECK(tokenizer->decode(ids, false) == item["decoded"].get<std::string>());
        CHECK(tokenizer->decode(ids, true) == item["decoded_skip_special"].get<std::string>());
      }
    }
  }
}
