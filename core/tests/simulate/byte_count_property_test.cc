// Property: whatever the model, shape, parallel layout and numerics, every byte count the core
// returns is non-negative and finite, and a run that does not fit is never reported as fitting.
//
// A seeded sweep over the builder's model families (Llama, Mistral, Qwen2/3, GPT-2, GPT-J,
// Falcon, BERT, ViT, Mixtral, Qwen2-MoE, DeepSeek-V3), sizes from tiny to ones whose byte counts
// overflow 64 bits, batch, sequence, TP/SP/CP/EP/PP/DP, precisions (fp8-mixed included),
// recompute policies, optimizers and ZeRO stages. A configuration the core rejects (ConfigError)
// holds the property trivially; every answer it gives must hold it: the built graph's storages
// and tensors, the simulation's memory profile and op counts, the training estimate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/error.h"
#include "accelsim/simulate.h"
#include "accelsim/training.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

class Sweep {
 public:
  explicit Sweep(uint64_t seed) : rng_(seed) {}

  template <typename T>
  T pick(const std::vector<T>& values) {
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng_)];
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // A model of one of the builder's families, with sizes drawn from the sweep (mostly ones that
  // build, sometimes ones whose byte counts cannot be represented).
  ModelSpec model() {
    const std::string family = pick<std::string>({"llama", "mistral", "qwen2", "qwen3", "gpt2", "gptj",
                                                   "falcon", "bert", "vit", "mixtral", "qwen2_moe",
                                                   "deepseek_v3"});
    ModelSpec m;
    if (family == "gptj") {
      m = testing::gptj_6b();
    } else if (family == "falcon") {
      m = testing::falcon_180b();
    } else if (family == "vit") {
      m = testing::vit_era5();
    } else if (family == "deepseek_v3") {
      m = testing::deepseek_v3();
    } else if (family == "mixtral") {
      m = testing::mixtral_8x7b();
    } else {
      m = testing::llama3_8b();
    }
    m.name = family;
    m.family = family;
    const bool extreme = chance(0.2);
    const int64_t heads = pick<int64_t>({1, 2, 4, 8, 16});
    m.num_heads = heads;
    m.num_kv_heads = heads >> std::uniform_int_distribution<int>(0, __builtin_ctzll(heads))(rng_);
    m.head_dim = extreme ? pick<int64_t>({int64_t{1} << 20, int64_t{1} << 26, int64_t{1} << 31})
                         : pick<int64_t>({16, 32, 64, 128});
    m.hidden_size = extreme && chance(0.5) ? pick<int64_t>({int64_t{1} << 28, int64_t{1} << 33, int64_t{1} << 40})
                                           : m.num_heads * m.head_dim;
    m.ffn_size = m.hidden_size * pick<int64_t>({1, 2, 4});
    m.vocab_size = extreme && chance(0.5) ? pick<int64_t>({int64_t{1} << 32, int64_t{1} << 45})
                                          : pick<int64_t>({256, 1000, 32000});
    m.num_layers = extreme && chance(0.3) ? pick<int64_t>({int64_t{1} << 21, int64_t{1} << 40})
                                          : pick<int64_t>({1, 2, 3, 4});
    m.max_position_embeddings = 4096;
    m.rotary_dim = family == "gptj" ? std::min<int64_t>(16, m.head_dim) : 0;
    if (family == "mistral") m.sliding_window = pick<int64_t>({16, 64});
    if (family == "qwen2" || family == "qwen2_moe") m.qkv_bias = true;
    if (family == "qwen3") m.qk_norm = true;
    if (family == "gpt2" || family == "bert") {
      m.activation = Activation::gelu_tanh;
      m.gated_ffn = false;
      m.norm = NormKind::layer_norm;
      m.rotary = false;
      m.learned_positions = true;
      m.qkv_bias = m.output_bias = m.ffn_bias = true;
      m.fused_qkv = family == "gpt2";
      m.tied_embeddings = true;
    }
    if (family == "bert") {
      m.causal = false;
      m.post_norm = true;
      m.final_norm = false;
      m.embedding_norm = true;
      m.type_vocab_size = 2;
      m.lm_head_transform = m.lm_head_bias = true;
      m.hidden_dropout = m.attention_dropout = m.embedding_dropout = 0.1;
    }
    if (family == "vit") {
      m.image_height = m.image_width = pick<int64_t>({8, 16, 32});
      m.patch_size = pick<int64_t>({2, 4});
      m.num_channels = 3;
      m.max_position_embeddings = m.image_tokens();
    }
    if (family == "mixtral" || family == "qwen2_moe") {
      m.moe = MoeSpec{.num_experts = pick<int64_t>({4, 8}), .top_k = pick<int64_t>({1, 2}),
                      .expert_ffn_size = m.ffn_size, .normalize_top_k = true, .fp32_combine = true};
      if (family == "qwen2_moe") {
        m.moe.shared_ffn_size = m.ffn_size;
        m.moe.shared_expert_gate = true;
        m.moe.sparse_step = pick<int64_t>({1, 2});
      }
    }
    if (family == "deepseek_v3") {
      m.mla = MlaSpec{.q_lora_rank = pick<int64_t>({0, 64}), .kv_lora_rank = 32, .qk_nope_head_dim = m.head_dim,
                      .qk_rope_head_dim = 16, .v_head_dim = m.head_dim};
      m.head_dim += 16;
      m.num_kv_heads = m.num_heads;
      m.moe = MoeSpec{.num_experts = 8, .top_k = 2, .expert_ffn_size = m.ffn_size, .shared_ffn_size = m.ffn_size,
                      .first_dense_layers = pick<int64_t>({0, 1}), .normalize_top_k = true,
                      .fp32_combine = true, .sigmoid_scoring = true, .num_groups = 2, .top_k_groups = 1};
    }
    return m;
  }

  // The step's numerics, as `accel-sim train --precision` sets them.
  void precision(ModelSpec& m, BuildOptions& b) {
    const std::string p = pick<std::string>({"bf16-mixed", "fp16-mixed", "fp8-mixed", "bf16", "fp32"});
    const DType dtype = p == "fp16-mixed" ? DType::fp16 : p == "fp32" ? DType::fp32 : DType::bf16;
    m.weight_dtype = m.activation_dtype = m.kv_cache_dtype = dtype;
    b.master_weights = p.ends_with("-mixed");
    b.fp8_gemms = p == "fp8-mixed";
  }

  BuildOptions options(const ModelSpec& m) {
    BuildOptions b;
    b.phase = pick<Phase>({Phase::train, Phase::train, Phase::prefill, Phase::decode});
    b.batch = chance(0.1) ? pick<int64_t>({int64_t{1} << 30, int64_t{1} << 50}) : pick<int64_t>({1, 2, 3});
    b.seq = chance(0.1) ? pick<int64_t>({int64_t{1} << 31, int64_t{1} << 62}) : pick<int64_t>({8, 16, 64, 96});
    b.context = chance(0.1) ? pick<int64_t>({int64_t{1} << 40, std::numeric_limits<int64_t>::max()})
                            : pick<int64_t>({0, 7, 100});
    b.tensor_parallel = pick<int64_t>({1, 1, 2, 4});
    b.sequence_parallel = b.tensor_parallel > 1 && chance(0.5);
    b.context_parallel = pick<int64_t>({1, 1, 2});
    b.expert_parallel = m.moe.enabled() ? pick<int64_t>({1, 2}) : 1;
    b.recompute = pick<Recompute>({Recompute::none, Recompute::selective, Recompute::full});
    b.optimizer = pick<Optimizer>({Optimizer::adamw, Optimizer::adam, Optimizer::sgd, Optimizer::none});
    b.eager_attention = chance(0.15);
    b.persistent_gradients = chance(0.2);
    b.moe_impl = pick<MoeImpl>({MoeImpl::grouped, MoeImpl::sequential});
    return b;
  }

  SimulateOptions simulate_options() {
    SimulateOptions o;
    o.cost_model = pick<std::string>({"roofline", "kernel"});
    o.fuse_elementwise = chance(0.3);
    o.release_policy = pick<ReleasePolicy>({ReleasePolicy::recorded, ReleasePolicy::last_use});
    o.fp8_weight_cache = chance(0.5);
    o.overlap_tp_comm = chance(0.5);
    o.micro_batches = pick<int64_t>({1, 4});
    return o;
  }

  DeviceSpec device() {
    DeviceSpec d = testing::round_device();
    d.fp8_matrix_flops_per_s = 200e12;
    d.memory_bytes = pick<double>({1e6, 1e9, 80e9});
    return d;
  }

 private:
  std::mt19937_64 rng_;
};

