// The kernel cost model and its calibration, against times worked out by hand on round numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "accelsim/cost_model.h"
#include "accelsim/error.h"
#include "accelsim/kernel_query.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

// The round device with 108 compute units, perfect efficiencies and no floors, so that a time
// is its tile and wave arithmetic alone.
DeviceSpec ideal_device(int units = 108) {
  DeviceSpec d = testing::round_device();
  d.num_compute_units = units;
  d.kernel = {.calibrated = true, .matmul_efficiency = 1.0, .attention_efficiency = 1.0,
              .attention_backward_efficiency = 1.0, .memory_efficiency = 1.0,
              .gemm_tile_overhead_s = 0.0, .kernel_floor_s = 0.0, .stream_floor_s = 0.0};
  return d;
}

CostOptions no_launch() {
  CostOptions o;
  o.include_launch_overhead = false;
  return o;
}

KernelQuery matmul(int64_t m, int64_t n, int64_t k) {
  return {.kind = KernelKind::matmul, .m = m, .n = n, .k = k};
}

TEST(KernelModelTest, GemmPaysForWholeTilesAndWaves) {
  // 2048 x 2048 x 4096 bf16 on 108 units (A100's SM count), bandwidth made irrelevant.
  // 256x128 tiles: 128 tiles, 2 waves = 2 tile-times of 2*256*128*4096 FLOPs at 100/108 TFLOP/s
  // per unit; 128x64 tiles: 512 tiles, 5 waves of quarter-size tiles = 1.25 tile-times, the
  // best of the tile list (64x64: 10 waves of eighth-size tiles, also 1.25). Split-K does not
  // apply (128 tiles x 2 > 2 x 108). Time = 1.25 * 2*256*128*4096 * 108 / 100e12 s,
  // 1.0546875 x the ideal 2*2048*2048*4096 / 100e12.
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e18;
  const KernelEstimate e = estimate_kernel(matmul(2048, 2048, 4096), d, "kernel", no_launch());
  const double ideal = 2.0 * 2048 * 2048 * 4096 / 100e12;
  EXPECT_NEAR(e.time_s, 1.0546875 * ideal, 1e-15);
  EXPECT_DOUBLE_EQ(e.roofline_time_s, ideal);
  EXPECT_EQ(e.bound, Bound::compute);
  // A fixed 1 us per wave of tiles (prologue, epilogue): the 5 waves of 128x64 tiles pay 5 us
  // and stay the best choice (64x64: 10 waves, 10 us; 256x128: 2 waves of 289.9 us each).
  d.kernel.gemm_tile_overhead_s = 1e-6;
  const KernelEstimate o = estimate_kernel(matmul(2048, 2048, 4096), d, "kernel", no_launch());
  EXPECT_NEAR(o.time_s, 1.0546875 * ideal + 5e-6, 1e-15);
  // Half the clock: the multiply-adds and the tile overhead (cycles) both take twice as long.
  d.clock_hz = 2e9;
  CostOptions slow = no_launch();
  slow.clock_hz = 1e9;
  EXPECT_NEAR(estimate_kernel(matmul(2048, 2048, 4096), d, "kernel", slow).time_s,
              2.0 * (1.0546875 * ideal + 5e-6), 1e-15);
}

TEST(KernelModelTest, SkinnyGemmIsBoundByItsWeights) {
  // A decode GEMM, 1 x 8192 by 8192 x 8192 bf16: 2 * (8192 + 8192^2 + 8192) bytes at 1 TB/s
  // times the 0.8 memory efficiency, plus the library kernel floor of 2 us.
  DeviceSpec d = ideal_device();
  d.kernel.memory_efficiency = 0.8;
  d.kernel.kernel_floor_s = 2e-6;
  const KernelEstimate e = estimate_kernel(matmul(1, 8192, 8192), d, "kernel", no_launch());
  const double bytes = 2.0 * (8192 + 8192.0 * 8192 + 8192);
  EXPECT_NEAR(e.time_s, bytes / 0.8e12 + 2e-6, 1e-15);
  EXPECT_EQ(e.bound, Bound::memory);
  // GEMM operand loads at their own bandwidth fraction, 0.9.
  d.kernel.gemm_memory_efficiency = 0.9;
  EXPECT_NEAR(estimate_kernel(matmul(1, 8192, 8192), d, "kernel", no_launch()).time_s,
              bytes / 0.9e12 + 2e-6, 1e-15);
  // fp8 operands (1 byte) with a bf16 result (2 bytes), as fp8 GEMM kernels write it.
  KernelQuery fp8 = matmul(1, 8192, 8192);
  fp8.dtype = DType::fp8_e4m3;
  d.fp8_matrix_flops_per_s = 200e12;
  const KernelEstimate f = estimate_kernel(fp8, d, "kernel", no_launch());
  const double fp8_bytes = 8192 + 8192.0 * 8192 + 2.0 * 8192;
  EXPECT_DOUBLE_EQ(f.bytes, fp8_bytes);
  EXPECT_NEAR(f.time_s, fp8_bytes / 0.9e12 + 2e-6, 1e-15);
}

