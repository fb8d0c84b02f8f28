#include "tokenizer/json_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace slab::tok {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::string text;
  in.seekg(0, std::ios::end);
  text.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0, std::ios::beg);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in) throw std::runtime_error(path.string() + ": read failed");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": malformed JSON: " + e.what());
  }
}

void fail(const std::string& file, const std::string& field, const std::string& what) {
  throw std::runtime_error(file + ": " + field + ": " + what);
}

std::string require_string(const nlohmann::json& json, const char* key, const std::string& file,
                           const std::string& field) {
  const auto it = json.find(key);
  if (it == json.end() || !it->is_string()) fail(file, field + "." + key, "missing or not a string");
  return it->get<std::string>();
}

}  // namespace slab::tok