// What went wrong with one configuration, for the failure message.
std::string describe(const ModelSpec& m, const BuildOptions& b) {
  return m.family + " hidden " + std::to_string(m.hidden_size) + " layers " + std::to_string(m.num_layers) +
         " heads " + std::to_string(m.num_heads) + "/" + std::to_string(m.num_kv_heads) + " head_dim " +
         std::to_string(m.head_dim) + " vocab " + std::to_string(m.vocab_size) + " phase " +
         std::string(b.phase == Phase::train ? "train" : b.phase == Phase::decode ? "decode" : "prefill") + " batch " + std::to_string(b.batch) + " seq " +
         std::to_string(b.seq) + " context " + std::to_string(b.context) + " tp " +
         std::to_string(b.tensor_parallel) + (b.sequence_parallel ? " sp" : "") + " cp " +
         std::to_string(b.context_parallel) + " ep " + std::to_string(b.expert_parallel) + " recompute " +
         std::string(b.recompute == Recompute::full ? "full" : b.recompute == Recompute::selective ? "selective" : "none") + (b.fp8_gemms ? " fp8" : "") + " dtype " +
         std::string(dtype_name(m.weight_dtype));
}

bool bytes_ok(double bytes) { return std::isfinite(bytes) && bytes >= 0.0; }

