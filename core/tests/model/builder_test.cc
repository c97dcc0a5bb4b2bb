#include "accelsim/builder.h"

#include <gtest/gtest.h>

#include "accelsim/error.h"
#include "accelsim/op_catalog.h"
#include "accelsim/simulate.h"

#include <limits>
#include <string>
#include <utility>
#include "testing/models.h"

namespace accelsim {
namespace {

struct Totals {
  double matrix_flops = 0;
  int64_t parameter_bytes = 0;
  int64_t buffer_bytes = 0;
  int attentions = 0;
};

Totals totals(const Graph& g) {
  Totals t;
  for (const Node& n : g.nodes()) {
    const OpCount c = count_op(g, n);
    EXPECT_TRUE(c.known) << n.op;
    if (uses_matrix_units(c.op_class)) t.matrix_flops += c.flops;
    if (n.op == "accel_sim::attention") ++t.attentions;
  }
  for (const Storage& s : g.storages()) {
    if (s.kind == StorageKind::parameter) t.parameter_bytes += s.size_bytes;
    if (s.kind == StorageKind::buffer) t.buffer_bytes += s.size_bytes;
  }
  return t;
}

// Llama-3-8B matmul weights excluding lm_head: 32 layers * 218,103,808 = 6,979,321,856.
constexpr double kLayerMatmulParams = 6979321856.0;
constexpr double kLmHeadParams = 525336576.0;  // 4096 * 128256

TEST(BuilderTest, HfEagerPrefillMatchesTheHandCount) {
  // batch 1, seq 2048: 2 * params * tokens for every matmul (logits for all tokens) plus
  // causal attention 4 * 32 heads * 2048*2049/2 pairs * 128 per layer.
  const Graph g = build_graph(testing::llama3_8b(),
                              {.phase = Phase::prefill, .seq = 2048, .kernels = KernelStyle::hf_eager});
  const Totals t = totals(g);
  const double attention = 32.0 * 4 * 32 * (2048.0 * 2049 / 2) * 128;
  EXPECT_DOUBLE_EQ(t.matrix_flops, 2 * (kLayerMatmulParams + kLmHeadParams) * 2048 + attention);
  EXPECT_EQ(t.attentions, 32);
  // Every weight is in the graph once: 8,030,261,248 bf16 parameters.
  EXPECT_EQ(t.parameter_bytes, 2 * 8030261248);
}

TEST(BuilderTest, FusedPrefillComputesLogitsForTheLastTokenOnly) {
  const Graph g = build_graph(testing::llama3_8b(), {.phase = Phase::prefill, .batch = 2, .seq = 512});
  const Totals t = totals(g);
  const double attention = 32.0 * 2 * 4 * 32 * (512.0 * 513 / 2) * 128;
  EXPECT_DOUBLE_EQ(t.matrix_flops, 2 * kLayerMatmulParams * 1024 + 2 * kLmHeadParams * 2 + attention);
  // The preallocated KV cache holds the 512 prompt tokens of both sequences.
  EXPECT_EQ(t.buffer_bytes - 8192 * 128 * 2, kv_cache_bytes(testing::llama3_8b(), 2, 512));
}

TEST(BuilderTest, DecodeReadsTheWholeCache) {
  // batch 8, 1000 cached tokens: each new query sees 1001 keys (non-causal, Sq = 1).
  const ModelSpec m = testing::llama3_8b();
  const Graph g = build_graph(m, {.phase = Phase::decode, .batch = 8, .context = 1000});
  const Totals t = totals(g);
  const double attention = 32.0 * 8 * 4 * 32 * 1001 * 128;
  EXPECT_DOUBLE_EQ(t.matrix_flops, 2 * (kLayerMatmulParams + kLmHeadParams) * 8 + attention);
  EXPECT_EQ(t.buffer_bytes - 8192 * 128 * 2, kv_cache_bytes(m, 8, 1001));
  // One rank of TP = 16 holds one of the 8 KV heads (replicated): 1/8 of the cache.
  EXPECT_EQ(step_kv_cache_bytes(m, {.phase = Phase::decode, .batch = 8, .context = 1000,
                                    .tensor_parallel = 16}),
            kv_cache_bytes(m, 8, 1001) / 8);
}

TEST(BuilderTest, TensorParallelismSplitsTheWork) {
  const ModelSpec m = testing::llama3_8b();
  const Totals one = totals(build_graph(m, {.phase = Phase::decode, .batch = 4, .context = 100}));
  const Totals two = totals(build_graph(m, {.phase = Phase::decode, .batch = 4, .context = 100,
                                            .tensor_parallel = 2}));
  EXPECT_DOUBLE_EQ(two.matrix_flops, one.matrix_flops / 2);
  // Norm weights are replicated: (8,030,261,248 - 65 * 4096) / 2 + 65 * 4096 per rank.
  EXPECT_EQ(two.parameter_bytes, 2 * ((8030261248 - 65 * 4096) / 2 + 65 * 4096));
  EXPECT_THROW(build_graph(m, {.phase = Phase::decode, .tensor_parallel = 3}), ConfigError);
}

// Bytes the grouped expert GEMMs of a graph read, over the bytes of all expert weights.
double expert_weight_fraction_read(const Graph& g) {
  double read = 0, weights = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != "_grouped_mm") continue;
    const TensorMeta& x = g.tensor(n.inputs[0]);
    const TensorMeta& w = g.tensor(n.inputs[1]);
    const TensorMeta& offsets = g.tensor(n.inputs[2]);
    read += count_op(g, n).bytes_read - x.accessed_bytes() - offsets.accessed_bytes();
    weights += w.accessed_bytes();
  }
  return read / weights;
}

