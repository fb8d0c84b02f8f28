// GGUF tensors behind the Checkpoint interface: Hugging Face names (per architecture), row-major
// shapes (GGUF lists dims innermost first), llama's Q/K rows back in rotate-half order, gemma3's
// norms back from 1 + w to w, quantized blocks decoded.
#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kernels/bf16.h"
#include "model/gguf_blocks.h"
#include "model/gguf_model.h"

namespace slab {
namespace {

using DequantizeFn = void (*)(const uint8_t*, size_t, float*);

// The block format a quantized tensor keeps for the INT8/INT4 repack (model/packed_quant.h).
BlockFormat block_format_of(GgmlType type) {
  switch (type) {
    case GgmlType::q8_0: return BlockFormat::q8_0;
    case GgmlType::q4_0: return BlockFormat::q4_0;
    case GgmlType::q4_1: return BlockFormat::q4_1;
    case GgmlType::q5_0: return BlockFormat::q5_0;
    case GgmlType::q5_1: return BlockFormat::q5_1;
    case GgmlType::q4_k: return BlockFormat::q4_k;
    case GgmlType::q5_k: return BlockFormat::q5_k;
    case GgmlType::q6_k: return BlockFormat::q6_k;
    default: return BlockFormat::none;
  }
}

DequantizeFn dequantizer(GgmlType type) {
  switch (type) {
    case GgmlType::q8_0: return gguf::dequantize_q8_0;
    case GgmlType::q4_0: return gguf::dequantize_q4_0;
    case GgmlType::q4_1: return gguf::dequantize_q4_1;
    case GgmlType::q5_0: return gguf::dequantize_q5_0;
    case GgmlType::q5_1: return gguf::dequantize_q5_1;
    case GgmlType::q4_k: return gguf::dequantize_q4_k;
    case GgmlType::q5_k: return gguf::dequantize_q5_k;
    case GgmlType::q6_k: return gguf::dequantize_q6_k;
    default: return nullptr;
  }
}

bool plain_dtype(GgmlType type, DType& out) {
  switch (type) {
    case GgmlType::f32: out = DType::f32; return true;
    case GgmlType::f16: out = DType::f16; return true;
    case GgmlType::bf16: out = DType::bf16; return true;
    default: return false;
  }
}

// The GGUF converter stores each llama head's rows as (pair index, half) where Hugging Face has
// (half, pair index): HF row h*D + i*D/2 + j is GGUF row h*D + 2*j + i. Returns, for each HF
// row, the GGUF row it comes from.
std::vector<size_t> rotate_half_row_order(size_t rows, size_t heads) {
  const size_t head_dim = rows / heads, half = head_dim / 2;
  std::vector<size_t> from(rows);
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < 2; ++i) {
      for (size_t j = 0; j < half; ++j) from[h * head_dim + i * half + j] = h * head_dim + 2 * j + i;
    }
  }
  return from;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Older converters wrote one 2-D tensor per expert, blk.N.ffn_{gate,up,down}.E.weight: the
// Hugging Face per-expert name (Mixtral's w1/w3/w2 for llama files), or empty for anything else.
std::string per_expert_tensor_name(const std::string& suffix, const std::string& layer_prefix,
                                   const std::string& arch) {
  static const std::pair<const char*, const char*> kParts[] = {
      {"ffn_gate.", "gate_proj"}, {"ffn_up.", "up_proj"}, {"ffn_down.", "down_proj"}};
  static const std::map<std::string, std::string> kMixtral = {
      {"gate_proj", "w1"}, {"up_proj", "w3"}, {"down_proj", "w2"}};
  const std::string weight = ".weight";
  for (const auto& [prefix, part] : kParts) {
    const std::string p(prefix);
    if (suffix.rfind(p, 0) != 0 || !ends_with(suffix, weight) || suffix.size() < p.size() + weight.size()) continue;
    const std::string expert = suffix.substr(p.size(), suffix.size() - p.size() - weight.size());
    if (expert.empty() || !std::all_of(expert.begin(), expert.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return {};
    if (arch == "llama")
      return layer_prefix + "block_sparse_moe.experts." + expert + "." + kMixtral.at(part) + ".weight";
    return layer_prefix + "mlp.experts." + expert + "." + part + ".weight";
  }
  return {};
}

class GgufCheckpoint final : public Checkpoint {
 public:
  explicit GgufCheckpoint(GgufFile file) : file_(std::move(file)) {
    const ModelConfig config = gguf_model_config(file_);  // checks the metadata before any copy
    const std::string arch = file_.get_string("general.architecture").value_or("");
    const bool interleaved_qk = arch == "llama";
    // llama.cpp's Gemma 3 converter adds Gemma3RMSNorm's 1 to every norm weight; the engine
    // applies (1 + w) itself, as for the Hugging Face checkpoint.
    const bool norms_plus_one = arch == "gemma3";
    std::map<std::string, size_t> dequantized;  // type name -> tensors
    size_t dequantized_bytes = 0;
    for (const GgufTensorInfo& t : file_.tensors()) {
      const std::string name = gguf_to_hf_tensor_name(t.name, arch);
      if (name.empty()) continue;
      size_t heads = 0;
      if (interleaved_qk && t.name.find(".attn_q.") != std::string::npos) heads = static_cast<size_t>(config.num_heads);
      if (interleaved_qk && t.name.find(".attn_k.") != std::string::npos)
        heads = static_cast<size_t>(config.num_kv_heads);
      Entry e{norms_plus_one && ends_with(t.name, "norm.weight") ? norm_minus_one(t, name) : make_view(t, name, heads),
              &t};
      if (dequantizer(t.type) != nullptr) {
        ++dequantized[ggml_type_name(static_cast<uint32_t>(t.type))];
        dequantized_bytes += e.view.bytes();
      }
      tensors_.emplace(name, std::move(e));
    }
    if (!dequantized.empty()) {
      std::string types;
      for (const auto& [type, count] : dequantized)
        types += (types.empty() ? "" : ", ") + type + " x " + std::to_string(count);
      spdlog::info(
          "{}: quantized tensors ({}, {:.1f} MiB as BF16) are repacked for the INT8/INT4 kernels from their "
          "blocks unless --quantization says otherwise (see the packing log); BF16 values are decoded only where "
          "a path needs them, a layer at a time",
          file_.source(), types, dequantized_bytes / double(1 << 20));
    }
  }

  bool has(const std::string& name) const override { return tensors_.count(name) != 0; }

  TensorView tensor(const std::string& name) const override {
    const Entry& e = entry(name);
    TensorView view = e.view;
    if (view.data == nullptr) {  // quantized: decoded to BF16 on first use, until released
      std::lock_guard<std::mutex> lock(decoded_mutex_);
      std::vector<kern::bf16_t>& values = decoded_[name];
      if (values.empty()) values = decode(*e.info, e.view);
      view.data = values.data();
    }
    return view;
  }

  TensorView tensor_header(const std::string& name) const override { return entry(name).view; }

  void release(const std::string& name) const override {
    std::lock_guard<std::mutex> lock(decoded_mutex_);
    decoded_.erase(name);
  }

  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> names;
    for (const auto& kv : tensors_) names.push_back(kv.first);
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  struct Entry {
    TensorView view;  // data null for quantized tensors (see tensor())
    const GgufTensorInfo* info = nullptr;
  };

  const Entry& entry(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw std::runtime_error(file_.source() + ": tensor '" + name + "' not found");
    return it->second;
  }

  // A quantized tensor's values as BF16, from the view's blocks (rows already in HF order).
  std::vector<kern::bf16_t> decode(const GgufTensorInfo& t, const TensorView& view) const {
    const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t.type));
    const DequantizeFn decode_blocks = dequantizer(t.type);
    const size_t row_elems = static_cast<size_t>(view.shape.back());
    const size_t rows = static_cast<size_t>(view.numel()) / row_elems;
    const size_t blocks_per_row = row_elems / info->block_elems;
    const size_t row_bytes = blocks_per_row * info->block_bytes;
    std::vector<kern::bf16_t> out(rows * row_elems);
    std::vector<float> row(row_elems);
    for (size_t r = 0; r < rows; ++r) {
      decode_blocks(view.blocks + r * row_bytes, blocks_per_row, row.data());
      for (size_t c = 0; c < row_elems; ++c) out[r * row_elems + c] = kern::f32_to_bf16(row[c]);
    }
    return out;
  }

  // A norm weight stored as 1 + w, as an owned F32 copy holding w.
  TensorView norm_minus_one(const GgufTensorInfo& t, const std::string& name) {
    TensorView stored = make_view(t, name, 0);
    if (stored.data == nullptr || t.dims.size() != 1) file_.fail_tensor(t.name, "expected a 1-D F32, F16 or BF16 norm");
    std::vector<uint8_t>& buf = owned_.emplace_back(static_cast<size_t>(t.numel()) * sizeof(float));
    float* w = reinterpret_cast<float*>(buf.data());
    convert_to_f32(stored, w);
    for (int64_t i = 0; i < t.numel(); ++i) w[i] -= 1.0f;
    stored.dtype = DType::f32;
    stored.data = buf.data();
    return stored;
  }

  // A view of `t` under its HF name: straight from the map when it can be, else an owned copy
  // (rows reordered when `heads` is nonzero). Quantized tensors keep their blocks (reordered
  // rows copied), and no values until tensor() decodes them.
  TensorView make_view(const GgufTensorInfo& t, const std::string& name, size_t heads) {
    TensorView view;
    view.name = name;
    view.file = file_.source();
    view.shape = t.shape();
    const size_t row_elems = t.dims.size() == 1 ? 1 : static_cast<size_t>(t.dims[0]);
    const size_t rows = static_cast<size_t>(t.numel()) / row_elems;
    std::vector<size_t> from;
    if (heads != 0) {
      if (rows % heads != 0 || (rows / heads) % 2 != 0) {
        file_.fail_tensor(t.name, std::to_string(rows) + " rows do not split into " + std::to_string(heads) +
                                      " heads of an even size");
      }
      from = rotate_half_row_order(rows, heads);
    }
    if (plain_dtype(t.type, view.dtype)) {
      if (from.empty()) {
        view.data = t.data;
        return view;
      }
      const size_t row_bytes = row_elems * dtype_size(view.dtype);
      std::vector<uint8_t>& buf = owned_.emplace_back(t.bytes);
      for (size_t r = 0; r < rows; ++r)
        std::copy_n(t.data + from[r] * row_bytes, row_bytes, buf.data() + r * row_bytes);
      view.data = buf.data();
      return view;
    }
    // Quantized: rows are whole blocks (the reader checked), so each decodes on its own.
    const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t.type));
    view.block_format = block_format_of(t.type);
    if (info == nullptr || dequantizer(t.type) == nullptr || view.block_format == BlockFormat::none)
      file_.fail_tensor(t.name, "no decoder for type " + ggml_type_name(static_cast<uint32_t>(t.type)));
    const size_t row_bytes = row_elems / info->block_elems * info->block_bytes;
    view.dtype = DType::bf16;
    if (from.empty()) {
      view.blocks = t.data;
    } else {
      std::vector<uint8_t>& blocks = owned_.emplace_back(t.bytes);
      for (size_t r = 0; r < rows; ++r)
        std::copy_n(t.data + from[r] * row_bytes, row_bytes, blocks.data() + r * row_bytes);
      view.blocks = blocks.data();
    }
    return view;
  }

  GgufFile file_;
  std::unordered_map<std::string, Entry> tensors_;
  std::vector<std::vector<uint8_t>> owned_;  // reordered tensors and blocks; vectors' data stays put
  mutable std::mutex decoded_mutex_;
  mutable std::unordered_map<std::string, std::vector<kern::bf16_t>> decoded_;  // tensor() values until release()
};

}  // namespace

