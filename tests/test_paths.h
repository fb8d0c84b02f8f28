#pragma once
// Where the tests find their data. Shared test data lives beside the checkout and may be absent:
// tests that need it call testdata_or_skip() and return early with a message.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace slab::test {

inline std::filesystem::path fixtures_dir() { return SLAB_FIXTURES_DIR; }

// The shared test data: $SLAB_TESTDATA when set (a machine where ../shared is not beside the
// checkout, such as the device machine, whose pack carries a copy), else ../shared/testdata.
inline std::filesystem::path testdata_dir() {
  const char* env = std::getenv("SLAB_TESTDATA");
  return (env != nullptr && *env != '\0') ? std::filesystem::path(env) : std::filesystem::path(SLAB_TESTDATA_DIR);
}

// Returns the path under the shared test data, or an empty path after printing why the test skips.
inline std::filesystem::path testdata_or_skip(const std::string& relative) {
  std::filesystem::path p = testdata_dir() / relative;
  if (!std::filesystem::exists(p)) {
    WARN("skipped: " << p.string() << " is absent (shared test data not checked out beside the repo)");
    return {};
  }
  return p;
}

// The real trained stories260K model folder, or "" after printing why the test skips.
inline std::string stories260k_or_skip() { return testdata_or_skip("models/stories260K").string(); }

}  // namespace slab::test