TEST(BuilderTest, MoeDecodeReadsOnlyTheRoutedExperts) {
  // Batch 1: each layer's token reads its top-2 of 8 experts: 2/8 of the expert weights.
  const ModelSpec m = testing::mixtral_8x7b();
  const Graph one = build_graph(m, {.phase = Phase::decode, .batch = 1, .context = 16});
  EXPECT_NEAR(expert_weight_fraction_read(one), 0.25, 1e-12);
  // Batch 256: 8 * (1 - (3/4)^256) experts: all of them.
  const Graph many = build_graph(m, {.phase = Phase::decode, .batch = 256, .context = 16});
  EXPECT_NEAR(expert_weight_fraction_read(many), 1.0, 1e-12);
  // FLOPs count only the routed work: 2 experts * 2 * 3*4096*14336 per token per layer.
  double expert_flops = 0;
  for (const Node& n : one.nodes()) {
    if (n.op == "_grouped_mm") expert_flops += count_op(one, n).flops;
  }
  EXPECT_DOUBLE_EQ(expert_flops, 32.0 * 2 * 2 * 3 * 4096 * 14336);
}

TEST(BuilderTest, SequentialExpertsDoTheSameWork) {
  const ModelSpec m = testing::mixtral_8x7b();
  const Totals grouped = totals(build_graph(m, {.phase = Phase::prefill, .batch = 2, .seq = 64}));
  const Totals sequential = totals(build_graph(
      m, {.phase = Phase::prefill, .batch = 2, .seq = 64, .moe_impl = MoeImpl::sequential}));
  EXPECT_DOUBLE_EQ(sequential.matrix_flops, grouped.matrix_flops);
  EXPECT_EQ(sequential.parameter_bytes, grouped.parameter_bytes);
  EXPECT_EQ(grouped.parameter_bytes, 2 * 46702792704);
}

TEST(BuilderTest, VisionTransformerStartsWithAPatchConvolution) {
  // Batch 1: the stride-2 convolution makes 259,200 patch vectors of width 4096, each a dot
  // product over 20*2*2 inputs: 2 * 259,200 * 4096 * 80 FLOPs + 259,200 * 4096 bias adds.
  const Graph g = build_graph(testing::vit_era5(), {.phase = Phase::prefill, .batch = 1});
  double conv = 0;
  int attentions = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == "convolution") conv += count_op(g, n).flops;
    if (n.op == "accel_sim::attention") {
      ++attentions;
      EXPECT_FALSE(n.attr_bool("is_causal", true));
      EXPECT_EQ(g.tensor(n.inputs[0]).shape[2], 259201);  // every token attends to every token
    }
  }
  EXPECT_DOUBLE_EQ(conv, 2.0 * 259200 * 4096 * 80 + 259200.0 * 4096);
  EXPECT_EQ(attentions, 32);
  EXPECT_THROW(build_graph(testing::vit_era5(), {.phase = Phase::decode}), ConfigError);
}

