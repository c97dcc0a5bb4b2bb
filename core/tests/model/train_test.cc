// The model builder's training step: forward + loss + backward + optimizer, checked against
// hand-worked FLOPs, bytes and collective counts.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/error.h"
#include "accelsim/memory.h"
#include "accelsim/op_catalog.h"
#include "accelsim/simulate.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

constexpr double kLlamaMatmulParams = 7504658432.0;  // 32 * 218,103,808 + lm_head 525,336,576
constexpr int64_t kLlamaParams = 8030261248;         // HF num_parameters()

struct Sums {
  double matmul = 0, attention = 0, forward_matmul = 0, optimizer_flops = 0;
  int64_t gradient_bytes = 0, state_bytes = 0, parameter_bytes = 0;
};

Sums sums(const Graph& g) {
  Sums s;
  for (const Node& n : g.nodes()) {
    const OpCount c = count_op(g, n);
    EXPECT_TRUE(c.known) << n.op;
    if (c.op_class == OpClass::matmul) s.matmul += c.flops;
    if (c.op_class == OpClass::matmul && n.pass == Pass::forward) s.forward_matmul += c.flops;
    if (c.op_class == OpClass::attention) s.attention += c.flops;
    if (n.pass == Pass::optimizer) s.optimizer_flops += c.flops;
  }
  for (const Storage& st : g.storages()) {
    if (st.kind == StorageKind::gradient) s.gradient_bytes += st.size_bytes;
    if (st.kind == StorageKind::optimizer_state) s.state_bytes += st.size_bytes;
    if (st.kind == StorageKind::parameter) s.parameter_bytes += st.size_bytes;
  }
  return s;
}

int count(const Graph& g, const std::string& op, Pass pass) {
  int k = 0;
  for (const Node& n : g.nodes()) k += n.op == op && n.pass == pass;
  return k;
}

TEST(TrainTest, LlamaStepIsSixFlopsPerParameterPerTokenPlusAttention) {
  // batch 2, seq 1024: every GEMM runs forward, dgrad and wgrad: 6 * params * tokens (logits for
  // all 2048 tokens). Causal attention: forward 4 * 32 heads * 1024*1025/2 pairs * 128 per layer
  // and sequence, backward 2.5 times that (FlashAttention-2's five matmuls against two).
  const Graph g = build_graph(testing::llama3_8b(), {.phase = Phase::train, .batch = 2, .seq = 1024});
  const Sums s = sums(g);
  EXPECT_DOUBLE_EQ(s.matmul, 6 * kLlamaMatmulParams * 2048);
  EXPECT_DOUBLE_EQ(s.forward_matmul, 2 * kLlamaMatmulParams * 2048);
  const double attention_forward = 32.0 * 2 * 4 * 32 * (1024.0 * 1025 / 2) * 128;
  EXPECT_DOUBLE_EQ(s.attention, 3.5 * attention_forward);
  EXPECT_EQ(count(g, "accel_sim::attention_backward", Pass::backward), 32);
  // AdamW: 16 FLOPs per parameter element, every parameter updated.
  EXPECT_DOUBLE_EQ(s.optimizer_flops, 16.0 * kLlamaParams);
}

TEST(TrainTest, ModelFlopsAreSixNTPlusThreeTimesForwardAttention) {
  // Llama-3-8B, batch 1, seq 4096: 6 * 7,504,658,432 matmul parameters * 4096 tokens plus
  // 3 x the causal forward attention, 32 layers x 4 x 32 heads x (4096 * 4097 / 2) pairs x 128.
  // Full recompute runs the forward again but leaves the model FLOPs alone; MFU is model FLOPs
  // over the latency at the device's bf16 peak.
  const double tokens = 4096;
  const double attention = 32.0 * 4 * 32 * (4096.0 * 4097 / 2) * 128;
  const double expected = 6 * kLlamaMatmulParams * tokens + 3 * attention;
  const DeviceSpec d = testing::round_device();
  for (Recompute r : {Recompute::none, Recompute::full}) {
    const Graph g = build_graph(testing::llama3_8b(),
                                {.phase = Phase::train, .batch = 1, .seq = 4096, .recompute = r});
    const SimulationResult s = simulate(g, d, SimulateOptions{});
    EXPECT_DOUBLE_EQ(s.model_flops, expected);
    EXPECT_DOUBLE_EQ(s.model_flops_utilization, expected / (s.latency_s * 100e12));
    EXPECT_LT(s.model_flops, s.total_flops);  // the hardware does more (norms, optimizer, recompute)
  }
  // An inference graph counts its forward once.
  const Graph prefill = build_graph(testing::llama3_8b(), {.phase = Phase::prefill, .seq = 4096});
  const SimulationResult p = simulate(prefill, d, SimulateOptions{});
  EXPECT_GT(p.model_flops, 2 * 6979321856.0 * tokens);  // layers' matmuls alone
}

TEST(TrainTest, EagerAttentionModelFlopsCountTheCausalPairsOnly) {
  // Llama-3-8B, batch 1, seq 512, attention as the unfused core: its QK^T and P V GEMMs compute
  // all 512 x 512 pairs per head, 32 layers x 4 x 32 heads x 512^2 x 128 FLOPs executed in the
  // forward, but model FLOPs count the causal 512 * 513 / 2 pairs, as with the fused kernel.
  const double tokens = 512;
  const double causal = 32.0 * 4 * 32 * (512.0 * 513 / 2) * 128;
  const double all_pairs = 32.0 * 4 * 32 * (512.0 * 512) * 128;
  const Graph g = build_graph(testing::llama3_8b(), {.phase = Phase::train, .batch = 1, .seq = 512,
                                                     .eager_attention = true});
  const SimulationResult s = simulate(g, testing::round_device(), SimulateOptions{});
  EXPECT_DOUBLE_EQ(s.model_flops, 6 * kLlamaMatmulParams * tokens + 3 * causal);
  double forward_bmm = 0;
  for (const OpResult& op : s.ops) {
    const Node& n = g.node(op.node);
    if (n.op == "bmm" && n.pass == Pass::forward) forward_bmm += op.count.flops;
  }
  EXPECT_DOUBLE_EQ(forward_bmm, all_pairs);
}

TEST(TrainTest, TensorParallelCollectivesAreTimedOnASystem) {
  // Llama-3-8B prefill, batch 1, seq 1024, TP 8 inside one 8-GPU domain of 100 GB/s and 1 us
  // per step: each all-reduce of the [1, 1024, 4096] bf16 activations (8,388,608 bytes) takes
  // the tree's 2 * log2(8) * 1 us + 2 * 7/8 * S / 100 GB/s.
  SystemSpec sys;
  sys.id = "round";
  sys.scaleup = {.bandwidth_bytes_per_s = 100e9, .latency_s = 1e-6, .efficiency = 1.0};
  const Graph g = build_graph(testing::llama3_8b(),
                              {.phase = Phase::prefill, .batch = 1, .seq = 1024, .tensor_parallel = 8});
  SimulateOptions o;
  o.system = sys;
  o.groups = {{.name = "tp", .size = 8}};
  const SimulationResult r = simulate(g, testing::round_device(), o);
  int all_reduces = 0;
  for (const Node& n : g.nodes()) all_reduces += n.op == "accel_sim::all_reduce";
  EXPECT_GE(all_reduces, 64);  // two per layer (attention and MLP outputs)
  const double each = 6e-6 + 2 * 7.0 / 8 * 8388608.0 / 100e9;
  double expected = 0;
  for (const OpResult& op : r.ops) {
    if (g.node(op.node).op != "accel_sim::all_reduce") continue;
    const double bytes = op.count.communication_bytes;
    expected += 6e-6 + 2 * 7.0 / 8 * bytes / 100e9;
    if (bytes == 8388608.0) EXPECT_NEAR(op.cost.time_s, each, 1e-15);
  }
  EXPECT_NEAR(r.communication_time_s, expected, 1e-12);
  // The latency includes it; without a system the collectives are free.
  const SimulationResult alone = simulate(g, testing::round_device(), SimulateOptions{});
  EXPECT_EQ(alone.communication_time_s, 0.0);
  EXPECT_NEAR(r.latency_s, alone.latency_s + r.communication_time_s, 1e-9);
  o.groups = {};
  EXPECT_THROW(simulate(g, testing::round_device(), o), ConfigError);
}

