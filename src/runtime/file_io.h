#pragma once
// Whole-file reads with errors that name the file, for the small text and JSON files a model
// folder ships (config.json, tokenizer.json, tokenizer_config.json, chat templates).
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace slab {

// Throws std::runtime_error "<path>: cannot open" / "<path>: read failed".
std::string read_file(const std::filesystem::path& path);
// Throws std::runtime_error "<path>: malformed JSON: ..." as well.
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace slab