TEST(BuilderTest, MlaDecodeAttendsInLatentSpace) {
  // Fused decode, batch 2, 1000 cached tokens: per layer one MQA attention of 128 query heads
  // over 1001 keys of 512 + 64 dims with 512-dim values: 2*2*128*1001*576 + 2*2*128*1001*512.
  const ModelSpec m = testing::deepseek_v3();
  const Graph g = build_graph(m, {.phase = Phase::decode, .batch = 2, .context = 1000});
  double attention = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == "accel_sim::attention") attention += count_op(g, n).flops;
  }
  EXPECT_DOUBLE_EQ(attention, 61.0 * (2 * 2 * 128 * 1001 * 576.0 + 2 * 2 * 128 * 1001 * 512.0));
  EXPECT_EQ(step_kv_cache_bytes(m, {.phase = Phase::decode, .batch = 2, .context = 1000}),
            2 * 1001 * 70272);
  const Totals t = totals(g);
  EXPECT_EQ(t.parameter_bytes, 2 * 671026404352);
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

double attention_flops(const Graph& g) {
  double f = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == "accel_sim::attention") f += count_op(g, n).flops;
  }
  return f;
}

TEST(BuilderTest, SequenceParallelismSplitsNormsAndAddsCollectives) {
  // TP 2 + SP, seq 2048: norms see 1024 tokens; every layer all-gathers before attention and
  // the FFN and reduce-scatters after them; the embedding reduce-scatters and lm_head gathers.
  const ModelSpec m = testing::llama3_8b();
  const BuildOptions tp{.phase = Phase::prefill, .seq = 2048, .tensor_parallel = 2};
  BuildOptions sp = tp;
  sp.sequence_parallel = true;
  const Graph g = build_graph(m, sp);
  EXPECT_EQ(count_ops(g, "accel_sim::all_gather"), 2 * 32 + 1);
  EXPECT_EQ(count_ops(g, "accel_sim::reduce_scatter"), 2 * 32 + 1);
  EXPECT_EQ(count_ops(g, "accel_sim::all_reduce"), 0);
  for (const Node& n : g.nodes()) {
    if (n.op == "_fused_rms_norm") {
      EXPECT_EQ(g.tensor(n.inputs[0]).shape[1], 1024);
    }
  }
  EXPECT_DOUBLE_EQ(totals(g).matrix_flops, totals(build_graph(m, tp)).matrix_flops);
  // Without SP, the two row-parallel outputs per layer and the embedding are all-reduced.
  EXPECT_EQ(count_ops(build_graph(m, tp), "accel_sim::all_reduce"), 2 * 32 + 1);
  // A collective carries its result's bytes: the all-gathered [1, 2048, 4096] bf16 activations.
  const SimulationResult r = simulate(g, DeviceSpec{.id = "d", .memory_bytes = 1e12,
                                                    .memory_bandwidth_bytes_per_s = 1e12,
                                                    .bf16_matrix_flops_per_s = 1e15}, {});
  EXPECT_EQ(r.num_collectives, 130);
  EXPECT_DOUBLE_EQ(r.communication_bytes, 65 * 2048 * 4096 * 2.0 + 65 * 1024 * 4096 * 2.0);
  EXPECT_THROW(build_graph(m, {.seq = 2048, .sequence_parallel = true}), ConfigError);
}

TEST(BuilderTest, ContextParallelZigzagBalancesCausalAttention) {
  // seq 4096 over CP 2: rank 0 holds query chunks [0, 1024) and [3072, 4096) against all 4096
  // keys: 1024*1025/2 + (4096*4097/2 - 3072*3073/2) = 4,195,328 pairs per head, exactly half
  // of the full sequence's 8,390,656.
  const ModelSpec m = testing::llama3_8b();
  const double whole = attention_flops(build_graph(m, {.phase = Phase::prefill, .seq = 4096}));
  const Graph g = build_graph(m, {.phase = Phase::prefill, .seq = 4096, .context_parallel = 2});
  EXPECT_DOUBLE_EQ(attention_flops(g), whole / 2);
  EXPECT_DOUBLE_EQ(attention_flops(g), 32.0 * 4 * 32 * 4195328 * 128);
  EXPECT_EQ(count_ops(g, "accel_sim::attention"), 2 * 32);
  EXPECT_EQ(step_kv_cache_bytes(m, {.phase = Phase::prefill, .seq = 4096, .context_parallel = 2}),
            kv_cache_bytes(m, 1, 2048));
  EXPECT_THROW(build_graph(m, {.phase = Phase::prefill, .seq = 4098, .context_parallel = 2}),
               ConfigError);
}

