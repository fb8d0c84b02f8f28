// The grammar engine against an independent prefix oracle (issue #13): for random and realistic
// JSON schemas and token sequences, a token is allowed by TokenMasker's mask (and by
// Matcher::can_accept) iff the text so far plus the token is the beginning of a document valid
// under the schema, and can_end() holds iff the text is a whole valid document. The labels come
// from scripts/json_prefix_oracle.py (recursive descent over JSON syntax and the schema's
// meaning, checked against Python's jsonschema) via scripts/make_json_prefix_fixtures.py.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "test_paths.h"

using slab::grammar::Grammar;
using slab::grammar::json_schema_to_gbnf;
using slab::grammar::JsonSchemaOptions;
using slab::grammar::Matcher;
using slab::grammar::TokenMasker;
using ordered_json = nlohmann::ordered_json;

namespace {

// A fixture token: the string itself, or {"hex": ...} where its bytes are not UTF-8.
std::string token_bytes(const ordered_json& token) {
  if (token.is_string()) return token.get<std::string>();
  const std::string hex = token.at("hex").get<std::string>();
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

// Bytes quoted for a failure message, \xHH outside printable ASCII.
std::string printable(const std::string& bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F && c != '\\') {
      out += c;
    } else {
      out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    }
  }
  return out + "\"";
}

bool mask_bit(const std::vector<uint64_t>& mask, size_t id) { return (mask[id / 64] >> (id % 64)) & 1; }

}  // namespace

TEST_CASE("token masks and the matcher agree with the JSON Schema prefix oracle on every fixture step", "[grammar]") {
  // SLAB_JSON_PREFIX_FIXTURE: a larger sweep written by the script with --out (not committed).
  const char* sweep = std::getenv("SLAB_JSON_PREFIX_FIXTURE");
  std::ifstream in(sweep ? std::filesystem::path(sweep)
                         : slab::test::fixtures_dir() / "grammar" / "json_schema_prefix.json");
  REQUIRE(in);
  const ordered_json fixture = ordered_json::parse(in);
  const auto& schemas = fixture.at("schemas");
  REQUIRE(schemas.size() >= 40);

  // One vocabulary for every schema: all the fixture's tokens and every single byte.
  std::map<std::string, size_t> id_of;
  for (int b = 0; b < 256; ++b) id_of.emplace(std::string(1, static_cast<char>(b)), 0);
  for (const auto& schema_case : schemas) {
    for (const auto& token : schema_case.at("tokens")) id_of.emplace(token_bytes(token), 0);
  }
  auto vocab = std::make_shared<std::vector<std::string>>();
  for (auto& [bytes, id] : id_of) {
    id = vocab->size();
    vocab->push_back(bytes);
  }
  const std::shared_ptr<const std::vector<std::string>> shared_vocab = vocab;
  std::vector<uint64_t> mask((vocab->size() + 63) / 64);

  size_t sequences = 0;
  size_t accepted_steps = 0;
  size_t rejected_steps = 0;
  size_t complete_ends = 0;
  size_t accepted_probes = 0;
  size_t rejected_probes = 0;
  for (const auto& schema_case : schemas) {
    JsonSchemaOptions options;
    options.allow_whitespace = schema_case.at("allow_whitespace").get<bool>();
    const std::string gbnf = json_schema_to_gbnf(schema_case.at("schema"), options);
    INFO("schema " << schema_case.at("name").get<std::string>() << "\n" << gbnf);
    const auto grammar = Grammar::parse(gbnf);
    const TokenMasker masker(grammar, shared_vocab);
    std::vector<size_t> ids;  // the schema's token table in vocabulary ids
    std::vector<std::string> table;
    for (const auto& token : schema_case.at("tokens")) {
      table.push_back(token_bytes(token));
      ids.push_back(id_of.at(table.back()));
    }
    for (const auto& sequence : schema_case.at("sequences")) {
      ++sequences;
      const auto& tokens = sequence.at("tokens");
      const bool last_rejected = sequence.at("last_rejected").get<bool>();
      const auto& probes = sequence.at("probes");  // [step, token, allowed], in step order
      size_t probe = 0;
      Matcher matcher(grammar);
      std::string text;
      for (size_t step = 0; step < tokens.size(); ++step) {
        const size_t index = tokens[step].get<size_t>();
        const std::string& token = table.at(index);
        const bool expected = !(last_rejected && step + 1 == tokens.size());
        INFO(sequence.at("kind").get<std::string>()
             << " sequence, text so far " << printable(text) << ", token " << printable(token));
        masker.fill_mask(matcher, mask);
        CHECK(mask_bit(mask, ids[index]) == expected);
        CHECK(matcher.can_accept(token) == expected);
        (expected ? accepted_steps : rejected_steps) += 1;
        for (; probe < probes.size() && probes[probe].at(0).get<size_t>() == step; ++probe) {
          const size_t probe_index = probes[probe].at(1).get<size_t>();
          const bool allowed = probes[probe].at(2).get<int>() != 0;
          INFO("probe token " << printable(table.at(probe_index)));
          CHECK(mask_bit(mask, ids[probe_index]) == allowed);
          CHECK(matcher.can_accept(table.at(probe_index)) == allowed);
          (allowed ? accepted_probes : rejected_probes) += 1;
        }
        if (!expected) break;
        if (!matcher.accept(token)) {
          FAIL_CHECK("Matcher::accept refused a token that can_accept and the oracle allow");
          break;
        }
        text += token;
      }
      INFO("at the end of " << printable(text));
      const bool complete = sequence.at("complete").get<bool>();
      CHECK(matcher.can_end() == complete);
      complete_ends += complete;
    }
  }
  WARN(schemas.size() << " schemas, " << sequences << " sequences: " << accepted_steps << " accepted and "
                      << rejected_steps << " rejected steps checked, " << complete_ends
                      << " complete documents; probes: " << accepted_probes << " allowed, " << rejected_probes
                      << " refused");
  CHECK(rejected_steps > 1000);
  CHECK(accepted_steps > 10000);
  CHECK(rejected_probes > 10000);
  CHECK(accepted_probes > 1000);
}
