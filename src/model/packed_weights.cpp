// Packing a checkpoint into the BF16 kernels' layout. Sources may be BF16 (packed from the map
// without a copy), F16 or F32 (converted to FP32 per matrix, rounded once when packed).
#include "model/packed_weights.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "model/fused_tensors.h"

namespace slab {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check_shape(const TensorView& v, const std::string& name, const std::vector<int64_t>& shape) {
  if (v.shape != shape) {
    throw std::runtime_error(v.file + ": tensor '" + name + "': expected shape " + shape_string(shape) + ", found " +
                             shape_string(v.shape));
  }
}

TensorView get(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape) {
  TensorView v = ck.tensor(name);  // throws naming the checkpoint and tensor
  check_shape(v, name, shape);
  return v;
}

// Whether two views' blocks share one K order (both in order, or the same permutation).
bool same_input_order(const TensorView& a, const TensorView& b) {
  if (a.input_perm == nullptr || b.input_perm == nullptr) return a.input_perm == b.input_perm;
  const int64_t k = a.shape.back();
  return k == b.shape.back() && std::equal(a.input_perm, a.input_perm + k, b.input_perm);
}

// The checkpoint as pack_model reads it: checked tensors, counted for the progress callback.
class TensorReader {
 public:
  // from_blocks: matrices whose parts all come as quantized blocks are packed from those (the
  // `auto` repack), so get_parts() hands them out without decoding their values.
  TensorReader(const Checkpoint& ck, const LoadProgress& on_progress, bool from_blocks)
      : ck_(ck), on_progress_(on_progress), from_blocks_(from_blocks) {
    if (!on_progress_) return;
    for (const std::string& name : ck.tensor_names()) total_ += ck.tensor_bytes(name);
  }
  bool has(const std::string& name) const { return ck_.has(name); }
  TensorView tensor(const std::string& name) const { return ck_.tensor(name); }
  TensorView get(const std::string& name, const std::vector<int64_t>& shape) {
    TensorView v = slab::get(ck_, name, shape);
    read_ += v.bytes();
    got_.push_back(name);
    return v;
  }
  // The parts of one packed matrix: headers only (blocks, no values) when every part has blocks
  // and the reader packs from blocks, else the tensors with their values.
  // Parts whose blocks are in different K orders (TensorView::input_perm) cannot share one packed
  // matrix: they come with their values.
  std::vector<TensorView> get_parts(const std::vector<std::pair<std::string, std::vector<int64_t>>>& parts) {
    std::vector<TensorView> views;
    for (const auto& [name, shape] : parts) {
      views.push_back(ck_.tensor_header(name));
      if (views.back().blocks == nullptr || !same_input_order(views.front(), views.back())) break;
    }
    const bool headers = from_blocks_ && views.size() == parts.size() && views.back().blocks != nullptr &&
                         same_input_order(views.front(), views.back());
    views.clear();
    for (const auto& [name, shape] : parts) {
      if (!headers) {
        views.push_back(get(name, shape));
        continue;
      }
      TensorView v = ck_.tensor_header(name);
      check_shape(v, name, shape);
      read_ += v.bytes();
      got_.push_back(name);  // released at the next report: blocks made on demand (AWQ) are freed
      views.push_back(v);
    }
    return views;
  }
  // Reports what was read so far (by then packed), or everything once done (tensors the model
  // does not use count as read, so the bar ends at 100 %), and releases the tensors read since
  // the last report: their views are dead by then.
  void report(bool done = false) {
    for (const std::string& name : got_) ck_.release(name);
    got_.clear();
    if (on_progress_) on_progress_(done ? total_ : std::min(read_, total_), total_);
  }