void check_graph(const Graph& g, const std::string& what) {
  for (const Storage& s : g.storages()) ASSERT_GE(s.size_bytes, 0) << what;
  for (const TensorMeta& t : g.tensors()) {
    ASSERT_GE(t.logical_bytes(), 0) << what;
    ASSERT_GE(t.accessed_bytes(), 0) << what;
  }
}

void check_simulation(const SimulationResult& r, const DeviceSpec& d, const std::string& what) {
  const MemoryProfile& mem = r.memory;
  for (int64_t bytes : {mem.parameter_bytes, mem.buffer_bytes, mem.input_bytes, mem.optimizer_state_bytes,
                        mem.resident_bytes, mem.peak_bytes, mem.peak_activation_bytes, mem.peak_gradient_bytes,
                        mem.peak_allocated_bytes, mem.peak_reserved_bytes, mem.peak_segment_bytes}) {
    ASSERT_GE(bytes, 0) << what;
  }
  ASSERT_GE(mem.peak_bytes, mem.resident_bytes) << what;
  for (int64_t live : mem.live_bytes) ASSERT_GE(live, mem.resident_bytes) << what;
  for (int64_t live : mem.live_bytes_after) ASSERT_GE(live, mem.resident_bytes) << what;
  for (double v : {r.latency_s, r.total_flops, r.total_bytes, r.communication_bytes, r.model_flops, r.energy_j,
                   r.required_bytes, r.memory_capacity_bytes}) {
    ASSERT_TRUE(bytes_ok(v)) << what << ": " << v;
  }
  for (const OpResult& op : r.ops) {
    ASSERT_TRUE(bytes_ok(op.count.bytes_read) && bytes_ok(op.count.bytes_written) &&
                bytes_ok(op.count.communication_bytes) && bytes_ok(op.count.flops) && bytes_ok(op.cost.time_s))
        << what << ": op " << op.node;
  }
  // What must fit is at least the peak of live bytes, and fitting means it fits.
  ASSERT_GE(r.required_bytes, static_cast<double>(mem.peak_bytes)) << what;
  ASSERT_EQ(r.fits, r.required_bytes <= d.memory_bytes) << what;
}

void check_training(const TrainingEstimate& e, const DeviceSpec& d, const std::string& what) {
  for (double v : {e.memory_per_gpu_bytes, e.reserved_per_gpu_bytes, e.activation_bytes, e.step_s, e.compute_s, e.tp_comm_s, e.bubble_s,
                   e.pp_comm_s, e.dp_comm_s, e.optimizer_s, e.forward_s, e.backward_s, e.tokens_per_s,
                   e.model_flops, e.tflops_per_gpu, e.mfu}) {
    ASSERT_TRUE(bytes_ok(v)) << what << ": " << v << " (" << e.reason << ")";
  }
  if (e.micro_batches == 0) return;  // infeasible before composing: nothing to check
  ASSERT_GE(e.memory_per_gpu_bytes, e.activation_bytes + d.runtime_reserved_bytes) << what;
  // The allocator reserves at least what is live.
  ASSERT_GE(e.reserved_per_gpu_bytes, e.memory_per_gpu_bytes) << what;
  ASSERT_EQ(e.fits, e.memory_per_gpu_bytes <= d.memory_bytes) << what;
  if (e.feasible) ASSERT_TRUE(e.fits) << what;
}

