// AWQ projections as awq4 blocks and BF16 values behind the Checkpoint interface (see the header).
#include "model/awq_checkpoint.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/bf16.h"

namespace slab {
namespace awq {
namespace {

constexpr int kBlockElems = 32;
constexpr size_t kBlockBytes = 24;

}  // namespace

void codes_awq4(const uint8_t* blocks, size_t block_count, const gguf::BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b) {
    const uint8_t* blk = blocks + b * kBlockBytes;
    std::memcpy(out.slope + b, blk, sizeof(float));
    std::memcpy(out.offset + b, blk + 4, sizeof(float));
    uint8_t* codes = out.codes + b * kBlockElems;
    for (int j = 0; j < 16; ++j) {
      codes[j] = blk[8 + j] & 0x0f;
      codes[j + 16] = blk[8 + j] >> 4;
    }
  }
}

void dequantize_awq4(const uint8_t* blocks, size_t block_count, float* out) {
  for (size_t b = 0; b < block_count; ++b) {
    const uint8_t* blk = blocks + b * kBlockBytes;
    float slope, offset;
    std::memcpy(&slope, blk, sizeof(float));
    std::memcpy(&offset, blk + 4, sizeof(float));
    float* y = out + b * kBlockElems;
    for (int j = 0; j < 16; ++j) {
      y[j] = slope * static_cast<float>(blk[8 + j] & 0x0f) + offset;
      y[j + 16] = slope * static_cast<float>(blk[8 + j] >> 4) + offset;
    }
  }
}

}  // namespace awq

namespace {

constexpr const char* kQweight = ".qweight";
constexpr const char* kQzeros = ".qzeros";
constexpr const char* kScales = ".scales";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One quantized projection: its three tensors and the weight's shape [out, in].
struct AwqLinear {
  std::string prefix;
  int64_t out = 0, in = 0;
};

class AwqCheckpoint final : public Checkpoint {
 public:
  AwqCheckpoint(std::unique_ptr<Checkpoint> inner, int group_size) : inner_(std::move(inner)), group_(group_size) {
    if (group_ <= 0 || group_ % 32 != 0) {
      throw std::runtime_error("AWQ group_size " + std::to_string(group_) + ": expected a positive multiple of 32");
    }
    for (const std::string& name : inner_->tensor_names()) {
      if (!ends_with(name, kQweight)) continue;
      const std::string prefix = name.substr(0, name.size() - std::strlen(kQweight));
      linears_[prefix + ".weight"] = check(prefix);
    }
    if (linears_.empty()) {
      throw std::runtime_error("config.json says AWQ, but the checkpoint has no '*.qweight' tensors");
    }
  }

  bool has(const std::string& name) const override {
    if (linears_.count(name)) return true;
    return inner_->has(name) && !hidden(name);
  }

  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> names;
    for (const std::string& n : inner_->tensor_names()) {
      if (!hidden(n)) names.push_back(n);
    }
    for (const auto& [name, linear] : linears_) names.push_back(name);
    return names;
  }

  TensorView tensor_header(const std::string& name) const override {
    const auto it = linears_.find(name);
    if (it == linears_.end()) return inner_->tensor_header(name);
    TensorView view = header_of(it->second, name);
    view.blocks = blocks_of(it->second);
    return view;
  }

  size_t tensor_bytes(const std::string& name) const override {
    const auto it = linears_.find(name);
    if (it == linears_.end()) return inner_->tensor_bytes(name);
    return static_cast<size_t>(it->second.out * it->second.in) * sizeof(kern::bf16_t);
  }

  TensorView tensor(const std::string& name) const override {
    const auto it = linears_.find(name);
    if (it == linears_.end()) return inner_->tensor(name);
    TensorView view = tensor_header(name);
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<kern::bf16_t>& values = values_[name];
    if (values.empty()) {
      const AwqLinear& l = it->second;
      const size_t row_blocks = static_cast<size_t>(l.in / 32);
      std::vector<float> row(static_cast<size_t>(l.in));
      values.resize(static_cast<size_t>(l.out * l.in));
      for (int64_t o = 0; o < l.out; ++o) {
        awq::dequantize_awq4(view.blocks + static_cast<size_t>(o) * row_blocks * 24, row_blocks, row.data());
        for (int64_t i = 0; i < l.in; ++i) values[static_cast<size_t>(o * l.in + i)] = kern::f32_to_bf16(row[i]);
      }
    }
    view.data = values.data();
    return view;
  }

  void release(const std::string& name) const override {
    if (!linears_.count(name)) return inner_->release(name);
    std::lock_guard<std::mutex> lock(mutex_);
    values_.erase(name);
    blocks_.erase(name);
  }

