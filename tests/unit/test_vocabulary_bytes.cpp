// Tokenizer::vocabulary_bytes(): the raw bytes each token adds in the middle of a text, for
// constrained decoding. Checked against the fixture corpus (the tokens of a text concatenate to
// its normalised bytes), against decode token by token over whole vocabularies, against an
// independent Python reference (scripts/make_token_bytes_fixtures.py), and between the loaders
// that read one vocabulary from different files.
#include <catch2/catch.hpp>

#include <thread>

#include "test_paths.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_cases.h"

namespace fs = std::filesystem;
using namespace slab;
using namespace slab::test;

namespace {

// How the bytes of a text relate to the bytes its tokens add (special tokens split the text
// into segments and add nothing themselves).
enum class TextBytes {
  same,                  // byte-level BPE without a normaliser
  nfc,                   // byte-level BPE after Unicode NFC (Qwen)
  metaspace,             // "▁" in the text comes back as a space (Gemma: spaces become "▁")
  metaspace_and_prefix,  // and each non-empty segment gains the dummy-prefix space (Llama 2)
};

struct BytesCase {
  const char* name;
  const char* fixture;  // tests/fixtures/tokenizer/<fixture>.json
  const char* testdata;
  bool json;  // staged like kTokenizers, or a GGUF file when false
  TextBytes text_bytes;
  bool decode_strips_leading_space;  // decode drops the first token's leading space
};

constexpr BytesCase kCases[] = {
    {"llama2 tokenizer.json", "llama2", "tokenizers/llama2", true, TextBytes::metaspace_and_prefix, true},
    {"llama2 tokenizer.model", "llama2_spm", "tokenizers/llama2", false, TextBytes::metaspace_and_prefix, true},
    {"llama3.1 tokenizer.json", "llama3.1", "tokenizers/llama3.1", true, TextBytes::same, false},
    {"qwen3 tokenizer.json", "qwen3", "tokenizers/qwen3", true, TextBytes::nfc, false},
    {"gemma3 tokenizer.json", "gemma3", "tokenizers/gemma3", true, TextBytes::metaspace, false},
    {"stories260K tokenizer.model", "stories260K", "models/stories260K", false, TextBytes::metaspace_and_prefix, true},
    {"stories260K GGUF", "stories260K", "models/stories260K-gguf/stories260K.gguf", false,
     TextBytes::metaspace_and_prefix, true},
};

bool is_gguf(const BytesCase& c) { return std::string_view(c.testdata).ends_with(".gguf"); }

// The tokenizer of a case, or nullptr after a WARN when the shared test data is absent.
std::unique_ptr<Tokenizer> load_case(const BytesCase& c) {
  if (is_gguf(c)) {
    const fs::path file = testdata_or_skip(c.testdata);
    return file.empty() ? nullptr : load_tokenizer(file);
  }
  for (const TokenizerCase& staged : kTokenizers) {
    if (std::string_view(staged.fixture) != c.fixture) continue;
    const fs::path folder = staged_folder(staged);
    return folder.empty() ? nullptr : load_tokenizer(folder);
  }
  FAIL("no staged tokenizer " << c.fixture);
  return nullptr;
}

void replace_all(std::string& text, const std::string& pattern, const std::string& content) {
  for (size_t hit = text.find(pattern); hit != std::string::npos; hit = text.find(pattern, hit + content.size()))
    text.replace(hit, pattern.size(), content);
}

std::string segment_bytes(std::string segment, TextBytes form) {
  switch (form) {
    case TextBytes::same: return segment;
    case TextBytes::nfc: {
      static const auto nfc = tok::parse_normalizer({{"type", "NFC"}}, "test", "normalizer");
      nfc->normalize(segment);
      return segment;
    }
    case TextBytes::metaspace_and_prefix:
      if (!segment.empty()) segment = " " + segment;
      [[fallthrough]];
    case TextBytes::metaspace: replace_all(segment, "\xE2\x96\x81", " "); return segment;
  }
  return segment;
}

// The bytes `ids` (the encoding of `text`, special tokens included) should add up to: the text
// cut at the special tokens' text, each segment in its normalised form.
std::string expected_bytes(const Tokenizer& tokenizer, const std::string& text, const std::vector<int32_t>& ids,
                           TextBytes form) {
  std::string expected;
  size_t pos = 0;
  for (const int32_t id : ids) {
    if (!tokenizer.is_special(id)) continue;
    const std::string piece = tokenizer.id_to_piece(id);
    const size_t hit = text.find(piece, pos);
    REQUIRE(hit != std::string::npos);
    expected += segment_bytes(text.substr(pos, hit - pos), form);
    pos = hit + piece.size();
  }
  return expected + segment_bytes(text.substr(pos), form);
}

std::string concatenate(const std::vector<std::string>& table, const std::vector<int32_t>& ids) {
  std::string bytes;
  for (const int32_t id : ids) bytes += table.at(static_cast<size_t>(id));
  return bytes;
}

std::string hex(const std::string& bytes);

// "id: bytes | bytes" for the first ids where two tables differ (and their sizes when those do).
std::vector<std::string> differences(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> found;
  if (a.size() != b.size()) found.push_back("sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()));
  for (size_t id = 0; id < std::min(a.size(), b.size()) && found.size() < 10; ++id) {
    if (a[id] != b[id]) found.push_back(std::to_string(id) + ": " + hex(a[id]) + " | " + hex(b[id]));
  }
  return found;
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out += digits[static_cast<uint8_t>(c) >> 4];
    out += digits[static_cast<uint8_t>(c) & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("vocabulary bytes: corpus tokens concatenate to the normalised text and to decode", "[tokenizer]") {
  for (const BytesCase& c : kCases) {
    DYNAMIC_SECTION(c.name) {
      const auto tokenizer = load_case(c);
      if (!tokenizer) return;
      const auto table = tokenizer->vocabulary_bytes();
      REQUIRE(table->size() == static_cast<size_t>(tokenizer->vocab_size()));
      const nlohmann::json fixture = read_fixture(c.fixture);
      REQUIRE(fixture["cases"].size() > 40);
      size_t compared_with_decode = 0;
      for (const auto& item : fixture["cases"]) {
        const std::string text = item["text"].get<std::string>();
        INFO("text: " << nlohmann::json(text).dump());
        const auto ids = ids_of(item["ids_no_special"]);
        const std::string bytes = concatenate(*table, ids);
        CHECK(hex(bytes) == hex(expected_bytes(*tokenizer, text, ids, c.text_bytes)));
        if (!tok::is_valid_utf8(bytes)) continue;
        ++compared_with_decode;
        const bool stripped = c.decode_strips_leading_space && !bytes.empty() && bytes[0] == ' ';
        CHECK(tokenizer->decode(ids, true) == (stripped ? bytes.substr(1) : bytes));
      }
      CHECK(compared_with_decode == fixture["cases"].size());
    }
  }
}

TEST_CASE("vocabulary bytes: every token adds to a decoded text what its bytes say", "[tokenizer]") {
  for (const BytesCase& c : kCases) {
    DYNAMIC_SECTION(c.name) {
      const auto tokenizer = load_case(c);
      if (!tokenizer) return;
      const auto table = tokenizer->vocabulary_bytes();
      // After a plain first token decode neither drops the next token's leading space nor sees a
      // sequence start; a token that is partial UTF-8 shows in decode as U+FFFD.
      const int32_t anchor = tokenizer->encode("a", false).back();
      const std::string anchor_text = tokenizer->decode(std::vector<int32_t>{anchor}, true);
      REQUIRE(anchor_text == "a");
      size_t partial = 0, empty = 0;
      for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
        const std::string& bytes = (*table)[static_cast<size_t>(id)];
        partial += tok::is_valid_utf8(bytes) ? 0 : 1;
        empty += bytes.empty() ? 1 : 0;
        const std::string decoded = tokenizer->decode(std::vector<int32_t>{anchor, id}, true);
        if (decoded != anchor_text + tok::to_valid_utf8(bytes)) {
          FAIL_CHECK("id " << id << " piece " << nlohmann::json(tokenizer->id_to_piece(id)).dump() << " bytes "
                           << hex(bytes) << " decoded after 'a' " << hex(decoded));
        }
        if (tokenizer->is_special(id)) CHECK(bytes.empty());
      }
      WARN(c.name << ": " << partial << " tokens are partial UTF-8, " << empty << " add nothing");
    }
  }
}

TEST_CASE("vocabulary bytes: byte tokens are raw bytes, split characters raw pieces", "[tokenizer]") {
  for (const BytesCase& c : kCases) {
    DYNAMIC_SECTION(c.name) {
      const auto tokenizer = load_case(c);
      if (!tokenizer) return;
      const auto table = tokenizer->vocabulary_bytes();
      if (const auto high = tokenizer->piece_to_id("<0xE4>")) {
        CHECK(hex((*table)[static_cast<size_t>(*high)]) == "e4");
        CHECK(hex((*table)[static_cast<size_t>(*tokenizer->piece_to_id("<0x0A>"))]) == "0a");
        CHECK(hex((*table)[static_cast<size_t>(*tokenizer->piece_to_id("<0x00>"))]) == "00");
      }
      // A character the vocabulary splits into pieces, at least one of them partial UTF-8.
      const std::string text = "a\xF0\x9F\xA6\x9C\xF0\x9D\x94\x98\xEA\xAF\x8D";  // a🦜𝔘ꯍ
      const auto ids = tokenizer->encode(text, false);
      const std::string bytes = concatenate(*table, ids);
      CHECK(hex(bytes) == hex(segment_bytes(text, c.text_bytes)));
      size_t partial = 0;
      for (const int32_t id : ids) partial += tok::is_valid_utf8((*table)[static_cast<size_t>(id)]) ? 0 : 1;
      CHECK(partial >= 2);
      if (const auto bos = tokenizer->bos_id()) CHECK((*table)[static_cast<size_t>(*bos)].empty());
      if (const auto eos = tokenizer->eos_id()) CHECK((*table)[static_cast<size_t>(*eos)].empty());
    }
  }
}

TEST_CASE("vocabulary bytes: tokens other than special ones give their text", "[tokenizer]") {
  SECTION("qwen3: non-special added tokens") {
    const auto tokenizer = load_case(kCases[3]);
    if (!tokenizer) return;
    const auto table = tokenizer->vocabulary_bytes();
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("<think>"))] == "<think>");
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("<|im_start|>"))].empty());
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("\xC4\xA0the"))] == " the");  // "Ġthe"
  }
  SECTION("gemma3: whitespace added tokens, metaspace pieces") {
    const auto tokenizer = load_case(kCases[4]);
    if (!tokenizer) return;
    const auto table = tokenizer->vocabulary_bytes();
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("\xE2\x96\x81\xE2\x96\x81"))] == "  ");
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("\n\n"))] == "\n\n");
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("<start_of_turn>"))].empty());
    CHECK((*table)[static_cast<size_t>(*tokenizer->piece_to_id("\xE2\x96\x81the"))] == " the");
  }
}