TEST(KernelModelTest, StreamingKernelIsFloorPlusBytesOrWaitsForTheHost) {
  // add over 1e6 bf16 elements: 3 passes = 6e6 bytes at 1 TB/s * 0.5 = 12 us, plus a 3 us floor.
  DeviceSpec d = ideal_device();
  d.kernel.memory_efficiency = 0.5;
  d.kernel.stream_floor_s = 3e-6;
  KernelQuery q{.kind = KernelKind::memory, .elements = 1e6, .op = "add"};
  EXPECT_NEAR(estimate_kernel(q, d, "kernel", no_launch()).time_s, 15e-6, 1e-15);
  // A host that needs 40 us per launch leaves the device waiting: 40 us per kernel.
  d.kernel_launch_overhead_s = 40e-6;
  const OpCount c{.flops = 1e6, .bytes_read = 6e6, .op_class = OpClass::elementwise};
  const OpCost launch_bound = KernelCostModel().cost(c, d, CostOptions{});
  EXPECT_NEAR(launch_bound.time_s, 40e-6, 1e-15);
  EXPECT_NEAR(launch_bound.launch_overhead_s, 25e-6, 1e-15);
  // ... unless it replays a CUDA graph.
  CostOptions graphs;
  graphs.cuda_graphs = true;
  EXPECT_NEAR(KernelCostModel().cost(c, d, graphs).time_s, 15e-6, 1e-15);
  // A software stack's own host cost per kernel replaces the device's bare launch: 60 us.
  CostOptions python;
  python.host_overhead_per_kernel_s = 60e-6;
  EXPECT_NEAR(KernelCostModel().cost(c, d, python).time_s, 60e-6, 1e-15);
  EXPECT_NEAR(RooflineCostModel().cost(c, d, python).launch_overhead_s, 60e-6, 1e-15);
  python.cuda_graphs = true;  // a graph replays without the host
  EXPECT_NEAR(KernelCostModel().cost(c, d, python).time_s, 15e-6, 1e-15);
  q.op = "no_such_op";
  EXPECT_THROW(estimate_kernel(q, d, "kernel", no_launch()), ConfigError);
}

TEST(KernelModelTest, TheSoftmaxCostsWhatTheDevicesSpecialFunctionUnitsMakeOfIt) {
  // 100 compute units at 1 GHz issuing 16 exp2 a clock: 1.6e12 exponentials a second against
  // 100 TFLOP/s of fp16 matmul, so one score's softmax is worth 100e12 / 1.6e12 / 4 = 15.625
  // head-dim units, not H100's 63: head dim 64 costs (1 + 15.625/64) / (1 + 15.625/128) of head
  // dim 128 per FLOP (the 128 CTAs of both shapes run in the same two waves).
  DeviceSpec d = ideal_device(100);
  d.memory_bandwidth_bytes_per_s = 1e18;
  d.clock_hz = 1e9;
  d.special_function_ops_per_clock = 16;
  auto per_flop = [&](int64_t head_dim, DType dtype, CostOptions o) {
    KernelQuery q{.kind = KernelKind::attention, .dtype = dtype, .batch = 2, .heads = 8, .seq_q = 1024,
                  .seq_k = 1024, .head_dim = head_dim};
    const KernelEstimate e = estimate_kernel(q, d, "kernel", o);
    return e.time_s / e.flops;
  };
  const double ratio = (1.0 + 15.625 / 64) / (1.0 + 15.625 / 128);
  EXPECT_NEAR(per_flop(64, DType::bf16, no_launch()) / per_flop(128, DType::bf16, no_launch()), ratio, 1e-12);
  // A clock override slows the matmuls and the exponentials alike: the ratio holds.
  CostOptions slow = no_launch();
  slow.clock_hz = 0.5e9;
  EXPECT_NEAR(per_flop(64, DType::bf16, slow) / per_flop(128, DType::bf16, slow), ratio, 1e-12);
  // fp8 matmuls at twice the fp16 rate: 31.25 units.
  d.fp8_matrix_flops_per_s = 200e12;
  EXPECT_NEAR(per_flop(64, DType::fp8_e4m3, no_launch()) / per_flop(128, DType::fp8_e4m3, no_launch()),
              (1.0 + 31.25 / 64) / (1.0 + 31.25 / 128), 1e-12);
  // Without the rate (or without units or a clock) the device keeps H100's 63.
  d.special_function_ops_per_clock = 0;
  EXPECT_NEAR(per_flop(64, DType::bf16, no_launch()) / per_flop(128, DType::bf16, no_launch()),
              (127.0 / 64) / (191.0 / 128), 1e-12);
}