TEST(TrainTest, AdafactorAndEightBitAdamKeepTheirStates) {
  // Llama-3-8B with fp32 master weights (4 bytes per parameter) beside the optimizer's states.
  const int64_t masters = 4 * kLlamaParams;
  // Adafactor: a matrix's second moment as a row and a column vector, a norm's whole; fp32.
  // Embedding and LM head [128256, 4096]: 132,352 each. A layer: q and o 8,192 each, k and v
  // 5,120 each, gate, up and down 18,432 each, two norms 4,096 each: 90,112; 32 layers, the
  // final norm: 2 x 132,352 + 32 x 90,112 + 4,096 = 3,152,384 floats.
  const Graph a = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 128,
                                                     .optimizer = Optimizer::adafactor});
  EXPECT_EQ(sums(a).state_bytes, masters + 4 * 3152384);
  EXPECT_EQ(count(a, "accel_sim::adafactor_step", Pass::optimizer), 33);  // a kernel per layer, one for the rest
  // Adam8bit: 1 byte per element per state, an fp32 absmax per 2,048 elements per state. Every
  // tensor has at least 4,096 elements. Blocks: embedding and LM head 256,512 each; a layer
  // 8,192 + 2,048 + 2,048 + 8,192 + 3 x 28,672 + 2 x 2 = 106,500; the final norm 2.
  const Graph b = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 128,
                                                     .optimizer = Optimizer::adam8bit});
  const int64_t blocks = 2 * 256512 + 32 * 106500 + 2;
  EXPECT_EQ(sums(b).state_bytes, masters + 2 * kLlamaParams + 2 * 4 * blocks);
  // Both steps are streaming kernels over their bytes: Adafactor reads the gradients and writes
  // the masters, 15 FLOPs per parameter element (optimizer.cc).
  EXPECT_DOUBLE_EQ(sums(a).optimizer_flops, 15.0 * static_cast<double>(kLlamaParams));
  EXPECT_DOUBLE_EQ(sums(b).optimizer_flops, 26.0 * static_cast<double>(kLlamaParams));
}

TEST(TrainTest, MixedPrecisionAdamHoldsEighteenBytesPerParameter) {
  // bf16 weights (2) + fp32 gradients (4) + fp32 master weights, exp_avg, exp_avg_sq (12):
  // Megatron-LM's 18 bytes per parameter.
  const Graph g = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 128});
  const Sums s = sums(g);
  EXPECT_EQ(s.parameter_bytes, 2 * kLlamaParams);
  EXPECT_EQ(s.gradient_bytes, 4 * kLlamaParams);
  EXPECT_EQ(s.state_bytes, 12 * kLlamaParams);
  const MemoryProfile m = compute_memory_profile(g);
  EXPECT_EQ(m.optimizer_state_bytes, 12 * kLlamaParams);
  // All gradients exist once backward is done; the peak holds them and at most the activations.
  EXPECT_LE(m.peak_gradient_bytes, 4 * kLlamaParams);
  EXPECT_GE(m.peak_bytes, 18 * kLlamaParams);
  // The optimizer on the host (ZeRO-Offload on one GPU): the host holds the states (12), the
  // fp32 gradients (4) and a bf16 copy of the parameters (2); the device keeps the parameters,
  // and each gradient only until the backward has written it: at most the largest, the LM head's
  // or the embedding's [128256, 4096] fp32, 2.1 GB.
  const MemoryProfile host = compute_memory_profile(g, ReleasePolicy::recorded, true);
  EXPECT_EQ(host.host_bytes, 18 * kLlamaParams);
  EXPECT_EQ(host.resident_bytes, m.resident_bytes - 12 * kLlamaParams);
  EXPECT_EQ(host.peak_gradient_bytes, int64_t{4} * 128256 * 4096);
  // 2 bytes a parameter, one gradient (0.26) and a 128-token step's activations: under 3, where
  // the step on the device peaks at 18.
  EXPECT_LT(host.peak_bytes, 3 * kLlamaParams);
  // Gradients kept between steps are zeroed in the optimizer pass before the forward: on the
  // device they still live from the backward's first write to its last, the largest at the
  // peak. A forward has no optimizer to offload.
  const Graph kept = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 128,
                                                        .persistent_gradients = true});
  EXPECT_EQ(compute_memory_profile(kept, ReleasePolicy::recorded, true).peak_gradient_bytes,
            int64_t{4} * 128256 * 4096);
  EXPECT_THROW(compute_memory_profile(build_graph(testing::llama3_8b(), {.seq = 128}), ReleasePolicy::recorded, true),
               ConfigError);

  // SGD with momentum, no master weights: bf16 gradients and one bf16 momentum buffer.
  const Graph sgd = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 128,
                                                       .optimizer = Optimizer::sgd,
                                                       .master_weights = false});
  const Sums t = sums(sgd);
  EXPECT_EQ(t.gradient_bytes, 2 * kLlamaParams);
  EXPECT_EQ(t.state_bytes, 2 * kLlamaParams);
  EXPECT_DOUBLE_EQ(t.optimizer_flops, 7.0 * kLlamaParams);
  EXPECT_EQ(count(sgd, "_foreach_copy_", Pass::optimizer), 0);
}

TEST(TrainTest, ForeachAndForLoopAdamWMoveEightyBytesPerParameter) {
  // Llama-3-8B in fp32 without master weights: parameters, gradients, exp_avg and exp_avg_sq are
  // 4 bytes per element. Bytes per element of torch.optim's AdamW (adamw.py):
  //   fused     reads p, g, m, v (16), writes p, m, v (12): 28;
  //   op by op  p.mul_ 4+4, m.lerp_(g) 8+4, v.mul_ 4+4, v.addcmul_(g, g) 8+4 (g read once),
  //             d = v.sqrt() 4+4, d.div_ 4+4, d.add_ 4+4, p.addcdiv_(m, d) 12+4: 48 + 32 = 80,
  // the same whether each op runs per parameter (for-loop) or over the list (foreach).
  // 291 parameter tensors: 32 layers x 9 (q, k, v, o, gate, up, down, two norms), the embedding,
  // the final norm and the LM head.
  ModelSpec m = testing::llama3_8b();
  m.weight_dtype = m.activation_dtype = DType::fp32;
  auto step = [&](OptimizerImpl impl) {
    return build_graph(m, {.phase = Phase::train, .seq = 16, .optimizer_impl = impl, .master_weights = false});
  };
  auto optimizer_bytes = [](const Graph& g) {
    double bytes = 0;
    for (const Node& n : g.nodes()) {
      if (n.pass == Pass::optimizer && n.op != "_foreach_zero_") bytes += count_op(g, n).bytes();
    }
    return bytes;
  };
  auto optimizer_nodes = [](const Graph& g) {
    int k = 0;
    for (const Node& n : g.nodes()) k += n.pass == Pass::optimizer;
    return k;
  };
  const double params = static_cast<double>(kLlamaParams);
  const Graph fused = step(OptimizerImpl::fused), foreach = step(OptimizerImpl::foreach),
              loop = step(OptimizerImpl::for_loop);
  EXPECT_DOUBLE_EQ(optimizer_bytes(fused), 28 * params);
  EXPECT_DOUBLE_EQ(optimizer_bytes(foreach), 80 * params);
  EXPECT_DOUBLE_EQ(optimizer_bytes(loop), 80 * params);
  EXPECT_EQ(optimizer_nodes(fused), 33);   // one kernel per layer, one for the rest
  EXPECT_EQ(optimizer_nodes(foreach), 8);  // eight list ops
  EXPECT_EQ(optimizer_nodes(loop), 8 * 291);
  EXPECT_EQ(count(loop, "addcdiv_", Pass::optimizer), 291);
  // Same states either way: 8 bytes per parameter.
  EXPECT_EQ(sums(loop).state_bytes, 8 * kLlamaParams);
  EXPECT_EQ(sums(foreach).state_bytes, 8 * kLlamaParams);
  // foreach holds every denominator at once (4 bytes per parameter) beside the parameters,
  // gradients and states (16): its peak is at least 20 bytes per parameter; for-loop's holds one
  // parameter's denominator at a time, the largest the [128256, 4096] embedding (2.1 GB).
  const int64_t held = 16 * kLlamaParams;
  EXPECT_GE(compute_memory_profile(foreach).peak_bytes, held + 4 * kLlamaParams);
  EXPECT_LT(compute_memory_profile(loop).peak_bytes, held + 4 * kLlamaParams);
  EXPECT_GE(compute_memory_profile(loop).peak_bytes, held + int64_t{4} * 128256 * 4096);
  // bf16 with fp32 masters: the foreach update runs over the masters, then each group's masters
  // are copied back into its bf16 parameters (33 groups, as the fused step's).
  const Graph mixed = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 16,
                                                         .optimizer_impl = OptimizerImpl::foreach});
  EXPECT_EQ(count(mixed, "_foreach_copy_", Pass::optimizer), 33);
  EXPECT_EQ(count(mixed, "_foreach_addcdiv_", Pass::optimizer), 1);
  EXPECT_EQ(sums(mixed).state_bytes, 12 * kLlamaParams);
  // Adafactor and 8-bit Adam run their own kernels: no foreach or for-loop form.
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 16, .optimizer = Optimizer::adafactor,
                               .optimizer_impl = OptimizerImpl::for_loop}),
               ConfigError);
}

TEST(TrainTest, ActivationsSavedForBackwardRaiseThePeak) {
  // The forward of a training step keeps what backward reads (matmul inputs, attention q/k/v/out
  // and logsumexp, norm inputs): its activations at the peak exceed a prefill's, which frees
  // each layer's temporaries as it goes.
  // Batch 4 so that the saved activations, not the fp32 gradients all live at the step's end
  // (32 GB), make the peak.
  const ModelSpec m = testing::llama3_8b();
  const MemoryProfile train = compute_memory_profile(
      build_graph(m, {.phase = Phase::train, .batch = 4, .seq = 2048, .optimizer = Optimizer::none}));
  const MemoryProfile prefill =
      compute_memory_profile(build_graph(m, {.phase = Phase::prefill, .batch = 4, .seq = 2048}));
  // A layer's saved bf16 inputs alone: x, normed, q, k, v, attention out, o_proj in, normed,
  // gate, up, act, product: well over 20 * 4 * 2048 * 4096 * 2 bytes per layer.
  EXPECT_GT(train.peak_activation_bytes + train.peak_gradient_bytes,
            32 * int64_t{20} * 4 * 2048 * 4096 * 2);
  EXPECT_GT(train.peak_activation_bytes, 10 * prefill.peak_activation_bytes);
}