TEST_CASE("vocabulary bytes: one table per tokenizer, shared between threads", "[tokenizer]") {
  const auto tokenizer = load_case(kCases[5]);
  if (!tokenizer) return;
  std::vector<std::shared_ptr<const std::vector<std::string>>> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = tokenizer->vocabulary_bytes(); });
  for (std::thread& t : threads) t.join();
  for (const auto& table : seen) CHECK(table.get() == seen[0].get());
  CHECK(tokenizer->vocabulary_bytes().get() == seen[0].get());
  CHECK(seen[0]->size() == static_cast<size_t>(tokenizer->vocab_size()));
}

// (The shared llama2 folder's tokenizer.json and tokenizer.model number their pieces differently.)
TEST_CASE("vocabulary bytes: stories260K's tokenizer.model and GGUF give one table", "[tokenizer]") {
  const auto model = load_case(kCases[5]);
  const auto gguf = load_case(kCases[6]);
  if (!model || !gguf) return;
  CHECK(differences(*model->vocabulary_bytes(), *gguf->vocabulary_bytes()) == std::vector<std::string>{});
}

TEST_CASE("vocabulary bytes: the Python reference agrees", "[tokenizer]") {
  const nlohmann::json reference = read_fixture("token_bytes");
  for (const BytesCase& c : kCases) {
    if (!reference.contains(c.fixture) || is_gguf(c)) continue;
    DYNAMIC_SECTION(c.name) {
      const auto tokenizer = load_case(c);
      if (!tokenizer) return;
      const auto table = tokenizer->vocabulary_bytes();
      const nlohmann::json& expected = reference[c.fixture];
      REQUIRE(expected["vocab_size"].get<int32_t>() == tokenizer->vocab_size());
      REQUIRE(expected["bytes"].size() > 100);
      for (const auto& [id, bytes] : expected["bytes"].items()) {
        INFO("id " << id);
        CHECK(hex((*table)[std::stoul(id)]) == bytes.get<std::string>());
      }
    }
  }
}

