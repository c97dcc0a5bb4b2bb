#include "accelsim/op_catalog.h"

#include <gtest/gtest.h>

#include "accelsim/error.h"
#include "testing/graph_builder.h"

namespace accelsim {
namespace {

using testing::add;
using testing::new_tensor;
using testing::view_of;

OpCount count_last(const Graph& g) { return count_op(g, g.nodes().back()); }

TEST(MatmulTest, MmCountsTwoFlopsPerMultiplyAdd) {
  // [128, 256] x [256, 512] fp32: 2*128*256*512 FLOPs; reads both operands, writes [128, 512].
  Graph g;
  TensorId a = new_tensor(g, {128, 256});
  TensorId b = new_tensor(g, {256, 512});
  TensorId c = new_tensor(g, {128, 512});
  add(g, "mm", {a, b}, {c});
  const OpCount n = count_last(g);
  EXPECT_DOUBLE_EQ(n.flops, 33554432.0);
  EXPECT_DOUBLE_EQ(n.bytes_read, (128 * 256 + 256 * 512) * 4.0);  // 655360
  EXPECT_DOUBLE_EQ(n.bytes_written, 128 * 512 * 4.0);             // 262144
  EXPECT_EQ(n.op_class, OpClass::matmul);
  EXPECT_EQ(n.compute_dtype, DType::fp32);
}

TEST(MatmulTest, AddmmAddsTheBiasOncePerOutput) {
  Graph g;
  TensorId bias = new_tensor(g, {512});
  TensorId a = new_tensor(g, {128, 256}, DType::bf16);
  TensorId b = new_tensor(g, {256, 512}, DType::bf16);
  TensorId c = new_tensor(g, {128, 512}, DType::bf16);
  add(g, "addmm", {bias, a, b}, {c});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 33554432.0 + 128 * 512);
  EXPECT_EQ(count_last(g).compute_dtype, DType::bf16);
}

TEST(MatmulTest, BmmAndShapeErrors) {
  Graph g;
  TensorId a = new_tensor(g, {8, 16, 32});
  TensorId b = new_tensor(g, {8, 32, 64});
  TensorId c = new_tensor(g, {8, 16, 64});
  add(g, "bmm", {a, b}, {c});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 2.0 * 8 * 16 * 32 * 64);  // 524288
  add(g, "bmm", {a, a}, {c});  // inner dims 32 vs 16
  EXPECT_THROW(count_last(g), ConfigError);
  add(g, "mm", {a, b}, {c});  // rank 3 into mm
  EXPECT_THROW(count_last(g), ConfigError);
}

TEST(MatmulTest, EagerAttentionGemmsCountTheCausalPairsWithAnOffsetAsUseful) {
  // 2 heads, 4 queries at positions 4..7 over 8 keys, head dim 16: query i sees keys 0..4+i,
  // 5 + 6 + 7 + 8 = 26 of the 32 pairs. QK^T [2, 4, 16] x [2, 16, 8] computes all of them:
  // 2 * 2 * 4 * 8 * 16 = 2048 FLOPs, of which 2 * 2 * 26 * 16 = 1664 on allowed pairs. P V
  // [2, 4, 8] x [2, 8, 16] sums over the same pairs: the same counts.
  Graph g;
  TensorId q = new_tensor(g, {2, 4, 16});
  TensorId kt = new_tensor(g, {2, 16, 8});
  TensorId s = new_tensor(g, {2, 4, 8});
  TensorId v = new_tensor(g, {2, 8, 16});
  TensorId o = new_tensor(g, {2, 4, 16});
  for (const char* gemm : {"qk", "pv"}) {
    const bool scores = std::string(gemm) == "qk";
    add(g, "bmm", scores ? std::vector<TensorId>{q, kt} : std::vector<TensorId>{s, v}, {scores ? s : o},
        {{"attention_gemm", std::string(gemm)}, {"mask_is_causal", true}, {"mask_query_offset", int64_t{4}}});
    const OpCount c = count_last(g);
    EXPECT_DOUBLE_EQ(c.flops, 2048.0);
    EXPECT_DOUBLE_EQ(c.useful_flops(), 1664.0);
    EXPECT_DOUBLE_EQ(c.masked_flops, 384.0);
  }
  // Unmarked, or marked with a mask that allows every pair: all FLOPs are useful.
  add(g, "bmm", {q, kt}, {s});
  EXPECT_DOUBLE_EQ(count_last(g).masked_flops, 0.0);
  add(g, "bmm", {q, kt}, {s}, {{"attention_gemm", std::string("qk")}, {"mask_is_causal", false}});
  EXPECT_DOUBLE_EQ(count_last(g).useful_flops(), 2048.0);
  add(g, "bmm", {q, kt}, {s}, {{"attention_gemm", std::string("kq")}});
  EXPECT_THROW(count_last(g), ConfigError);
}