TEST(KernelModelTest, AttentionScalesWithHeadDimAndClock) {
  // With no compute units (no wave quantization) attention is its FLOPs at the sustained rate,
  // times (1 + 63/d) / (1 + 63/128) for the softmax's exp work: head dim 64 costs
  // (127/64) / (191/128) = 1.3298... of head dim 128 per FLOP.
  DeviceSpec d = ideal_device(0);
  d.memory_bandwidth_bytes_per_s = 1e18;
  auto per_flop = [&](int64_t head_dim, CostOptions o) {
    KernelQuery q{.kind = KernelKind::attention, .batch = 2, .heads = 8, .seq_q = 1024,
                  .seq_k = 1024, .head_dim = head_dim};
    const KernelEstimate e = estimate_kernel(q, d, "kernel", o);
    return e.time_s / e.flops;
  };
  EXPECT_NEAR(per_flop(128, no_launch()), 1.0 / 100e12, 1e-27);
  EXPECT_NEAR(per_flop(64, no_launch()) / per_flop(128, no_launch()), (127.0 / 64) / (191.0 / 128),
              1e-12);
  // In fp8 the matmuls run at twice the fp16 rate but the exp units do not: the softmax is worth
  // 2 x 63 = 126 head-dim units, (1 + 126/64) / (1 + 126/128) of head dim 128 per FLOP.
  d.fp8_matrix_flops_per_s = 200e12;
  auto fp8_per_flop = [&](int64_t head_dim) {
    KernelQuery q{.kind = KernelKind::attention, .dtype = DType::fp8_e4m3, .batch = 2, .heads = 8,
                  .seq_q = 1024, .seq_k = 1024, .head_dim = head_dim};
    const KernelEstimate e = estimate_kernel(q, d, "kernel", no_launch());
    return e.time_s / e.flops;
  };
  EXPECT_NEAR(fp8_per_flop(128), 1.0 / 200e12, 1e-27);
  EXPECT_NEAR(fp8_per_flop(64) / fp8_per_flop(128), (190.0 / 64) / (254.0 / 128), 1e-12);
  // Half the clock, half the compute rate.
  d.clock_hz = 2e9;
  CostOptions slow = no_launch();
  slow.clock_hz = 1e9;
  EXPECT_NEAR(per_flop(128, slow), 2.0 / 100e12, 1e-27);
  // The backward runs at its own efficiency and counts 2.5x the forward's FLOPs, plus its
  // preprocess and postprocess kernels over the 4 x 512 query rows of 128 (2,048 rows, 262,144
  // elements, bf16): O and dO read (2 x 262,144 x 2 B), D written (4 B a row), the fp32 dQ
  // accumulator cleared (4 B an element), then read (4 B) and written as dQ (2 B): 3,678,208 B.
  d.clock_hz = 0;
  d.kernel.attention_backward_efficiency = 0.5;
  KernelQuery both{.kind = KernelKind::attention, .batch = 1, .heads = 4, .seq_q = 512,
                   .seq_k = 512, .head_dim = 128, .forward = true, .backward = true};
  const KernelEstimate e = estimate_kernel(both, d, "kernel", no_launch());
  const double forward = 4.0 * 4 * 512 * 512 * 128;
  const double side = (2.0 * 262144 * 2 + 4.0 * 2048 + 4.0 * 262144 + 4.0 * 262144 + 2.0 * 262144) / 1e18;
  EXPECT_DOUBLE_EQ(side * 1e18, 3678208.0);
  EXPECT_DOUBLE_EQ(e.flops, 3.5 * forward);
  EXPECT_NEAR(e.time_s, forward / 100e12 + 2.5 * forward / 50e12 + side, 1e-15);
  // cuDNN's backward runs at its own efficiency where the device has one (0.8 here), its
  // forward at cudnn_efficiency (0.25 here); without one, at FlashAttention-2's backward.
  KernelQuery cudnn = both;
  cudnn.impl = AttentionImpl::cudnn;
  d.kernel.cudnn_efficiency = 0.25;
  EXPECT_NEAR(estimate_kernel(cudnn, d, "kernel", no_launch()).time_s,
              forward / 25e12 + 2.5 * forward / 50e12 + side, 1e-15);
  d.kernel.cudnn_backward_efficiency = 0.8;
  EXPECT_NEAR(estimate_kernel(cudnn, d, "kernel", no_launch()).time_s,
              forward / 25e12 + 2.5 * forward / 80e12 + side, 1e-15);
  // FlashAttention-2 keeps its own backward.
  EXPECT_NEAR(estimate_kernel(both, d, "kernel", no_launch()).time_s,
              forward / 100e12 + 2.5 * forward / 50e12 + side, 1e-15);
  // FlashAttention-1 runs forward and backward at 124/230 of FlashAttention-2's rates (the
  // FlashAttention-2 post's A100 maxima): 100 -> 53.913 and 50 -> 26.957 TFLOP/s.
  KernelQuery flash1 = both;
  flash1.impl = AttentionImpl::flash1;
  EXPECT_NEAR(estimate_kernel(flash1, d, "kernel", no_launch()).time_s,
              forward / (100e12 * 124 / 230) + 2.5 * forward / (50e12 * 124 / 230) + side, 1e-15);
}