 private:
  // The three tensors of `prefix`, checked against each other; the weight's shape.
  AwqLinear check(const std::string& prefix) const {
    const std::string qw_name = prefix + kQweight;
    const TensorView qw = inner_->tensor_header(qw_name);
    auto fail = [&](const std::string& tensor, const std::string& what) -> AwqLinear {
      throw std::runtime_error(qw.file + ": tensor '" + tensor + "': " + what);
    };
    if (!inner_->has(prefix + kQzeros) || !inner_->has(prefix + kScales)) {
      return fail(qw_name, "an AWQ projection needs " + prefix + kQzeros + " and " + prefix + kScales + " beside it");
    }
    const TensorView qz = inner_->tensor_header(prefix + kQzeros);
    const TensorView sc = inner_->tensor_header(prefix + kScales);
    if (qw.dtype != DType::i32 || qw.shape.size() != 2) return fail(qw_name, "expected I32 [in, out / 8]");
    AwqLinear l;
    l.prefix = prefix;
    l.in = qw.shape[0];
    l.out = qw.shape[1] * 8;
    if (l.in % group_ != 0) {
      return fail(qw_name, std::to_string(l.in) + " inputs are not whole groups of " + std::to_string(group_));
    }
    const int64_t groups = l.in / group_;
    if (qz.dtype != DType::i32 || qz.shape != std::vector<int64_t>{groups, qw.shape[1]}) {
      return fail(prefix + kQzeros, "expected I32 " + shape_text({groups, qw.shape[1]}) + ", found " +
                                        dtype_name(qz.dtype) + " " + shape_text(qz.shape));
    }
    if (sc.dtype == DType::i32 || sc.shape != std::vector<int64_t>{groups, l.out}) {
      return fail(prefix + kScales, "expected F16, BF16 or F32 " + shape_text({groups, l.out}) + ", found " +
                                        dtype_name(sc.dtype) + " " + shape_text(sc.shape));
    }
    return l;
  }

  TensorView header_of(const AwqLinear& l, const std::string& name) const {
    TensorView view;
    view.name = name;
    view.dtype = DType::bf16;  // what tensor() decodes to
    view.shape = {l.out, l.in};
    view.file = inner_->tensor_header(l.prefix + kQweight).file;
    view.block_format = BlockFormat::awq4;
    return view;
  }

  // The weight [out, in] as awq4 blocks, rows in order: made on first use, until release().
  const uint8_t* blocks_of(const AwqLinear& l) const {
    const std::string name = l.prefix + ".weight";
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint8_t>& blocks = blocks_[name];
    if (!blocks.empty()) return blocks.data();
    const TensorView qw = inner_->tensor(l.prefix + kQweight);
    const TensorView qz = inner_->tensor(l.prefix + kQzeros);
    const TensorView sc = inner_->tensor(l.prefix + kScales);
    std::vector<float> scales(static_cast<size_t>(sc.numel()));
    convert_to_f32(sc, scales.data());
    const auto words = static_cast<size_t>(l.out / 8);
    const auto* qwords = static_cast<const uint8_t*>(qw.data);
    const auto* zwords = static_cast<const uint8_t*>(qz.data);
    auto word = [](const uint8_t* base, size_t index) {
      uint32_t w;
      std::memcpy(&w, base + 4 * index, 4);
      return w;
    };
    const size_t row_blocks = static_cast<size_t>(l.in / 32);
    blocks.assign(static_cast<size_t>(l.out) * row_blocks * 24, 0);
    // Eight output columns (one int32 column of qweight) at a time: their rows of blocks stay in
    // cache while qweight is read along its rows.
    for (size_t w = 0; w < words; ++w) {
      for (int64_t i = 0; i < l.in; ++i) {
        const uint32_t codes = word(qwords, static_cast<size_t>(i) * words + w);
        const size_t block = static_cast<size_t>(i / 32);
        const int j = static_cast<int>(i % 32);
        for (int c = 0; c < 8; ++c) {
          const size_t o = 8 * w + static_cast<size_t>(kAwqOrder[c]);
          uint8_t* blk = blocks.data() + (o * row_blocks + block) * 24;
          const auto code = static_cast<uint8_t>((codes >> (4 * c)) & 0x0fu);
          blk[8 + (j & 15)] |= j < 16 ? code : static_cast<uint8_t>(code << 4);
          if (j != 0) continue;
          const size_t g = static_cast<size_t>(i / group_);
          const uint32_t zword = word(zwords, g * words + w);
          const auto zero = static_cast<float>((zword >> (4 * c)) & 0x0fu);
          const float slope = scales[g * static_cast<size_t>(l.out) + o];
          const float offset = -slope * zero;
          std::memcpy(blk, &slope, 4);
          std::memcpy(blk + 4, &offset, 4);
        }
      }
    }
    inner_->release(l.prefix + kQweight);
    inner_->release(l.prefix + kQzeros);
    inner_->release(l.prefix + kScales);
    return blocks.data();
  }

  // The AWQ tensors themselves: behind their projection's .weight.
  bool hidden(const std::string& name) const {
    for (const char* tail : {kQweight, kQzeros, kScales}) {
      if (ends_with(name, tail) && linears_.count(name.substr(0, name.size() - std::strlen(tail)) + ".weight")) {
        return true;
      }
    }
    return false;
  }

  std::unique_ptr<Checkpoint> inner_;
  int group_;
  std::map<std::string, AwqLinear> linears_;  // by the .weight name they stand for
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint8_t>> blocks_;
  mutable std::map<std::string, std::vector<kern::bf16_t>> values_;
};

}  // namespace

std::unique_ptr<Checkpoint> wrap_awq_checkpoint(std::unique_ptr<Checkpoint> inner, int group_size) {
  return std::make_unique<AwqCheckpoint>(std::move(inner), group_size);
}

}  // namespace slab