TEST(MatmulTest, EagerAttentionGemmsCountASlidingWindowAsUseful) {
  // One head, 8 causal queries over 8 keys, window 3: 1 + 2 + 3 * 6 = 21 of 64 pairs, head dim
  // 4. A baddbmm QK^T (ALiBi added) computes 2 * 64 * 4 + 64 = 576 FLOPs, 21 * (2 * 4 + 1) = 189
  // of them on allowed pairs; P V [1, 8, 8] x [1, 8, 4]: 2 * 64 * 4 = 512, of them 2 * 21 * 4 = 168.
  Graph g;
  TensorId bias = new_tensor(g, {1, 1, 8});
  TensorId q = new_tensor(g, {1, 8, 4});
  TensorId kt = new_tensor(g, {1, 4, 8});
  TensorId s = new_tensor(g, {1, 8, 8});
  TensorId v = new_tensor(g, {1, 8, 4});
  TensorId o = new_tensor(g, {1, 8, 4});
  add(g, "baddbmm", {bias, q, kt}, {s},
      {{"attention_gemm", std::string("qk")}, {"mask_is_causal", true}, {"mask_window_size", int64_t{3}}});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 576.0);
  EXPECT_DOUBLE_EQ(count_last(g).useful_flops(), 189.0);
  add(g, "bmm", {s, v}, {o},
      {{"attention_gemm", std::string("pv")}, {"mask_is_causal", true}, {"mask_window_size", int64_t{3}}});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 512.0);
  EXPECT_DOUBLE_EQ(count_last(g).useful_flops(), 168.0);
}

TEST(MatmulTest, GroupedMmCountsEachTokenAgainstOneExpert) {
  // 96 routed tokens of width 64 against 4 experts of [64, 128]: 2*96*64*128.
  Graph g;
  TensorId x = new_tensor(g, {96, 64}, DType::bf16);
  TensorId w = new_tensor(g, {4, 64, 128}, DType::bf16);
  TensorId offs = new_tensor(g, {4}, DType::int32);
  TensorId y = new_tensor(g, {96, 128}, DType::bf16);
  add(g, "_grouped_mm", {x, w, offs}, {y});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 1572864.0);
  // 96 routed rows touch all 4 experts (1 - (3/4)^96 ~ 1 - 1e-12): all weights are read.
  EXPECT_NEAR(count_last(g).bytes_read, 96 * 64 * 2 + 4 * 64 * 128 * 2 + 4 * 4, 1e-6);
}

TEST(MatmulTest, GroupedMmForOneTokenReadsOnlyItsTopKExperts) {
  // One decode token routed to its top-2 of 8 experts: 2 rows; 8*(1 - (1 - 2/8)^1) = 2 experts
  // touched, so 2/8 of the [8, 64, 128] bf16 weights (32768 of 131072 bytes) are read.
  Graph g;
  TensorId x = new_tensor(g, {2, 64}, DType::bf16);
  TensorId w = new_tensor(g, {8, 64, 128}, DType::bf16);
  TensorId offs = new_tensor(g, {8}, DType::int32);
  TensorId y = new_tensor(g, {2, 128}, DType::bf16);
  add(g, "_grouped_mm", {x, w, offs}, {y}, {{"top_k", int64_t{2}}});
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 2 * 64 * 2 + 32768 + 8 * 4);
  EXPECT_DOUBLE_EQ(count_last(g).flops, 2.0 * 2 * 64 * 128);
}

