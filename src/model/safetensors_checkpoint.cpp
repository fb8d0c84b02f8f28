// Safetensors checkpoints: model.safetensors, or model.safetensors.index.json and its shards.
// Layout of one file: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
// section, offsets relative to its start. Every file is mapped and its whole header validated at
// open, so a bad file fails before anything is converted.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "runtime/mapped_file.h"

namespace slab {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit is 100 MB

[[noreturn]] void fail_file(const fs::path& file, const std::string& what) {
  throw std::runtime_error(file.string() + ": " + what);
}

[[noreturn]] void fail_tensor(const fs::path& file, const std::string& name, const std::string& what) {
  throw std::runtime_error(file.string() + ": tensor '" + name + "': " + what);
}

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "F32")
    out = DType::f32;
  else if (s == "F16")
    out = DType::f16;
  else if (s == "BF16")
    out = DType::bf16;
  else if (s == "I32")  // AWQ/GPTQ packed codes and g_idx (model/prequantized_checkpoint.h)
    out = DType::i32;
  else
    return false;
  return true;
}

uint64_t get_offset(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::numeric_limits<uint64_t>::max();
}

// Parses and validates one file's header; appends its tensors to `out`.
void read_header(const MappedFile& file, std::unordered_map<std::string, TensorView>& out) {
  const fs::path& path = file.path();
  const size_t size = file.size();
  if (size < 8) {
    fail_file(path,
              "truncated: " + std::to_string(size) + " bytes, too short for the 8-byte safetensors header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file.data()[i];
  if (header_len > size - 8) {
    fail_file(path, "header length " + std::to_string(header_len) + " exceeds the file size (" + std::to_string(size) +
                        " bytes; truncated or not a safetensors file)");
  }
  if (header_len > kMaxHeaderBytes) {
    fail_file(path, "header length " + std::to_string(header_len) + " exceeds 100 MB");
  }
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::parse_error& e) {
    fail_file(path, std::string("malformed safetensors header JSON: ") + e.what());
  }
  if (!header.is_object()) fail_file(path, "safetensors header is not a JSON object");

  const uint8_t* data = file.data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object()) fail_tensor(path, name, "header entry is not an object");
    auto dt = entry.find("dtype");
    auto sh = entry.find("shape");
    auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) fail_tensor(path, name, "missing or invalid 'dtype'");
    if (sh == entry.end() || !sh->is_array()) fail_tensor(path, name, "missing or invalid 'shape'");
    if (off == entry.end() || !off->is_array() || off->size() != 2) {
      fail_tensor(path, name, "missing or invalid 'data_offsets' (expected [begin, end])");
    }
    TensorView view;
    view.name = name;
    view.file = path.string();
    if (!parse_dtype(dt->get<std::string>(), view.dtype)) {
      fail_tensor(
          path, name,
          "unsupported dtype '" + dt->get<std::string>() + "' (supported: F32, F16, BF16, and I32 for AWQ codes)");
    }
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        fail_tensor(path, name, "invalid shape " + sh->dump());
      }
      const auto dim = static_cast<uint64_t>(d.get<int64_t>());
      if (dim != 0 && numel > (uint64_t{1} << 62) / dim) fail_tensor(path, name, "shape too large");
      numel *= dim;
      view.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = get_offset((*off)[0]);
    const uint64_t end = get_offset((*off)[1]);
    const std::string offsets = "data_offsets " + off->dump();
    if (begin > end) fail_tensor(path, name, offsets + " are not in order");
    if (end > data_size) {
      fail_tensor(path, name,
                  offsets + " extend past the end of the data section (" + std::to_string(data_size) +
                      " bytes; file truncated?)");
    }
    const uint64_t expect = numel * dtype_size(view.dtype);
    if (end - begin != expect) {
      fail_tensor(path, name,
                  offsets + " hold " + std::to_string(end - begin) + " bytes but shape " + sh->dump() + " of " +
                      dtype_name(view.dtype) + " needs " + std::to_string(expect));
    }
    view.data = data + begin;
    if (!out.emplace(name, std::move(view)).second) {
      fail_tensor(path, name, "appears in more than one file of the checkpoint");
    }
  }
}

