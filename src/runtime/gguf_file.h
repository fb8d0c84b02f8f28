#pragma once
// The GGUF container (versions 2 and 3): header, metadata key/values, tensor infos, aligned data
// section. It lives in runtime, beside the memory map, because both the model (weights, config)
// and the tokenizer (vocabulary) read the same file; it knows nothing of architectures.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 key/value count; each key/value is a string
// key, a u32 value type and the value (arrays: u32 element type, u64 count, elements); each tensor
// info is a string name, u32 dimension count, u64 dims (innermost first), u32 ggml type, u64
// offset into the data section. The data section starts at the next multiple of
// general.alignment (default 32) after the infos. Strings are u64 length + bytes. Little-endian.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/mapped_file.h"

namespace slab {

enum class GgufValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* gguf_value_type_name(GgufValueType type);

// One metadata value. Integers land in `integer` (signed types sign-extended; u64 above INT64_MAX
// is refused at parse), floats in `real`, booleans as 0/1 in `integer`.
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  GgufValueType element_type = GgufValueType::u8;  // arrays only
  int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::vector<GgufValue> items;  // arrays only

  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::f32 || type == GgufValueType::f64; }
};

// The ggml tensor types this reader accepts, with their block geometry: `block_elems` elements
// stored in `block_bytes` bytes (1 and the element size for the plain types).
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  bf16 = 30,
};
struct GgmlTypeInfo {
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
};
// nullptr for a type id this reader does not support.
const GgmlTypeInfo* ggml_type_info(uint32_t type_id);
// "Q2_K" etc. for any type id ggml defines, "type <id>" for the rest (for messages).
std::string ggml_type_name(uint32_t type_id);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // innermost first, as stored (ne0, ne1, ...)
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;  // into the data section
  const uint8_t* data = nullptr;
  size_t bytes = 0;

  int64_t numel() const;
  // Row-major shape, outermost first (dims reversed), as safetensors and PyTorch write it.
  std::vector<int64_t> shape() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws std::runtime_error naming the file and, where there is one, the
  // key or tensor at fault, and what was expected.
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes already in memory (which must outlive the result); `source` names them in
  // messages. Never reads outside [data, data + size).
  static GgufFile parse(const uint8_t* data, size_t size, const std::string& source);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& source() const { return source_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Typed reads; a key present with the wrong type throws naming the file, key and both types.
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;  // integers are accepted too
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  // An array whose elements have one of `allowed` types (or any type when empty).
  const GgufValue* get_array(const std::string& key, std::initializer_list<GgufValueType> allowed = {}) const;

  [[noreturn]] void fail_key(const std::string& key, const std::string& what) const;
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& what) const;

 private:
  std::string source_;
  MappedFile file_;  // empty when parsed from caller-owned bytes
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// The GGUF file a --model argument names: the argument itself when it is a regular file (of any
// name; the magic is checked when it is read), or the one *.gguf file in a folder without
// config.json. nullopt for a Hugging Face folder (or a path that does not exist). Throws naming
// the folder when it holds no config.json and several .gguf files.
std::optional<std::filesystem::path> gguf_model_file(const std::filesystem::path& model);

}  // namespace slab
