#pragma once
// Test helper: writes GGUF bytes by hand (the format as documented by ggml, not through the
// reader under test), so tests can make well-formed files and break them on purpose.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace slab::test {

class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3, uint64_t alignment = 32) : version_(version), alignment_(alignment) {}

  // Raw pieces of a key/value: the caller writes the value bytes with the put_* helpers.
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) { return kv(key, 4, pod(v)); }
  GgufBuilder& kv_i32(const std::string& key, int32_t v) { return kv(key, 5, pod(v)); }
  GgufBuilder& kv_f32(const std::string& key, float v) { return kv(key, 6, pod(v)); }
  GgufBuilder& kv_bool(const std::string& key, bool v) { return kv(key, 7, std::string(1, v ? '\1' : '\0')); }
  GgufBuilder& kv_str(const std::string& key, const std::string& v) { return kv(key, 8, str(v)); }
  GgufBuilder& kv_u64(const std::string& key, uint64_t v) { return kv(key, 10, pod(v)); }
  GgufBuilder& kv_f64(const std::string& key, double v) { return kv(key, 12, pod(v)); }
  GgufBuilder& kv_str_array(const std::string& key, const std::vector<std::string>& items) {
    std::string body = pod(uint32_t{8}) + pod(uint64_t{items.size()});
    for (const auto& s : items) body += str(s);
    return kv(key, 9, body);
  }
  template <typename T>
  GgufBuilder& kv_pod_array(const std::string& key, uint32_t element_type, const std::vector<T>& items) {
    std::string body = pod(element_type) + pod(uint64_t{items.size()});
    for (const T& x : items) body += pod(x);
    return kv(key, 9, body);
  }
  GgufBuilder& kv_raw(const std::string& key, uint32_t type, const std::string& value_bytes) {
    return kv(key, type, value_bytes);
  }

  // A tensor with ggml dims (innermost first), type id and raw data bytes.
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, std::string bytes) {
    tensors_.push_back({name, std::move(dims), type, std::move(bytes)});
    return *this;
  }
  GgufBuilder& tensor_f32(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& values) {
    std::string b(values.size() * 4, '\0');
    std::memcpy(b.data(), values.data(), b.size());
    return tensor(name, std::move(dims), 0, std::move(b));
  }

  std::string bytes() const {
    std::string out = "GGUF" + pod(version_) + pod(uint64_t{tensors_.size()}) + pod(uint64_t{kv_count_}) + kvs_;
    std::vector<uint64_t> offsets;
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      offsets.push_back(offset);
      offset = align(offset + t.bytes.size());
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      out += str(t.name) + pod(uint32_t(t.dims.size()));
      for (uint64_t d : t.dims) out += pod(d);
      out += pod(t.type) + pod(offsets[i]);
    }
    out.resize(align(out.size()), '\0');
    for (const auto& t : tensors_) {
      out += t.bytes;
      out.resize(align(out.size()), '\0');
    }
    return out;
  }

  template <typename T>
  static std::string pod(T v) {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
  }
  static std::string str(const std::string& s) { return pod(uint64_t{s.size()}) + s; }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string bytes;
  };
  GgufBuilder& kv(const std::string& key, uint32_t type, const std::string& value) {
    kvs_ += str(key) + pod(type) + value;
    ++kv_count_;
    return *this;
  }
  uint64_t align(uint64_t x) const { return (x + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t version_;
  uint64_t alignment_;
  std::string kvs_;
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace slab::test