class SafetensorsCheckpoint final : public Checkpoint {
 public:
  SafetensorsCheckpoint(std::string description, std::vector<MappedFile> files,
                        std::unordered_map<std::string, TensorView> tensors)
      : description_(std::move(description)), files_(std::move(files)), tensors_(std::move(tensors)) {}

  bool has(const std::string& name) const override { return tensors_.count(name) != 0; }

  TensorView tensor(const std::string& name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      throw std::runtime_error(description_ + ": tensor '" + name + "' not found");
    }
    return it->second;
  }

  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const auto& kv : tensors_) names.push_back(kv.first);
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string description_;
  std::vector<MappedFile> files_;  // keeps the views' memory mapped
  std::unordered_map<std::string, TensorView> tensors_;
};

std::unique_ptr<Checkpoint> open_sharded(const fs::path& index_path) {
  json index;
  {
    MappedFile f(index_path);
    const char* text = reinterpret_cast<const char*>(f.data());
    try {
      index = json::parse(text, text + f.size());
    } catch (const json::parse_error& e) {
      fail_file(index_path, std::string("invalid JSON: ") + e.what());
    }
  }
  auto wm = index.find("weight_map");
  if (!index.is_object() || wm == index.end() || !wm->is_object()) {
    fail_file(index_path, "field 'weight_map': missing or not an object");
  }
  std::map<std::string, std::string> shard_of;  // tensor -> shard file name
  std::set<std::string> shards;
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string()) fail_file(index_path, "field 'weight_map': tensor '" + name + "': expected a file name");
    const std::string file = shard.get<std::string>();
    const fs::path rel(file);
    if (file.empty() || rel.is_absolute() || file.find("..") != std::string::npos) {
      fail_file(index_path, "field 'weight_map': tensor '" + name + "': invalid shard name '" + file + "'");
    }
    shard_of[name] = file;
    shards.insert(file);
  }
  const fs::path dir = index_path.parent_path();
  std::vector<MappedFile> files;
  std::unordered_map<std::string, TensorView> tensors;
  for (const std::string& shard : shards) {
    const fs::path p = dir / shard;
    if (!fs::is_regular_file(p)) {
      std::string example;
      for (const auto& [name, file] : shard_of) {
        if (file == shard) {
          example = name;
          break;
        }
      }
      fail_file(index_path, "shard '" + shard + "' (holding tensor '" + example + "') not found at " + p.string());
    }
    files.emplace_back(p);
    read_header(files.back(), tensors);
  }
  for (const auto& [name, file] : shard_of) {
    auto it = tensors.find(name);
    if (it == tensors.end() || fs::path(it->second.file).filename() != fs::path(file).filename()) {
      fail_file(index_path, "field 'weight_map': tensor '" + name + "' is not in shard '" + file + "'");
    }
  }
  return std::make_unique<SafetensorsCheckpoint>(index_path.string(), std::move(files), std::move(tensors));
}

}  // namespace

std::unique_ptr<Checkpoint> open_safetensors_checkpoint(const fs::path& model_dir) {
  const fs::path single = model_dir / "model.safetensors";
  const fs::path index = model_dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    std::vector<MappedFile> files;
    files.emplace_back(single);
    std::unordered_map<std::string, TensorView> tensors;
    read_header(files.back(), tensors);
    return std::make_unique<SafetensorsCheckpoint>(single.string(), std::move(files), std::move(tensors));
  }
  if (fs::exists(index)) return open_sharded(index);
  throw std::runtime_error(model_dir.string() + ": no model.safetensors or model.safetensors.index.json");
}

}  // namespace slab
