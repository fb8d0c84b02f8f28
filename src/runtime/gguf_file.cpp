// GGUF parsing with every read bounds-checked against the bytes given: counts and lengths are
// compared with what is left before anything is allocated, so a hostile header cannot make the
// reader allocate more than a small multiple of the file's size.
#include "runtime/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace slab {
namespace {

constexpr int kMaxArrayDepth = 4;  // GGUF writers nest arrays at most once in practice
constexpr uint32_t kMaxDims = 4;   // ggml's GGML_MAX_DIMS
constexpr uint64_t kMaxStringBytes = 1u << 30;

struct TypeRow {
  uint32_t id;
  GgmlTypeInfo info;
  bool supported;
};

// Every type id ggml defines (names for messages); the supported ones with their block geometry.
constexpr TypeRow kGgmlTypes[] = {
    {0, {"F32", 1, 4}, true},       {1, {"F16", 1, 2}, true},       {2, {"Q4_0", 32, 18}, true},
    {3, {"Q4_1", 32, 20}, true},    {6, {"Q5_0", 32, 22}, true},    {7, {"Q5_1", 32, 24}, true},
    {8, {"Q8_0", 32, 34}, true},    {9, {"Q8_1", 0, 0}, false},     {10, {"Q2_K", 0, 0}, false},
    {11, {"Q3_K", 0, 0}, false},    {12, {"Q4_K", 256, 144}, true}, {13, {"Q5_K", 256, 176}, true},
    {14, {"Q6_K", 256, 210}, true}, {15, {"Q8_K", 0, 0}, false},    {16, {"IQ2_XXS", 0, 0}, false},
    {17, {"IQ2_XS", 0, 0}, false},  {18, {"IQ3_XXS", 0, 0}, false}, {19, {"IQ1_S", 0, 0}, false},
    {20, {"IQ4_NL", 0, 0}, false},  {21, {"IQ3_S", 0, 0}, false},   {22, {"IQ2_S", 0, 0}, false},
    {23, {"IQ4_XS", 0, 0}, false},  {24, {"I8", 0, 0}, false},      {25, {"I16", 0, 0}, false},
    {26, {"I32", 0, 0}, false},     {27, {"I64", 0, 0}, false},     {28, {"F64", 0, 0}, false},
    {29, {"IQ1_M", 0, 0}, false},   {30, {"BF16", 1, 2}, true},     {34, {"TQ1_0", 0, 0}, false},
    {35, {"TQ2_0", 0, 0}, false},   {39, {"MXFP4", 0, 0}, false},
};

// Smallest encoding of one element of each value type, to bound array counts by the bytes left.
uint64_t min_value_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::u16:
    case GgufValueType::i16: return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32: return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64: return 8;
    case GgufValueType::string: return 8;
    case GgufValueType::array: return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= 12; }

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, const std::string& source) : data_(data), size_(size), source_(source) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  // `what` says what was being read, for the truncation message.
  void need(uint64_t n, const std::string& what) const {
    if (n > left()) {
      throw std::runtime_error(source_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                               std::to_string(pos_) + ", only " + std::to_string(left()) + " left");
    }
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (length)");
    if (n > kMaxStringBytes) {
      throw std::runtime_error(source_ + ": " + what + ": string length " + std::to_string(n) + " exceeds 1 GiB");
    }
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& source_;
};