TEST(BuilderTest, AWindowPeriodWindowsAllLayersButEveryPth) {
  // Period 2 (gpt-oss): layers 0, 2, ... attend through the window, 1, 3, ... to everything, so
  // the 32 layers' attention is half the all-windowed model's and half the unwindowed one's.
  ModelSpec windowed = testing::llama3_8b();
  windowed.sliding_window = 1024;
  ModelSpec alternating = windowed;
  alternating.sliding_window_period = 2;
  const BuildOptions o{.phase = Phase::prefill, .seq = 4096};
  const double all = attention_flops(build_graph(windowed, o));
  const double none = attention_flops(build_graph(testing::llama3_8b(), o));
  EXPECT_LT(all, none / 2);
  EXPECT_DOUBLE_EQ(attention_flops(build_graph(alternating, o)), (all + none) / 2);
  int windows = 0;
  const Graph g = build_graph(alternating, o);
  for (const Node& n : g.nodes()) {
    if (n.op != "accel_sim::attention") continue;
    const std::string prefix = "model.layers.";
    const int layer = std::stoi(n.module_path.substr(n.module_path.find(prefix) + prefix.size()));
    const bool windowed = n.attr_int("window_size", 0) == 1024;
    EXPECT_EQ(windowed, layer % 2 == 0) << n.module_path;
    windows += windowed ? 1 : 0;
  }
  EXPECT_EQ(windows, 16);
}

TEST(BuilderTest, SinksAndExpertBiasesAreTrainedParameters) {
  // A training step of a 1-layer Mixtral with gpt-oss's sinks and biases holds exactly the
  // counted parameters, and each new one gets a gradient (the attention backward writes the
  // sinks'; an expert bias's is the sum of its rows' output gradients): gradients stay the same
  // share of the parameters as without them.
  ModelSpec plain = testing::mixtral_8x7b();
  plain.num_layers = 1;
  ModelSpec m = plain;
  m.attention_sinks = true;
  m.moe.router_bias = m.moe.expert_bias = true;
  auto bytes = [](const ModelSpec& spec, StorageKind kind) {
    int64_t total = 0;
    const Graph g = build_graph(spec, {.phase = Phase::train, .seq = 64});
    for (const Storage& st : g.storages()) {
      if (st.kind == kind) total += st.size_bytes;
    }
    return total;
  };
  // bf16 parameters: sinks 32, router biases 8, expert biases 8 x (2 x 14336 + 4096).
  const int64_t added = 32 + 8 + 8 * 32768;
  EXPECT_EQ(parameter_count(m) - parameter_count(plain), added);
  EXPECT_EQ(bytes(m, StorageKind::parameter) - bytes(plain, StorageKind::parameter), 2 * added);
  EXPECT_EQ(bytes(m, StorageKind::gradient) - bytes(plain, StorageKind::gradient), 4 * added);  // fp32
}

TEST(BuilderTest, ExpertParallelismSplitsExpertsAndRoutesWithAllToAll) {
  // EP 2, decode batch 1: each rank owns 4 of 8 experts; the group routes 2 tokens (one per
  // rank), touching 8 * (1 - (3/4)^2) = 3.5 experts, 1.75 per rank: 1.75 / 4 of local weights.
  const ModelSpec m = testing::mixtral_8x7b();
  const Graph g = build_graph(m, {.phase = Phase::decode, .batch = 1, .context = 16,
                                  .expert_parallel = 2});
  EXPECT_NEAR(expert_weight_fraction_read(g), 1.75 / 4, 1e-12);
  EXPECT_EQ(count_ops(g, "accel_sim::all_to_all"), 2 * 32);
  EXPECT_EQ(totals(g).parameter_bytes, 2 * (int64_t{46702792704} - int64_t{32} * 4 * 3 * 4096 * 14336));
  EXPECT_THROW(build_graph(testing::llama3_8b(), {.phase = Phase::decode, .expert_parallel = 2}),
               ConfigError);
}

