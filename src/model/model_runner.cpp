// The runner: kernel choice, weight packing, thread pool, and the fast forward pass. The fast
// pass mirrors forward.cpp step for step (embed, per layer norm → QKV → q/k norm, RoPE, cache
// write → attention → o_proj + residual → norm → gate+up → SiLU·up → down + residual, final norm,
// head), with BF16 activations into FP32-accumulating linears and the residual stream in FP32.
#include "model/model_runner.h"

#include "model/rope_params.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/linear_bf16.h"
#include "kernels/reference.h"
#include "kernels/rowwise_bf16.h"
#include "model/linear_tuning.h"
#include "model/model_runner_internal.h"
#include "runtime/aligned_buffer.h"
#include "runtime/cpu_features.h"
#include "runtime/task_team.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace slab {

namespace {

kern::Isa choose_isa(KernelChoice choice, const CpuFeatures& f) {
  switch (choice) {
    case KernelChoice::reference: return kern::Isa::scalar;
    case KernelChoice::avx512_bf16:
      if (!f.has_avx512_bf16_kernels())
        throw std::runtime_error("the AVX-512 BF16 kernels were asked for, but this CPU lacks them");
      return kern::Isa::avx512_bf16;
    case KernelChoice::avx2:
      if (!f.has_avx2_kernels()) throw std::runtime_error("the AVX2 kernels were asked for, but this CPU lacks them");
      return kern::Isa::avx2;
    case KernelChoice::automatic: break;
  }
  if (f.has_avx512_bf16_kernels()) return kern::Isa::avx512_bf16;
  if (f.has_avx2_kernels()) return kern::Isa::avx2;
  return kern::Isa::scalar;  // the scalar FP32 reference forward
}

// The threads that pack the checkpoint: as many as the pool will have, on the same cores (its cpu
// list, or the process's cpuset), each bound to its core where the pool pins, so that first touch
// places the weights on the NUMA nodes of the cores that will read them. The caller packs the
// first share unbound, as it packed everything before.
TaskTeam pack_team(const RunnerOptions& o) {
  const Topology& topo = Topology::system();
  const TopologyInfo info = o.cpu_list.empty() ? topo.process_info() : topo.info_for(o.cpu_list);
  const int cores = static_cast<int>(info.cores.size());
  const int threads = o.n_threads > 0 ? o.n_threads : std::max(1, cores);
  std::vector<std::vector<int>> cpus;
  if (o.pin_threads && threads <= cores) {
    for (int t = 0; t < threads; ++t) cpus.push_back(info.cores[static_cast<size_t>(t)].os_cpus);
  }
  return TaskTeam(threads, std::move(cpus));
}

}  // namespace

const char* forward_phase_name(ForwardPhase phase) {
  switch (phase) {
    case ForwardPhase::embed: return "embed";
    case ForwardPhase::norm: return "norms";
    case ForwardPhase::qkv: return "qkv";
    case ForwardPhase::rope_kv: return "rope+kv";
    case ForwardPhase::attention: return "attention";
    case ForwardPhase::o_proj: return "o";
    case ForwardPhase::mlp_up: return "gate_up";
    case ForwardPhase::down: return "down";
    case ForwardPhase::head: return "head";
    case ForwardPhase::count: break;
  }
  return "?";
}

double ForwardPhaseSeconds::total() const {
  double sum = 0;
  for (double s : seconds) sum += s;
  return sum;
}

ForwardPhaseSeconds ForwardPhaseSeconds::operator-(const ForwardPhaseSeconds& earlier) const {
  ForwardPhaseSeconds d;
  for (size_t i = 0; i < seconds.size(); ++i) d.seconds[i] = seconds[i] - earlier.seconds[i];
  return d;
}

ModelRunner::ModelRunner(const Model& model, const Checkpoint& checkpoint, const RunnerOptions& options) {
  meta_.config = model.config;
  meta_.generation = model.generation;
  isa_ = choose_isa(options.kernels, cpu_features());
  if (isa_ == kern::Isa::scalar) {
    owned_fp32_ = std::make_unique<Model>();
    owned_fp32_->config = model.config;
    owned_fp32_->generation = model.generation;
    owned_fp32_->weights = load_model_weights(model.config, checkpoint);
    reference_ = owned_fp32_.get();
  }
  init(checkpoint, options);
}

ModelRunner::ModelRunner(const Model& model, const RunnerOptions& options) {
  meta_.config = model.config;
  meta_.generation = model.generation;
  isa_ = choose_isa(options.kernels, cpu_features());
  if (isa_ == kern::Isa::scalar) reference_ = &model;
  init(*checkpoint_over(model.config, model.weights), options);
}

ModelRunner::~ModelRunner() = default;