GgufValue read_value(ByteReader& in, GgufValueType type, const std::string& source, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  const std::string what = "key '" + key + "'";
  switch (type) {
    case GgufValueType::u8: v.integer = in.read<uint8_t>(what); break;
    case GgufValueType::i8: v.integer = in.read<int8_t>(what); break;
    case GgufValueType::u16: v.integer = in.read<uint16_t>(what); break;
    case GgufValueType::i16: v.integer = in.read<int16_t>(what); break;
    case GgufValueType::u32: v.integer = in.read<uint32_t>(what); break;
    case GgufValueType::i32: v.integer = in.read<int32_t>(what); break;
    case GgufValueType::i64: v.integer = in.read<int64_t>(what); break;
    case GgufValueType::u64: {
      const uint64_t u = in.read<uint64_t>(what);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw std::runtime_error(source + ": key '" + key + "': u64 value " + std::to_string(u) + " is too large");
      }
      v.integer = static_cast<int64_t>(u);
      break;
    }
    case GgufValueType::f32: v.real = in.read<float>(what); break;
    case GgufValueType::f64: v.real = in.read<double>(what); break;
    case GgufValueType::boolean: {
      const uint8_t b = in.read<uint8_t>(what);
      if (b > 1)
        throw std::runtime_error(source + ": key '" + key + "': bool value " + std::to_string(b) + " is not 0 or 1");
      v.integer = b;
      break;
    }
    case GgufValueType::string: v.text = in.read_string(what); break;
    case GgufValueType::array: {
      if (depth >= kMaxArrayDepth) {
        throw std::runtime_error(source + ": key '" + key + "': arrays nested deeper than " +
                                 std::to_string(kMaxArrayDepth) + " levels");
      }
      const uint32_t et = in.read<uint32_t>(what + " (array element type)");
      if (!valid_value_type(et)) {
        throw std::runtime_error(source + ": key '" + key + "': unknown array element type " + std::to_string(et));
      }
      v.element_type = static_cast<GgufValueType>(et);
      const uint64_t count = in.read<uint64_t>(what + " (array length)");
      if (count > in.left() / min_value_bytes(v.element_type)) {
        throw std::runtime_error(source + ": truncated: key '" + key + "': array of " + std::to_string(count) + " " +
                                 gguf_value_type_name(v.element_type) + " values does not fit in the " +
                                 std::to_string(in.left()) + " bytes left");
      }
      v.items.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) v.items.push_back(read_value(in, v.element_type, source, key, depth + 1));
      break;
    }
  }
  return v;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8: return "u8";
    case GgufValueType::i8: return "i8";
    case GgufValueType::u16: return "u16";
    case GgufValueType::i16: return "i16";
    case GgufValueType::u32: return "u32";
    case GgufValueType::i32: return "i32";
    case GgufValueType::f32: return "f32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::u64: return "u64";
    case GgufValueType::i64: return "i64";
    case GgufValueType::f64: return "f64";
  }
  return "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64: return true;
    default: return false;
  }
}

