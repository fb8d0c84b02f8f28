#pragma once
// The real tokenizers the tests run (shared test data, decompressed into a scratch folder once)
// and their expected outputs (tests/fixtures/tokenizer/<name>.json, made by
// scripts/make_tokenizer_fixtures.py).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace slab::test {

// A scratch folder removed when the test binary exits.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = std::filesystem::temp_directory_path() / ("slab-tokenizer-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::filesystem::path& scratch() {
  static ScratchDir dir;
  return dir.path();
}

// Copies `name` from `source` into `target`, decompressing `name.xz` when only that exists.
inline void stage_file(const std::filesystem::path& source, const std::filesystem::path& target,
                       const std::string& name) {
  if (std::filesystem::exists(source / name)) {
    std::filesystem::copy_file(source / name, target / name, std::filesystem::copy_options::overwrite_existing);
  } else if (std::filesystem::exists(source / (name + ".xz"))) {
    const std::string command =
        "xz -dc '" + (source / (name + ".xz")).string() + "' > '" + (target / name).string() + "'";
    REQUIRE(std::system(command.c_str()) == 0);
  }
}

struct TokenizerCase {
  const char* fixture;   // tests/fixtures/tokenizer/<fixture>.json
  const char* testdata;  // folder under ../shared/testdata
  bool json;             // tokenizer.json (else tokenizer.model alone)
};

constexpr TokenizerCase kTokenizers[] = {
    {"llama2", "tokenizers/llama2", true},     {"llama2_spm", "tokenizers/llama2", false},
    {"llama3.1", "tokenizers/llama3.1", true}, {"qwen3", "tokenizers/qwen3", true},
    {"gemma3", "tokenizers/gemma3", true},     {"stories260K", "models/stories260K", false},
};

// A folder holding the tokenizer files of one case, decompressed; empty when the shared test
// data is absent (after a WARN).
inline std::filesystem::path staged_folder(const TokenizerCase& c) {
  static std::map<std::string, std::filesystem::path> staged;
  if (const auto it = staged.find(c.fixture); it != staged.end()) return it->second;
  const std::filesystem::path source = slab::test::testdata_or_skip(c.testdata);
  if (source.empty()) return {};
  const std::filesystem::path target = scratch() / c.fixture;
  std::filesystem::create_directories(target);
  stage_file(source, target, "tokenizer_config.json");
  stage_file(source, target, c.json ? "tokenizer.json" : "tokenizer.model");
  staged[c.fixture] = target;
  return target;
}

inline nlohmann::json read_fixture(const std::string& name) {
  std::ifstream in(slab::test::fixtures_dir() / "tokenizer" / (name + ".json"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

inline std::vector<int32_t> ids_of(const nlohmann::json& json) { return json.get<std::vector<int32_t>>(); }

}  // namespace slab::test