 private:
  const Checkpoint& ck_;
  const LoadProgress& on_progress_;
  bool from_blocks_ = false;
  size_t read_ = 0, total_ = 0;
  std::vector<std::string> got_;
};

std::vector<float> to_f32(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  convert_to_f32(v, out.data());
  return out;
}

// fn(lo, hi) over a matrix's panels [0, panels), on the team's threads where there is a team:
// a panel's bytes come from its own rows, so the matrix packs the same on any number of threads.
void for_panels(const TaskTeam* team, int panels, const std::function<void(int, int)>& fn) {
  if (team == nullptr) {
    fn(0, panels);
    return;
  }
  team->for_shares(panels, kMinPackPanelsPerThread, fn);
}

// Rows [0, n) of w (row stride k) into the BF16 panels from dst.
template <typename Src>
void pack_rows(const TaskTeam* team, kern::bf16_t* dst, const Src* w, int n, int k) {
  const size_t panel_elems = static_cast<size_t>(kern::packed_pairs(k)) * 2 * kern::kPanelCols;
  for_panels(team, kern::packed_panels(n), [&](int lo, int hi) {
    const int r0 = lo * kern::kPanelCols;
    kern::pack_linear_bf16(dst + static_cast<size_t>(lo) * panel_elems, w + static_cast<size_t>(r0) * k,
                           std::min(n, hi * kern::kPanelCols) - r0, k, static_cast<size_t>(k));
  });
}

// Rows [0, n) of a [n, k] tensor into the BF16 panels from dst. BF16 packs straight from the
// memory map; F16 and F32 rows are widened to FP32 a run of panels at a time by the thread that
// packs them, so the conversion is split too and no matrix-sized copy exists.
void pack_tensor_rows(const TaskTeam* team, kern::bf16_t* dst, const TensorView& p, int n, int k) {
  if (p.dtype == DType::bf16) {
    pack_rows(team, dst, static_cast<const kern::bf16_t*>(p.data), n, k);
    return;
  }
  const size_t panel_elems = static_cast<size_t>(kern::packed_pairs(k)) * 2 * kern::kPanelCols;
  for_panels(team, kern::packed_panels(n), [&](int lo, int hi) {
    const int r0 = lo * kern::kPanelCols, rows = std::min(n, hi * kern::kPanelCols) - r0;
    std::vector<float> tmp(static_cast<size_t>(rows) * static_cast<size_t>(k));
    convert_to_f32(row_slice(p, r0, rows), tmp.data());
    kern::pack_linear_bf16(dst + static_cast<size_t>(lo) * panel_elems, tmp.data(), rows, k, static_cast<size_t>(k));
  });
}

// Stacks the [n_i, k] parts along N and packs them: one packed matrix, one stream per step.
PackedMatrix pack_stacked(const std::vector<TensorView>& parts, int k, const AllocOptions& alloc,
                          const TaskTeam* team) {
  PackedMatrix m;
  m.k = k;
  for (const TensorView& p : parts) m.n += static_cast<int>(p.shape[0]);
  m.buf = AlignedBuffer(kern::packed_bf16_elems(m.n, k) * sizeof(kern::bf16_t), alloc);
  // Parts that start on a panel boundary pack in place, each into its own run of panels: no
  // staging copy (a BF16 part packs straight from the memory map). Only a part that starts
  // inside a panel (N of the part before not a multiple of 32) needs the stacked FP32 copy.
  bool aligned = true;
  for (size_t i = 0; i + 1 < parts.size(); ++i) aligned = aligned && parts[i].shape[0] % kern::kPanelCols == 0;
  kern::bf16_t* dst = m.buf.as<kern::bf16_t>();
  const size_t panel_elems = static_cast<size_t>(kern::packed_pairs(k)) * 2 * kern::kPanelCols;
  if (aligned) {
    size_t row = 0;
    for (const TensorView& p : parts) {
      const int n = static_cast<int>(p.shape[0]);
      pack_tensor_rows(team, dst + row / kern::kPanelCols * panel_elems, p, n, k);
      row += static_cast<size_t>(n);
    }
    return m;
  }
  std::vector<float> tmp(static_cast<size_t>(m.n) * static_cast<size_t>(k));
  size_t at = 0;
  for (const TensorView& p : parts) {
    convert_to_f32(p, tmp.data() + at);
    at += static_cast<size_t>(p.numel());
  }
  pack_rows(team, dst, tmp.data(), m.n, k);
  return m;
}

// Gate and up [n, k] as one SwiGLU matrix (kernels/linear_bf16.h), packed straight from BF16
// checkpoints; otherwise each run of panel pairs widens its own gate and up rows to FP32.
PackedMatrix pack_swiglu(const TensorView& gate, const TensorView& up, int k, const AllocOptions& alloc,
                         const TaskTeam* team) {
  PackedMatrix m;
  const int n = static_cast<int>(gate.shape[0]);
  m.n = 2 * n;
  m.k = k;
  m.swiglu = true;
  m.buf = AlignedBuffer(m.bytes(), alloc);
  kern::bf16_t* dst = m.buf.as<kern::bf16_t>();
  const size_t ld = static_cast<size_t>(k);
  const size_t panel_elems = static_cast<size_t>(kern::packed_pairs(k)) * 2 * kern::kPanelCols;
  // Panel pairs (a gate panel, then its up panel) of rows [32 lo, 32 hi).
  const bool bf16 = gate.dtype == DType::bf16 && up.dtype == DType::bf16;
  for_panels(team, kern::packed_panels(n), [&](int lo, int hi) {
    const int r0 = lo * kern::kPanelCols, rows = std::min(n, hi * kern::kPanelCols) - r0;
    kern::bf16_t* at = dst + 2 * static_cast<size_t>(lo) * panel_elems;
    if (bf16) {
      const size_t first = static_cast<size_t>(r0) * ld;
      kern::pack_swiglu_bf16(at, static_cast<const kern::bf16_t*>(gate.data) + first,
                             static_cast<const kern::bf16_t*>(up.data) + first, rows, k, ld);
      return;
    }
    std::vector<float> g(static_cast<size_t>(rows) * ld), u(g.size());
    convert_to_f32(row_slice(gate, r0, rows), g.data());
    convert_to_f32(row_slice(up, r0, rows), u.data());
    kern::pack_swiglu_bf16(at, g.data(), u.data(), rows, k, ld);
  });
  return m;
}

// Parts whose blocks repack into different formats, as segments (PackedMatrix::segments): one
// matrix per run of consecutive parts sharing a format, so that each keeps its own (a Q4_K_M
// QKV's Q4_K q and k stay K-quant 4-bit beside its Q6_K v, where one matrix would hold all three as
// W8 g32). nullopt when every part repacks into the same format.
std::optional<PackedMatrix> pack_segments(const std::vector<TensorView>& parts, int k, const AllocOptions& alloc,
                                          const TaskTeam* team) {
  std::vector<std::vector<TensorView>> runs;
  std::vector<kern::QuantFormat> formats;
  const auto same = [](const kern::QuantFormat& a, const kern::QuantFormat& b) {
    return a.bits == b.bits && a.group == b.group && a.zero_point == b.zero_point && a.k_quant == b.k_quant;
  };
  for (const TensorView& p : parts) {
    const std::optional<kern::QuantFormat> f = block_repack_format({p});
    if (!f || p.input_perm != nullptr) return std::nullopt;  // act-order parts share one format anyway
    if (formats.empty() || !same(formats.back(), *f)) {
      runs.emplace_back();
      formats.push_back(*f);
    }
    runs.back().push_back(p);
  }
  if (runs.size() < 2) return std::nullopt;
  PackedMatrix m;
  m.k = k;
  m.quantized = true;
  for (size_t i = 0; i < runs.size(); ++i) {
    PackedMatrix s;
    s.k = k;
    for (const TensorView& p : runs[i]) s.n += static_cast<int>(p.shape[0]);
    s.quantized = true;
    s.quant = block_repack_format(runs[i]).value_or(formats[i]);
    s.buf = AlignedBuffer(s.bytes(), alloc);
    pack_stacked_blocks(s.buf.as<uint8_t>(), runs[i], k, s.quant, team);
    m.n += s.n;
    m.segments.push_back(std::move(s));
  }
  m.quant = m.segments.front().quant;
  return m;
}

// A projection (parts stacked along N) in the format `quantization` asks for; records the path
// it took. Quantized matrices are never SwiGLU-fused: gate_up then is [gate; up] rows.
PackedMatrix pack_projection(const std::vector<TensorView>& parts, int k, WeightQuantization quantization,
                             const AllocOptions& alloc, const TaskTeam* team, std::map<std::string, int>& paths,
                             bool swiglu = false) {
  std::optional<kern::QuantFormat> format = rtn_quant_format(quantization);
  std::string source = parts.front().block_format != BlockFormat::none ? block_format_name(parts.front().block_format)
                                                                       : dtype_name(parts.front().dtype);
  for (const TensorView& p : parts) {
    const std::string s = p.block_format != BlockFormat::none ? block_format_name(p.block_format) : dtype_name(p.dtype);
    if (s != source) source += "+" + s;
  }
  bool from_blocks = false;
  bool one_order = true;  // blocks in different K orders (act-order GPTQ) cannot be stacked
  for (const TensorView& p : parts) one_order = one_order && same_input_order(parts.front(), p);
  if (quantization == WeightQuantization::automatic && one_order) {
    format = block_repack_format(parts);
    from_blocks = format.has_value();
    if (from_blocks && !swiglu) {
      if (std::optional<PackedMatrix> m = pack_segments(parts, k, alloc, team)) {
        ++paths[source + " -> " + m->format_name() + " (repacked)"];
        return std::move(*m);
      }
    }
  }
  if (!format) {
    ++paths[source + " -> BF16"];
    return swiglu ? pack_swiglu(parts[0], parts[1], k, alloc, team) : pack_stacked(parts, k, alloc, team);
  }
  PackedMatrix m;
  m.k = k;
  for (const TensorView& p : parts) m.n += static_cast<int>(p.shape[0]);
  m.quantized = true;
  m.quant = *format;
  m.buf = AlignedBuffer(m.bytes(), alloc);
  if (from_blocks) {
    pack_stacked_blocks(m.buf.as<uint8_t>(), parts, k, *format, team);
    if (const int32_t* perm = parts.front().input_perm) m.input_perm.assign(perm, perm + k);
  } else {
    pack_stacked_rtn(m.buf.as<uint8_t>(), parts, k, *format, team);
  }
  ++paths[source + " -> " + quant_format_name(*format) + (from_blocks ? " (repacked)" : " (RTN)")];
  return m;
}

std::vector<float> concat_f32(const std::vector<TensorView>& parts) {
  std::vector<float> out;
  for (const TensorView& p : parts) {
    const auto v = to_f32(p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Over a loaded Model's FP32 vectors, by Hugging Face name.
class WeightsCheckpoint final : public Checkpoint {
 public:
  WeightsCheckpoint(const ModelConfig& c, const ModelWeights& w) {
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
    const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
    add(c.weight_prefix + "embed_tokens.weight", w.token_embedding, {c.vocab_size, hidden});
    add(c.weight_prefix + "norm.weight", w.final_norm, {hidden});
    add(c.lm_head_name, w.lm_head, {c.vocab_size, hidden});
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const std::string p = layer_prefix(c, static_cast<int>(i));
      const LayerWeights& l = w.layers[i];
      add(p + "input_layernorm.weight", l.attn_norm, {hidden});
      add(p + mlp_norm_name(c), l.mlp_norm, {hidden});
      add(p + "post_attention_layernorm.weight", l.post_attn_norm, {hidden});
      add(p + "post_feedforward_layernorm.weight", l.post_mlp_norm, {hidden});
      add(p + "self_attn.q_proj.weight", l.wq, {q_dim, hidden});
      add(p + "self_attn.k_proj.weight", l.wk, {kv_dim, hidden});
      add(p + "self_attn.v_proj.weight", l.wv, {kv_dim, hidden});
      add(p + "self_attn.o_proj.weight", l.wo, {hidden, q_dim});
      add(p + "self_attn.q_proj.bias", l.bq, {q_dim});
      add(p + "self_attn.k_proj.bias", l.bk, {kv_dim});
      add(p + "self_attn.v_proj.bias", l.bv, {kv_dim});
      add(p + "self_attn.o_proj.bias", l.bo, {hidden});
      add(p + "self_attn.q_norm.weight", l.q_norm, {c.head_dim});
      add(p + "self_attn.k_norm.weight", l.k_norm, {c.head_dim});
      add(p + "mlp.gate_proj.weight", l.w_gate, {inter, hidden});
      add(p + "mlp.up_proj.weight", l.w_up, {inter, hidden});
      add(p + "mlp.down_proj.weight", l.w_down, {hidden, inter});
      if (!l.experts.empty()) add(router_tensor_name(c, static_cast<int>(i)), l.router, {c.num_experts, hidden});
      for (size_t e = 0; e < l.experts.size(); ++e) {
        const ExpertTensorNames n = expert_tensor_names(c, static_cast<int>(i), static_cast<int>(e));
        const int64_t expert_inter = c.moe_intermediate_size;
        add(n.gate, l.experts[e].w_gate, {expert_inter, hidden});
        add(n.up, l.experts[e].w_up, {expert_inter, hidden});
        add(n.down, l.experts[e].w_down, {hidden, expert_inter});
      }
      add(p + "mlp.gate_proj.bias", l.b_gate, {inter});
      add(p + "mlp.up_proj.bias", l.b_up, {inter});
      add(p + "mlp.down_proj.bias", l.b_down, {hidden});
    }
  }
  bool has(const std::string& name) const override { return views_.count(name) != 0; }
  TensorView tensor(const std::string& name) const override {
    auto it = views_.find(name);
    if (it == views_.end()) throw std::runtime_error("loaded model: no tensor '" + name + "'");
    return it->second;
  }
  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> names;
    for (const auto& [name, view] : views_) names.push_back(name);
    return names;
  }

 private:
  void add(const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape) {
    if (v.empty()) return;  // absent optional tensor
    views_[name] = TensorView{name, DType::f32, std::move(shape), v.data(), "loaded model"};
  }
  std::map<std::string, TensorView> views_;
};

}  // namespace

void PackedModel::embed(float* out, int token, int hidden) const {
  if (!embedding.empty()) {
    kern::convert_bf16_to_f32(out, embedding.data() + static_cast<size_t>(token) * hidden, static_cast<size_t>(hidden));
    return;
  }
  for (const PackedMatrix* table : {&embedding_quant, &lm_head}) {
    if (table->quantized) {  // the first quantized one holds the rows (a tied head only without a table)
      kern::dequantize_quant_rows(out, static_cast<size_t>(hidden), table->buf.as<const uint8_t>(), table->quant,
                                  hidden, token, 1);
      return;
    }
  }
  // Tied: row `token` of the packed head is column token % 32 of panel token / 32, stored as
  // k-pairs 128 bytes apart (see kernels/linear_bf16.h).
  const kern::bf16_t* panel = lm_head.buf.as<const kern::bf16_t>() + static_cast<size_t>(token / kern::kPanelCols) *
                                                                         kern::packed_pairs(hidden) * 2 *
                                                                         kern::kPanelCols;
  const int col = token % kern::kPanelCols;
  for (int k = 0; k < hidden; ++k) {
    out[k] = kern::bf16_to_f32(panel[static_cast<size_t>(k / 2) * 2 * kern::kPanelCols + col * 2 + (k % 2)]);
  }
}

std::string PackedModel::describe_formats() const {
  auto mib = [](size_t b) {
    return std::to_string(b / (1 << 20)) + "." + std::to_string(b % (1 << 20) * 10 / (1 << 20)) + " MiB";
  };
  std::map<std::string, size_t> bytes;  // format -> packed bytes
  for (const PackedLayer& l : layers) {
    for (const PackedMatrix* m : l.matrices()) {
      if (m->segments.empty()) {
        bytes[m->format_name()] += m->bytes();
        continue;
      }
      for (const PackedMatrix& s : m->segments) bytes[s.format_name()] += s.bytes();
    }
  }
  std::string out = "projections ";
  bool first = true;
  for (const auto& [format, b] : bytes) {
    out += (first ? "" : " + ") + format + " " + mib(b);
    first = false;
  }
  out += ", lm_head " + lm_head.format_name() + " " + mib(lm_head.bytes());
  if (embedding_quant.quantized)
    out += ", embedding " + embedding_quant.format_name() + " " + mib(embedding_quant.bytes());
  return out;
}

size_t PackedModel::embedding_bytes() const {
  return embedding.size() * sizeof(kern::bf16_t) + (embedding_quant.quantized ? embedding_quant.bytes() : 0);
}

std::vector<const PackedMatrix*> PackedLayer::matrices() const {
  std::vector<const PackedMatrix*> out{&qkv, &o};
  if (!is_moe()) {
    out.push_back(&gate_up);
    out.push_back(&down);
    return out;
  }
  out.push_back(&router);
  for (const PackedExpert& e : experts) {
    out.push_back(&e.gate_up);
    out.push_back(&e.down);
  }
  return out;
}

size_t PackedModel::decode_bytes(int experts_per_token) const {
  size_t total = lm_head.bytes();
  for (const PackedLayer& l : layers) {
    total += l.qkv.bytes() + l.o.bytes();
    if (!l.is_moe()) {
      total += l.gate_up.bytes() + l.down.bytes();
      continue;
    }
    const PackedExpert& e = l.experts.front();
    total += l.router.bytes() + static_cast<size_t>(experts_per_token) * (e.gate_up.bytes() + e.down.bytes());
  }
  return total;
}

PackedModel pack_model(const ModelConfig& c, const Checkpoint& stored, const PackOptions& options) {
  const auto split = split_fused_projections(c, stored);  // phi3: q/k/v and gate/up as row slices
  TensorReader ck(*split, options.on_progress, options.quantization == WeightQuantization::automatic);
  AllocOptions alloc;
  alloc.numa_node = options.numa_node;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const int h = c.hidden_size;
  PackedModel m;
  m.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = layer_prefix(c, i);
    PackedLayer& l = m.layers[static_cast<size_t>(i)];
    l.attn_norm = effective_norm(c, to_f32(ck.get(p + "input_layernorm.weight", {hidden})));
    l.mlp_norm = effective_norm(c, to_f32(ck.get(p + mlp_norm_name(c), {hidden})));
    if (c.sandwich_norms) {
      l.post_attn_norm = effective_norm(c, to_f32(ck.get(p + "post_attention_layernorm.weight", {hidden})));
      l.post_mlp_norm = effective_norm(c, to_f32(ck.get(p + "post_feedforward_layernorm.weight", {hidden})));
    }
    if (c.qk_norm) {
      l.q_norm = effective_norm(c, to_f32(ck.get(p + "self_attn.q_norm.weight", {c.head_dim})));
      l.k_norm = effective_norm(c, to_f32(ck.get(p + "self_attn.k_norm.weight", {c.head_dim})));
    }
    l.qkv = pack_projection(ck.get_parts({{p + "self_attn.q_proj.weight", {q_dim, hidden}},
                                          {p + "self_attn.k_proj.weight", {kv_dim, hidden}},
                                          {p + "self_attn.v_proj.weight", {kv_dim, hidden}}}),
                            h, options.quantization, alloc, options.team, m.projection_paths);
    if (c.qkv_bias) {
      l.b_qkv = concat_f32({ck.get(p + "self_attn.q_proj.bias", {q_dim}), ck.get(p + "self_attn.k_proj.bias", {kv_dim}),
                            ck.get(p + "self_attn.v_proj.bias", {kv_dim})});
    }
    l.o = pack_projection(ck.get_parts({{p + "self_attn.o_proj.weight", {hidden, q_dim}}}), static_cast<int>(q_dim),
                          options.quantization, alloc, options.team, m.projection_paths);
    if (c.o_bias) l.b_o = to_f32(ck.get(p + "self_attn.o_proj.bias", {hidden}));
    if (layer_is_moe(c, i)) {
      const int64_t expert_inter = c.moe_intermediate_size;
      l.router = pack_stacked({ck.get(router_tensor_name(c, i), {c.num_experts, hidden})}, h, alloc, options.team);
      l.experts.resize(static_cast<size_t>(c.num_experts));
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertTensorNames n = expert_tensor_names(c, i, e);
        PackedExpert& x = l.experts[static_cast<size_t>(e)];
        // get_parts: a GGUF file's quantized experts repack from their blocks, never decoded.
        x.gate_up = pack_projection(ck.get_parts({{n.gate, {expert_inter, hidden}}, {n.up, {expert_inter, hidden}}}), h,
                                    options.quantization, alloc, options.team, m.projection_paths, true);
        x.down = pack_projection(ck.get_parts({{n.down, {hidden, expert_inter}}}), c.moe_intermediate_size,
                                 options.quantization, alloc, options.team, m.projection_paths);
      }
      ck.report();
      continue;
    }
    // SwiGLU fusion leaves no place for a bias between the linear and the activation.
    l.gate_up = pack_projection(
        ck.get_parts({{p + "mlp.gate_proj.weight", {inter, hidden}}, {p + "mlp.up_proj.weight", {inter, hidden}}}), h,
        options.quantization, alloc, options.team, m.projection_paths, !c.mlp_bias);
    l.down = pack_projection(ck.get_parts({{p + "mlp.down_proj.weight", {hidden, inter}}}), c.intermediate_size,
                             options.quantization, alloc, options.team, m.projection_paths);
    if (c.mlp_bias) {
      l.b_gate_up = concat_f32({ck.get(p + "mlp.gate_proj.bias", {inter}), ck.get(p + "mlp.up_proj.bias", {inter})});
      l.b_down = to_f32(ck.get(p + "mlp.down_proj.bias", {hidden}));
    }
    ck.report();
  }
  m.final_norm = effective_norm(c, to_f32(ck.get(c.weight_prefix + "norm.weight", {hidden})));
  const TensorView embed = ck.get_parts({{c.weight_prefix + "embed_tokens.weight", {c.vocab_size, hidden}}}).front();
  if (embed.input_perm != nullptr) {  // its rows are looked up, not multiplied: no K order but its own
    throw std::runtime_error(embed.file + ": tensor '" + embed.name +
                             "': an act-order (desc_act) quantized embedding table is not supported");
  }
  if (!c.tie_word_embeddings && !ck.has(c.lm_head_name)) {
    try {
      (void)ck.tensor(c.lm_head_name);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(e.what()) +
                               " (tie_word_embeddings is false, so the output matrix is required)");
    }
  }
  const TensorView head =
      c.tie_word_embeddings ? embed : ck.get_parts({{c.lm_head_name, {c.vocab_size, hidden}}}).front();
  // A GGUF file's quantized head runs quantized, as its author chose (Q6_K in Q4_K_M files).
  const bool head_from_blocks =
      options.quantization == WeightQuantization::automatic && head.block_format != BlockFormat::none;
  if ((options.quantize_lm_head && rtn_quant_format(options.quantization)) || head_from_blocks) {
    std::map<std::string, int> head_path;  // the head is not a projection; describe_formats() names its format
    m.lm_head = pack_projection({head}, h, options.quantization, alloc, options.team, head_path);
  } else {
    m.lm_head = pack_stacked({head}, h, alloc, options.team);
  }
  // The embedding rows: a GGUF file's quantized table stays quantized (repacked: the file's values),
  // and --quantize-lm-head quantizes the table with the head (RTN); a tied quantized head is the
  // table. Otherwise BF16, from the packed head while it is BF16 and tied.
  const bool embed_from_blocks =
      options.quantization == WeightQuantization::automatic && embed.block_format != BlockFormat::none;
  const bool embed_rtn = options.quantize_lm_head && rtn_quant_format(options.quantization);
  if (embed_from_blocks || embed_rtn) {
    if (!c.tie_word_embeddings || !m.lm_head.quantized) {
      std::map<std::string, int> embed_path;
      m.embedding_quant = pack_projection({embed}, h, options.quantization, alloc, options.team, embed_path);
    }
  } else if (!c.tie_word_embeddings || m.lm_head.quantized) {
    m.embedding.resize(static_cast<size_t>(embed.numel()));
    if (embed.dtype == DType::bf16) {
      std::memcpy(m.embedding.data(), embed.data, m.embedding.size() * sizeof(kern::bf16_t));
    } else {
      const auto f = to_f32(embed);
      for (size_t i = 0; i < f.size(); ++i) m.embedding[i] = kern::f32_to_bf16(f[i]);
    }
  }
  ck.report(/*done=*/true);
  return m;
}

std::unique_ptr<Checkpoint> checkpoint_over(const ModelConfig& config, const ModelWeights& weights) {
  return std::make_unique<WeightsCheckpoint>(config, weights);
}

}  // namespace slab