// A configuration drawn from the sweep's small sizes only (no extreme head_dim, hidden_size,
// vocab_size or num_layers; batch <= 3, seq <= 96, context <= 100), on one rank of its tensor-
// and context-parallel groups, in a phase its model has (BERT and ViT are encoders, no decode):
// nothing in it is out of the builder's range, so the core must answer, not reject it.
bool plain(const ModelSpec& m, const BuildOptions& b) {
  return m.head_dim <= 128 + 16 && m.hidden_size <= 16 * 144 && m.vocab_size <= 32000 && m.num_layers <= 4 &&
         b.batch <= 3 && b.seq <= 96 && b.context <= 100 && b.tensor_parallel == 1 && b.context_parallel == 1 &&
         (m.causal || b.phase != Phase::decode);
}

TEST(ByteCountProperty, EveryByteCountIsNonNegativeAndFiniteAndFittingMeansFitting) {
  Sweep sweep(20261124);
  const SystemSpec system = testing::round_system();
  constexpr int kConfigurations = 1500;
  int plain_built = 0, plain_estimated = 0, too_deep_rejected = 0;
  for (int i = 0; i < kConfigurations; ++i) {
    ModelSpec m = sweep.model();
    BuildOptions b = sweep.options(m);
    sweep.precision(m, b);
    const DeviceSpec d = sweep.device();
    const SimulateOptions o = sweep.simulate_options();
    const std::string what = "configuration " + std::to_string(i) + ": " + describe(m, b);
    const bool is_plain = plain(m, b);
    const bool too_deep = m.num_layers > (int64_t{1} << 14);  // ModelSpec::validate's bound
    // The graph of one rank, and its simulation.
    try {
      const Graph g = build_graph(m, b);
      check_graph(g, what);
      check_simulation(simulate(g, d, o), d, what);
      EXPECT_FALSE(too_deep) << what << ": more layers than a graph is built for";
      plain_built += is_plain ? 1 : 0;
    } catch (const ConfigError& e) {
      EXPECT_FALSE(is_plain) << what << ": rejected: " << e.what();
      too_deep_rejected += too_deep ? 1 : 0;
    }
    if (HasFatalFailure()) return;
    // A training run of the model on the system: its stage profile and the step composed from it.
    if (b.phase != Phase::train) continue;
    ParallelLayout l;
    l.tp = b.tensor_parallel;
    l.sequence_parallel = b.sequence_parallel;
    l.cp = b.context_parallel;
    l.ep = b.expert_parallel;
    l.pp = sweep.pick<int64_t>({1, 2});
    l.dp = l.ep * sweep.pick<int64_t>({1, 2});
    l.micro_batch = b.batch;
    l.global_batch = l.dp * l.micro_batch * sweep.pick<int64_t>({1, 2, 8});
    l.virtual_stages = l.pp > 1 ? sweep.pick<int64_t>({1, 2}) : 1;
    l.zero = sweep.pick<int>({0, 1, 2, 3});
    l.gpipe = l.virtual_stages == 1 && sweep.chance(0.2);
    try {
      check_training(estimate_training(m, b, l, d, system, o), d, what);
      plain_estimated += is_plain ? 1 : 0;
    } catch (const ConfigError& e) {
      EXPECT_FALSE(is_plain) << what << ": training rejected: " << e.what();
    }
    if (HasFatalFailure()) return;
  }
  // The sweep must exercise the core, not only its rejections. The draws are independent, so:
  //   P(plain) = 0.8 (model not extreme) x 0.9^3 (batch, seq, context small) x 2/4 (tp = 1)
  //              x 2/3 (cp = 1) x (1 - 2/12 x 1/4) (not an encoder family in decode) = 0.1863,
  //              mean 279.5 of 1500, standard deviation sqrt(1500 x 0.1863 x 0.8137) = 15.1;
  //   P(plain training step) = 0.8 x 0.9^3 x 2/4 x 2/3 x 2/4 (phase train) = 0.0972,
  //              mean 145.8, standard deviation 11.5;
  //   P(more than 2^14 layers) = 0.2 (extreme) x 0.3 (extreme depth: 2^21 or 2^40) = 0.06,
  //              mean 90, standard deviation 9.2.
  // Each bound sits about five standard deviations below its mean.
  EXPECT_GE(plain_built, 200);
  EXPECT_GE(plain_estimated, 85);
  EXPECT_GE(too_deep_rejected, 45);
  std::printf("%d plain configurations built, %d plain training steps estimated, %d over-deep models rejected\n",
              plain_built, plain_estimated, too_deep_rejected);
}

}  // namespace
}  // namespace accelsim