TEST(BuilderTest, Int4WeightOnlyPacksTheBlockLinearsAndKeepsTheRestInBf16) {
  // Llama-3-8B with int4 weights in groups of 128: the 6,979,321,856 block matmul weights take
  // half a byte each (3,489,660,928 B) plus a bf16 scale and zero point per group of 128 input
  // channels (6,979,321,856 / 128 * 2 * 2 = 218,103,808 B); embedding and LM head stay bf16
  // (2 * 525,336,576 * 2 B), as do the 65 norms of 4096 (532,480 B).
  ModelSpec m = testing::llama3_8b();
  m.int4_group_size = 128;
  const Graph g = build_graph(m, {.phase = Phase::decode, .batch = 1, .context = 128});
  const Totals t = totals(g);
  EXPECT_EQ(t.parameter_bytes, int64_t{3489660928} + 218103808 + 2101346304 + 532480);
  EXPECT_EQ(count_ops(g, "_weight_int4pack_mm"), 7 * 32);
  // The work is that of the bf16 model: 2 FLOPs per multiply-add over the logical weights.
  const Totals bf16 = totals(build_graph(testing::llama3_8b(), {.phase = Phase::decode, .batch = 1, .context = 128}));
  EXPECT_DOUBLE_EQ(t.matrix_flops, bf16.matrix_flops);
  // Routed experts are packed too and still read only for the touched experts (top-2 of 8).
  ModelSpec moe = testing::mixtral_8x7b();
  moe.int4_group_size = 128;
  for (MoeImpl impl : {MoeImpl::grouped, MoeImpl::sequential}) {
    const Graph mg = build_graph(moe, {.phase = Phase::decode, .batch = 1, .context = 16, .moe_impl = impl});
    EXPECT_DOUBLE_EQ(totals(mg).matrix_flops,
                     totals(build_graph(testing::mixtral_8x7b(), {.phase = Phase::decode, .batch = 1,
                                                                  .context = 16, .moe_impl = impl}))
                         .matrix_flops);
  }
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 128}), ConfigError);
}

// A GPT-J-shaped toy: hidden 64, 4 heads of 16 with RoPE on their first 8 dims, a 256-wide
// gelu_new MLP with biases, vocab 100, 2 parallel blocks sharing one LayerNorm, an untied
// lm_head with a bias. Parameters: embed 6,400; per layer LayerNorm 128, q/k/v/out 4*64*64 =
// 16,384, fc_in 64*256 + 256 = 16,640, fc_out 256*64 + 64 = 16,448 (49,600); ln_f 128;
// lm_head 6,400 + 100: 6,400 + 2 * 49,600 + 128 + 6,500 = 112,228.
ModelSpec toy_gptj() {
  return ModelSpec{.name = "toy-gptj", .family = "gptj", .hidden_size = 64, .num_layers = 2,
                   .num_heads = 4, .num_kv_heads = 4, .head_dim = 16, .ffn_size = 256,
                   .vocab_size = 100, .max_position_embeddings = 64,
                   .activation = Activation::gelu_new, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .rotary_dim = 8, .parallel_block = true,
                   .lm_head_bias = true, .ffn_bias = true};
}

double gemm_flops(const Graph& g, Pass pass) {
  double f = 0;
  for (const Node& n : g.nodes()) {
    if (n.pass == pass && (n.op == "mm" || n.op == "addmm")) f += count_op(g, n).flops;
  }
  return f;
}