TEST(AttentionTest, CausalCountsOnlyUnmaskedPairs) {
  // B=2, H=4, S=8, D=16. Causal: each head has 8*9/2 = 36 visible pairs; 8 heads -> 288 pairs;
  // QK^T and PV each 2*pairs*16 FLOPs -> 4*288*16 = 18432. Non-causal: 64 pairs -> 32768.
  Graph g;
  TensorId q = new_tensor(g, {2, 4, 8, 16}, DType::bf16);
  TensorId k = new_tensor(g, {2, 4, 8, 16}, DType::bf16);
  TensorId v = new_tensor(g, {2, 4, 8, 16}, DType::bf16);
  TensorId o = new_tensor(g, {2, 4, 8, 16}, DType::bf16);
  add(g, "accel_sim::attention", {q, k, v}, {o}, {{"is_causal", true}});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 18432.0);
  EXPECT_EQ(count_last(g).op_class, OpClass::attention);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 3 * 2 * 4 * 8 * 16 * 2.0);
  add(g, "accel_sim::attention", {q, k, v}, {o}, {{"is_causal", false}});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 32768.0);
}

TEST(AttentionTest, GroupedQueryAttentionUsesQueryHeads) {
  // 8 query heads sharing 2 KV heads, S=4, D=8: 8 heads * 16 pairs * 4 * 8 = 4096 FLOPs;
  // the smaller K and V are what is read.
  Graph g;
  TensorId q = new_tensor(g, {1, 8, 4, 8}, DType::fp16);
  TensorId k = new_tensor(g, {1, 2, 4, 8}, DType::fp16);
  TensorId v = new_tensor(g, {1, 2, 4, 8}, DType::fp16);
  TensorId o = new_tensor(g, {1, 8, 4, 8}, DType::fp16);
  add(g, "_scaled_dot_product_flash_attention_for_cpu", {q, k, v}, {o});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 4096.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, (256 + 64 + 64) * 2.0);
}

TEST(AttentionTest, DecodeStepWithCausalMaskSeesTheWholeCache) {
  // One query against 100 cached keys with top-left causal alignment sees 1 key; a decode
  // step is recorded non-causal and sees all 100.
  Graph g;
  TensorId q = new_tensor(g, {1, 1, 1, 4});
  TensorId k = new_tensor(g, {1, 1, 100, 4});
  TensorId v = new_tensor(g, {1, 1, 100, 4});
  TensorId o = new_tensor(g, {1, 1, 1, 4});
  add(g, "accel_sim::attention", {q, k, v}, {o});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 4.0 * 100 * 4);
}

TEST(AttentionTest, BackwardIsFiveMatmulsOverThePairs) {
  // B=1, H=1, S=4, D=Dv=8, non-causal: 16 pairs; 3 products over D and 2 over Dv:
  // 2 * 16 * (3*8 + 2*8) = 1280 FLOPs (2.5x the forward's 512).
  Graph g;
  TensorId dout = new_tensor(g, {1, 1, 4, 8});
  TensorId q = new_tensor(g, {1, 1, 4, 8});
  TensorId k = new_tensor(g, {1, 1, 4, 8});
  TensorId v = new_tensor(g, {1, 1, 4, 8});
  TensorId o = new_tensor(g, {1, 1, 4, 8});
  TensorId dq = new_tensor(g, {1, 1, 4, 8});
  add(g, "_scaled_dot_product_flash_attention_for_cpu_backward", {dout, q, k, v, o}, {dq});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 1280.0);
  add(g, "accel_sim::attention", {q, k, v}, {o});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 512.0);
  // The builder's backward also reads the fp32 logsumexp [1, 1, 4] and writes dq, dk, dv.
  TensorId lse = new_tensor(g, {1, 1, 4});
  TensorId dk = new_tensor(g, {1, 1, 4, 8});
  TensorId dv = new_tensor(g, {1, 1, 4, 8});
  add(g, "accel_sim::attention_backward", {dout, q, k, v, o, lse}, {dq, dk, dv});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 1280.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 5 * 128.0 + 16.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 3 * 128.0);
}