// A GPT-3-style model (pre-LayerNorm, fused QKV, 4h GELU MLP, biases, learned positions, fp16,
// dropout 0.1) with `layers` layers: hidden 256, 8 heads, batch 2, seq 128.
ModelSpec gpt3_style(int64_t layers) {
  return ModelSpec{.name = "gpt3-style", .family = "gpt2", .hidden_size = 256,
                   .num_layers = layers, .num_heads = 8, .num_kv_heads = 8, .head_dim = 32,
                   .ffn_size = 1024, .vocab_size = 1000, .max_position_embeddings = 512,
                   .activation = Activation::gelu_tanh, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .rotary = false, .learned_positions = true,
                   .fused_qkv = true, .tied_embeddings = true, .qkv_bias = true,
                   .output_bias = true, .ffn_bias = true, .hidden_dropout = 0.1,
                   .embedding_dropout = 0.1, .attention_dropout = 0.1,
                   .weight_dtype = DType::fp16, .activation_dtype = DType::fp16,
                   .kv_cache_dtype = DType::fp16};
}

// Activation bytes live when the forward ends (at the loss), beyond the resident ones.
int64_t saved_activations(int64_t layers, Recompute recompute, bool eager_attention = false,
                          int64_t tp = 1) {
  const Graph g = build_graph(gpt3_style(layers), {.phase = Phase::train, .batch = 2, .seq = 128,
                                                   .tensor_parallel = tp,
                                                   .sequence_parallel = tp > 1,
                                                   .optimizer = Optimizer::none,
                                                   .recompute = recompute,
                                                   .eager_attention = eager_attention});
  const MemoryProfile p = compute_memory_profile(g);
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
    if (g.node(i).op == "nll_loss_forward") return p.live_bytes_after[i] - p.resident_bytes;
  }
  ADD_FAILURE() << "no loss node";
  return 0;
}

TEST(TrainTest, ActivationMemoryPerLayerMatchesKorthikanti) {
  // Korthikanti et al. 2022, sec. 4.1, 16-bit activations, s = 128, b = 2, h = 256, a = 8,
  // sbh = 65,536: per layer the attention block keeps its QKV input (2sbh), Q and K (4sbh), V
  // (2sbh), the projection's input (2sbh) and the dropout mask (sbh); the MLP its two inputs
  // (2sbh, 8sbh), the GELU input (8sbh) and the dropout mask (sbh); the two LayerNorms their
  // inputs (4sbh): 34sbh, plus 5as^2b for the unfused attention core, which FlashAttention does
  // not keep (its backward recomputes the scores). Beyond the formula, small fp32 statistics:
  // each LayerNorm's mean and rstd (2 x 2 x 4 bytes x sb) and the attention's log-sum-exp
  // (4 bytes x abs), which selective recomputation makes again in the backward with the rest of
  // the core attention.
  const int64_t sbh = 128 * 2 * 256;
  const int64_t statistics = 2 * 2 * 4 * 128 * 2 + 4 * 8 * 2 * 128;
  const int64_t none = saved_activations(3, Recompute::none) - saved_activations(2, Recompute::none);
  EXPECT_EQ(none, 34 * sbh + statistics);
  const int64_t selective =
      saved_activations(3, Recompute::selective) - saved_activations(2, Recompute::selective);
  EXPECT_EQ(selective, 34 * sbh + 2 * 2 * 4 * 128 * 2);
  // Full recompute keeps each layer's input only: 2sbh.
  const int64_t full = saved_activations(3, Recompute::full) - saved_activations(2, Recompute::full);
  EXPECT_EQ(full, 2 * sbh);
}

TEST(TrainTest, SequenceParallelismKeepsOneShardOfEveryActivation) {
  // Korthikanti et al. 2022, Table 2, tensor and sequence parallelism: 34sbh / t per layer (the
  // gathered inputs of the column-parallel GEMMs are gathered again in backward, not kept),
  // with t = 2; the statistics are split the same way (LayerNorms by tokens, the log-sum-exp by
  // heads).
  const int64_t sbh = 128 * 2 * 256;
  const int64_t statistics = 2 * 2 * 4 * 128 * 2 + 4 * 8 * 2 * 128;
  const int64_t sp = saved_activations(3, Recompute::none, false, 2) - saved_activations(2, Recompute::none, false, 2);
  EXPECT_EQ(sp, 34 * sbh / 2 + statistics / 2);
}

TEST(TrainTest, UnfusedAttentionCoreAddsKorthikantisQuadraticTerm) {
  // The unfused core keeps the softmax output (2as^2b), the dropout mask (as^2b) and the dropout
  // output (2as^2b): 5as^2b = 5 * 8 * 128^2 * 2 bytes per layer on top of 34sbh (no
  // log-sum-exp now, only the LayerNorm statistics). Selective recomputation runs the core again
  // in backward and keeps 34sbh; full keeps 2sbh.
  const int64_t sbh = 128 * 2 * 256;
  const int64_t as2b = 8 * 128 * 128 * 2;
  const int64_t norms = 2 * 2 * 4 * 128 * 2;
  auto per_layer = [](Recompute r) {
    return saved_activations(3, r, true) - saved_activations(2, r, true);
  };
  EXPECT_EQ(per_layer(Recompute::none), 34 * sbh + 5 * as2b + norms);
  EXPECT_EQ(per_layer(Recompute::selective), 34 * sbh + norms);
  EXPECT_EQ(per_layer(Recompute::full), 2 * sbh);
}

// Activation bytes live when the forward ends, beyond the resident ones, of a Llama-shaped toy
// (hidden 256, 8 heads of 32 with as many KV heads, SwiGLU 1,024, RMSNorm, RoPE, no biases,
// separate q, k and v projections as torchtitan's Llama writes them) at s = 128, b = 2.
int64_t llama_saved(int64_t layers, Recompute recompute, int64_t interval = 1) {
  const ModelSpec m{.name = "toy-llama", .hidden_size = 256, .num_layers = layers, .num_heads = 8,
                    .num_kv_heads = 8, .head_dim = 32, .ffn_size = 1024, .vocab_size = 1000,
                    .max_position_embeddings = 128};
  const Graph g = build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128,
                                  .optimizer = Optimizer::none, .recompute = recompute,
                                  .recompute_interval = interval});
  const MemoryProfile p = compute_memory_profile(g);
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
    const std::string& op = g.node(i).op;
    if (op == "nll_loss_forward" || op == "accel_sim::cross_entropy") return p.live_bytes_after[i] - p.resident_bytes;
  }
  ADD_FAILURE() << "no loss node";
  return 0;
}

TEST(TrainTest, TorchtitansOpLevelCheckpointingKeepsTheSavedOpsOutputs) {
  // torchtitan's op-level SAC saves the outputs of the 1st, 3rd, 5th and 7th of a layer's seven
  // aten.mm (q, v, gate, down: the 2nd, 4th and 6th are k, o and up), of the attention kernel
  // (its output and fp32 log-sum-exp), and the checkpoint keeps the layer's input; everything
  // else runs again in the backward. With sbh = 128 x 2 x 256 elements of 2 bytes: q, v, the
  // attention output, down and the input 2sbh bytes each, gate (1,024 wide) 8sbh: 18sbh, and the
  // log-sum-exp 4 x 8 heads x 128 x 2 = 8,192 bytes.
  const int64_t sbh = 128 * 2 * 256, lse = 4 * 8 * 128 * 2;
  const int64_t op = llama_saved(3, Recompute::selective_op) - llama_saved(2, Recompute::selective_op);
  EXPECT_EQ(op, 18 * sbh + lse);
  // Full keeps the input alone; every second layer checkpointed (torchtitan's selective_ac_option
  // 2: layers 1, 3, ...) keeps, over two layers, one layer's everything and one layer's input.
  const int64_t none = llama_saved(3, Recompute::none) - llama_saved(2, Recompute::none);
  EXPECT_EQ(llama_saved(3, Recompute::full) - llama_saved(2, Recompute::full), 2 * sbh);
  EXPECT_EQ(llama_saved(4, Recompute::full, 2) - llama_saved(2, Recompute::full, 2), none + 2 * sbh);
  EXPECT_GT(none, op);
  // An interval without a policy, or below 1, is refused.
  EXPECT_THROW(llama_saved(2, Recompute::none, 2), ConfigError);
  EXPECT_THROW(llama_saved(2, Recompute::full, 0), ConfigError);
}

