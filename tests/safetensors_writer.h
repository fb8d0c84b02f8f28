#pragma once
// Test helpers: a scratch directory removed at scope exit, and a minimal safetensors writer that
// can also produce deliberately broken files (raw header text, wrong offsets, truncation).
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("slab_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct TestTensor {
  std::string name;
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian data
};

inline std::string f32_bytes(const std::vector<float>& values) {
  std::string s(values.size() * sizeof(float), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

// n values uniform in [-0.5, 0.5), the same for the same seed.
inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline TestTensor random_f32_tensor(const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {name, "F32", std::move(shape), f32_bytes(random_values(static_cast<size_t>(n), seed))};
}

// The header JSON a well-formed file would have for `tensors` (offsets packed in order).
inline nlohmann::json safetensors_header(const std::vector<TestTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

// A whole file from raw header text and data; `declared_len` overrides the length prefix.
inline std::string safetensors_raw(const std::string& header_text, const std::string& data, int64_t declared_len = -1) {
  std::string header = header_text;
  if (declared_len < 0) {
    while (header.size() % 8 != 0) header += ' ';  // the format pads with spaces to 8 bytes
  }
  uint64_t len = declared_len < 0 ? header.size() : static_cast<uint64_t>(declared_len);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + data;
}

inline std::string safetensors_bytes(const std::vector<TestTensor>& tensors) {
  std::string data;
  for (const auto& t : tensors) data += t.bytes;
  return safetensors_raw(safetensors_header(tensors).dump(), data);
}

}  // namespace slab::test
