// Tokenizers against the outputs of Hugging Face tokenizers / sentencepiece on a fixed corpus
// (tests/fixtures/tokenizer, made by scripts/make_tokenizer_fixtures.py), plus error handling.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_cases.h"

namespace fs = std::filesystem;
using slab::test::ids_of;
using slab::test::kTokenizers;
using slab::test::read_fixture;
using slab::test::scratch;
using slab::test::staged_folder;
using slab::test::TokenizerCase;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Streams `ids` through an IncrementalDetokenizer; every delta must be valid UTF-8.
std::string stream_decode(const slab::Tokenizer& tokenizer, std::span<const int32_t> seed, std::span<const int32_t> ids,
                          bool skip_special) {
  slab::IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  detokenizer.seed(seed);
  std::string text;
  for (const int32_t id : ids) {
    const std::string delta = detokenizer.push(id);
    CHECK(slab::tok::is_valid_utf8(delta));
    text += delta;
  }
  const std::string rest = detokenizer.flush();
  CHECK(slab::tok::is_valid_utf8(rest));
  return text + rest;
}

}  // namespace

TEST_CASE("tokenizers match Hugging Face / sentencepiece on the corpus", "[tokenizer]") {
  for (const TokenizerCase& c : kTokenizers) {
    DYNAMIC_SECTION(c.fixture) {
      const fs::path folder = staged_folder(c);
      if (folder.empty()) return;
      const auto start = std::chrono::steady_clock::now();
      const auto tokenizer = slab::load_tokenizer(folder);
      const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      WARN(c.fixture << ": loaded " << tokenizer->vocab_size() << " tokens in " << load_seconds << " s");

      const nlohmann::json fixture = read_fixture(c.fixture);
      size_t passed = 0;
      for (const auto& item : fixture["cases"]) {
        const std::string text = item["text"].get<std::string>();
        INFO("text: " << nlohmann::json(text).dump());
        const auto expected = ids_of(item["ids"]);
        const auto encoded = tokenizer->encode(text, true);
        const auto encoded_plain = tokenizer->encode(text, false);
        const std::string decoded = tokenizer->decode(expected, false);
        const std::string decoded_skip = tokenizer->decode(expected, true);
        CHECK(encoded == expected);
        CHECK(encoded_plain == ids_of(item["ids_no_special"]));
        CHECK(decoded == item["decoded"].get<std::string>());
        CHECK(decoded_skip == item["decoded_skip_special"].get<std::string>());
        const std::string streamed = stream_decode(*tokenizer, {}, expected, false);
        const std::string streamed_skip = stream_decode(*tokenizer, {}, expected, true);
        CHECK(streamed == decoded);
        CHECK(streamed_skip == decoded_skip);
        if (encoded == expected && encoded_plain == ids_of(item["ids_no_special"]) &&
            decoded == item["decoded"].get<std::string>() &&
            decoded_skip == item["decoded_skip_special"].get<std::string>() && streamed == decoded &&
            streamed_skip == decoded_skip) {
          ++passed;
        }
      }
      WARN(c.fixture << ": " << passed << "/" << fixture["cases"].size() << " corpus strings match");
    }
  }
}

TEST_CASE("incremental detokenizer seeded with a prompt emits only the continuation", "[tokenizer]") {
  const fs::path folder = staged_folder(kTokenizers[3]);  // qwen3: byte-level, splits characters
  if (folder.empty()) return;
  const auto tokenizer = slab::load_tokenizer(folder);
  const auto prompt = tokenizer->encode("Write a haiku:", false);
  const auto answer = tokenizer->encode(" 你好 👨‍👩‍👧 café 🇯🇵 done", false);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), answer.begin(), answer.end());
  const std::string full = tokenizer->decode(all, false);
  const std::string prompt_text = tokenizer->decode(prompt, false);
  REQUIRE(full.rfind(prompt_text, 0) == 0);
  CHECK(stream_decode(*tokenizer, prompt, answer, false) == full.substr(prompt_text.size()));
}

TEST_CASE("incremental detokenizer on arbitrary id sequences equals decode", "[tokenizer]") {
  for (const TokenizerCase& c : kTokenizers) {
    DYNAMIC_SECTION(c.fixture) {
      const fs::path folder = staged_folder(c);
      if (folder.empty()) return;
      const auto tokenizer = slab::load_tokenizer(folder);
      // A run of byte-fallback pieces that turns invalid only at its end: decode renders every
      // byte of it as U+FFFD, so the ASCII byte at its start must not be streamed early.
      if (const auto ascii = tokenizer->piece_to_id("<0x37>"), stray = tokenizer->piece_to_id("<0xA6>");
          ascii && stray) {
        std::vector<int32_t> ids = tokenizer->encode("Us", false);
        ids.insert(ids.end(), {*ascii, *stray});
        const auto tail = tokenizer->encode(" vac", false);
        ids.insert(ids.end(), tail.begin(), tail.end());
        CHECK(stream_decode(*tokenizer, {}, ids, false) == tokenizer->decode(ids, false));
      }
      // Random ids, biased to the low (byte) and high (added) ends of the vocabulary.
      std::mt19937 rng(1234);
      const int32_t size = tokenizer->vocab_size();
      for (int round = 0; round < 200; ++round) {
        std::vector<int32_t> ids(rng() % 24);
        for (int32_t& id : ids) {
          const uint32_t kind = rng() % 3;
          id = kind == 0   ? static_cast<int32_t>(rng() % static_cast<uint32_t>(size))
               : kind == 1 ? static_cast<int32_t>(rng() % 600u)
                           : size - 1 - static_cast<int32_t>(rng() % 300u);
        }
        for (const bool skip : {false, true}) {
          INFO("round " << round << " skip_special_tokens " << skip);
          CHECK(stream_decode(*tokenizer, {}, ids, skip) == tokenizer->decode(ids, skip));
        }
      }
    }
  }
}