const GgmlTypeInfo* ggml_type_info(uint32_t type_id) {
  for (const TypeRow& row : kGgmlTypes) {
    if (row.id == type_id) return row.supported ? &row.info : nullptr;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t type_id) {
  for (const TypeRow& row : kGgmlTypes) {
    if (row.id == type_id) return row.info.name;
  }
  return "type " + std::to_string(type_id);
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return {dims.rbegin(), dims.rend()}; }

GgufFile GgufFile::open(const std::filesystem::path& path) {
  MappedFile file(path);
  GgufFile parsed = parse(file.data(), file.size(), path.string());
  parsed.file_ = std::move(file);  // the mapping's address does not change when moved
  return parsed;
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, const std::string& source) {
  GgufFile f;
  f.source_ = source;
  ByteReader in(data, size, f.source_);
  in.need(4, "the magic \"GGUF\"");
  if (std::memcmp(data, "GGUF", 4) != 0) throw std::runtime_error(source + ": not a GGUF file (no \"GGUF\" magic)");
  in.read<uint32_t>("magic");
  f.version_ = in.read<uint32_t>("the version");
  if (f.version_ != 2 && f.version_ != 3) {
    throw std::runtime_error(source + ": GGUF version " + std::to_string(f.version_) +
                             " is not supported (expected 2 or 3)");
  }
  const uint64_t tensor_count = in.read<uint64_t>("the tensor count");
  const uint64_t kv_count = in.read<uint64_t>("the metadata count");
  // Each key/value needs at least 8 (key length) + 4 (type) + 1 bytes; each tensor info 8+4+4+8.
  if (kv_count > in.left() / 13) {
    throw std::runtime_error(source + ": truncated: " + std::to_string(kv_count) + " metadata entries do not fit in " +
                             std::to_string(in.left()) + " bytes");
  }
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("metadata key " + std::to_string(i));
    const uint32_t t = in.read<uint32_t>("key '" + key + "' (value type)");
    if (!valid_value_type(t))
      throw std::runtime_error(source + ": key '" + key + "': unknown value type " + std::to_string(t));
    GgufValue value = read_value(in, static_cast<GgufValueType>(t), source, key, 0);
    if (!f.metadata_.emplace(key, std::move(value)).second) {
      throw std::runtime_error(source + ": key '" + key + "' appears twice");
    }
  }
  if (const auto a = f.get_int("general.alignment")) {
    if (*a <= 0 || *a > (1 << 20) || (*a & (*a - 1)) != 0)
      f.fail_key("general.alignment", "expected a power of two, found " + std::to_string(*a));
    f.alignment_ = static_cast<uint64_t>(*a);
  }

  if (tensor_count > in.left() / 24) {
    throw std::runtime_error(source + ": truncated: " + std::to_string(tensor_count) + " tensor infos do not fit in " +
                             std::to_string(in.left()) + " bytes");
  }
  f.tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = in.read_string("tensor info " + std::to_string(i) + " (name)");
    const std::string what = "tensor '" + t.name + "'";
    const uint32_t n_dims = in.read<uint32_t>(what + " (dimension count)");
    if (n_dims == 0 || n_dims > kMaxDims) {
      f.fail_tensor(t.name, std::to_string(n_dims) + " dimensions (expected 1 to " + std::to_string(kMaxDims) + ")");
    }
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = in.read<uint64_t>(what + " (dimensions)");
      if (dim == 0 || dim > (uint64_t{1} << 40) || numel > (uint64_t{1} << 50) / dim) {
        f.fail_tensor(t.name, "dimension " + std::to_string(dim) + " is zero or too large");
      }
      numel *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    const uint32_t type = in.read<uint32_t>(what + " (type)");
    const GgmlTypeInfo* info = ggml_type_info(type);
    if (info == nullptr) {
      f.fail_tensor(
          t.name, "tensor type " + ggml_type_name(type) +
                      " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
    }
    t.type = static_cast<GgmlType>(type);
    if (static_cast<uint64_t>(t.dims[0]) % info->block_elems != 0) {
      f.fail_tensor(t.name, "row length " + std::to_string(t.dims[0]) + " is not a multiple of " + info->name +
                                "'s block of " + std::to_string(info->block_elems));
    }
    t.bytes = static_cast<size_t>(numel / info->block_elems * info->block_bytes);
    t.offset = in.read<uint64_t>(what + " (offset)");
    if (t.offset % f.alignment_ != 0) {
      f.fail_tensor(t.name, "offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                                std::to_string(f.alignment_));
    }
    if (!f.tensor_index_.emplace(t.name, f.tensors_.size()).second) f.fail_tensor(t.name, "appears twice");
    f.tensors_.push_back(std::move(t));
  }

  const uint64_t data_start = align_up(in.pos(), f.alignment_);
  const uint64_t data_size = data_start <= size ? size - data_start : 0;
  for (GgufTensorInfo& t : f.tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      f.fail_tensor(t.name, "data at offset " + std::to_string(t.offset) + " (" + std::to_string(t.bytes) +
                                " bytes of " + ggml_type_name(static_cast<uint32_t>(t.type)) +
                                ") extends past the end of the data section (" + std::to_string(data_size) +
                                " bytes; file truncated?)");
    }
    t.data = data + data_start + t.offset;
  }
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::fail_key(const std::string& key, const std::string& what) const {
  throw std::runtime_error(source_ + ": key '" + key + "': " + what);
}

void GgufFile::fail_tensor(const std::string& name, const std::string& what) const {
  throw std::runtime_error(source_ + ": tensor '" + name + "': " + what);
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) fail_key(key, std::string("expected an integer, found a ") + gguf_value_type_name(v->type));
  return v->integer;
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_integer()) return static_cast<double>(v->integer);
  if (!v->is_float()) fail_key(key, std::string("expected a number, found a ") + gguf_value_type_name(v->type));
  return v->real;
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::boolean)
    fail_key(key, std::string("expected a bool, found a ") + gguf_value_type_name(v->type));
  return v->integer != 0;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::string)
    fail_key(key, std::string("expected a string, found a ") + gguf_value_type_name(v->type));
  return v->text;
}

const GgufValue* GgufFile::get_array(const std::string& key, std::initializer_list<GgufValueType> allowed) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufValueType::array)
    fail_key(key, std::string("expected an array, found a ") + gguf_value_type_name(v->type));
  if (allowed.size() == 0) return v;
  for (GgufValueType t : allowed) {
    if (v->element_type == t) return v;
  }
  std::string names;
  for (GgufValueType t : allowed) names += (names.empty() ? "" : " or ") + std::string(gguf_value_type_name(t));
  fail_key(key, "expected an array of " + names + ", found an array of " + gguf_value_type_name(v->element_type));
}

std::optional<std::filesystem::path> gguf_model_file(const std::filesystem::path& model) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(model)) return model;
  if (!fs::is_directory(model) || fs::exists(model / "config.json")) return std::nullopt;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(model)) {
    if (entry.is_regular_file() && entry.path().extension() == ".gguf") found.push_back(entry.path());
  }
  if (found.size() <= 1) return found.empty() ? std::nullopt : std::optional<fs::path>(found[0]);
  std::sort(found.begin(), found.end());
  std::string names;
  for (const auto& p : found) names += (names.empty() ? "" : ", ") + p.filename().string();
  throw std::runtime_error(model.string() + ": holds several .gguf files (" + names +
                           ") and no config.json; pass the one to serve as --model FILE");
}

}  // namespace slab