TEST(ConvolutionTest, DirectConvolution) {
  // x [1,3,32,32], w [16,3,3,3] -> y [1,16,30,30]: 2 * (16*30*30) * (3*3*3) = 777600.
  Graph g;
  TensorId x = new_tensor(g, {1, 3, 32, 32});
  TensorId w = new_tensor(g, {16, 3, 3, 3});
  TensorId y = new_tensor(g, {1, 16, 30, 30});
  add(g, "convolution", {x, w}, {y}, {{"transposed", false}, {"groups", int64_t{1}}});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 777600.0);
  EXPECT_EQ(count_last(g).op_class, OpClass::convolution);
}

TEST(NormalizationTest, LayerNormAndSoftmax) {
  // [4, 10] fp32 with weight and bias: 7 FLOPs/element = 280; reads x, weight, bias;
  // writes y plus mean and rstd [4, 1].
  Graph g;
  TensorId x = new_tensor(g, {4, 10});
  TensorId w = new_tensor(g, {10});
  TensorId b = new_tensor(g, {10});
  TensorId y = new_tensor(g, {4, 10});
  TensorId mean = new_tensor(g, {4, 1});
  TensorId rstd = new_tensor(g, {4, 1});
  add(g, "native_layer_norm", {x, w, b}, {y, mean, rstd});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 280.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 160.0 + 40.0 + 40.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 160.0 + 16.0 + 16.0);
  add(g, "_softmax", {x}, {y});
  EXPECT_DOUBLE_EQ(count_last(g).flops, 200.0);
  EXPECT_EQ(count_last(g).op_class, OpClass::softmax);
}

TEST(IndexingTest, EmbeddingReadsOnlyTheGatheredRows) {
  // A 1000 x 64 fp32 table, 16 int64 indices: reads 16 rows (4096 B) + indices (128 B).
  Graph g;
  TensorId table = new_tensor(g, {1000, 64}, DType::fp32, StorageKind::parameter);
  TensorId idx = new_tensor(g, {2, 8}, DType::int64, StorageKind::input);
  TensorId out = new_tensor(g, {2, 8, 64});
  add(g, "embedding", {table, idx}, {out});
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 4096.0 + 128.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 4096.0);
  EXPECT_DOUBLE_EQ(count_last(g).flops, 0.0);
}

TEST(PointwiseTest, BroadcastOperandIsReadOnce) {
  // x [4, 8] + b expanded to [4, 8] with stride 0: reads 128 + 32 bytes, writes 128.
  Graph g;
  TensorId x = new_tensor(g, {4, 8});
  TensorId row = new_tensor(g, {8});
  TensorMeta expanded{.shape = {4, 8}, .strides = {0, 1}, .dtype = DType::fp32,
                      .storage = g.tensor(row).storage};
  TensorId b = g.add_tensor(expanded);
  TensorId y = new_tensor(g, {4, 8});
  add(g, "add", {x, b}, {y});
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 160.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 128.0);
  EXPECT_DOUBLE_EQ(count_last(g).flops, 32.0);
}

TEST(PointwiseTest, InPlaceVariantIsCountedLikeItsFunctionalOp) {
  Graph g;
  TensorId x = new_tensor(g, {4, 8});
  TensorId z = new_tensor(g, {4, 8});
  TensorId y = view_of(g, x, {4, 8});
  add(g, "mul_", {x, z}, {y});
  EXPECT_TRUE(is_known_op("mul_"));
  EXPECT_DOUBLE_EQ(count_last(g).flops, 32.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 256.0);  // x and z, 32 fp32 elements each
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 128.0);
}