TEST_CASE("tokenizer metadata: special tokens, BOS/EOS, pieces", "[tokenizer]") {
  SECTION("qwen3") {
    const fs::path folder = staged_folder(kTokenizers[3]);
    if (folder.empty()) return;
    const auto tokenizer = slab::load_tokenizer(folder);
    CHECK(tokenizer->vocab_size() == 151669);
    CHECK_FALSE(tokenizer->bos_id().has_value());
    CHECK(tokenizer->eos_id() == 151645);
    CHECK(tokenizer->eos_token() == "<|im_end|>");
    CHECK(tokenizer->piece_to_id("<|im_start|>") == 151644);
    CHECK(tokenizer->is_special(151644));
    CHECK_FALSE(tokenizer->is_special(151667));  // <think> is added but not special
    CHECK(tokenizer->id_to_piece(151667) == "<think>");
    CHECK(tokenizer->id_to_piece(-1).empty());
    CHECK(tokenizer->id_to_piece(10'000'000).empty());
    CHECK_FALSE(tokenizer->piece_to_id("no such piece").has_value());
  }
  SECTION("llama3.1") {
    const fs::path folder = staged_folder(kTokenizers[2]);
    if (folder.empty()) return;
    const auto tokenizer = slab::load_tokenizer(folder);
    CHECK(tokenizer->bos_id() == 128000);
    CHECK(tokenizer->bos_token() == "<|begin_of_text|>");
    CHECK(tokenizer->eos_id() == 128009);
    CHECK(tokenizer->id_to_piece(tokenizer->encode(" hello", false).at(0)) == "Ġhello");
  }
  SECTION("stories260K tokenizer.model") {
    const fs::path folder = slab::test::testdata_or_skip("models/stories260K");
    if (folder.empty()) return;
    const auto tokenizer = slab::load_tokenizer(folder);
    CHECK(tokenizer->vocab_size() == 512);
    CHECK(tokenizer->bos_id() == 1);
    CHECK(tokenizer->eos_id() == 2);
    CHECK(tokenizer->is_special(1));
    CHECK_FALSE(tokenizer->is_special(100));
    CHECK(tokenizer->id_to_piece(3) == "<0x00>");
    CHECK(tokenizer->piece_to_id("<unk>") == 0);
    CHECK_FALSE(tokenizer->piece_to_id("definitely not a piece").has_value());
    CHECK(tokenizer->encode("Once upon a time", true).at(0) == 1);
  }
}

namespace {

// A small tokenizer.json exercising the parser without the shared data.
const char* kTinyTokenizerJson = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 7, "content": "<eos>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 8, "content": "<pad>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
      {"SpecialToken": {"id": "<eos>", "type_id": 0}}], "pair": [],
      "special_tokens": {"<eos>": {"id": "<eos>", "ids": [7], "tokens": ["<eos>"]}}},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
    "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġab": 4, "c": 5, "abc": 6},
    "merges": ["a b", ["Ġ", "ab"], "ab c"]}
})";

fs::path tiny_folder(const std::string& name, const std::string& tokenizer_json) {
  const fs::path folder = scratch() / name;
  fs::create_directories(folder);
  write_file(folder / "tokenizer.json", tokenizer_json);
  return folder;
}