TEST(TrainTest, SelectiveRecomputeChecksTheCoreAttentionOnEveryPath) {
  // Megatron-LM's selective recomputation checkpoints the core attention: q, k and v stay, the
  // attention kernel runs again in the backward, and what only the core kept for its backward
  // is made again there. With FlashAttention that is the log-sum-exp, and under fp8 GEMMs the
  // attention output too (the output projection keeps its e4m3 copy). Per layer, on the
  // GPT-3-style block (s = 128, b = 2, h = 256, a = 8, sbh = 65,536; LayerNorm statistics
  // 2 x 2 x 4 x sb = 4,096 bytes, log-sum-exp 4 x abs = 8,192):
  //   16-bit, TP 1:        none 34sbh + 4,096 + 8,192, selective 34sbh + 4,096;
  //   TP 2 with SP:        half of each;
  //   CP 2 (64 tokens):    half of each; the K and V gathered over the sequence are not kept
  //                        (every policy gathers them again in the backward, as Megatron-LM's
  //                        context parallelism does), only this rank's chunk;
  //   fp8 GEMMs:           none 29sbh + 12h^2 + 12,288 (Fp8GemmsKeepOneByteCopiesForBackward),
  //                        selective 27sbh + 12h^2 + 4,096;
  // and full keeps each layer's input: 2sbh, sbh with SP or CP 2, 2sbh with fp8 (the weight
  // casts are made again in the backward).
  const int64_t sbh = 128 * 2 * 256, norms = 2 * 2 * 4 * 128 * 2, lse = 4 * 8 * 2 * 128;
  const int64_t casts = 12 * 256 * 256;
  auto per_layer = [](Recompute r, BuildOptions o) {
    o.phase = Phase::train;
    o.batch = 2;
    o.seq = 128;
    o.optimizer = Optimizer::none;
    o.recompute = r;
    auto saved = [&](int64_t layers) {
      const Graph g = build_graph(gpt3_style(layers), o);
      const MemoryProfile p = compute_memory_profile(g);
      for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
        if (g.node(i).op == "nll_loss_forward") return p.live_bytes_after[i] - p.resident_bytes;
      }
      return int64_t{-1};
    };
    return saved(3) - saved(2);
  };
  const BuildOptions plain, sp{.tensor_parallel = 2, .sequence_parallel = true}, cp{.context_parallel = 2};
  const BuildOptions fp8{.fp8_gemms = true};
  EXPECT_EQ(per_layer(Recompute::none, plain), 34 * sbh + norms + lse);
  EXPECT_EQ(per_layer(Recompute::selective, plain), 34 * sbh + norms);
  EXPECT_EQ(per_layer(Recompute::full, plain), 2 * sbh);
  EXPECT_EQ(per_layer(Recompute::none, sp), (34 * sbh + norms + lse) / 2);
  EXPECT_EQ(per_layer(Recompute::selective, sp), (34 * sbh + norms) / 2);
  EXPECT_EQ(per_layer(Recompute::full, sp), sbh);
  EXPECT_EQ(per_layer(Recompute::none, cp), (34 * sbh + norms + lse) / 2);
  EXPECT_EQ(per_layer(Recompute::selective, cp), (34 * sbh + norms) / 2);
  EXPECT_EQ(per_layer(Recompute::full, cp), sbh);
  EXPECT_EQ(per_layer(Recompute::none, fp8), 29 * sbh + casts + norms + lse);
  EXPECT_EQ(per_layer(Recompute::selective, fp8), 27 * sbh + casts + norms);
  EXPECT_EQ(per_layer(Recompute::full, fp8), 2 * sbh);
  // The attention kernel runs again in the backward, once per layer and query chunk (CP's
  // zigzag gives a rank two), and under CP its K and V are gathered again, once more when the
  // core is recomputed.
  auto nodes = [](Recompute r, BuildOptions o, const std::string& op) {
    o.phase = Phase::train;
    o.seq = 128;
    o.optimizer = Optimizer::none;
    o.recompute = r;
    return count(build_graph(gpt3_style(2), o), op, Pass::backward);
  };
  EXPECT_EQ(nodes(Recompute::none, plain, "accel_sim::attention"), 0);
  EXPECT_EQ(nodes(Recompute::selective, plain, "accel_sim::attention"), 2);
  EXPECT_EQ(nodes(Recompute::selective, cp, "accel_sim::attention"), 4);
  EXPECT_EQ(nodes(Recompute::none, cp, "accel_sim::all_gather"), 2 * 2);
  EXPECT_EQ(nodes(Recompute::selective, cp, "accel_sim::all_gather"), 2 * 4);
}

TEST(TrainTest, GradientsKeptBetweenStepsAreLiveFromTheFirstOp) {
  // zero_grad(set_to_none=False): one _foreach_zero_ over every gradient before the forward, so
  // at the loss (end of forward) the fp16 model's gradients (weights' bytes) are already live.
  const ModelSpec m = gpt3_style(2);
  const BuildOptions kept{.phase = Phase::train, .batch = 2, .seq = 128,
                          .optimizer = Optimizer::none, .persistent_gradients = true};
  const Graph g = build_graph(m, kept);
  ASSERT_EQ(g.node(0).op, "_foreach_zero_");
  EXPECT_EQ(g.node(0).pass, Pass::optimizer);
  int64_t parameter_bytes = 0;
  for (const Storage& st : g.storages()) {
    if (st.kind == StorageKind::parameter) parameter_bytes += st.size_bytes;
  }
  const Graph plain = build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128,
                                      .optimizer = Optimizer::none});
  const MemoryProfile with = compute_memory_profile(g);
  const MemoryProfile without = compute_memory_profile(plain);
  auto at_loss = [](const Graph& graph, const MemoryProfile& p) {
    for (NodeId i = 0; i < static_cast<NodeId>(graph.nodes().size()); ++i) {
      if (graph.node(i).op == "nll_loss_forward") return p.live_bytes_after[i];
    }
    return int64_t{-1};
  };
  // Mixed precision keeps fp32 gradients: 2x the fp16 weights' bytes.
  EXPECT_EQ(at_loss(g, with) - at_loss(plain, without), 2 * parameter_bytes);
}

TEST(TrainTest, TorchaosFloat8KeepsTheSixteenBitInputsAndCastsAgainInTheBackward) {
  // torchao's Float8Linear on the Llama-shaped toy's seven linears (q, k, v, o, gate, up, down):
  // each casts its own input and weight to e4m3, after an amax each (abs, then max): 14 casts and
  // 14 amaxes a layer, where Transformer Engine casts 4 distinct inputs (q, k and v share one,
  // gate and up one) and 7 weights and takes the amax in the cast. The backward casts the output
  // gradient to e5m2 (both, 7 a layer) and, under torchao only, the input and the weight again
  // (14 e4m3 casts, 21 amaxes). torchao keeps the 16-bit inputs, not fp8 copies: a layer keeps
  // exactly what the same step without fp8 keeps.
  const ModelSpec m{.name = "toy-llama", .hidden_size = 256, .num_layers = 2, .num_heads = 8,
                    .num_kv_heads = 8, .head_dim = 32, .ffn_size = 1024, .vocab_size = 1000,
                    .max_position_embeddings = 128};
  auto build = [&](bool fp8, Fp8Recipe recipe, int64_t layers) {
    ModelSpec spec = m;
    spec.num_layers = layers;
    return build_graph(spec, {.phase = Phase::train, .batch = 2, .seq = 128, .optimizer = Optimizer::none,
                              .fp8_gemms = fp8, .fp8_recipe = recipe});
  };
  auto casts = [](const Graph& g, Pass pass, DType to) {
    int n = 0;
    for (const Node& node : g.nodes()) {
      if (node.pass == pass && node.op == "_to_copy" && g.tensor(node.outputs[0]).dtype == to) ++n;
    }
    return n;
  };
  auto per_layer = [&](auto f) { return f(build(true, Fp8Recipe::torchao, 3)) - f(build(true, Fp8Recipe::torchao, 2)); };
  auto te_per_layer = [&](auto f) {
    return f(build(true, Fp8Recipe::transformer_engine, 3)) - f(build(true, Fp8Recipe::transformer_engine, 2));
  };
  auto fwd_e4m3 = [&](const Graph& g) { return casts(g, Pass::forward, DType::fp8_e4m3); };
  auto bwd_e4m3 = [&](const Graph& g) { return casts(g, Pass::backward, DType::fp8_e4m3); };
  auto bwd_e5m2 = [&](const Graph& g) { return casts(g, Pass::backward, DType::fp8_e5m2); };
  auto fwd_max = [&](const Graph& g) { return count(g, "max", Pass::forward); };
  auto bwd_max = [&](const Graph& g) { return count(g, "max", Pass::backward); };
  EXPECT_EQ(per_layer(fwd_e4m3), 14);
  EXPECT_EQ(te_per_layer(fwd_e4m3), 11);
  EXPECT_EQ(per_layer(fwd_max), 14);
  EXPECT_EQ(te_per_layer(fwd_max), 0);
  EXPECT_EQ(per_layer(bwd_e5m2), 7);
  EXPECT_EQ(te_per_layer(bwd_e5m2), 7);
  EXPECT_EQ(per_layer(bwd_e4m3), 14);
  EXPECT_EQ(te_per_layer(bwd_e4m3), 0);
  EXPECT_EQ(per_layer(bwd_max), 21);
  EXPECT_EQ(per_layer([&](const Graph& g) { return count(g, "_scaled_mm", Pass::backward); }), 14);
  auto saved = [&](const Graph& g) {
    const MemoryProfile p = compute_memory_profile(g);
    for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
      const std::string& op = g.node(i).op;
      if (op == "nll_loss_forward" || op == "accel_sim::cross_entropy") return p.live_bytes_after[i] - p.resident_bytes;
    }
    return int64_t{-1};
  };
  const int64_t bf16 = saved(build(false, Fp8Recipe::transformer_engine, 3)) - saved(build(false, Fp8Recipe::transformer_engine, 2));
  EXPECT_EQ(per_layer(saved), bf16);
  // The recipe is refused where nothing is cast to fp8.
  EXPECT_THROW(build(false, Fp8Recipe::torchao, 2), ConfigError);
}

