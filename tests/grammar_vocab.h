#pragma once
// Test and bench helpers for the grammar module: a byte-level BPE vocabulary read from a Hugging
// Face tokenizer.json (optionally .xz), and llama.cpp's JSON grammar.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace slab::test {

inline const char* kJsonGbnf = R"gbnf(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)gbnf";

// Token id -> the bytes it stands for; added (special) tokens are empty. Reads `path`, or
// decompresses it with xz when it ends in .xz.
inline std::vector<std::string> load_byte_level_vocab(const std::filesystem::path& path) {
  std::string text;
  if (path.extension() == ".xz") {
    FILE* pipe = popen(("xz -dc '" + path.string() + "'").c_str(), "r");
    if (!pipe) throw std::runtime_error("cannot run xz");
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
    if (pclose(pipe) != 0) throw std::runtime_error("xz failed on " + path.string());
  } else {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const auto json = nlohmann::json::parse(text);
  // GPT-2's bytes_to_unicode, inverted: printable bytes stand for themselves, the rest for 256+n.
  std::vector<int> byte_of(512, -1);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    byte_of[static_cast<size_t>(printable ? b : 256 + next++)] = b;
  }
  size_t size = 0;
  for (const auto& [key, id] : json["model"]["vocab"].items()) size = std::max(size, id.get<size_t>() + 1);
  for (const auto& added : json["added_tokens"]) size = std::max(size, added["id"].get<size_t>() + 1);
  std::vector<std::string> vocab(size);
  for (const auto& [key, id] : json["model"]["vocab"].items()) {
    std::string bytes;
    for (size_t i = 0; i < key.size();) {
      const auto b0 = static_cast<unsigned char>(key[i]);
      const int len = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
      uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
      for (int k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(key[i + static_cast<size_t>(k)]) & 0x3F);
      i += static_cast<size_t>(len);
      if (cp >= byte_of.size() || byte_of[cp] < 0) throw std::runtime_error("not a byte-level token: " + key);
      bytes += static_cast<char>(byte_of[cp]);
    }
    vocab[id.get<size_t>()] = std::move(bytes);
  }
  for (const auto& added : json["added_tokens"]) vocab[added["id"].get<size_t>()].clear();
  return vocab;
}

}  // namespace slab::test
