#include "model/fused_tensors.h"

#include "model/weights.h"

#include <map>
#include <stdexcept>
#include <string>

namespace slab {
namespace {

struct Slice {
  std::string fused;  // the checkpoint's tensor
  int64_t row0 = 0, rows = 0, total_rows = 0, cols = 0;
  // The fused tensor's shape when it is not [total_rows, cols]: experts stacked as [E, rows, cols]
  // (its rows then count through the experts: expert e's row r is row e · rows + r).
  std::vector<int64_t> shape;
};

class SplitCheckpoint final : public Checkpoint {
 public:
  SplitCheckpoint(const ModelConfig& c, const Checkpoint& inner) : inner_(inner) {
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
    const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string p = layer_prefix(c, i);
      if (c.fused_qkv_proj) {
        const std::string f = p + "self_attn.qkv_proj.weight";
        const int64_t total = q_dim + 2 * kv_dim;
        slices_[p + "self_attn.q_proj.weight"] = {f, 0, q_dim, total, hidden, {}};
        slices_[p + "self_attn.k_proj.weight"] = {f, q_dim, kv_dim, total, hidden, {}};
        slices_[p + "self_attn.v_proj.weight"] = {f, q_dim + kv_dim, kv_dim, total, hidden, {}};
      }
      if (c.fused_gate_up_proj) {
        const std::string f = p + "mlp.gate_up_proj.weight";
        slices_[p + "mlp.gate_proj.weight"] = {f, 0, inter, 2 * inter, hidden, {}};
        slices_[p + "mlp.up_proj.weight"] = {f, inter, inter, 2 * inter, hidden, {}};
      }
      if (layer_is_moe(c, i)) add_stacked_experts(c, i);
    }
  }

  // transformers 5's in-memory MoE modules (what a state dict saved without its conversion
  // holds): every expert in two 3-D tensors, mlp.experts.gate_up_proj [E, 2 · inter, hidden]
  // (each expert's gate rows, then its up rows) and mlp.experts.down_proj [E, hidden, inter],
  // and the router as mlp.gate.weight (mixtral's checkpoints say block_sparse_moe.gate.weight).
  // llama.cpp's GGUF files keep gate and up apart (ffn_gate_exps, ffn_up_exps), which the GGUF
  // checkpoint names mlp.experts.gate_proj and mlp.experts.up_proj, [E, inter, hidden] each.
  void add_stacked_experts(const ModelConfig& c, int layer) {
    const std::string p = layer_prefix(c, layer);
    const int64_t e_count = c.num_experts, hidden = c.hidden_size, inter = c.moe_intermediate_size;
    const std::string gate_up = p + "mlp.experts.gate_up_proj", down = p + "mlp.experts.down_proj";
    const std::string gate = p + "mlp.experts.gate_proj", up = p + "mlp.experts.up_proj";
    const bool gate_apart = inner_.has(gate);
    for (int64_t e = 0; e < e_count; ++e) {
      const ExpertTensorNames n = expert_tensor_names(c, layer, static_cast<int>(e));
      if (gate_apart) {
        slices_[n.gate] = {gate, inter * e, inter, 0, hidden, {e_count, inter, hidden}};
        slices_[n.up] = {up, inter * e, inter, 0, hidden, {e_count, inter, hidden}};
      } else {
        slices_[n.gate] = {gate_up, 2 * inter * e, inter, 0, hidden, {e_count, 2 * inter, hidden}};
        slices_[n.up] = {gate_up, 2 * inter * e + inter, inter, 0, hidden, {e_count, 2 * inter, hidden}};
      }
      slices_[n.down] = {down, hidden * e, hidden, 0, inter, {e_count, hidden, inter}};
    }
    const std::string router = router_tensor_name(c, layer);
    if (router != p + "mlp.gate.weight") slices_[router] = {p + "mlp.gate.weight", 0, e_count, e_count, hidden, {}};
  }

  bool has(const std::string& name) const override {
    if (inner_.has(name)) return true;
    auto it = slices_.find(name);
    return it != slices_.end() && inner_.has(it->second.fused);
  }

  TensorView tensor(const std::string& name) const override {
    // The separate name wins where it exists (a loaded Model's weights, already split).
    auto it = slices_.find(name);
    if (it == slices_.end() || inner_.has(name)) return inner_.tensor(name);
    return slice(name, inner_.tensor(it->second.fused));  // throws naming the checkpoint and the fused tensor
  }

  std::vector<std::string> tensor_names() const override { return inner_.tensor_names(); }

  TensorView tensor_header(const std::string& name) const override {
    if (slices_.count(name) == 0 || inner_.has(name)) return inner_.tensor_header(name);
    return slice(name, inner_.tensor_header(slices_.at(name).fused));
  }
  void release(const std::string& name) const override {
    auto it = slices_.find(name);
    inner_.release(it == slices_.end() || inner_.has(name) ? name : it->second.fused);
  }

 private:
  // The rows of the fused tensor's view `v` that `name` stands for.
  TensorView slice(const std::string& name, TensorView v) const {
    const Slice& s = slices_.at(name);
    const std::vector<int64_t> want = s.shape.empty() ? std::vector<int64_t>{s.total_rows, s.cols} : s.shape;
    if (v.shape != want) {
      auto text = [](const std::vector<int64_t>& shape) {
        std::string out;
        for (int64_t d : shape) out += (out.empty() ? "" : ", ") + std::to_string(d);
        return "[" + out + "]";
      };
      throw std::runtime_error(v.file + ": tensor '" + s.fused + "': expected shape " + text(want) + ", found " +
                               text(v.shape));
    }
    v.name = name;
    v.shape = {s.rows, s.cols};
    // A GGUF file's quantized rows are whole blocks, so a run of rows is a run of bytes too.
    if (v.blocks != nullptr) v.blocks += static_cast<size_t>(s.row0) * block_format_row_bytes(v.block_format, s.cols);
    if (v.data != nullptr)
      v.data = static_cast<const char*>(v.data) + static_cast<size_t>(s.row0 * s.cols) * dtype_size(v.dtype);
    return v;
  }

  const Checkpoint& inner_;
  std::map<std::string, Slice> slices_;
};

}  // namespace

std::unique_ptr<Checkpoint> split_fused_projections(const ModelConfig& config, const Checkpoint& checkpoint) {
  return std::make_unique<SplitCheckpoint>(config, checkpoint);
}

}  // namespace slab