TEST(KernelModelTest, AttentionBackwardPaysItsSideKernelsKvBlocksAndLayoutCopies) {
  // 108 units at 1 TB/s, 1 us per streaming kernel. Backward of 1 x 54 heads x 1024 x 1024 at
  // head dim 128, bf16: 432 CTAs of 128 keys, 4 full waves; 2.5 x 4 x 54 x 1024^2 x 128 FLOPs
  // at 100 TFLOP/s (head dim 128: no softmax scaling). Each wave also loads and stores a
  // 128 x 128 K, V, dK and dV block per unit: 108 x 4 x 128 x 128 x 2 B at 1 TB/s.
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e12;
  d.kernel.stream_floor_s = 1e-6;
  KernelQuery q{.kind = KernelKind::attention, .batch = 1, .heads = 54, .seq_q = 1024,
                .seq_k = 1024, .head_dim = 128, .forward = false, .backward = true};
  const double compute = 2.5 * 4 * 54 * 1024.0 * 1024 * 128 / 100e12;
  const double kv_blocks = 4 * 108 * 4 * 128 * 128 * 2.0 / 1e12;
  // Side kernels over 55,296 rows, 7,077,888 elements: 2 x 7,077,888 x 2 + 4 x 55,296 +
  // 4 x 7,077,888 = 56,844,288 B before, 6 x 7,077,888 = 42,467,328 B after, each a kernel.
  const double side = (56844288.0 + 42467328.0) / 1e12 + 2e-6;
  const KernelEstimate e = estimate_kernel(q, d, "kernel", no_launch());
  EXPECT_NEAR(e.time_s, compute + kv_blocks + side, 1e-15);
  // Contiguous [batch, heads, seq, dim] inputs: PyTorch's FlashAttention-2 backward first
  // copies O and dO (14,155,776 B each) with a permute, counted at two passes: 4 x 14,155,776 B
  // read and written per copy, each a streaming kernel.
  q.heads_first_inputs = true;
  const KernelEstimate copied = estimate_kernel(q, d, "kernel", no_launch());
  EXPECT_NEAR(copied.time_s, e.time_s + 2 * (4 * 14155776.0 / 1e12 + 1e-6), 1e-15);
  EXPECT_DOUBLE_EQ(copied.bytes, e.bytes + 2 * 4 * 14155776.0);
  // cuDNN takes the strided layout as it is.
  q.impl = AttentionImpl::cudnn;
  const KernelEstimate cudnn = estimate_kernel(q, d, "kernel", no_launch());
  EXPECT_NEAR(cudnn.time_s, e.time_s, 1e-15);
  // The exp weighs 4/10 as much per backward FLOP: head dim 64 costs
  // (1 + 25.2/64) / (1 + 25.2/128) of head dim 128 per FLOP, without units or bandwidth limits.
  DeviceSpec flat = ideal_device(0);
  flat.memory_bandwidth_bytes_per_s = 1e18;
  auto per_flop = [&](int64_t head_dim) {
    KernelQuery b{.kind = KernelKind::attention, .batch = 2, .heads = 8, .seq_q = 1024,
                  .seq_k = 1024, .head_dim = head_dim, .forward = false, .backward = true};
    const KernelEstimate r = estimate_kernel(b, flat, "kernel", no_launch());
    return r.time_s / r.flops;
  };
  EXPECT_NEAR(per_flop(64) / per_flop(128), (1 + 25.2 / 64) / (1 + 25.2 / 128), 1e-6);
}

TEST(KernelModelTest, AttentionWavesCausalImbalanceAndSplitKvDecode) {
  // 108 units, bandwidth irrelevant. Non-causal, batch 1 x 54 heads x 1024 queries = 432 CTAs
  // of 128 queries: 4 waves for 4 CTAs per unit, no penalty: time = FLOPs / peak.
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e18;
  auto attention = [&](int64_t heads, int64_t sq, int64_t sk, bool causal) {
    KernelQuery q{.kind = KernelKind::attention, .batch = 1, .heads = heads, .seq_q = sq,
                  .seq_k = sk, .head_dim = 128, .causal = causal};
    const KernelEstimate e = estimate_kernel(q, d, "kernel", no_launch());
    return e.time_s / (e.flops / 100e12);
  };
  EXPECT_NEAR(attention(54, 1024, 1024, false), 1.0, 1e-12);
  // Causal with 8 query blocks and only 8 CTAs (1 head): one wave, as long as its last block,
  // 2 * 7.5 / 8 = 1.875 average blocks, over 8 CTAs on 108 units: 1.875 * 108 / 8 = 25.3125;
  // and the diagonal 128 x 128 blocks are computed whole: 8 * 9 / 2 = 36 blocks of 128^2 pairs
  // = 589824 computed for the 1024 * 1025 / 2 = 524800 the mask lets through.
  EXPECT_NEAR(attention(1, 1024, 1024, true), 1.875 * 108 / 8 * 589824.0 / 524800.0, 1e-9);
  // 54 heads causal: 432 CTAs in 4 waves, longer than the imbalance bound (2 * 7.5 / 8), so
  // only the diagonal blocks cost extra.
  EXPECT_NEAR(attention(54, 1024, 1024, true), 589824.0 / 524800.0, 1e-12);
  // A fixed 2 us per wave of query blocks: 4 waves, 8 us on top.
  d.kernel.gemm_tile_overhead_s = 2e-6;
  KernelQuery q{.kind = KernelKind::attention, .batch = 1, .heads = 54, .seq_q = 1024,
                .seq_k = 1024, .head_dim = 128};
  const KernelEstimate e = estimate_kernel(q, d, "kernel", no_launch());
  EXPECT_NEAR(e.time_s, e.flops / 100e12 + 8e-6, 1e-15);
  d.kernel.gemm_tile_overhead_s = 0.0;
  // Decode: 1 query per head against 4096 keys splits the keys (no wave penalty).
  EXPECT_NEAR(attention(8, 1, 4096, false), 1.0, 1e-12);
}

TEST(KernelModelTest, ErrorStatsAreMediansAndP90OfRelativeErrors) {
  // |errors| 0.1, 0.2, 0, 0.5: median 0.15, p90 (linear) 0.2 + 0.7 * 0.3 = 0.41; signed
  // errors 0.1, -0.2, 0, 0.5: median 0.05.
  const ErrorStats s = error_stats({1.1, 0.8, 1.0, 1.5}, {1, 1, 1, 1});
  EXPECT_EQ(s.rows, 4);
  EXPECT_NEAR(s.median_abs_error, 0.15, 1e-12);
  EXPECT_NEAR(s.p90_abs_error, 0.41, 1e-12);
  EXPECT_NEAR(s.median_signed_error, 0.05, 1e-12);
  EXPECT_THROW(error_stats({1.0}, {0.0}), ConfigError);
}