TEST(PointwiseTest, ATensorPassedTwiceIsReadOnce) {
  // x * x (torch.optim's addcmul_(v, g, g) likewise): each thread loads x[i] for both operands.
  Graph g;
  TensorId x = new_tensor(g, {4, 8});
  TensorId y = view_of(g, x, {4, 8});
  add(g, "mul_", {x, x}, {y});
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 128.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 128.0);
}

TEST(DataMovementTest, ViewsCostNothingAndLaunchNoKernel) {
  Graph g;
  TensorId x = new_tensor(g, {4, 8});
  TensorId y = view_of(g, x, {32});
  add(g, "view", {x}, {y});
  const OpCount n = count_last(g);
  EXPECT_FALSE(n.launches_kernel);
  EXPECT_DOUBLE_EQ(n.bytes(), 0.0);
  EXPECT_EQ(n.op_class, OpClass::view);
}

TEST(DataMovementTest, CastReadsAndWritesEverything) {
  Graph g;
  TensorId x = new_tensor(g, {1024});
  TensorId y = new_tensor(g, {1024}, DType::bf16);
  add(g, "_to_copy", {x}, {y}, {{"dtype", std::string("bf16")}});
  EXPECT_DOUBLE_EQ(count_last(g).bytes_read, 4096.0);
  EXPECT_DOUBLE_EQ(count_last(g).bytes_written, 2048.0);
}

TEST(ReductionTest, NllLossReadsOnlyTheTargetColumnOfEachRow) {
  // Log-probabilities [1024, 32000] fp32 and int64 targets [1024]: the forward reads the 1024
  // targets (8 KiB) and one 4-byte log-probability per row (4 KiB), never the other 31,999
  // columns (131 MB), and writes the loss and the total weight (4 B each).
  Graph g;
  TensorId logp = new_tensor(g, {1024, 32000});
  TensorId target = new_tensor(g, {1024}, DType::int64);
  TensorId loss = new_tensor(g, {});
  TensorId total = new_tensor(g, {});
  add(g, "nll_loss_forward", {logp, target}, {loss, total});
  OpCount n = count_last(g);
  EXPECT_DOUBLE_EQ(n.bytes_read, 1024 * 8.0 + 1024 * 4.0);
  EXPECT_DOUBLE_EQ(n.bytes_written, 8.0);
  // The backward zero-fills the gradient [1024, 32000] (131,072,000 B written) and writes each
  // row's target column; it reads the 0-d upstream gradient and the targets, not `self`.
  TensorId dloss = new_tensor(g, {});
  TensorId dlogp = new_tensor(g, {1024, 32000});
  add(g, "nll_loss_backward", {dloss, logp, target, total}, {dlogp});
  n = count_last(g);
  EXPECT_DOUBLE_EQ(n.bytes_read, 4.0 + 1024 * 8.0);
  EXPECT_DOUBLE_EQ(n.bytes_written, 1024 * 32000 * 4.0);
}

TEST(CatalogueTest, UnknownOpIsCountedOnItsBytesAndFlagged) {
  Graph g;
  TensorId x = new_tensor(g, {100});
  TensorId y = new_tensor(g, {50});
  add(g, "my_custom_op", {x}, {y});
  const OpCount n = count_last(g);
  EXPECT_FALSE(n.known);
  EXPECT_TRUE(n.launches_kernel);
  EXPECT_DOUBLE_EQ(n.bytes_read, 400.0);
  EXPECT_DOUBLE_EQ(n.bytes_written, 200.0);
  EXPECT_FALSE(is_known_op("my_custom_op"));
}