void ModelRunner::init(const Checkpoint& checkpoint, const RunnerOptions& options) {
  options_ = options;
  amx_ = options.amx && isa_ == kern::Isa::avx512_bf16 && amx_bf16_usable();
  blocking_ = options.blocking ? *options.blocking : linear_tuning_for(cpu_features()).blocking;
  kern::check_linear_blocking(blocking_);
  if (reference_) return;
  const ModelConfig& c = meta_.config;
  if (c.head_dim % 2 != 0) throw std::runtime_error("head_dim must be even for RoPE");
  packed_ = std::make_unique<Packed>();
  const TaskTeam team = pack_team(options);
  packed_->model = pack_model(
      c, checkpoint,
      PackOptions{options.numa_node, &team, options.on_load_progress, options.quantization, options.quantize_lm_head});
  ws_ = std::make_unique<Workspace>();
  const int rot = rotary_dim_of(c);
  for (int set = 0; set < kRopeSets; ++set) {
    RopeTable& table = ws_->rope[set];
    table.inv_freq.resize(static_cast<size_t>(rot / 2));
    ref::rope_inverse_frequencies(table.inv_freq.data(), rot, rope_set_params(c, set));
    table.scale = rope_set_scale(c, set);
  }
}

std::string ModelRunner::describe() const {
  if (reference_) return "float32 scalar reference kernels, 1 thread";
  const int threads = pool_ ? pool_->size() : options_.n_threads;
  // The BF16 tiles take BF16 linears past the decode rows and attention (kernels/attention.h), the
  // INT8 tiles quantized linears of 16 rows and more (kernels/linear_quant.h says which).
  const std::string amx = amx_ ? (amx_int8_usable() ? " + amx_bf16 (M >= 9, attention) / amx_int8 (M >= 16)"
                                                    : " + amx_bf16 (M >= 9, attention)")
                               : "";
  return std::string("bf16 ") + kern::isa_name(isa_) + amx + " kernels, " +
         (threads > 0 ? std::to_string(threads) : std::string("one per core")) +
         (threads == 1 ? " thread" : " threads");
}

std::string ModelRunner::weight_format() const {
  if (!packed_) return "FP32 (scalar reference path)";
  std::string paths;
  for (const auto& [path, count] : packed_->model.projection_paths) {
    paths += (paths.empty() ? "" : ", ") + path + " x " + std::to_string(count);
  }
  return packed_->model.describe_formats() + " (" + paths + ")";
}

bool ModelRunner::has_quantized_weights() const {
  if (!packed_) return false;
  for (const PackedLayer& l : packed_->model.layers) {
    for (const PackedMatrix* m : l.matrices()) {
      if (m->quantized) return true;
    }
  }
  return false;
}

size_t ModelRunner::decode_weight_bytes() const {
  return packed_ ? packed_->model.decode_bytes(meta_.config.num_experts_per_tok) : 0;
}

size_t ModelRunner::weight_bytes() const {
  if (packed_) return packed_->model.decode_bytes(meta_.config.num_experts) + packed_->model.embedding_bytes();
  size_t total = 0;
  const auto fp32 = checkpoint_over(reference_->config, reference_->weights);
  for (const std::string& name : fp32->tensor_names()) total += fp32->tensor(name).bytes();
  return total;
}

ModelRunner::MoeStepBytes ModelRunner::last_moe_step() const { return ws_ ? ws_->moe_last_step : MoeStepBytes{}; }

int ModelRunner::num_threads() const { return pool_ ? pool_->size() : (reference_ ? 1 : 0); }

ThreadPool& ModelRunner::thread_pool() {
  ensure_pool();
  return *pool_;
}

std::vector<std::vector<int>> ModelRunner::thread_bindings() const {
  return pool_ ? pool_->bindings() : std::vector<std::vector<int>>{};
}

void ModelRunner::share_thread_pool(ModelRunner& owner) {
  if (reference_) return;  // the reference forward runs on the calling thread alone
  owner.ensure_pool();
  pool_ = owner.pool_;
}

void ModelRunner::ensure_pool() {
  if (pool_) return;
  ThreadPoolOptions o;
  o.n_threads = options_.n_threads;
  o.cpu_list = options_.cpu_list.c_str();  // read only while the pool is constructed
  o.pin = options_.pin_threads;
  o.pin_caller = options_.pin_threads;  // the caller of the first forward (the engine loop)
  pool_ = std::make_unique<ThreadPool>(o);
}

std::vector<float> ModelRunner::forward(const ForwardBatch& batch, KvCache& cache) {
  if (reference_) return slab::forward(*reference_, batch, cache);
  return forward_fast(batch, cache);
}

void ModelRunner::recycle_logits(std::vector<float>&& logits) {
  if (logits.capacity() > spare_logits_.capacity()) spare_logits_ = std::move(logits);
}

}  // namespace slab

namespace slab {

std::unique_ptr<ModelRunner> load_model_runner(const std::filesystem::path& model_dir, const RunnerOptions& options) {
  const Model meta = load_model_metadata(model_dir);
  const auto checkpoint = open_model_checkpoint(model_dir);
  return std::make_unique<ModelRunner>(meta, *checkpoint, options);
}

}  // namespace slab