TEST(KernelModelTest, FitRecoversTheConstantsThatMadeTheMeasurements) {
  // Measurements made by the model itself under known constants are fitted back from the
  // defaults to the grid points they were made with. At 0.5 TB/s the GEMMs with M <= 64 are
  // bound by their weights (they show the GEMM bandwidth), the others by whole tiles (the
  // efficiency, and over K = 256...1024 the fixed time per wave of tiles).
  DeviceSpec truth = ideal_device();
  truth.memory_bandwidth_bytes_per_s = 0.5e12;
  truth.kernel = {.calibrated = true, .matmul_efficiency = 0.6, .attention_efficiency = 0.4,
                  .attention_backward_efficiency = 0.45, .memory_efficiency = 0.7,
                  .gemm_memory_efficiency = 0.8, .gemm_tile_overhead_s = 1.5e-6,
                  .kernel_floor_s = 4e-6, .stream_floor_s = 6e-6};
  std::vector<KernelQuery> queries;
  for (int64_t m : {1, 16, 64, 1024, 4096, 8192}) queries.push_back(matmul(m, 4096, 4096));
  for (int64_t k : {256, 512, 1024}) queries.push_back(matmul(8192, 8192, k));
  for (int64_t s : {512, 2048, 8192}) {
    queries.push_back({.kind = KernelKind::attention, .batch = 4, .heads = 16, .seq_q = s,
                       .seq_k = s, .head_dim = 128});
  }
  for (double n : {1e4, 1e5, 1e6, 1e7, 1e8}) {
    queries.push_back({.kind = KernelKind::memory, .elements = n, .op = "mul"});
  }
  std::vector<double> measured;
  for (const KernelQuery& q : queries) {
    measured.push_back(estimate_kernel(q, truth, "kernel", no_launch()).time_s);
  }
  DeviceSpec start = ideal_device();
  start.memory_bandwidth_bytes_per_s = 0.5e12;
  start.kernel = KernelConstants{};
  const KernelConstants k = fit_kernel_constants(queries, measured, start);
  EXPECT_TRUE(k.calibrated);
  EXPECT_NEAR(k.matmul_efficiency, 0.6, 0.011);
  EXPECT_NEAR(k.attention_efficiency, 0.4, 0.011);
  EXPECT_NEAR(k.memory_efficiency, 0.7, 0.011);
  EXPECT_NEAR(k.stream_floor_s, 6e-6, 0.3e-6);
  EXPECT_NEAR(k.gemm_memory_efficiency, 0.8, 0.04);
  // The library floor and the GEMM tile overhead trade off on these shapes (both lengthen every
  // GEMM by about the same time), so the fit need not find them apart; together with the other
  // constants they reproduce every measurement within 2%.
  DeviceSpec fitted = start;
  fitted.kernel = k;
  for (size_t i = 0; i < queries.size(); ++i) {
    EXPECT_NEAR(estimate_kernel(queries[i], fitted, "kernel", no_launch()).time_s / measured[i], 1.0,
                0.02)
        << i;
  }
  // Constants named in `keep` hold the starting device's values (the streaming floor and
  // efficiency here, though the rows ask for 6 us and 0.7); an unknown name is refused.
  const KernelConstants held =
      fit_kernel_constants(queries, measured, start, {"stream_floor_s", "memory_efficiency"});
  EXPECT_EQ(held.stream_floor_s, start.kernel.stream_floor_s);
  EXPECT_EQ(held.memory_efficiency, start.kernel.memory_efficiency);
  EXPECT_NEAR(held.matmul_efficiency, 0.6, 0.011);
  EXPECT_THROW(fit_kernel_constants(queries, measured, start, {"stream_floor_us"}), ConfigError);
}

TEST(KernelModelTest, TheSustainedClockIsTheMedianClockOfTheLongGemms) {
  // On the ideal device at 1 GHz a large bf16 GEMM is all tile arithmetic (no floors, no tile
  // overhead; its 0.4 GB of operands take 0.4 ms at 1 TB/s against ~11 ms of multiply-adds), so
  // its time goes as 1 / clock: a GEMM measured 1/0.9 times its full-clock time ran at 0.9 of the
  // clock. Three such GEMMs of at least kSustainedKernelS (3 ms) at 0.88, 0.9 and 0.95 give the
  // median, 0.9; a short GEMM measured at half the clock does not count.
  DeviceSpec d = ideal_device();
  d.clock_hz = 1e9;
  std::vector<KernelQuery> queries = {matmul(8192, 8192, 8192), matmul(16384, 8192, 8192),
                                      matmul(8192, 16384, 8192), matmul(1024, 1024, 1024)};
  const double share[] = {0.88, 0.9, 0.95, 0.5};
  std::vector<double> measured;
  for (size_t i = 0; i < queries.size(); ++i) {
    measured.push_back(estimate_kernel(queries[i], d, "kernel", no_launch()).time_s / share[i]);
  }
  ASSERT_GE(measured[0], kSustainedKernelS);
  ASSERT_LT(measured[3], kSustainedKernelS);
  int used = 0;
  EXPECT_NEAR(fit_sustained_clock_fraction(queries, measured, d, &used), 0.9, 1e-9);
  EXPECT_EQ(used, 3);
  // Faster than the model at full clock: at most 1. Fewer than kSustainedMinRows long rows: 0.
  EXPECT_EQ(fit_sustained_clock_fraction(queries, {measured[0] * 0.8, measured[1] * 0.8, measured[2] * 0.8, measured[3]}, d), 1.0);
  EXPECT_EQ(fit_sustained_clock_fraction({queries[0], queries[1]}, {measured[0], measured[1]}, d, &used), 0.0);
  EXPECT_EQ(used, 0);
  // fit_kernel_constants fits it last, with the other constants (held here at the ones that made
  // the rows); named in `keep`, or with too few long rows, it holds the device's value.
  std::vector<std::string> others;
  for (const std::string& name : kernel_constant_names()) {
    if (name != "sustained_clock_fraction") others.push_back(name);
  }
  DeviceSpec start = d;
  start.kernel.sustained_clock_fraction = 0.7;
  EXPECT_NEAR(fit_kernel_constants(queries, measured, start, others).sustained_clock_fraction, 0.9, 1e-9);
  others.push_back("sustained_clock_fraction");
  EXPECT_EQ(fit_kernel_constants(queries, measured, start, others).sustained_clock_fraction, 0.7);
  EXPECT_EQ(fit_kernel_constants({queries[0], queries[3]}, {measured[0], measured[3]}, start).sustained_clock_fraction, 0.7);
  // A device without a clock cannot be fitted.
  d.clock_hz = 0;
  EXPECT_THROW(fit_sustained_clock_fraction(queries, measured, d), ConfigError);
}

