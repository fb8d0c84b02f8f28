// AWQ and GPTQ projections as 24-byte blocks and BF16 values behind the Checkpoint interface (see
// the header).
#include "model/prequantized_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
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

// 40-byte blocks of 8-bit codes (GPTQ 8-bit): FP32 slope, FP32 offset, 32 codes.
void codes_gptq8(const uint8_t* blocks, size_t block_count, const gguf::BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b) {
    const uint8_t* blk = blocks + b * 40;
    std::memcpy(out.slope + b, blk, sizeof(float));
    std::memcpy(out.offset + b, blk + 4, sizeof(float));
    std::memcpy(out.codes + b * kBlockElems, blk + 8, kBlockElems);
  }
}

void dequantize_gptq8(const uint8_t* blocks, size_t block_count, float* out) {
  for (size_t b = 0; b < block_count; ++b) {
    const uint8_t* blk = blocks + b * 40;
    float slope, offset;
    std::memcpy(&slope, blk, sizeof(float));
    std::memcpy(&offset, blk + 4, sizeof(float));
    for (int j = 0; j < kBlockElems; ++j) out[b * kBlockElems + static_cast<size_t>(j)] = slope * blk[8 + j] + offset;
  }
}

}  // namespace awq

namespace {

constexpr const char* kQweight = ".qweight";
constexpr const char* kQzeros = ".qzeros";
constexpr const char* kScales = ".scales";
constexpr const char* kGidx = ".g_idx";
constexpr int kBlock = 32;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint32_t word_at(const void* base, size_t index) {
  uint32_t w;
  std::memcpy(&w, static_cast<const uint8_t*>(base) + 4 * index, 4);
  return w;
}

void put_block_affine(uint8_t* blk, float slope, float offset) {
  std::memcpy(blk, &slope, 4);
  std::memcpy(blk + 4, &offset, 4);
}

// Code j (0..31) of a block: a nibble of the 24-byte 4-bit blocks, a byte of the 40-byte 8-bit ones.
void put_block_code(uint8_t* blk, int j, uint8_t code, int bits) {
  if (bits == 8) {
    blk[8 + j] = code;
    return;
  }
  blk[8 + (j & 15)] |= j < 16 ? code : static_cast<uint8_t>(code << 4);
}

// One quantized projection: its tensors' prefix, the weight's shape [out, in], the group of each
// input row (GPTQ; empty for AWQ: i / group). Act-order GPTQ: `perm` lists the input rows sorted
// by group (stable), the order of the blocks' K; blocks_ok is false when some run of 32 of it
// still spans two groups (a group size that is no multiple of 32): then there are no blocks.
struct QuantLinear {
  std::string prefix;
  int64_t out = 0, in = 0;
  int64_t groups = 0;
  std::vector<int32_t> row_group;
  std::vector<int32_t> perm;  // empty: rows in order
  bool blocks_ok = true;
};

class PrequantizedCheckpoint final : public Checkpoint {
 public:
  PrequantizedCheckpoint(std::unique_ptr<Checkpoint> inner, const PrequantizedConfig& q)
      : inner_(std::move(inner)), q_(q), gptq_(q.method == PrequantizedConfig::Method::gptq), bits_(q.bits),
        block_bytes_(q.bits == 8 ? 40 : 24) {
    const bool gptq_bits = bits_ == 2 || bits_ == 3 || bits_ == 8;
    if (bits_ != 4 && (!gptq_bits || !gptq_)) {
      throw std::runtime_error("pre-quantized bits " + std::to_string(bits_) + ": 4 (AWQ, GPTQ) or 2, 3, 8 (GPTQ)");
    }
    mask_ = (1u << bits_) - 1u;
    if (q_.method == PrequantizedConfig::Method::none) throw std::runtime_error("not a pre-quantized checkpoint");
    if (q_.group_size < 0 || q_.group_size % kBlock != 0 || (!gptq_ && q_.group_size == 0)) {
      throw std::runtime_error(std::string(gptq_ ? "GPTQ" : "AWQ") + " group_size " + std::to_string(q_.group_size) +
                               ": expected a positive multiple of 32");
    }
    for (const std::string& name : inner_->tensor_names()) {
      if (!ends_with(name, kQweight)) continue;
      const std::string prefix = name.substr(0, name.size() - std::strlen(kQweight));
      linears_[prefix + ".weight"] = gptq_ ? check_gptq(prefix) : check_awq(prefix);
    }
    if (linears_.empty()) {
      throw std::runtime_error(std::string("config.json says ") + (gptq_ ? "GPTQ" : "AWQ") +
                               ", but the checkpoint has no '*.qweight' tensors");
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
    const QuantLinear& l = it->second;
    TensorView view = header_of(l, name);
    view.blocks = blocks_of(l);  // null when the runs of 32 are not one group each
    // Act-order values come from the tensors (the blocks' K is permuted); others from the blocks.
    std::vector<float> exact;
    if (!l.perm.empty() || view.blocks == nullptr) exact = exact_values(l);  // outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<kern::bf16_t>& values = values_[name];
    if (values.empty()) {
      values.resize(static_cast<size_t>(l.out * l.in));
      if (!exact.empty()) {
        for (size_t i = 0; i < values.size(); ++i) values[i] = kern::f32_to_bf16(exact[i]);
      } else {
        const size_t row_blocks = static_cast<size_t>(l.in / kBlock);
        std::vector<float> row(static_cast<size_t>(l.in));
        const auto decode = bits_ == 8 ? awq::dequantize_gptq8 : awq::dequantize_awq4;
        for (int64_t o = 0; o < l.out; ++o) {
          decode(view.blocks + static_cast<size_t>(o) * row_blocks * block_bytes_, row_blocks, row.data());
          for (int64_t i = 0; i < l.in; ++i) values[static_cast<size_t>(o * l.in + i)] = kern::f32_to_bf16(row[i]);
        }
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
  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    const std::string file = inner_->has(tensor) ? inner_->tensor_header(tensor).file : std::string("checkpoint");
    throw std::runtime_error(file + ": tensor '" + tensor + "': " + what);
  }

  // The headers of a projection's qweight, qzeros and scales (the last two must exist).
  struct Headers {
    TensorView qweight, qzeros, scales;
  };
  Headers headers_of(const std::string& prefix) const {
    for (const char* tail : {kQzeros, kScales}) {
      if (!inner_->has(prefix + tail)) {
        fail(prefix + kQweight, std::string("a quantized projection needs ") + prefix + tail + " beside it");
      }
    }
    return {inner_->tensor_header(prefix + kQweight), inner_->tensor_header(prefix + kQzeros),
            inner_->tensor_header(prefix + kScales)};
  }

  // AWQ: the three tensors of `prefix`, checked against each other.
  QuantLinear check_awq(const std::string& prefix) const {
    const auto [qw, qz, sc] = headers_of(prefix);
    if (qw.dtype != DType::i32 || qw.shape.size() != 2) fail(prefix + kQweight, "expected I32 [in, out / 8]");
    QuantLinear l;
    l.prefix = prefix;
    l.in = qw.shape[0];
    l.out = qw.shape[1] * 8;
    if (l.in % q_.group_size != 0) {
      fail(prefix + kQweight,
           std::to_string(l.in) + " inputs are not whole groups of " + std::to_string(q_.group_size));
    }
    l.groups = l.in / q_.group_size;
    if (qz.dtype != DType::i32 || qz.shape != std::vector<int64_t>{l.groups, qw.shape[1]}) {
      fail(prefix + kQzeros, "expected I32 " + shape_text({l.groups, qw.shape[1]}) + ", found " + dtype_name(qz.dtype) +
                                 " " + shape_text(qz.shape));
    }
    check_scales(prefix, sc, l);
    return l;
  }

  // GPTQ: qweight, qzeros, scales and (if present) g_idx of `prefix`.
  QuantLinear check_gptq(const std::string& prefix) const {
    const auto [qw, qz, sc] = headers_of(prefix);
    const std::string bits = std::to_string(bits_);
    const std::string in_words = 32 % bits_ == 0 ? "in / " + std::to_string(32 / bits_) : "in * " + bits + " / 32";
    if (qw.dtype != DType::i32 || qw.shape.size() != 2) fail(prefix + kQweight, "expected I32 [" + in_words + ", out]");
    // 32 codes fill `bits_` words: outputs (qzeros' codes) in multiples of 32 / gcd(32, bits_).
    const int64_t out_multiple = 32 / std::gcd(32, bits_);
    if ((qw.shape[0] * 32) % bits_ != 0) {
      fail(prefix + kQweight, std::to_string(qw.shape[0]) + " rows of " + bits +
                                  "-bit codes are no whole runs of 32 inputs (" + bits +
                                  " words each): the weight needs inputs in multiples of 32");
    }
    QuantLinear l;
    l.prefix = prefix;
    l.in = qw.shape[0] * 32 / bits_;
    l.out = qw.shape[1];
    if (l.in % kBlock != 0 || l.out % out_multiple != 0) {
      fail(prefix + kQweight, "the weight " + shape_text({l.out, l.in}) +
                                  " needs inputs in multiples of 32 and outputs in multiples of " +
                                  std::to_string(out_multiple) + " (" + bits + "-bit)");
    }
    const int64_t group = q_.group_size > 0 ? q_.group_size : l.in;
    l.groups = (l.in + group - 1) / group;
    const int64_t zero_words = l.out * bits_ / 32;
    if (qz.dtype != DType::i32 || qz.shape != std::vector<int64_t>{l.groups, zero_words}) {
      fail(prefix + kQzeros, "expected I32 " + shape_text({l.groups, zero_words}) + ", found " + dtype_name(qz.dtype) +
                                 " " + shape_text(qz.shape));
    }
    check_scales(prefix, sc, l);
    l.row_group.resize(static_cast<size_t>(l.in));
    for (int64_t i = 0; i < l.in; ++i) l.row_group[static_cast<size_t>(i)] = static_cast<int32_t>(i / group);
    if (inner_->has(prefix + kGidx)) {
      const TensorView gi = inner_->tensor(prefix + kGidx);
      if (gi.dtype != DType::i32 || gi.shape != std::vector<int64_t>{l.in}) {
        fail(prefix + kGidx,
             "expected I32 [" + std::to_string(l.in) + "], found " + dtype_name(gi.dtype) + " " + shape_text(gi.shape));
      }
      for (int64_t i = 0; i < l.in; ++i) {
        const auto g = static_cast<int32_t>(word_at(gi.data, static_cast<size_t>(i)));
        if (g < 0 || g >= l.groups) {
          fail(prefix + kGidx,
               "row " + std::to_string(i) + " names group " + std::to_string(g) + " of " + std::to_string(l.groups));
        }
        l.row_group[static_cast<size_t>(i)] = g;
      }
      inner_->release(prefix + kGidx);
    }
    bool in_order = true;
    for (int64_t i = 1; i < l.in; ++i) {
      in_order = in_order && l.row_group[static_cast<size_t>(i)] >= l.row_group[static_cast<size_t>(i - 1)];
    }
    if (!in_order) {
      if (!q_.desc_act) {
        fail(prefix + kGidx, "gives the rows their groups out of order, but quantization_config.desc_act is false");
      }
      l.perm.resize(static_cast<size_t>(l.in));
      std::iota(l.perm.begin(), l.perm.end(), 0);
      std::stable_sort(l.perm.begin(), l.perm.end(), [&l](int32_t a, int32_t b) {
        return l.row_group[static_cast<size_t>(a)] < l.row_group[static_cast<size_t>(b)];
      });
    }
    // Every run of 32 (in the blocks' order) must lie in one group.
    for (int64_t b = 0; b < l.in && l.blocks_ok; b += kBlock) {
      const int32_t g = l.row_group[static_cast<size_t>(source_row(l, b))];
      for (int64_t k = b + 1; k < b + kBlock; ++k) {
        l.blocks_ok = l.blocks_ok && l.row_group[static_cast<size_t>(source_row(l, k))] == g;
      }
    }
    return l;
  }

  void check_scales(const std::string& prefix, const TensorView& sc, const QuantLinear& l) const {
    if (sc.dtype == DType::i32 || sc.shape != std::vector<int64_t>{l.groups, l.out}) {
      fail(prefix + kScales, "expected F16, BF16 or F32 " + shape_text({l.groups, l.out}) + ", found " +
                                 dtype_name(sc.dtype) + " " + shape_text(sc.shape));
    }
  }

  // The input row at position k of the blocks' K.
  static int64_t source_row(const QuantLinear& l, int64_t k) {
    return l.perm.empty() ? k : l.perm[static_cast<size_t>(k)];
  }

  TensorView header_of(const QuantLinear& l, const std::string& name) const {
    TensorView view;
    view.name = name;
    view.dtype = DType::bf16;  // what tensor() decodes to
    view.shape = {l.out, l.in};
    view.file = inner_->tensor_header(l.prefix + kQweight).file;
    view.block_format = !gptq_       ? BlockFormat::awq4
                        : bits_ == 2 ? BlockFormat::gptq2
                        : bits_ == 3 ? BlockFormat::gptq3
                        : bits_ == 8 ? BlockFormat::gptq8
                                     : BlockFormat::gptq4;
    view.input_perm = l.perm.empty() ? nullptr : l.perm.data();
    return view;
  }

  // The inner tensors of one projection (read once; released by the caller).
  struct Raw {
    const void* qweight = nullptr;
    const void* qzeros = nullptr;
    std::vector<float> scales;
  };
  Raw raw_of(const QuantLinear& l) const {
    Raw r;
    r.qweight = inner_->tensor(l.prefix + kQweight).data;
    r.qzeros = inner_->tensor(l.prefix + kQzeros).data;
    const TensorView sc = inner_->tensor(l.prefix + kScales);
    r.scales.resize(static_cast<size_t>(sc.numel()));
    convert_to_f32(sc, r.scales.data());
    return r;
  }
  void release_raw(const QuantLinear& l) const {
    inner_->release(l.prefix + kQweight);
    inner_->release(l.prefix + kQzeros);
    inner_->release(l.prefix + kScales);
  }

  // Code n of a GPTQ-packed sequence whose word w is at index first + w · stride: every 32 codes
  // fill bits_ words as one little-endian bit stream, code n at stream bits n · bits_ up (stream
  // bit s is bit s % 32 of word s / 32). 2-, 4- and 8-bit codes lie within a word (32 / bits_ per
  // int32, lowest first); a 3-bit code may straddle two (codes 10 and 21 of each run of 32).
  uint32_t unpack_code(const void* words, size_t first, size_t stride, int64_t n) const {
    const int64_t bit = n * bits_;
    const auto w = static_cast<size_t>(bit / 32);
    const auto shift = static_cast<unsigned>(bit % 32);
    uint64_t v = word_at(words, first + w * stride) >> shift;
    if (shift + static_cast<unsigned>(bits_) > 32) {
      v |= static_cast<uint64_t>(word_at(words, first + (w + 1) * stride)) << (32 - shift);
    }
    return static_cast<uint32_t>(v) & mask_;
  }

  // GPTQ's zero of output o in group g: qzeros' row g packs the outputs' zeros (minus
  // zero_offset). With v1's + 1 a zero may reach 2^bits_: the blocks keep it in the FP32 offset.
  float gptq_zero(const Raw& r, const QuantLinear& l, int64_t g, int64_t o) const {
    const auto row = static_cast<size_t>(g * (l.out * bits_ / 32));
    return static_cast<float>(unpack_code(r.qzeros, row, 1, o) + static_cast<uint32_t>(q_.zero_offset));
  }

  // GPTQ's code of input row i, output o: column o of qweight packs the input rows.
  uint32_t gptq_code(const Raw& r, const QuantLinear& l, int64_t i, int64_t o) const {
    return unpack_code(r.qweight, static_cast<size_t>(o), static_cast<size_t>(l.out), i);
  }

  // GPTQ: W[o][i] exactly, [out][in], rows in their own order.
  std::vector<float> exact_values(const QuantLinear& l) const {
    const Raw r = raw_of(l);
    std::vector<float> w(static_cast<size_t>(l.out * l.in));
    for (int64_t i = 0; i < l.in; ++i) {
      const int64_t g = l.row_group[static_cast<size_t>(i)];
      for (int64_t o = 0; o < l.out; ++o) {
        const auto code = static_cast<float>(gptq_code(r, l, i, o));
        const float scale = r.scales[static_cast<size_t>(g * l.out + o)];
        w[static_cast<size_t>(o * l.in + i)] = scale * (code - gptq_zero(r, l, g, o));
      }
    }
    release_raw(l);
    return w;
  }

  // The weight [out, in] as 24-byte blocks, rows in order: made on first use, until release().
  const uint8_t* blocks_of(const QuantLinear& l) const {
    const std::string name = l.prefix + ".weight";
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = blocks_.find(name);
      if (it != blocks_.end()) return it->second.data();
    }
    if (!l.blocks_ok) return nullptr;
    const size_t row_blocks = static_cast<size_t>(l.in / kBlock);
    std::vector<uint8_t> blocks(static_cast<size_t>(l.out) * row_blocks * block_bytes_, 0);
    if (gptq_) {
      fill_gptq(l, blocks.data());
    } else {
      fill_awq(l, blocks.data());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.emplace(name, std::move(blocks)).first->second.data();
  }

  void fill_awq(const QuantLinear& l, uint8_t* blocks) const {
    const Raw r = raw_of(l);
    const auto words = static_cast<size_t>(l.out / 8);
    const size_t row_blocks = static_cast<size_t>(l.in / kBlock);
    // Eight output columns (one int32 column of qweight) at a time: their rows of blocks stay in
    // cache while qweight is read along its rows.
    for (size_t w = 0; w < words; ++w) {
      for (int64_t i = 0; i < l.in; ++i) {
        const uint32_t codes = word_at(r.qweight, static_cast<size_t>(i) * words + w);
        const size_t block = static_cast<size_t>(i / kBlock);
        const int j = static_cast<int>(i % kBlock);
        for (int c = 0; c < 8; ++c) {
          const size_t o = 8 * w + static_cast<size_t>(kAwqOrder[c]);
          uint8_t* blk = blocks + (o * row_blocks + block) * block_bytes_;
          put_block_code(blk, j, static_cast<uint8_t>((codes >> (4 * c)) & 0x0fu), 4);
          if (j != 0) continue;
          const size_t g = static_cast<size_t>(i / q_.group_size);
          const uint32_t zword = word_at(r.qzeros, g * words + w);
          const auto zero = static_cast<float>((zword >> (4 * c)) & 0x0fu);
          const float slope = r.scales[g * static_cast<size_t>(l.out) + o];
          put_block_affine(blk, slope, -slope * zero);
        }
      }
    }
    release_raw(l);
  }

  // Position k of the blocks' K holds input row source_row(l, k): its code, and at the start of
  // each run of 32 the run's group's slope and offset (one group per run: blocks_ok).
  void fill_gptq(const QuantLinear& l, uint8_t* blocks) const {
    const Raw r = raw_of(l);
    const size_t row_blocks = static_cast<size_t>(l.in / kBlock);
    for (int64_t k = 0; k < l.in; ++k) {
      const int64_t i = source_row(l, k);
      const int64_t g = l.row_group[static_cast<size_t>(i)];
      const size_t block = static_cast<size_t>(k / kBlock);
      const int j = static_cast<int>(k % kBlock);
      for (int64_t o = 0; o < l.out; ++o) {
        uint8_t* blk = blocks + (static_cast<size_t>(o) * row_blocks + block) * block_bytes_;
        put_block_code(blk, j, static_cast<uint8_t>(gptq_code(r, l, i, o)), bits_);
        if (j != 0) continue;
        const float slope = r.scales[static_cast<size_t>(g * l.out + o)];
        put_block_affine(blk, slope, -slope * gptq_zero(r, l, g, o));
      }
    }
    release_raw(l);
  }

  // The quantized tensors themselves: behind their projection's .weight.
  bool hidden(const std::string& name) const {
    for (const char* tail : {kQweight, kQzeros, kScales, kGidx}) {
      if (ends_with(name, tail) && linears_.count(name.substr(0, name.size() - std::strlen(tail)) + ".weight")) {
        return true;
      }
    }
    return false;
  }

  std::unique_ptr<Checkpoint> inner_;
  PrequantizedConfig q_;
  bool gptq_ = false;
  int bits_ = 4;  // 4; GPTQ also 2, 3 (held in the 4-bit blocks) and 8
  uint32_t mask_ = 0x0f;
  size_t block_bytes_ = 24;                     // 24-byte 4-bit blocks (2-, 3-, 4-bit codes), 40-byte 8-bit ones
  std::map<std::string, QuantLinear> linears_;  // by the .weight name they stand for
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint8_t>> blocks_;
  mutable std::map<std::string, std::vector<kern::bf16_t>> values_;
};

}  // namespace

std::unique_ptr<Checkpoint> wrap_prequantized_checkpoint(std::unique_ptr<Checkpoint> inner,
                                                         const PrequantizedConfig& q) {
  return std::make_unique<PrequantizedCheckpoint>(std::move(inner), q);
}

}  // namespace slab