std::string gguf_to_hf_tensor_name(const std::string& gguf_name, const std::string& arch) {
  static const std::map<std::string, std::string> kTopLevel = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  static const std::map<std::string, std::string> kPerLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},    {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},          {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_k.bias", "self_attn.k_proj.bias"},          {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_v.bias", "self_attn.v_proj.bias"},          {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_output.bias", "self_attn.o_proj.bias"},     {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},       {"ffn_gate.bias", "mlp.gate_proj.bias"},
      {"ffn_up.weight", "mlp.up_proj.weight"},           {"ffn_up.bias", "mlp.up_proj.bias"},
      {"ffn_down.weight", "mlp.down_proj.weight"},       {"ffn_down.bias", "mlp.down_proj.bias"},
  };
  // Mixtures of experts: the router, and every expert's matrices stacked in one 3-D tensor
  // [E, rows, cols] under transformers 5's in-memory names (model/fused_tensors.h slices them).
  static const std::map<std::string, std::string> kExperts = {
      {"ffn_gate_inp.weight", "mlp.gate.weight"},
      {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
      {"ffn_up_exps.weight", "mlp.experts.up_proj"},
      {"ffn_down_exps.weight", "mlp.experts.down_proj"},
      {"ffn_gate_up_exps.weight", "mlp.experts.gate_up_proj"},
  };

  // Where an architecture's Hugging Face names differ: Gemma 3's four norms a layer (ffn_norm is
  // the norm before the MLP, not after attention), Phi-3's fused projections (ffn_up holds the
  // gate rows, then the up rows, as gate_up_proj does).
  static const std::map<std::string, std::string> kGemma3 = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
  };
  static const std::map<std::string, std::string> kPhi3 = {
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"ffn_up.weight", "mlp.gate_up_proj.weight"},
  };
  if (auto it = kTopLevel.find(gguf_name); it != kTopLevel.end()) return it->second;
  if (gguf_name.rfind("blk.", 0) != 0) return {};
  const size_t dot = gguf_name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return {};
  const std::string layer = gguf_name.substr(4, dot - 4);
  if (!std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; })) return {};
  const std::string suffix = gguf_name.substr(dot + 1);
  const std::map<std::string, std::string>* own = arch == "gemma3" ? &kGemma3 : arch == "phi3" ? &kPhi3 : nullptr;
  if (own != nullptr) {
    if (auto it = own->find(suffix); it != own->end()) return "model.layers." + layer + "." + it->second;
  }
  for (const auto* names : {&kPerLayer, &kExperts}) {
    if (auto it = names->find(suffix); it != names->end()) return "model.layers." + layer + "." + it->second;
  }
  return per_expert_tensor_name(suffix, "model.layers." + layer + ".", arch);
}

std::unique_ptr<Checkpoint> open_gguf_checkpoint(const std::filesystem::path& file) {
  return std::make_unique<GgufCheckpoint>(GgufFile::open(file));
}

std::unique_ptr<Checkpoint> open_gguf_checkpoint(GgufFile file) {
  return std::make_unique<GgufCheckpoint>(std::move(file));
}

std::string describe_gguf_tensor_types(const GgufFile& file) {
  std::map<std::string, size_t> counts;
  for (const GgufTensorInfo& t : file.tensors()) ++counts[ggml_type_name(static_cast<uint32_t>(t.type))];
  std::vector<std::pair<std::string, size_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  std::string out;
  for (const auto& [type, count] : sorted) out += (out.empty() ? "" : ", ") + type + " x " + std::to_string(count);
  return out;
}

}  // namespace slab