TEST_CASE("decoder token bytes: a Strip before the join trims each token, after it only the text's ends",
          "[tokenizer]") {
  const auto token_bytes = [](const nlohmann::json& json, std::string token) {
    const auto decoder = tok::parse_decoder(json, "test", "decoder");
    bool joined = false;
    decoder->token_bytes(token, joined);
    return token;
  };
  const nlohmann::json strip = {{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}};
  const nlohmann::json replace = {{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}};
  const nlohmann::json fuse = {{"type", "Fuse"}};
  const nlohmann::json byte_fallback = {{"type", "ByteFallback"}};
  CHECK(token_bytes({{"type", "Sequence"}, {"decoders", {replace, byte_fallback, fuse, strip}}}, "\xE2\x96\x81the") ==
        " the");
  CHECK(token_bytes({{"type", "Sequence"}, {"decoders", {replace, strip, fuse}}}, "\xE2\x96\x81the") == "the");
  CHECK(token_bytes({{"type", "Sequence"}, {"decoders", {replace, byte_fallback}}}, "<0xC3>") == "\xC3");
  CHECK(token_bytes({{"type", "ByteLevel"}}, "\xC4\xA0\xC3\xA4") == " \xE4");  // "Ġä": space, half a character
  CHECK(token_bytes({{"type", "ByteLevel"}}, "<think>") == "<think>");
}