TEST(BuilderTest, ParallelBlockHasTheHandCountedFlops) {
  // Fused prefill, batch 1, seq 8. Per layer: q, k, v, out 4 * 2*8*64*64 = 262,144; fc_in
  // 2*8*64*256 + 8*256 bias adds = 264,192; fc_out 2*8*256*64 + 8*64 = 262,656; causal attention
  // 4 * 4 heads * 36 pairs * 16 = 9,216 (798,208). Logits of the last token: 2*64*100 + 100.
  const ModelSpec m = toy_gptj();
  EXPECT_EQ(parameter_count(m), 112228);
  const Graph g = build_graph(m, {.phase = Phase::prefill, .seq = 8});
  const Totals t = totals(g);
  EXPECT_DOUBLE_EQ(t.matrix_flops, 2 * 798208.0 + 12900.0);
  EXPECT_EQ(t.parameter_bytes, 2 * 112228);
  // One LayerNorm per layer plus ln_f; the cos/sin rows hold 8 dims: 64 positions * 8 * 2 B,
  // beside the K and V caches (2 layers * 2 * 4 heads * 8 tokens * 16 * 2 B).
  EXPECT_EQ(count_ops(g, "native_layer_norm"), 3);
  EXPECT_EQ(t.buffer_bytes, 64 * 8 * 2 + 2 * 2 * 4 * 8 * 16 * 2);
  // The same GEMMs as the sequential block, one norm fewer per layer.
  ModelSpec sequential = m;
  sequential.parallel_block = false;
  const Graph gs = build_graph(sequential, {.phase = Phase::prefill, .seq = 8});
  EXPECT_DOUBLE_EQ(totals(gs).matrix_flops, t.matrix_flops);
  EXPECT_EQ(count_ops(gs, "native_layer_norm"), 5);
  // HF-eager GPT-J (no SDPA path in transformers) multiplies out the full 8 x 8 scores and the
  // probabilities by V: 2 * 2 * 4 heads * 64 * 16 = 16,384 per layer instead of the causal
  // kernel's 9,216; logits for all 8 tokens: 2*8*64*100 + 800.
  const Graph eager = build_graph(m, {.phase = Phase::prefill, .seq = 8, .kernels = KernelStyle::hf_eager});
  EXPECT_DOUBLE_EQ(totals(eager).matrix_flops, 2 * (798208.0 - 9216.0 + 16384.0) + 103200.0);
  EXPECT_EQ(count_ops(eager, "accel_sim::attention"), 0);
  // Its model FLOPs count the 36 causal pairs only, as the fused kernel's do.
  const DeviceSpec d{.id = "d", .memory_bytes = 1e12, .memory_bandwidth_bytes_per_s = 1e12,
                     .bf16_matrix_flops_per_s = 1e15};
  EXPECT_DOUBLE_EQ(simulate(eager, d, {}).model_flops, 2 * 798208.0 + 103200.0);
  // HF's Falcon attention is not modelled eagerly.
  ModelSpec falcon = m;
  falcon.family = "falcon";
  EXPECT_THROW(build_graph(falcon, {.phase = Phase::prefill, .seq = 8, .kernels = KernelStyle::hf_eager}),
               ConfigError);
}

TEST(BuilderTest, ParallelBlockReducesItsTwoBranchesOnce) {
  // TP 2: the attention and MLP partial sums are added, then all-reduced once per layer (plus
  // the embedding's): 1 + 2; the sequential block reduces each branch: 1 + 2 * 2.
  ModelSpec m = toy_gptj();
  EXPECT_EQ(count_ops(build_graph(m, {.phase = Phase::decode, .context = 8, .tensor_parallel = 2}),
                      "accel_sim::all_reduce"),
            3);
  m.parallel_block = false;
  EXPECT_EQ(count_ops(build_graph(m, {.phase = Phase::decode, .context = 8, .tensor_parallel = 2}),
                      "accel_sim::all_reduce"),
            5);
  // Falcon's two norms under sequence parallelism: each normed copy is all-gathered (2 per
  // layer, and lm_head's), the summed branches reduce-scattered (1 per layer, and the embedding's).
  ModelSpec falcon = toy_gptj();
  falcon.parallel_ffn_norm = true;
  const Graph g = build_graph(falcon, {.phase = Phase::prefill, .seq = 8, .tensor_parallel = 2,
                                       .sequence_parallel = true});
  EXPECT_EQ(count_ops(g, "accel_sim::all_gather"), 2 * 2 + 1);
  EXPECT_EQ(count_ops(g, "accel_sim::reduce_scatter"), 2 + 1);
  EXPECT_EQ(count_ops(g, "native_layer_norm"), 2 * 2 + 1);
}

