#pragma once
// Reading the JSON files a tokenizer folder ships, with errors that name the file at fault.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/file_io.h"

namespace slab::tok {

using slab::read_json_file;  // runtime/file_io.h

// Throws std::runtime_error "<file>: <field>: <what>".
[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& what);

// The string at json[key], or throws naming the file and field when it is absent or not a string.
std::string require_string(const nlohmann::json& json, const char* key, const std::string& file,
                           const std::string& field);

}  // namespace slab::tok