TEST(TrainTest, Fp8GemmsKeepOneByteCopiesForBackward) {
  // Transformer Engine's recipe on the GPT-3-style block (h = 256, sbh = 65,536): the backward
  // keeps fp8 copies of the four linears' inputs (QKV input sbh, attention output sbh, FC1 input
  // sbh, FC2 input 4sbh) instead of their 16-bit selves, and the fp8 weights (12 h^2 bytes).
  // Still 16-bit: the LayerNorm inputs (2 x 2sbh), q, k, v (6sbh), the attention output
  // FlashAttention reads (2sbh), the GELU input (8sbh), the dropout masks (2 x sbh): 29sbh.
  const int64_t sbh = 128 * 2 * 256;
  const int64_t statistics = 2 * 2 * 4 * 128 * 2 + 4 * 8 * 2 * 128;
  auto saved = [](int64_t layers) {
    const Graph g = build_graph(gpt3_style(layers), {.phase = Phase::train, .batch = 2, .seq = 128,
                                                     .optimizer = Optimizer::none,
                                                     .fp8_gemms = true});
    const MemoryProfile p = compute_memory_profile(g);
    for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
      if (g.node(i).op == "nll_loss_forward") return p.live_bytes_after[i] - p.resident_bytes;
    }
    return int64_t{-1};
  };
  EXPECT_EQ(saved(3) - saved(2), 29 * sbh + 12 * 256 * 256 + statistics);
  // Every block GEMM, forward and backward, is an fp8 GEMM: 4 per layer forward, 8 backward.
  const Graph g = build_graph(gpt3_style(2), {.phase = Phase::train, .batch = 2, .seq = 128,
                                              .optimizer = Optimizer::none, .fp8_gemms = true});
  EXPECT_EQ(count(g, "_scaled_mm", Pass::forward), 8);
  EXPECT_EQ(count(g, "_scaled_mm", Pass::backward), 16);
  for (const Node& n : g.nodes()) {
    if (n.op != "_scaled_mm") continue;
    const DType in = g.tensor(n.inputs[0]).dtype;
    EXPECT_TRUE(in == DType::fp8_e4m3 || in == DType::fp8_e5m2) << n.module_path;
  }
  // The model FLOPs stay (but for the bias adds, which now run beside the fp8 GEMM); at a
  // GEMM-bound size (h = 4096, 8192 tokens) on a device whose fp8 peak is twice its fp16 one
  // the step is faster, while at h = 256 the casts make it slower.
  DeviceSpec d = testing::round_device();
  d.fp8_matrix_flops_per_s = 200e12;
  ModelSpec big = gpt3_style(2);
  big.hidden_size = 4096;
  big.num_heads = big.num_kv_heads = 32;
  big.head_dim = 128;
  big.ffn_size = 16384;
  big.max_position_embeddings = 2048;
  auto step = [&](const ModelSpec& m, int64_t seq, bool fp8) {
    return simulate(build_graph(m, {.phase = Phase::train, .batch = 4, .seq = seq,
                                    .optimizer = Optimizer::none, .fp8_gemms = fp8}),
                    d, SimulateOptions{});
  };
  const SimulationResult fast = step(big, 2048, true), slow = step(big, 2048, false);
  EXPECT_NEAR(fast.model_flops / slow.model_flops, 1.0, 1e-3);
  EXPECT_LT(fast.latency_s, 0.8 * slow.latency_s);
  EXPECT_GT(step(gpt3_style(2), 128, true).latency_s, step(gpt3_style(2), 128, false).latency_s);
  // fp8 GEMMs have no HF-eager form and exclude int4 weights.
  EXPECT_THROW(build_graph(gpt3_style(2), {.phase = Phase::prefill, .seq = 128,
                                           .kernels = KernelStyle::hf_eager, .fp8_gemms = true}),
               ConfigError);
  ModelSpec int4 = gpt3_style(2);
  int4.int4_group_size = 128;
  EXPECT_THROW(build_graph(int4, {.phase = Phase::prefill, .seq = 128, .fp8_gemms = true}),
               ConfigError);
}

TEST(TrainTest, Fp8WeightCastsAreMarkedOncePerStep) {
  // Transformer Engine casts each weight to fp8 on a step's first micro-batch only: the builder
  // marks the forward weight casts, one per block linear (QKV, proj, FC1, FC2: 4 per layer), and
  // nothing in the backward (dgrad and wgrad read the forward's fp8 weight through a transposed
  // view; no re-cast). With the cache, 4 micro-batches run them once: 3 x their time less.
  const Graph g = build_graph(gpt3_style(2), {.phase = Phase::train, .batch = 2, .seq = 128,
                                              .fp8_gemms = true});
  int marked = 0;
  for (const Node& n : g.nodes()) {
    if (!n.attr_bool("once_per_step", false)) continue;
    ++marked;
    EXPECT_EQ(n.op, "_to_copy");
    EXPECT_EQ(n.pass, Pass::forward);
    EXPECT_EQ(g.storage(g.tensor(n.inputs[0]).storage).kind, StorageKind::parameter);
  }
  EXPECT_EQ(marked, 8);
  DeviceSpec d = testing::round_device();
  d.fp8_matrix_flops_per_s = 200e12;
  SimulateOptions o;
  o.micro_batches = 4;
  const SimulationResult every = simulate(g, d, o);
  o.fp8_weight_cache = true;
  const SimulationResult cached = simulate(g, d, o);
  double casts = 0;
  for (const OpResult& op : cached.ops) {
    if (g.node(op.node).attr_bool("once_per_step", false)) casts += op.cost.time_s;
  }
  EXPECT_GT(casts, 0.0);
  EXPECT_NEAR(cached.once_per_step_time_s, casts, 1e-15);
  EXPECT_NEAR(every.latency_s - cached.latency_s, 3 * casts, 1e-12);
  EXPECT_NEAR(every.forward_time_s - cached.forward_time_s, 3 * casts, 1e-12);
  EXPECT_EQ(every.backward_time_s, cached.backward_time_s);
  EXPECT_EQ(every.optimizer_time_s, cached.optimizer_time_s);
}

TEST(TrainTest, GradientAccumulationRunsForwardAndBackwardPerMicroBatch) {
  // 4 micro-batches: forward and backward time, FLOPs and model FLOPs 4x, the optimizer once.
  const DeviceSpec d = testing::round_device();
  const Graph g = build_graph(gpt3_style(2), {.phase = Phase::train, .batch = 2, .seq = 128,
                                              .persistent_gradients = true});
  const SimulationResult one = simulate(g, d, SimulateOptions{});
  SimulateOptions four;
  four.micro_batches = 4;
  const SimulationResult acc = simulate(g, d, four);
  EXPECT_DOUBLE_EQ(acc.forward_time_s, 4 * one.forward_time_s);
  EXPECT_DOUBLE_EQ(acc.backward_time_s, 4 * one.backward_time_s);
  EXPECT_DOUBLE_EQ(acc.optimizer_time_s, one.optimizer_time_s);
  EXPECT_NEAR(acc.latency_s, acc.forward_time_s + acc.backward_time_s + acc.optimizer_time_s, 1e-15);
  EXPECT_DOUBLE_EQ(acc.model_flops, 4 * one.model_flops);
  EXPECT_EQ(acc.memory.peak_bytes, one.memory.peak_bytes);
  four.micro_batches = 0;
  EXPECT_THROW(simulate(g, d, four), ConfigError);
}

TEST(TrainTest, FullRecomputeRunsEachLayerForwardAgainInBackward) {
  // The recomputed forward doubles the layers' forward GEMMs (8 per layer: c_attn, c_proj, c_fc,
  // c_proj in forward and again in backward); the lm_head's is not repeated. The step's
  // gradients and FLOPs otherwise stay those of the step without recompute.
  const ModelSpec m = gpt3_style(2);
  const Graph plain = build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128,
                                      .optimizer = Optimizer::none});
  const Graph full = build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128,
                                     .optimizer = Optimizer::none, .recompute = Recompute::full});
  int recomputed = 0;
  double layer_forward_flops = 0;
  for (const Node& n : full.nodes()) {
    if (!n.attr_bool("recompute", false)) continue;
    ++recomputed;
    EXPECT_EQ(n.pass, Pass::backward);
    EXPECT_EQ(n.module_path.rfind("model.layers.", 0), 0u) << n.module_path;
    const OpCount c = count_op(full, n);
    if (c.op_class == OpClass::matmul) layer_forward_flops += c.flops;
  }
  int layer_nodes = 0;
  for (const Node& n : plain.nodes()) {
    layer_nodes += n.pass == Pass::forward && n.module_path.rfind("model.layers.", 0) == 0;
  }
  EXPECT_EQ(recomputed, layer_nodes);
  // Per layer 2 * tokens * (3h^2 + h^2 + 4h^2 + 4h^2) FLOPs of GEMMs plus their bias adds,
  // tokens * (3h + h + 4h + h); two layers, 256 tokens, h = 256.
  EXPECT_DOUBLE_EQ(layer_forward_flops, 2 * (2.0 * 256 * 12 * 256 * 256 + 256.0 * 9 * 256));
  EXPECT_DOUBLE_EQ(sums(full).matmul, sums(plain).matmul + layer_forward_flops);
  // What the forward leaves for the backward (at the loss): each layer's input alone.
  EXPECT_LT(saved_activations(2, Recompute::full), saved_activations(2, Recompute::none));
}

