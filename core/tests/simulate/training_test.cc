// One parallel training step composed from a stage's simulation, checked piece by piece.
#include "accelsim/training.h"

#include <gtest/gtest.h>

#include "accelsim/builder.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

ModelSpec small_gpt(int64_t layers) {
  return ModelSpec{.name = "small", .family = "gpt2", .hidden_size = 256, .num_layers = layers,
                   .num_heads = 8, .num_kv_heads = 8, .head_dim = 32, .ffn_size = 1024,
                   .vocab_size = 1024, .max_position_embeddings = 512,
                   .activation = Activation::gelu_tanh, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .rotary = false, .learned_positions = true,
                   .fused_qkv = true, .tied_embeddings = true, .qkv_bias = true,
                   .output_bias = true, .ffn_bias = true};
}

SystemSpec round_system() {
  SystemSpec s;
  s.id = "round";
  s.scaleup_domain = 8;
  s.scaleup = {.bandwidth_bytes_per_s = 100e9, .latency_s = 1e-6, .efficiency = 1.0};
  s.scaleout = {.bandwidth_bytes_per_s = 10e9, .latency_s = 5e-6, .efficiency = 1.0};
  return s;
}

TEST(TrainingTest, StepIsComputeBubblePipelineDataParallelAndOptimizer) {
  // 4 layers, TP 2 x PP 2 x DP 2 (8 GPUs, one domain), global batch 8 of micro-batch 1:
  // 4 micro-batches per step on each of the 2 data-parallel replicas.
  const ModelSpec m = small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const ParallelLayout layout{.tp = 2, .pp = 2, .dp = 2, .micro_batch = 1, .global_batch = 8};
  const BuildOptions base{.seq = 128};
  const TrainingEstimate e = estimate_training(m, base, layout, d, sys, SimulateOptions{});
  ASSERT_TRUE(e.feasible) << e.reason;
  EXPECT_EQ(e.micro_batches, 4);

  // The stage by hand: 2 of the 4 layers, one micro-batch, TP 2 collectives on the system.
  ModelSpec stage = m;
  stage.num_layers = 2;
  const Graph g = build_graph(stage, {.phase = Phase::train, .batch = 1, .seq = 128, .tensor_parallel = 2});
  SimulateOptions o;
  o.system = sys;
  o.groups = {{.name = "tp", .size = 2, .ranks_per_domain = 2}};
  const SimulationResult r = simulate(g, d, o);
  const double per_mb = r.forward_time_s + r.backward_time_s;
  EXPECT_NEAR(e.compute_s, 4 * per_mb, 1e-12);
  EXPECT_NEAR(e.tp_comm_s, 4 * r.communication_time_s, 1e-12);
  EXPECT_GT(e.tp_comm_s, 0.0);
  EXPECT_NEAR(e.bubble_s, 1 * per_mb, 1e-12);  // (pp - 1) / v micro-batch times
  // Pipeline fill and drain: 2 (pp - 1) sends of [1, 128, 256] bf16 = 65,536 bytes inside the
  // domain: 1 us + 65,536 B / 100 GB/s each.
  EXPECT_NEAR(e.pp_comm_s, 2 * (1e-6 + 65536.0 / 100e9), 1e-15);
  // ZeRO-1 over 2 ranks in the domain: reduce-scatter of the fp32 gradients and all-gather of
  // the bf16 parameters, (p-1) alpha + (p-1)/p S / B each, minus the backward / forward of one
  // micro-batch they overlap with.
  double params = 0, grads = 0;
  for (const Storage& st : g.storages()) {
    if (st.kind == StorageKind::parameter) params += static_cast<double>(st.size_bytes);
    if (st.kind == StorageKind::gradient) grads += static_cast<double>(st.size_bytes);
  }
  const double rs = 1e-6 + 0.5 * grads / 100e9, ag = 1e-6 + 0.5 * params / 100e9;
  EXPECT_NEAR(e.dp_comm_s, std::max(0.0, rs - r.backward_time_s) + std::max(0.0, ag - r.forward_time_s), 1e-12);
  EXPECT_NEAR(e.optimizer_s, r.optimizer_time_s / 2, 1e-15);
  EXPECT_NEAR(e.step_s, e.compute_s + e.bubble_s + e.pp_comm_s + e.dp_comm_s + e.optimizer_s, 1e-15);
  EXPECT_NEAR(e.tokens_per_s, 8 * 128 / e.step_s, 1e-6);
  EXPECT_GT(e.mfu, 0.0);
  EXPECT_LT(e.mfu, 1.0);
  // Interleaving 2 virtual stages halves the bubble and doubles the fill/drain sends.
  ParallelLayout v = layout;
  v.virtual_stages = 2;
  v.global_batch = 8;
  const TrainingEstimate ei = estimate_training(m, base, v, d, sys, SimulateOptions{});
  ASSERT_TRUE(ei.feasible) << ei.reason;
  EXPECT_NEAR(ei.bubble_s, e.bubble_s / 2, 1e-12);
  EXPECT_NEAR(ei.pp_comm_s, 2 * e.pp_comm_s, 1e-15);
}

TEST(TrainingTest, UnevenStagesWaitForTheHeaviest) {
  // 5 layers over 2 stages: the step is paced by the stage with 3 (and the embedding and head).
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const TrainingEstimate five = estimate_training(small_gpt(5), {.seq = 128}, {.pp = 2, .global_batch = 4}, d,
                                                  sys, SimulateOptions{});
  const TrainingEstimate six = estimate_training(small_gpt(6), {.seq = 128}, {.pp = 2, .global_batch = 4}, d,
                                                 sys, SimulateOptions{});
  ASSERT_TRUE(five.feasible) << five.reason;
  EXPECT_NEAR(five.compute_s, six.compute_s, 1e-15);
}

TEST(TrainingTest, InfeasibleLayoutsSayWhy) {
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128};
  auto why = [&](ParallelLayout l, int64_t layers = 4) {
    const TrainingEstimate e = estimate_training(small_gpt(layers), base, l, d, sys, SimulateOptions{});
    EXPECT_FALSE(e.feasible);
    return e.reason;
  };
  EXPECT_NE(why({.pp = 8, .global_batch = 8}).find("fewer than 8 stages"), std::string::npos);
  EXPECT_NE(why({.dp = 2, .micro_batch = 2, .global_batch = 6}).find("not a multiple"), std::string::npos);
  EXPECT_NE(why({.tp = 3, .global_batch = 1}).find("divisible"), std::string::npos);
  EXPECT_NE(why({.pp = 2, .global_batch = 3, .virtual_stages = 2}).find("multiple of pp"), std::string::npos);
  DeviceSpec tiny = d;
  tiny.memory_bytes = 1e6;
  const TrainingEstimate e = estimate_training(small_gpt(4), base, {.global_batch = 1}, tiny, sys, SimulateOptions{});
  EXPECT_FALSE(e.fits);
  EXPECT_NE(e.reason.find("per GPU"), std::string::npos);
}

}  // namespace
}  // namespace accelsim