TEST(KernelModelTest, AKernelTimedAloneAddsItsClassOverheadAndTheFitTellsItFromTheFloor) {
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e12;
  d.kernel.kernel_floor_s = 3e-6;
  d.kernel.stream_floor_s = 1.5e-6;
  d.kernel.alone_kernel_overhead_s = 7e-6;
  d.kernel.alone_stream_overhead_s = 2.5e-6;
  // A decode GEMM (M = 1 against a 4,096 x 4,096 bf16 weight: 33.6 MB) and a streaming mul of
  // 1e6 bf16 elements (6 MB): alone, each is its in-stream time plus its class's overhead.
  KernelQuery gemm = matmul(1, 4096, 4096);
  KernelQuery mul{.kind = KernelKind::memory, .elements = 1e6, .op = "mul"};
  const double gemm_stream = estimate_kernel(gemm, d, "kernel", no_launch()).time_s;
  const double mul_stream = estimate_kernel(mul, d, "kernel", no_launch()).time_s;
  EXPECT_NEAR(mul_stream, 1.5e-6 + 6e6 / 1e12, 1e-12);  // floor + bytes at 1 TB/s (efficiency 1)
  gemm.timed_alone = mul.timed_alone = true;
  EXPECT_NEAR(estimate_kernel(gemm, d, "kernel", no_launch()).time_s - gemm_stream, 7e-6, 1e-12);
  EXPECT_NEAR(estimate_kernel(mul, d, "kernel", no_launch()).time_s - mul_stream, 2.5e-6, 1e-12);
  // The roofline is compared with the same measurements: it adds the same overhead.
  gemm.timed_alone = false;
  const double roof = estimate_kernel(gemm, d, "roofline", no_launch()).roofline_time_s;
  gemm.timed_alone = true;
  EXPECT_NEAR(estimate_kernel(gemm, d, "roofline", no_launch()).roofline_time_s - roof, 7e-6, 1e-12);

  // Rows of both timings pin a floor and an overhead apart (each timed-alone row is a stream
  // row plus the overhead); from the defaults the fit finds the grid points they were made with.
  std::vector<KernelQuery> queries;
  for (int64_t m : {1, 16, 64, 4096}) {
    for (bool alone : {false, true}) {
      KernelQuery q = matmul(m, 4096, 4096);
      q.timed_alone = alone;
      queries.push_back(q);
    }
  }
  for (double n : {1e3, 1e5, 1e7, 1e8}) {
    for (bool alone : {false, true}) {
      queries.push_back({.kind = KernelKind::memory, .elements = n, .op = "add", .timed_alone = alone});
    }
  }
  std::vector<double> measured;
  for (const KernelQuery& q : queries) measured.push_back(estimate_kernel(q, d, "kernel", no_launch()).time_s);
  DeviceSpec start = d;
  start.kernel = KernelConstants{};
  const KernelConstants k = fit_kernel_constants(queries, measured, start);
  EXPECT_NEAR(k.alone_kernel_overhead_s, 7e-6, 0.26e-6);
  EXPECT_NEAR(k.alone_stream_overhead_s, 2.5e-6, 0.13e-6);
  EXPECT_NEAR(k.stream_floor_s, 1.5e-6, 0.26e-6);
  // Timed alone only, a floor and the overhead show only as their sum, which belongs to the
  // timing: the in-stream floors hold the device's values (the defaults: 3 us each) and the
  // streaming kernels' overhead takes the rest, 1.5 + 2.5 - 3 = 1 us, so a simulated step's small
  // kernels keep the in-stream floor. (The library kernels' overhead trades off against the GEMM
  // tile overhead on these shapes, as above; together they reproduce every alone row within 3%.)
  std::vector<KernelQuery> alone_only, stream_only;
  std::vector<double> alone_measured, stream_measured;
  for (size_t i = 0; i < queries.size(); ++i) {
    (queries[i].timed_alone ? alone_only : stream_only).push_back(queries[i]);
    (queries[i].timed_alone ? alone_measured : stream_measured).push_back(measured[i]);
  }
  const KernelConstants alone = fit_kernel_constants(alone_only, alone_measured, start);
  EXPECT_EQ(alone.stream_floor_s, start.kernel.stream_floor_s);
  EXPECT_EQ(alone.kernel_floor_s, start.kernel.kernel_floor_s);
  EXPECT_NEAR(alone.alone_stream_overhead_s, 1e-6, 0.13e-6);
  DeviceSpec fitted = start;
  fitted.kernel = alone;
  for (size_t i = 0; i < alone_only.size(); ++i) {
    EXPECT_NEAR(estimate_kernel(alone_only[i], fitted, "kernel", no_launch()).time_s / alone_measured[i], 1.0, 0.03) << i;
  }
  // In a stream only, the floors are fitted and the overheads, which no row shows, hold.
  const KernelConstants stream = fit_kernel_constants(stream_only, stream_measured, start);
  EXPECT_NEAR(stream.stream_floor_s, 1.5e-6, 0.26e-6);
  EXPECT_EQ(stream.alone_kernel_overhead_s, start.kernel.alone_kernel_overhead_s);
  EXPECT_EQ(stream.alone_stream_overhead_s, start.kernel.alone_stream_overhead_s);
}