TEST(TrainTest, TensorParallelPadsAVocabularyItDoesNotDivide) {
  // GPT-2's 50,257 tokens under TP 4: padded to 50,688 (99 x 512, a multiple of 128 x 4), 12,672
  // per rank.
  ModelSpec m = gpt3_style(2);
  m.vocab_size = 50257;
  const Graph g = build_graph(m, {.phase = Phase::train, .batch = 1, .seq = 128, .tensor_parallel = 4});
  bool found = false;
  for (const TensorMeta& t : g.tensors()) {
    if (t.name == "model.embed_tokens.weight") {
      EXPECT_EQ(t.shape[0], 12672);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(TrainTest, UnusedParametersGetNoGradientAndNoOptimizerState) {
  // ViT's pooler runs in the forward but feeds no loss (MSE on the last hidden state): its
  // 4096 * 4096 + 4096 parameters get no gradient and no optimizer state.
  const ModelSpec m = testing::vit_era5();
  const Graph g = build_graph(m, {.phase = Phase::train, .batch = 1});
  const Sums s = sums(g);
  const int64_t params = s.parameter_bytes / 2;
  const int64_t pooler = int64_t{4096} * 4096 + 4096;
  EXPECT_EQ(s.gradient_bytes, 4 * (params - pooler));
  EXPECT_EQ(s.state_bytes, 12 * (params - pooler));
  // The patch embedding's weight gradient is a convolution backward; the pixels need none.
  EXPECT_EQ(count(g, "convolution_backward", Pass::backward), 1);
}

TEST(TrainTest, TensorParallelBackwardAllReducesTheColumnInputs) {
  // TP 2 without SP: forward all-reduces after o_proj and down_proj (2 per layer) and after the
  // vocabulary-parallel embedding; backward all-reduces the gradients of the inputs of the
  // column-parallel q/k/v and gate/up projections (2 per layer) and of the LM head; the
  // cross-entropy all-reduces its row statistics once. 2*32 + 1 + 2*32 + 1 + 1 = 131.
  const ModelSpec m = testing::llama3_8b();
  const Graph g = build_graph(m, {.phase = Phase::train, .seq = 256, .tensor_parallel = 2});
  EXPECT_EQ(count(g, "accel_sim::all_reduce", Pass::forward), 2 * 32 + 1 + 1);
  EXPECT_EQ(count(g, "accel_sim::all_reduce", Pass::backward), 2 * 32 + 1);
  EXPECT_DOUBLE_EQ(sums(g).matmul, 6 * kLlamaMatmulParams * 256 / 2);
  // With SP every all-gather becomes a reduce-scatter in backward and vice versa:
  // forward 2*32 + 1 all-gathers (before each column-parallel block and the LM head) and
  // 2*32 + 1 reduce-scatters (after each row-parallel block and the embedding).
  const Graph sp = build_graph(m, {.phase = Phase::train, .seq = 256, .tensor_parallel = 2,
                                   .sequence_parallel = true});
  EXPECT_EQ(count(sp, "accel_sim::all_gather", Pass::forward), 65);
  EXPECT_EQ(count(sp, "accel_sim::reduce_scatter", Pass::forward), 65);
  EXPECT_EQ(count(sp, "accel_sim::reduce_scatter", Pass::backward), 65);
  // Backward all-gathers: the 65 gradients of the forward reduce-scatters, and each forward
  // gather again from its saved 1/tp shard for the weight gradients (65), so that only the shard
  // is kept between forward and backward (Korthikanti et al. 2022, sec. 4.2.2).
  EXPECT_EQ(count(sp, "accel_sim::all_gather", Pass::backward), 65 + 65);
  EXPECT_EQ(count(sp, "accel_sim::all_reduce", Pass::backward), 0);
}

TEST(TrainTest, MoeAndMlaBackwardDoublesEveryGemm) {
  // Every GEMM's backward is a dgrad and a wgrad of its own size, grouped expert GEMMs included.
  for (const ModelSpec& m : {testing::mixtral_8x7b(), testing::deepseek_v3()}) {
    const Sums s = sums(build_graph(m, {.phase = Phase::train, .seq = 128}));
    EXPECT_DOUBLE_EQ(s.matmul, 3 * s.forward_matmul) << m.name;
  }
}

TEST(TrainTest, MlaContextParallelismBalancesCausalAttention) {
  // DeepSeek-V3 under CP 2 gathers the latent cache and gives rank 0 the zigzag chunks: half the
  // causal attention of the whole sequence, forward and backward.
  const ModelSpec m = testing::deepseek_v3();
  for (Phase phase : {Phase::prefill, Phase::train}) {
    const double whole = sums(build_graph(m, {.phase = phase, .seq = 512})).attention;
    const Graph g = build_graph(m, {.phase = phase, .seq = 512, .context_parallel = 2});
    EXPECT_DOUBLE_EQ(sums(g).attention, whole / 2);
    EXPECT_EQ(count(g, "accel_sim::all_gather", Pass::forward), 2 * 61);  // latent, RoPE key
  }
}

TEST(TrainTest, HfEagerStepsDifferentiateTheEagerOpsAsAutogradDoes) {
  // HF's eager Llama: each RMSNorm runs pow, mean, rsqrt op by op (32 layers x 2 + the final
  // norm = 65), and rotate_half negates half of q and of k in every layer (64). Autograd's
  // backward: pow -> pow, scalar mul, mul; rsqrt -> mul, pow, mul; mean -> one div; neg -> neg.
  const Graph g = build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 128,
                                                      .kernels = KernelStyle::hf_eager});
  EXPECT_EQ(count(g, "rsqrt", Pass::forward), 65);
  EXPECT_EQ(count(g, "pow", Pass::forward), 65);
  EXPECT_EQ(count(g, "pow", Pass::backward), 2 * 65);
  EXPECT_EQ(count(g, "neg", Pass::forward), 64);
  EXPECT_EQ(count(g, "neg", Pass::backward), 64);
}

TEST(TrainTest, RejectsWhatItDoesNotModel) {
  ModelSpec m = testing::llama3_8b();
  m.weight_dtype = DType::int8;
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 128}), ConfigError);
  EXPECT_EQ(step_kv_cache_bytes(testing::llama3_8b(), {.phase = Phase::train, .seq = 128}), 0);
}

TEST(TrainTest, ExpertImbalanceLoadsTheBusiestRank) {
  // Mixtral under EP 2, 128 tokens x top-2 = 256 routed rows per rank on average: with an
  // imbalance of 1.5 the busiest rank receives 384, and its grouped expert GEMMs (forward and
  // backward) and the all-to-all into them grow by exactly 1.5.
  const ModelSpec m = testing::mixtral_8x7b();
  auto expert_flops = [&](double imbalance) {
    const Graph g = build_graph(m, {.phase = Phase::train, .seq = 128, .expert_parallel = 2,
                                    .expert_imbalance = imbalance});
    double flops = 0;
    for (const Node& n : g.nodes()) {
      if (n.op == "_grouped_mm") flops += count_op(g, n).flops;
    }
    return flops;
  };
  EXPECT_DOUBLE_EQ(expert_flops(1.5), 1.5 * expert_flops(1.0));
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 128, .expert_parallel = 2, .expert_imbalance = 0.5}),
               ConfigError);
}

TEST(TrainTest, FusedGatedActivationKeepsGateAndUpOnly) {
  // A Llama-style block (h = 256, FFN 704) and a MoE one (4 experts of 352, top-2), b = 2, s = 128:
  // t = 256 tokens, bf16. Unfused, the product's backward keeps silu(gate) [t, 704] beside gate
  // and up: 256 x 704 x 2 = 360,448 bytes per layer more than the fused kernel, which keeps gate
  // and up only. The MoE layer routes 2t = 512 rows through [rows, 352]: 512 x 352 x 2 = 360,448
  // bytes. The fused forward kernel reads gate and up and writes the product (3 x 360,448 bytes
  // for the dense FFN); its backward reads dy, gate and up and writes two gradients (5 x).
  ModelSpec dense{.name = "small-llama", .hidden_size = 256, .num_heads = 8, .num_kv_heads = 2,
                  .head_dim = 32, .ffn_size = 704, .vocab_size = 1000,
                  .max_position_embeddings = 512};
  ModelSpec moe = dense;
  moe.moe = MoeSpec{.num_experts = 4, .top_k = 2, .expert_ffn_size = 352, .normalize_top_k = true};
  auto per_layer = [](ModelSpec m, bool fused) {
    auto saved = [&](int64_t layers) {
      m.num_layers = layers;
      const Graph g = build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128,
                                      .optimizer = Optimizer::none,
                                      .fused_gated_activation = fused});
      const MemoryProfile p = compute_memory_profile(g);
      for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
        if (g.node(i).op == "nll_loss_forward") return p.live_bytes_after[i] - p.resident_bytes;
      }
      return int64_t{-1};
    };
    return saved(3) - saved(2);
  };
  EXPECT_EQ(per_layer(dense, false) - per_layer(dense, true), 360448);
  EXPECT_EQ(per_layer(moe, false) - per_layer(moe, true), 360448);

  dense.num_layers = 1;
  const Graph g = build_graph(dense, {.phase = Phase::train, .batch = 2, .seq = 128,
                                      .optimizer = Optimizer::none,
                                      .fused_gated_activation = true});
  int forward = 0, backward = 0;
  for (const Node& n : g.nodes()) {
    EXPECT_NE(n.op, "silu") << "the fused FFN runs no separate activation";
    if (n.op == "accel_sim::gated_activation") {
      ++forward;
      const OpCount c = count_op(g, n);
      EXPECT_EQ(c.bytes_read + c.bytes_written, 3 * 360448);
    } else if (n.op == "accel_sim::gated_activation_backward") {
      ++backward;
      const OpCount c = count_op(g, n);
      EXPECT_EQ(c.bytes_read + c.bytes_written, 5 * 360448);
    }
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(backward, 1);
  EXPECT_THROW(build_graph(dense, {.kernels = KernelStyle::hf_eager, .fused_gated_activation = true}),
               ConfigError);
}