TEST(BuilderTest, ParallelBlockTrainsWithEveryGemmDifferentiated) {
  // Batch 1, seq 8: the forward linear GEMMs are 2 * 786,432 (q, k, v, out, fc_in, fc_out
  // without their bias adds) + lm_head over all 8 tokens 2*8*64*100 = 1,675,264, plus the bias
  // adds 2 * (2,048 + 512) + 800. The backward runs a dgrad and a wgrad GEMM for each: 2x.
  const Graph g = build_graph(toy_gptj(), {.phase = Phase::train, .seq = 8});
  EXPECT_DOUBLE_EQ(gemm_flops(g, Pass::forward), 1675264.0 + 5120.0 + 800.0);
  EXPECT_DOUBLE_EQ(gemm_flops(g, Pass::backward), 2 * 1675264.0);
  // TP 2: forward all-reduces the embedding, each layer's summed branches (2) and the loss's row
  // statistics; backward the gradient of each layer's one normed input, which q, k, v and fc_in
  // share (2), and of the LM head's input: 4 and 3. Falcon's second norm adds one per layer.
  auto all_reduces = [](const Graph& graph, Pass pass) {
    int n = 0;
    for (const Node& node : graph.nodes()) n += node.pass == pass && node.op == "accel_sim::all_reduce";
    return n;
  };
  const Graph tp = build_graph(toy_gptj(), {.phase = Phase::train, .seq = 8, .tensor_parallel = 2});
  EXPECT_EQ(all_reduces(tp, Pass::forward), 4);
  EXPECT_EQ(all_reduces(tp, Pass::backward), 3);
  ModelSpec falcon = toy_gptj();
  falcon.parallel_ffn_norm = true;
  const Graph ftp = build_graph(falcon, {.phase = Phase::train, .seq = 8, .tensor_parallel = 2});
  EXPECT_EQ(all_reduces(ftp, Pass::backward), 5);
  // Each rank does half of every GEMM; fc_out's bias is added to the full-width output of its
  // row-parallel GEMM on each rank: 1,675,264 / 2 + 2 * (2,048 / 2 + 512) + 800 / 2.
  EXPECT_DOUBLE_EQ(gemm_flops(ftp, Pass::forward), 837632.0 + 3072.0 + 400.0);
  EXPECT_DOUBLE_EQ(gemm_flops(ftp, Pass::backward), 1675264.0);
}

// A Llama-shaped toy: hidden 256, 2 layers, 4 heads of 64 (MHA), SwiGLU 512, vocab 1000.
ModelSpec toy_llama() {
  return ModelSpec{.name = "toy-llama", .hidden_size = 256, .num_layers = 2, .num_heads = 4,
                   .num_kv_heads = 4, .head_dim = 64, .ffn_size = 512, .vocab_size = 1000,
                   .max_position_embeddings = 128};
}

// Bytes the block GEMMs read: {weights, everything}.
std::pair<int64_t, double> block_gemm_reads(const Graph& g) {
  int64_t weights = 0;
  double all = 0;
  for (const Node& n : g.nodes()) {
    if ((n.op != "mm" && n.op != "_scaled_mm") || n.module_path.rfind("model.layers.", 0) != 0) continue;
    weights += g.tensor(n.inputs[1]).accessed_bytes();
    all += count_op(g, n).bytes_read;
  }
  return {weights, all};
}

TEST(BuilderTest, Fp8InferenceStoresTheBlockWeightsInOneByte) {
  // Block linears: per layer q, k, v, o 4*256*256 + gate, up, down 3*256*512 = 655,360;
  // 1,310,720 in all. Decode, batch 4: the bf16 GEMMs read 2 bytes per weight and [4, in] bf16
  // inputs (per layer six of width 256 and one of 512: 16,384 B); fp8 halves both.
  ModelSpec m = toy_llama();
  const BuildOptions decode{.phase = Phase::decode, .batch = 4, .context = 16};
  BuildOptions fp8 = decode;
  fp8.fp8_gemms = true;
  const Graph g16 = build_graph(m, decode);
  const Graph g8 = build_graph(m, fp8);
  EXPECT_EQ(block_gemm_reads(g16).first, 2 * 1310720);
  EXPECT_DOUBLE_EQ(block_gemm_reads(g16).second, 2 * 1310720 + 2 * 16384.0);
  EXPECT_EQ(block_gemm_reads(g8).first, 1310720);
  EXPECT_DOUBLE_EQ(block_gemm_reads(g8).second, 1310720 + 16384.0);
  // Resident weights: embedding and lm_head 2 * 256,000 and five norms of 256 stay bf16:
  // 2 * (1,310,720 + 513,280) = 3,648,000 B, against 1,310,720 + 2 * 513,280 = 2,337,280 B.
  EXPECT_EQ(totals(g16).parameter_bytes, 3648000);
  EXPECT_EQ(totals(g8).parameter_bytes, 2337280);
  // Every block GEMM is an fp8 GEMM of a 1-byte input cast once per distinct input (the normed
  // input for q, k, v; the attention output; the normed input for gate and up; the SwiGLU
  // product: 4 per layer), writing bf16; no weight is cast.
  EXPECT_EQ(count_ops(g8, "_scaled_mm"), 7 * 2);
  EXPECT_EQ(count_ops(g8, "mm"), 1);  // lm_head
  int casts = 0;
  for (const Node& n : g8.nodes()) {
    if (n.op == "_scaled_mm") {
      EXPECT_EQ(g8.tensor(n.inputs[0]).dtype, DType::fp8_e4m3);
      EXPECT_EQ(g8.tensor(n.inputs[1]).dtype, DType::fp8_e4m3);
      EXPECT_EQ(g8.tensor(n.outputs[0]).dtype, DType::bf16);
    }
    if (n.op != "_to_copy") continue;
    ++casts;
    EXPECT_NE(g8.storage(g8.tensor(n.inputs[0]).storage).kind, StorageKind::parameter);
  }
  EXPECT_EQ(casts, 4 * 2);
  // An fp8 KV cache (ModelSpec::kv_cache_dtype): 2 layers * K, V * 4 sequences * 17 tokens *
  // 4 heads * 64 dims * 1 B = 69,632 B, beside the bf16 cos/sin rows (128 * 64 * 2 B); each
  // attention reads its bf16 query (4*4*64*2 B) and 1-byte K and V (2 * 4*4*17*64 B).
  m.kv_cache_dtype = DType::fp8_e4m3;
  const Graph kv8 = build_graph(m, fp8);
  EXPECT_EQ(step_kv_cache_bytes(m, fp8), 69632);
  EXPECT_EQ(totals(kv8).buffer_bytes, 69632 + 128 * 64 * 2);
  for (const Node& n : kv8.nodes()) {
    if (n.op == "accel_sim::attention") EXPECT_DOUBLE_EQ(count_op(kv8, n).bytes_read, 2048 + 34816);
  }
}

