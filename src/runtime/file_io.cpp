#include "runtime/file_io.h"

#include <fstream>
#include <stdexcept>

namespace slab {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::string text;
  in.seekg(0, std::ios::end);
  text.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0, std::ios::beg);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in) throw std::runtime_error(path.string() + ": read failed");
  return text;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": malformed JSON: " + e.what());
  }
}

}  // namespace slab