// A Llama-style model for the loss tests (h = 256, vocab 1000, two layers): a training step at
// b = 2, s = 128 (256 rows of logits) under the loss `loss`, no optimizer.
Graph small_llama_loss_step(CrossEntropy loss) {
  ModelSpec m{.name = "small-llama", .hidden_size = 256, .num_heads = 8, .num_kv_heads = 2,
              .head_dim = 32, .ffn_size = 704, .vocab_size = 1000, .max_position_embeddings = 512};
  m.num_layers = 2;
  return build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128, .optimizer = Optimizer::none,
                         .cross_entropy = loss});
}

// The first node running `op`.
NodeId node_of(const Graph& g, const char* op) {
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
    if (g.node(i).op == op) return i;
  }
  ADD_FAILURE() << "no " << op;
  return NodeId{0};
}

TEST(TrainTest, FusedCrossEntropyReadsTheSixteenBitLogitsOnce) {
  // A Llama-style model (h = 256, vocab 1000), b = 2, s = 128: 256 rows of bf16 logits,
  // 256 x 1000 x 2 = 512,000 bytes. The fused loss reads them and the int64 labels (2,048 bytes)
  // and writes the fp32 loss (4) and each row's log-sum-exp (1,024); its backward reads dy (4),
  // the logits, the log-sum-exp and the labels and writes the logits' gradient in bf16 (512,000).
  // No fp32 tensor of the logits' size is made: where the upcast loss keeps an fp32 log-softmax
  // (1,024,000 bytes) for its backward, the fused one keeps the bf16 logits (512,000), so the
  // fused step peaks at least 512,000 bytes lower.
  const Graph g = small_llama_loss_step(CrossEntropy::fused);
  int forward = 0, backward = 0;
  for (const Node& n : g.nodes()) {
    EXPECT_NE(n.op, "_log_softmax");
    EXPECT_NE(n.op, "nll_loss_forward");
    const OpCount c = count_op(g, n);
    if (n.op == "accel_sim::cross_entropy") {
      ++forward;
      EXPECT_EQ(c.bytes_read, 512000 + 2048);
      EXPECT_EQ(c.bytes_written, 4 + 1024);
    } else if (n.op == "accel_sim::cross_entropy_backward") {
      ++backward;
      EXPECT_EQ(c.bytes_read, 4 + 512000 + 1024 + 2048);
      EXPECT_EQ(c.bytes_written, 512000);
    }
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(backward, 1);
  for (const TensorMeta& t : g.tensors()) {
    const bool logits_sized = t.shape == std::vector<int64_t>{256, 1000};
    EXPECT_FALSE(t.dtype == DType::fp32 && logits_sized);
  }
  const Graph upcast = small_llama_loss_step(CrossEntropy::upcast);
  EXPECT_EQ(count(upcast, "_log_softmax", Pass::forward), 1);
  // At the loss (the step's peak is at its end, where every gradient is live), beside the same
  // rest: the upcast loss's fp32 log-softmax (1,024,000) and nll_loss's total_weight (4) against
  // the fused loss's bf16 logits (512,000) and log-sum-exp (1,024).
  auto at_loss = [](const Graph& graph, const char* loss) {
    return compute_memory_profile(graph).live_bytes_after[node_of(graph, loss)];
  };
  EXPECT_EQ(at_loss(upcast, "nll_loss_forward") - at_loss(g, "accel_sim::cross_entropy"),
            1024000 + 4 - 512000 - 1024);
  ModelSpec m{.name = "small-llama", .hidden_size = 256, .num_heads = 8, .num_kv_heads = 2,
              .head_dim = 32, .ffn_size = 704, .vocab_size = 1000, .max_position_embeddings = 512};
  EXPECT_THROW(build_graph(m, {.phase = Phase::prefill, .seq = 8, .cross_entropy = CrossEntropy::fused}), ConfigError);
}

TEST(TrainTest, HfBertTakesItsMaskedLmLossInTheLogitsDtypeUnlessAutocastUpcasts) {
  // BertForMaskedLM calls CrossEntropyLoss on its prediction scores as they are: a bf16 step
  // under HF's eager kernels has a bf16 log-softmax and no fp32 tensor of the logits' size
  // (2 x 64 rows x 1,000); with master weights (autocast) the loss is upcast as a causal LM's.
  ModelSpec bert{.name = "small-bert", .family = "bert", .causal = false, .hidden_size = 64,
                 .num_layers = 1, .num_heads = 4, .num_kv_heads = 4, .head_dim = 16,
                 .ffn_size = 256, .vocab_size = 1000, .max_position_embeddings = 128,
                 .activation = Activation::gelu, .gated_ffn = false, .norm = NormKind::layer_norm,
                 .rotary = false, .learned_positions = true, .post_norm = true,
                 .type_vocab_size = 2, .embedding_norm = true, .final_norm = false,
                 .lm_head_transform = true, .lm_head_bias = true, .tied_embeddings = true,
                 .qkv_bias = true, .output_bias = true, .ffn_bias = true};
  auto fp32_logits = [](const Graph& g) {
    int n = 0;
    for (const TensorMeta& t : g.tensors()) n += t.dtype == DType::fp32 && t.shape == std::vector<int64_t>{128, 1000};
    return n;
  };
  auto log_softmax_dtype = [](const Graph& g) {
    for (const Node& n : g.nodes()) {
      if (n.op == "_log_softmax") return g.tensor(n.outputs[0]).dtype;
    }
    ADD_FAILURE() << "no _log_softmax";
    return DType::fp32;
  };
  const Graph own = build_graph(bert, {.phase = Phase::train, .batch = 2, .seq = 64, .kernels = KernelStyle::hf_eager,
                                       .optimizer = Optimizer::none, .master_weights = false});
  EXPECT_EQ(log_softmax_dtype(own), DType::bf16);
  EXPECT_EQ(fp32_logits(own), 0);
  const Graph amp = build_graph(bert, {.phase = Phase::train, .batch = 2, .seq = 64, .kernels = KernelStyle::hf_eager,
                                       .optimizer = Optimizer::none, .master_weights = true});
  EXPECT_EQ(log_softmax_dtype(amp), DType::fp32);
  EXPECT_GT(fp32_logits(amp), 0);
}

TEST(TrainTest, TheUpcastLossHoldsThreeFp32LogitsAtItsBackwardMegatronsOne) {
  // The same model and shape: 256 rows x 1,000 logits, 512,000 bytes in bf16, 1,024,000 in fp32.
  // PyTorch's cross_entropy of logits.float(): the fp32 copy dies at the log-softmax, which keeps
  // its fp32 output; the backward's nll_loss_backward writes an fp32 gradient of it (1,024,000)
  // and _log_softmax_backward_data another (1,024,000) while the log-softmax is still read:
  // 2,048,000 bytes more live there than after the forward's loss. Megatron-LM's
  // vocab-parallel loss keeps its fp32 softmax and writes the gradient over it: nothing of the
  // logits' size is allocated in its backward, and the forward's copy is its only fp32 tensor of
  // that size.
  auto fp32_logit_storages = [](const Graph& g) {
    std::set<StorageId> s;
    for (const TensorMeta& t : g.tensors()) {
      if (t.dtype == DType::fp32 && t.shape == std::vector<int64_t>{256, 1000}) s.insert(t.storage);
    }
    return s.size();
  };
  const Graph upcast = small_llama_loss_step(CrossEntropy::upcast);
  const MemoryProfile up = compute_memory_profile(upcast);
  const NodeId cast = node_of(upcast, "_to_copy"), lsb = node_of(upcast, "_log_softmax_backward_data");
  EXPECT_EQ(upcast.node(cast).pass, Pass::forward);
  EXPECT_EQ(count_op(upcast, upcast.node(cast)).bytes_written, 1024000);
  // Give or take a few scalars (the loss's dy; nll_loss's total weight, which its backward reads
  // last).
  const int64_t grown = up.live_bytes[lsb] - up.live_bytes_after[node_of(upcast, "nll_loss_forward")];
  EXPECT_GE(grown, 2048000 - 16);
  EXPECT_LE(grown, 2048000 + 16);
  EXPECT_EQ(fp32_logit_storages(upcast), 4u);  // the copy, the log-softmax, the two gradients

  const Graph megatron = small_llama_loss_step(CrossEntropy::vocab_parallel);
  const MemoryProfile mp = compute_memory_profile(megatron);
  const NodeId loss = node_of(megatron, "accel_sim::cross_entropy");
  const NodeId back = node_of(megatron, "accel_sim::cross_entropy_backward");
  EXPECT_EQ(count_op(megatron, megatron.node(loss)).bytes_read, 1024000 + 2048);  // the fp32 copy, the labels
  const int64_t held = mp.live_bytes[back] - mp.live_bytes_after[loss];
  EXPECT_GE(held, -16);
  EXPECT_LE(held, 16);
  EXPECT_EQ(fp32_logit_storages(megatron), 1u);
  // After its forward the loss holds the copy (1,024,000) and the rows' log-sum-exp (1,024)
  // where the upcast loss holds its log-softmax (1,024,000) and nll_loss's total weight (4).
  EXPECT_EQ(mp.live_bytes_after[loss] - up.live_bytes_after[node_of(upcast, "nll_loss_forward")], 1024 - 4);
}

TEST(TrainTest, Fp8ParametersAndWeightDtypeGradients) {
  // One Llama-style layer (h = 256, 8 heads and 2 KV heads of 32, FFN 704, vocab 1000, untied
  // head), bf16 weights, AdamW with fp32 master weights. The layer's linears hold q 256 x 256,
  // k and v 2 x 64 x 256, o 256 x 256, gate, up and down 3 x 704 x 256: 704,512 weights; with its
  // two norms 705,024; the model N = 256,000 (embedding) + 705,024 + 256 (final norm) + 256,000
  // (head) = 1,217,280 parameters.
  //   fp8 parameters: the linears' weights in e4m3, 704,512 bytes less than in bf16, and no
  //   weight cast runs;
  //   gradients in the weight dtype: 2N bytes of gradients instead of the fp32 4N.
  ModelSpec m{.name = "small-llama", .hidden_size = 256, .num_layers = 1, .num_heads = 8,
              .num_kv_heads = 2, .head_dim = 32, .ffn_size = 704, .vocab_size = 1000,
              .max_position_embeddings = 512};
  const int64_t n = 1217280;
  auto built = [&](bool fp8_parameters, bool bf16_grads) {
    return build_graph(m, {.phase = Phase::train, .batch = 2, .seq = 128, .fp8_gemms = true,
                           .fp8_parameters = fp8_parameters,
                           .gradients_in_weight_dtype = bf16_grads});
  };
  auto casts = [](const Graph& g) {
    int k = 0;
    for (const Node& node : g.nodes()) k += node.attr_int("once_per_step", 0) != 0;
    return k;
  };
  const Sums cast = sums(built(false, false)), stored = sums(built(true, false));
  EXPECT_EQ(cast.parameter_bytes - stored.parameter_bytes, 704512);
  EXPECT_EQ(cast.parameter_bytes, 2 * n);
  EXPECT_EQ(casts(built(false, false)), 7);
  EXPECT_EQ(casts(built(true, false)), 0);
  EXPECT_EQ(cast.gradient_bytes, 4 * n);
  EXPECT_EQ(sums(built(false, true)).gradient_bytes, 2 * n);
  EXPECT_THROW(build_graph(m, {.phase = Phase::prefill, .fp8_gemms = true, .fp8_parameters = true}),
               ConfigError);
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .fp8_parameters = true}), ConfigError);
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .master_weights = false,
                               .gradients_in_weight_dtype = true}),
               ConfigError);
}