TEST(BuilderTest, SimulatesWithoutUnknownOps) {
  DeviceSpec d{.id = "d", .memory_bytes = 80e9, .memory_bandwidth_bytes_per_s = 3e12,
               .fp32_flops_per_s = 60e12, .bf16_matrix_flops_per_s = 1e15};
  for (KernelStyle style : {KernelStyle::fused, KernelStyle::hf_eager}) {
    const Graph g = build_graph(testing::llama3_8b(), {.phase = Phase::prefill, .seq = 128, .kernels = style});
    const SimulationResult r = simulate(g, d, {});
    EXPECT_TRUE(r.uncovered_ops.empty());
    EXPECT_GT(r.latency_s, 0);
  }
  EXPECT_THROW(build_graph(testing::llama3_8b(), {.phase = Phase::prefill, .seq = 0}), ConfigError);
}

TEST(BuilderTest, OptionsWhoseTensorsOverflow64BitsAreRejectedNamingTheQuantity) {
  const ModelSpec m = testing::llama3_8b();
  auto message = [&](const BuildOptions& o) {
    try {
      o.validate(m);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // 2^22 sequences of 2^24 tokens: the hidden states (2^46 x 4096 x 4 = 2^60 bytes) and the FFN's
  // (2^46 x 14336 x 4 < 2^62) fit; the fp32 logits (2^46 x 128256 x 4 > 2^64) do not.
  const BuildOptions wide{.batch = int64_t{1} << 22, .seq = int64_t{1} << 24};
  EXPECT_EQ(message(wide), "model 'llama-3-8b': batch x seq x vocab_size x 4 bytes overflows 64-bit byte counts");
  EXPECT_THROW(build_graph(m, wide), ConfigError);
  // A decode step after 2^63 - 1 cached tokens has one token too many to count.
  const BuildOptions decode{.phase = Phase::decode, .context = std::numeric_limits<int64_t>::max()};
  EXPECT_EQ(message(decode), "model 'llama-3-8b': context + 1 overflows 64-bit byte counts");
  // Its KV cache: 2 x 32 layers x 8 heads x 128 x 2 bytes = 2^17 bytes per token, 2^47 tokens.
  const BuildOptions cache{.phase = Phase::decode, .context = (int64_t{1} << 47) - 1};
  EXPECT_EQ(message(cache).find("model 'llama-3-8b': this rank's KV cache"), 0u) << message(cache);
  EXPECT_THROW(step_kv_cache_bytes(m, cache), ConfigError);
  // More layers than a graph's 32-bit ids can name.
  ModelSpec deep = m;
  deep.num_layers = int64_t{1} << 21;
  deep.hidden_size = deep.head_dim = 64;
  deep.num_heads = deep.num_kv_heads = 1;
  deep.ffn_size = 64;
  deep.vocab_size = 64;
  EXPECT_THROW(build_graph(deep, {.seq = 1}), ConfigError);
}

}  // namespace
}  // namespace accelsim