TEST(KernelModelTest, StreamingConstantsAreFittedOnElementWiseKernelsWhereThereAreAny) {
  // add and copy stream at 0.8 of 1 TB/s; a softmax over the same bytes takes three times as long
  // (bound by its SMs). The streaming efficiency comes from the element-wise rows alone; without
  // them, from the softmax rows.
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e12;
  d.kernel.memory_efficiency = 0.8;
  d.kernel.stream_floor_s = 2e-6;
  std::vector<KernelQuery> queries;
  std::vector<double> measured;
  for (double n : {1e6, 1e7, 1e8}) {
    for (const char* op : {"add", "copy", "softmax"}) {
      const KernelQuery q{.kind = KernelKind::memory, .elements = n, .op = op};
      const double t = estimate_kernel(q, d, "kernel", no_launch()).time_s;
      queries.push_back(q);
      measured.push_back(std::string(op) == "softmax" ? 3.0 * t : t);
    }
  }
  DeviceSpec start = d;
  start.kernel = KernelConstants{};
  EXPECT_NEAR(fit_kernel_constants(queries, measured, start).memory_efficiency, 0.8, 0.011);
  std::vector<KernelQuery> softmax_only;
  std::vector<double> softmax_measured;
  for (size_t i = 2; i < queries.size(); i += 3) {
    softmax_only.push_back(queries[i]);
    softmax_measured.push_back(measured[i]);
  }
  // They ask for 0.8 / 3 = 0.27: the fit goes to its grid's lowest efficiency, 0.40.
  EXPECT_NEAR(fit_kernel_constants(softmax_only, softmax_measured, start).memory_efficiency, 0.40, 1e-9);
}

// Streams at 0.8 of 1 TB/s after a 2 us floor; ATen's softmax, norms and widening casts at the
// given shares of that.
DeviceSpec aten_share_device(double softmax, double norm, double cast) {
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e12;
  d.kernel.memory_efficiency = 0.8;
  d.kernel.stream_floor_s = 2e-6;
  d.kernel.softmax_bandwidth_share = softmax;
  d.kernel.norm_bandwidth_share = norm;
  d.kernel.widening_cast_bandwidth_share = cast;
  return d;
}

TEST(KernelModelTest, AtenSoftmaxNormsAndWideningCastsStreamAtTheirShare) {
  // 1 TB/s at 0.8: an add over 1e8 bf16 elements moves 6e8 bytes in 750 us, plus a 2 us floor.
  DeviceSpec d = aten_share_device(0.4, 0.8, 0.5);
  auto time = [&](const char* op, double bytes, bool aten) {
    const KernelQuery q{.kind = KernelKind::memory, .bytes = bytes, .elements = 1e8, .op = op,
                        .aten_kernel = aten};
    return estimate_kernel(q, d, "kernel", no_launch()).time_s;
  };
  EXPECT_NEAR(time("add", 6e8, true), 752e-6, 1e-12);
  // ATen's softmax over 4e8 bytes (read and written once): 4e8 / (0.8e12 x 0.4) = 1250 us.
  EXPECT_NEAR(time("softmax", 4e8, true), 1252e-6, 1e-12);
  // Its norm: 4e8 / (0.8e12 x 0.8) = 625 us.
  EXPECT_NEAR(time("layer_norm", 4e8, true), 627e-6, 1e-12);
  EXPECT_NEAR(time("rms_norm", 4e8, true), 627e-6, 1e-12);
  // A bf16 -> fp32 cast reads 2e8 and writes 4e8 bytes: 6e8 / (0.8e12 x 0.5) = 1500 us.
  EXPECT_NEAR(time("cast", 6e8, true), 1502e-6, 1e-12);
  // A fused replacement (Liger's, a compiled graph's) streams at the full rate: 500 us.
  EXPECT_NEAR(time("softmax", 4e8, false), 502e-6, 1e-12);
  EXPECT_NEAR(time("cast", 6e8, false), 752e-6, 1e-12);
  // A narrowing cast in a graph (fp32 -> bf16: reads 4e8, writes 2e8) streams at the full rate.
  const OpCount narrow{.bytes_read = 4e8, .bytes_written = 2e8, .op_class = OpClass::copy};
  EXPECT_NEAR(KernelCostModel().cost(narrow, d, no_launch()).time_s, 752e-6, 1e-12);
  const OpCount wide{.bytes_read = 2e8, .bytes_written = 4e8, .op_class = OpClass::copy};
  EXPECT_NEAR(KernelCostModel().cost(wide, d, no_launch()).time_s, 1502e-6, 1e-12);
  // A zero share means "as any streaming kernel".
  d.kernel.softmax_bandwidth_share = 0.0;
  EXPECT_NEAR(time("softmax", 4e8, true), 502e-6, 1e-12);
}