// LoRA (BuildOptions::lora_rank 16) on Llama-3-8B (hidden 4096, q 4096, k and v 1024 wide,
// FFN 14336), one sequence of 1,024 tokens. Per layer the adapters hold A [16, in] and
// B [out, 16] beside q, k, v, o, gate, up (in 4096) and down (in 14336):
// A 16 x (6 x 4096 + 14336) = 622,592 and B 16 x (4096 + 1024 + 1024 + 4096 + 14336 + 14336 +
// 4096) = 16 x 43,008 = 688,128 parameters, 1,310,720 in all; 41,943,040 over 32 layers.
TEST(TrainTest, LoraTrainsTheAdaptersAlone) {
  constexpr double kTokens = 1024;
  constexpr double kA = 32.0 * 622592, kB = 32.0 * 688128, kAdapters = kA + kB;
  ASSERT_EQ(kAdapters, 41943040.0);
  const Graph g = build_graph(testing::llama3_8b(),
                              {.phase = Phase::train, .batch = 1, .seq = 1024, .lora_rank = 16});
  const Sums s = sums(g);
  // Gradients and optimizer states of the adapters only: fp32 gradients, and fp32 masters with
  // two fp32 moments (12 bytes) per adapter parameter; the base's bf16 weights plus the adapters'.
  EXPECT_EQ(s.gradient_bytes, static_cast<int64_t>(kAdapters) * 4);
  EXPECT_EQ(s.state_bytes, static_cast<int64_t>(kAdapters) * 12);
  EXPECT_EQ(s.parameter_bytes, kLlamaParams * 2 + static_cast<int64_t>(kAdapters) * 2);
  // The model's parameters are frozen storages, the adapters' are not (what a sharded optimizer
  // gathers back).
  int64_t trainable = 0;
  for (const Storage& st : g.storages()) {
    if (st.kind == StorageKind::parameter && !st.frozen) trainable += st.size_bytes;
  }
  EXPECT_EQ(trainable, static_cast<int64_t>(kAdapters) * 2);
  // The base's GEMMs run forward and dgrad, no wgrad; layer 0's q, k and v take no dgrad either
  // (their input, the frozen embedding's normalized output, needs no gradient): 4096 x (4096 +
  // 2 x 1024) = 25,165,824 weights. The adapters run forward and wgrad, B its dgrad, and A its
  // dgrad except beside layer 0's q, k and v (3 x 16 x 4096 = 196,608 weights).
  const double base = (4 * kLlamaMatmulParams - 2 * 25165824.0) * kTokens;
  const double adapters = (2 * kAdapters + 2 * kAdapters + 2 * kB + 2 * (kA - 196608)) * kTokens;
  EXPECT_DOUBLE_EQ(s.matmul, base + adapters);
  EXPECT_DOUBLE_EQ(s.forward_matmul, 2 * (kLlamaMatmulParams + kAdapters) * kTokens);

  // Shared inputs (Megatron-Core's fused linear_qkv and linear_fc1): one A for q, k and v and
  // one for gate and up, so A holds 16 x (3 x 4096 + 14336) = 425,984 per layer.
  const Graph shared = build_graph(testing::llama3_8b(), {.phase = Phase::train, .batch = 1, .seq = 1024,
                                                          .lora_rank = 16, .lora_shared_input = true});
  EXPECT_EQ(sums(shared).gradient_bytes, static_cast<int64_t>(32 * (425984 + 688128)) * 4);
}

// Under TP 2 with sequence parallelism the adapters beside o_proj and down_proj gather their
// B outputs [1024 tokens, 2048] to the full width [1024, 4096] (Megatron's ParallelLinearAdapter):
// two such all-gathers per layer in the forward, 64 in all, each moving 1024 x 4096 x 2 bytes.
TEST(TrainTest, LoraUnderTensorParallelismGathersTheRowParallelAdapters) {
  const Graph g = build_graph(testing::llama3_8b(),
                              {.phase = Phase::train, .batch = 1, .seq = 1024, .tensor_parallel = 2,
                               .sequence_parallel = true, .lora_rank = 16});
  int wide = 0, narrow = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != "accel_sim::all_gather" || n.pass != Pass::forward) continue;
    const TensorMeta& out = g.tensor(n.outputs[0]);
    if (out.shape == std::vector<int64_t>{1024, 4096}) ++wide;
    if (out.shape == std::vector<int64_t>{1024, 16}) ++narrow;  // A's [tokens, 8] halves, gathered
  }
  EXPECT_EQ(wide, 64);
  EXPECT_EQ(narrow, 32 * 5);  // beside q, k, v, gate and up
}

TEST(TrainTest, LoraRefusesWhatItDoesNotModel) {
  EXPECT_THROW(build_graph(testing::llama3_8b(), {.phase = Phase::prefill, .seq = 16, .lora_rank = 16}),
               ConfigError);
  EXPECT_THROW(build_graph(testing::mixtral_8x7b(), {.phase = Phase::train, .seq = 16, .lora_rank = 16}),
               ConfigError);
  EXPECT_THROW(build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 16, .tensor_parallel = 4,
                                                  .lora_rank = 6}),
               ConfigError);
  BuildOptions o{.phase = Phase::train, .seq = 16, .lora_rank = 16};
  o.lora_targets = {"fc9"};
  EXPECT_THROW(build_graph(testing::llama3_8b(), o), ConfigError);
  o.lora_targets = {"qkv_proj"};  // Llama's q, k and v are three linears
  EXPECT_THROW(build_graph(testing::llama3_8b(), o), ConfigError);
  EXPECT_THROW(build_graph(testing::llama3_8b(), {.phase = Phase::train, .seq = 16, .lora_shared_input = true}),
               ConfigError);
}

}  // namespace
}  // namespace accelsim