std::string error_of(const fs::path& folder) {
  try {
    slab::load_tokenizer(folder);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a small tokenizer.json: merges, added tokens, template, decoding", "[tokenizer]") {
  const auto tokenizer = slab::load_tokenizer(tiny_folder("tiny", kTinyTokenizerJson));
  CHECK(tokenizer->vocab_size() == 9);
  CHECK(tokenizer->encode("ab abc", false) == std::vector<int32_t>{3, 4, 5});
  CHECK(tokenizer->encode("ab abc", true) == std::vector<int32_t>{3, 4, 5, 7});
  // lstrip/rstrip: the spaces around <pad> belong to it.
  CHECK(tokenizer->encode("ab <pad> ab<eos>", false) == std::vector<int32_t>{3, 8, 3, 7});
  CHECK(tokenizer->encode("abc", false) == std::vector<int32_t>{6});
  CHECK(tokenizer->decode(std::vector<int32_t>{3, 4, 7}, false) == "ab ab<eos>");
  CHECK(tokenizer->decode(std::vector<int32_t>{3, 4, 7}, true) == "ab ab");
  CHECK(tokenizer->decode(std::vector<int32_t>{3, 99, -4}, true) == "ab");
  // Characters missing from the vocabulary (no unk, no byte fallback) are dropped.
  CHECK(tokenizer->encode("abz", false) == std::vector<int32_t>{3});
  // Invalid UTF-8 input is repaired rather than rejected.
  CHECK_NOTHROW(tokenizer->encode("ab\xff\xfe", false));
  // Token bytes: "Ġ" is a space, the plain added token <pad> adds its text, the special <eos> nothing.
  CHECK(*tokenizer->vocabulary_bytes() ==
        std::vector<std::string>{"a", "b", " ", "ab", " ab", "c", "abc", "", "<pad>"});

  // Without a decoder Hugging Face joins the token strings with spaces: each adds one before it.
  std::string no_decoder = kTinyTokenizerJson;
  const std::string decoder =
      R"("decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})";
  REQUIRE(no_decoder.find(decoder) != std::string::npos);
  no_decoder.replace(no_decoder.find(decoder), decoder.size(), R"("decoder": null)");
  const auto plain = slab::load_tokenizer(tiny_folder("tiny-no-decoder", no_decoder));
  CHECK(plain->decode(std::vector<int32_t>{3, 4, 8}, true) ==
        "ab \xC4\xA0"
        "ab <pad>");
  CHECK(*plain->vocabulary_bytes() == std::vector<std::string>{" a", " b", " \xC4\xA0", " ab",
                                                               " \xC4\xA0"
                                                               "ab",
                                                               " c", " abc", "", " <pad>"});
}

TEST_CASE("bad tokenizer folders give errors naming the file and field", "[tokenizer]") {
  SECTION("no tokenizer files") {
    const fs::path folder = scratch() / "empty";
    fs::create_directories(folder);
    CHECK_THAT(error_of(folder), Catch::Contains("no tokenizer.json or tokenizer.model"));
    CHECK_THAT(error_of(scratch() / "does-not-exist"), Catch::Contains("not a directory"));
  }
  SECTION("malformed tokenizer.json") {
    const fs::path folder = tiny_folder("malformed", "{\"model\": {\"type\": \"BPE\", ");
    const std::string error = error_of(folder);
    CHECK_THAT(error, Catch::Contains((folder / "tokenizer.json").string()));
    CHECK_THAT(error, Catch::Contains("malformed JSON"));
  }
  SECTION("malformed tokenizer_config.json") {
    const fs::path folder = tiny_folder("bad-config", kTinyTokenizerJson);
    write_file(folder / "tokenizer_config.json", "{\"bos_token\": ");
    CHECK_THAT(error_of(folder), Catch::Contains("tokenizer_config.json: malformed JSON"));
    write_file(folder / "tokenizer_config.json", "{\"add_bos_token\": \"yes\"}");
    CHECK_THAT(error_of(folder), Catch::Contains("tokenizer_config.json: add_bos_token: not a boolean"));
  }
  SECTION("unsupported components") {
    const auto with = [](const std::string& from, const std::string& to) {
      std::string json = kTinyTokenizerJson;
      const size_t at = json.find(from);
      REQUIRE(at != std::string::npos);
      return json.replace(at, from.size(), to);
    };
    CHECK_THAT(error_of(tiny_folder("nfkd", with("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFKD\"}"))),
               Catch::Contains("tokenizer.json: normalizer.type: unsupported normalizer type \"NFKD\""));
    CHECK_THAT(error_of(tiny_folder("wordpiece", with("\"type\": \"BPE\"", "\"type\": \"WordPiece\""))),
               Catch::Contains("model.type: unsupported model type \"WordPiece\""));
    CHECK_THAT(
        error_of(tiny_folder("unknown-field", with("\"version\": \"1.0\"", "\"version\": \"1.0\", \"extra\": 1"))),
        Catch::Contains("tokenizer.json: extra: unknown field"));
    CHECK_THAT(error_of(tiny_folder("bad-merge", with("\"ab c\"", "\"ab zz\""))), Catch::Contains("model.merges[2]"));
    CHECK_THAT(error_of(tiny_folder("bad-regex", with("\"type\": \"ByteLevel\", \"add_prefix_space\": false",
                                                      "\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
                                                      "\"behavior\": \"Isolated\", \"add_prefix_space\": false"))),
               Catch::Contains("pre_tokenizer.pattern.Regex: regex does not compile"));
    CHECK_THAT(error_of(tiny_folder("truncation", with("\"truncation\": null", "\"truncation\": {\"max_length\": 5}"))),
               Catch::Contains("truncation"));
  }
  SECTION("corrupt tokenizer.model") {
    const fs::path folder = scratch() / "bad-model";
    fs::create_directories(folder);
    write_file(folder / "tokenizer.model", "not a protobuf");
    CHECK_THAT(error_of(folder), Catch::Contains("tokenizer.model: cannot load SentencePiece model"));
  }
}