TEST(KernelModelTest, FitRecoversTheAtenBandwidthSharesFromLargeRowsOnly) {
  // Rows made with shares 0.3 (softmax), 0.9 (norms) and 0.6 (casts) over a streaming rate that
  // the adds pin; rows under 32 MB, where the floor and the host set the time, carry a 10 us
  // host cost that must not pull the shares.
  DeviceSpec d = aten_share_device(0.3, 0.9, 0.6);
  std::vector<KernelQuery> queries;
  std::vector<double> measured;
  for (double n : {1e5, 1e6, 3e7, 1e8}) {
    for (const char* op : {"add", "softmax", "layer_norm", "cast"}) {
      const double per = std::string(op) == "add" ? 6.0 : std::string(op) == "cast" ? 6.0 : 4.0;
      const KernelQuery q{.kind = KernelKind::memory, .bytes = per * n, .elements = n, .op = op,
                          .aten_kernel = true};
      const double t = estimate_kernel(q, d, "kernel", no_launch()).time_s;
      queries.push_back(q);
      measured.push_back(per * n < 32e6 && std::string(op) != "add" ? t + 10e-6 : t);
    }
  }
  DeviceSpec start = d;
  start.kernel.softmax_bandwidth_share = 0.5;
  start.kernel.norm_bandwidth_share = 0.5;
  start.kernel.widening_cast_bandwidth_share = 0.5;
  const KernelConstants k = fit_kernel_constants(queries, measured, start);
  EXPECT_NEAR(k.memory_efficiency, 0.8, 0.011);
  EXPECT_NEAR(k.softmax_bandwidth_share, 0.3, 0.011);
  EXPECT_NEAR(k.norm_bandwidth_share, 0.9, 0.011);
  EXPECT_NEAR(k.widening_cast_bandwidth_share, 0.6, 0.011);
}

TEST(KernelModelTest, GemmsOffTheSixteenByteAlignmentRunOnTheSlowKernels) {
  // K of the operands and N of B and of the result must be multiples of 16 bytes: 8 bf16
  // elements, 16 fp8 ones (whose result, bf16, needs N a multiple of 8). M does not matter.
  EXPECT_FALSE(gemm_leading_dims_aligned(4096, 10922, DType::bf16));
  EXPECT_TRUE(gemm_leading_dims_aligned(4096, 10944, DType::bf16));
  EXPECT_FALSE(gemm_leading_dims_aligned(10922, 4096, DType::bf16));
  EXPECT_TRUE(gemm_leading_dims_aligned(4096, 10936, DType::bf16));
  EXPECT_FALSE(gemm_leading_dims_aligned(4096, 10936, DType::fp8_e4m3));
  EXPECT_FALSE(gemm_leading_dims_aligned(10936, 4096, DType::fp8_e4m3));  // B's rows: 16 fp8
  EXPECT_TRUE(gemm_leading_dims_aligned(10944, 4096, DType::fp8_e4m3));
  EXPECT_TRUE(gemm_leading_dims_aligned(50304, 768, DType::bf16));
  EXPECT_FALSE(gemm_leading_dims_aligned(50257, 768, DType::bf16));  // GPT-2's vocab
  // Compute-bound (bandwidth made irrelevant): the kernel steps through K in whole 64-deep
  // slices, so K = 4,092 costs as much as 4,096 for 4,092/4,096 of the FLOPs; the time per FLOP
  // of K = 4,092 over that of K = 4,096 is 4,096/4,092 times the ratio of the efficiencies.
  DeviceSpec d = ideal_device();
  d.memory_bandwidth_bytes_per_s = 1e18;
  auto per_flop = [&](int64_t k) {
    const KernelEstimate e = estimate_kernel(matmul(4096, 4096, k), d, "kernel", no_launch());
    return e.time_s / e.flops;
  };
  // No constant: 0.32 of the aligned efficiency (1.0 here).
  EXPECT_NEAR(per_flop(4092) / per_flop(4096), 4096.0 / 4092.0 / 0.32, 1e-9);
  d.kernel.unaligned_matmul_efficiency = 0.25;
  EXPECT_NEAR(per_flop(4092) / per_flop(4096), 4096.0 / 4092.0 * 4.0, 1e-9);
}

TEST(KernelModelTest, LatencyBandWeighsEachClassErrorByItsTime) {
  // 3 s of matmul at 10%, 1 s of attention at 20%, 1 s of elementwise at 30%; collectives are
  // not timed here and do not count: (0.3 + 0.2 + 0.3) / 5 = 0.16.
  SimulationResult r;
  auto add = [&](OpClass c, double t) {
    OpResult op;
    op.count.op_class = c;
    op.cost.time_s = t;
    r.ops.push_back(op);
  };
  add(OpClass::matmul, 3.0);
  add(OpClass::attention, 1.0);
  add(OpClass::elementwise, 1.0);
  add(OpClass::communication, 5.0);
  EXPECT_NEAR(latency_error_band(r, {.gemm = 0.1, .attention = 0.2, .memory = 0.3}), 0.16, 1e-12);
  EXPECT_EQ(latency_error_band(SimulationResult{}, {}), 0.0);
  // An error is a size: a negative or infinite one is refused, naming it.
  try {
    latency_error_band(r, {.gemm = 0.1, .attention = -0.2, .memory = 0.3});
    ADD_FAILURE() << "a negative error was taken";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "latency_error_band: errors.attention must not be negative (got -0.2)");
  }
  EXPECT_THROW(latency_error_band(r, {.gemm = std::numeric_limits<double>::infinity()}), ConfigError);
}

}  // namespace
}  // namespace accelsim
