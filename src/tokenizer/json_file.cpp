#include "tokenizer/json_file.h"

#include <stdexcept>

namespace slab::tok {

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