TEST(CatalogueTest, KnowsTheOpsOfCapturedTransformers) {
  for (const char* op : {"mm", "addmm", "bmm", "embedding", "native_layer_norm", "_softmax",
                         "gelu", "silu", "mul", "add", "pow", "mean", "rsqrt", "cat", "neg",
                         "slice", "_to_copy", "clone", "accel_sim::attention", "topk",
                         "_grouped_mm", "convolution", "max_pool2d_with_indices",
                         "_native_batch_norm_legit_no_training", "tanh", "where"}) {
    EXPECT_TRUE(is_known_op(op)) << op;
  }
  EXPECT_GT(known_ops().size(), 300u);
}

}  // namespace
}  // namespace accelsim

namespace accelsim {
namespace {

TEST(OptimizerTest, FusedAdamWReadsFourAndWritesThreeStatesPerParameter) {
  // Two fp32 parameters of 100 and 28 elements: 128 elements, 16 FLOPs each = 2048. Reads
  // param, grad, exp_avg, exp_avg_sq (4 * 512 B) and two 0-d fp32 steps (8 B); writes param,
  // exp_avg and exp_avg_sq (3 * 512 B) when the schema's in-place form lists no outputs.
  Graph g;
  std::vector<TensorId> in;
  for (int list = 0; list < 4; ++list) {
    in.push_back(testing::new_tensor(g, {100}));
    in.push_back(testing::new_tensor(g, {28}));
  }
  in.push_back(testing::new_tensor(g, {}));
  in.push_back(testing::new_tensor(g, {}));
  testing::add(g, "_fused_adamw_", in, {});
  OpCount c = count_op(g, g.nodes().back());
  EXPECT_DOUBLE_EQ(c.flops, 2048.0);
  EXPECT_DOUBLE_EQ(c.bytes_read, 4 * 512.0 + 8.0);
  EXPECT_DOUBLE_EQ(c.bytes_written, 3 * 512.0);
  EXPECT_TRUE(c.known);
  // SGD with momentum: param, grad, momentum; 7 FLOPs per element; writes param and momentum.
  std::vector<TensorId> sgd(in.begin(), in.begin() + 6);
  testing::add(g, "_fused_sgd_", sgd, {});
  c = count_op(g, g.nodes().back());
  EXPECT_DOUBLE_EQ(c.flops, 7 * 128.0);
  EXPECT_DOUBLE_EQ(c.bytes_written, 2 * 512.0);
  // Lists of unequal length are a malformed node.
  std::vector<TensorId> bad(in.begin(), in.begin() + 5);
  testing::add(g, "_fused_adam_", bad, {});
  EXPECT_THROW(count_op(g, g.nodes().back()), ConfigError);
}

TEST(AttentionWindowTest, SlidingWindowCapsTheKeysEachQuerySees) {
  // S = 8, window 3, causal: queries see 1, 2, 3, 3, 3, 3, 3, 3 keys = 21 pairs; one head,
  // D = Dv = 4: 4 * 21 * 4 = 336 FLOPs. Decode against 100 keys with window 3: 3 pairs.
  Graph g;
  TensorId q = testing::new_tensor(g, {1, 1, 8, 4});
  TensorId k = testing::new_tensor(g, {1, 1, 8, 4});
  TensorId o = testing::new_tensor(g, {1, 1, 8, 4});
  testing::add(g, "accel_sim::attention", {q, k, k}, {o},
               {{"is_causal", true}, {"window_size", int64_t{3}}});
  EXPECT_DOUBLE_EQ(count_op(g, g.nodes().back()).flops, 336.0);
  TensorId q1 = testing::new_tensor(g, {1, 1, 1, 4});
  TensorId kc = testing::new_tensor(g, {1, 1, 100, 4});
  testing::add(g, "accel_sim::attention", {q1, kc, kc}, {q1}, {{"window_size", int64_t{3}}});
  EXPECT_DOUBLE_EQ(count_op(g, g.nodes().back()).flops, 4.0 * 3 * 4);
}

}  // namespace
}  // namespace accelsim
