// One parallel training step composed from a stage's simulation, checked piece by piece.
#include "accelsim/plan.h"
#include "accelsim/training.h"

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/error.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

using testing::round_system;

TEST(TrainingTest, StepIsComputeBubblePipelineDataParallelAndOptimizer) {
  // 4 layers, TP 2 x PP 2 x DP 2 (8 GPUs, one domain), global batch 8 of micro-batch 1:
  // 4 micro-batches per step on each of the 2 data-parallel replicas.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const ParallelLayout layout{.tp = 2, .pp = 2, .dp = 2, .micro_batch = 1, .global_batch = 8};
  const BuildOptions base{.seq = 128};
  const TrainingEstimate e = estimate_training(m, base, layout, d, sys, SimulateOptions{});
  ASSERT_TRUE(e.feasible) << e.reason;
  EXPECT_EQ(e.micro_batches, 4);  // global batch 8 / (dp 2 x micro-batch 1)

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
  // The heaviest stage is the first: the embedding with its position table and 2 layers, the
  // graph above less the final LayerNorm's weight and bias (2 x 256, bf16 parameters and fp32
  // gradients); the last stage's copy of the tied word table leaves the position table out.
  params -= 2 * 256 * 2;
  grads -= 2 * 256 * 4;
  const double rs = 1e-6 + 0.5 * grads / 100e9, ag = 1e-6 + 0.5 * params / 100e9;
  EXPECT_NEAR(e.dp_comm_s, std::max(0.0, rs - r.backward_time_s) + std::max(0.0, ag - r.forward_time_s), 1e-12);
  EXPECT_NEAR(e.optimizer_s, r.optimizer_time_s / 2, 1e-15);
  // The compute beside a hidden collective is slowed by 18.9% of the time it hides (arXiv
  // 2507.03114): what the reduce-scatter and the all-gather hide behind one micro-batch's backward
  // and forward, and the TP collectives the stage overlaps, 4 micro-batches of them.
  const double hidden = std::min(rs, r.backward_time_s) + std::min(ag, r.forward_time_s) +
                        4 * r.overlapped_communication_s;
  EXPECT_GT(hidden, 0.0);
  EXPECT_NEAR(e.overlap_slowdown_s, 0.189 * hidden, 1e-15);
  EXPECT_NEAR(e.step_s, e.compute_s + e.bubble_s + e.pp_comm_s + e.dp_comm_s + e.overlap_slowdown_s + e.optimizer_s,
              1e-15);
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

TEST(TrainingTest, StepsRunAtTheSustainedClockUnlessOneIsGiven) {
  // A device measured to keep 0.8 of its 1 GHz clock under sustained load trains as the same
  // device run at an 800 MHz clock override; an explicit override wins over the sustained clock.
  // (The kernel cost model: the roofline has no clock.)
  SimulateOptions kernel;
  kernel.cost_model = "kernel";
  const ModelSpec m = testing::small_gpt(4);
  DeviceSpec d = testing::round_device();
  d.clock_hz = 1e9;
  const SystemSpec sys = round_system();
  const ParallelLayout layout{.tp = 2, .pp = 2, .dp = 2, .micro_batch = 1, .global_batch = 8};
  const BuildOptions base{.seq = 128};
  const TrainingEstimate full = estimate_training(m, base, layout, d, sys, kernel);
  EXPECT_EQ(full.clock_hz, 0.0);
  SimulateOptions at_800 = kernel;
  at_800.cost.clock_hz = 0.8e9;
  const TrainingEstimate clocked = estimate_training(m, base, layout, d, sys, at_800);
  d.kernel.sustained_clock_fraction = 0.8;
  const TrainingEstimate sustained = estimate_training(m, base, layout, d, sys, kernel);
  ASSERT_TRUE(sustained.feasible) << sustained.reason;
  EXPECT_EQ(sustained.clock_hz, 0.8e9);
  EXPECT_EQ(sustained.step_s, clocked.step_s);
  EXPECT_GT(sustained.compute_s, full.compute_s);
  EXPECT_NEAR(sustained.mfu * sustained.step_s / (full.mfu * full.step_s), 1.0, 1e-12);  // MFU against the datasheet peak
  SimulateOptions at_500 = kernel;
  at_500.cost.clock_hz = 0.5e9;
  EXPECT_EQ(estimate_training(m, base, layout, d, sys, at_500).clock_hz, 0.5e9);
  EXPECT_EQ(training_clock_hz(d, kernel), 0.8e9);
  EXPECT_EQ(training_clock_hz(d, SimulateOptions{}), 0.0);  // the roofline (the default) has no clock
  EXPECT_EQ(estimate_training(m, base, layout, d, sys, SimulateOptions{}).clock_hz, 0.0);
}

TEST(TrainingTest, ALayerPatternIsProfiledOneRepeatAtATime) {
  // Windowed and full layers alternating (period 2): the stage profile is built from 2 and 4
  // layers, so a 4-layer model's step is its own graph's forward and backward, not 4 copies of
  // one kind of layer.
  ModelSpec m = testing::small_gpt(4);
  m.sliding_window = 32;
  m.sliding_window_period = 2;
  const TrainingEstimate e = estimate_training(m, {.seq = 512}, {.micro_batch = 1, .global_batch = 1},
                                               testing::round_device(), round_system(), SimulateOptions{});
  ASSERT_TRUE(e.feasible) << e.reason;
  const SimulationResult r = simulate(build_graph(m, {.phase = Phase::train, .batch = 1, .seq = 512}),
                                      testing::round_device(), SimulateOptions{});
  EXPECT_NEAR(e.compute_s, r.forward_time_s + r.backward_time_s, 1e-12 * e.compute_s);
  ModelSpec uniform = m;
  uniform.sliding_window_period = 0;  // every layer windowed: less attention work
  const TrainingEstimate w = estimate_training(uniform, {.seq = 512}, {.micro_batch = 1, .global_batch = 1},
                                               testing::round_device(), round_system(), SimulateOptions{});
  EXPECT_LT(w.compute_s, e.compute_s);
}

TEST(TrainingTest, FullyShardedStepsGatherEveryMicroBatchAndPayForWhatTheyHide) {
  // ZeRO-3 (FSDP) over DP 2 in one domain, 4 layers, global batch 4 of micro-batch 1: 2
  // micro-batches per replica, each gathering the parameters for its forward and again for its
  // backward and reduce-scattering the gradients. The first layer's gather and the last layer's
  // reduce-scatter wait for nothing; the rest hides behind the passes as far as they last.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const ParallelLayout layout{.dp = 2, .micro_batch = 1, .global_batch = 4, .zero = 3};
  const TrainingEstimate e = estimate_training(m, {.seq = 128}, layout, d, sys, SimulateOptions{});
  ASSERT_TRUE(e.feasible) << e.reason;
  ASSERT_EQ(e.micro_batches, 2);
  // Parameter and gradient bytes of the whole model and of one layer (4 layers less 3).
  auto bytes = [](int64_t layers, StorageKind kind) {
    const Graph g = build_graph(testing::small_gpt(layers), {.phase = Phase::train, .batch = 1, .seq = 128});
    double sum = 0;
    for (const Storage& st : g.storages()) {
      if (st.kind == kind) sum += static_cast<double>(st.size_bytes);
    }
    return sum;
  };
  const double params = bytes(4, StorageKind::parameter), grads = bytes(4, StorageKind::gradient);
  const double layer_params = params - bytes(3, StorageKind::parameter);
  const double layer_grads = grads - bytes(3, StorageKind::gradient);
  // 2 ranks in a 100 GB/s domain with 1 us latency: 1 us + S / 2 / 100 GB/s.
  auto coll = [](double s) { return 1e-6 + 0.5 * s / 100e9; };
  const double ag = coll(params), rs = coll(grads);
  const double fwd = std::min(ag, e.forward_s), bwd = std::min(ag + rs, e.backward_s);
  EXPECT_NEAR(e.dp_comm_s, 2 * ((ag - fwd) + coll(layer_params) + (ag + rs - bwd) + coll(layer_grads)), 1e-12);
  // No TP: the slowdown is 18.9% of the data-parallel time hidden behind the 2 micro-batches.
  EXPECT_GT(fwd + bwd, 0.0);
  EXPECT_NEAR(e.overlap_slowdown_s, 0.189 * 2 * (fwd + bwd), 1e-15);
  // Without overlap every collective is exposed and nothing is slowed.
  ParallelLayout exposed = layout;
  exposed.overlap_param_gather = false;
  const TrainingEstimate x = estimate_training(m, {.seq = 128}, exposed, d, sys, SimulateOptions{});
  EXPECT_NEAR(x.dp_comm_s, 2 * (2 * ag + rs), 1e-12);
  EXPECT_NEAR(x.overlap_slowdown_s, 0.0, 1e-18);
}

TEST(TrainingTest, UnevenStagesWaitForTheHeaviest) {
  // 5 layers over 2 stages: the step is paced by the stage with 3 (and the embedding and head).
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const TrainingEstimate five = estimate_training(testing::small_gpt(5), {.seq = 128}, {.pp = 2, .global_batch = 4}, d,
                                                  sys, SimulateOptions{});
  const TrainingEstimate six = estimate_training(testing::small_gpt(6), {.seq = 128}, {.pp = 2, .global_batch = 4}, d,
                                                 sys, SimulateOptions{});
  ASSERT_TRUE(five.feasible) << five.reason;
  EXPECT_NEAR(five.compute_s, six.compute_s, 1e-15);
}

TEST(TrainingTest, InfeasibleLayoutsSayWhy) {
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128};
  auto why = [&](ParallelLayout l, int64_t layers = 4) {
    const TrainingEstimate e = estimate_training(testing::small_gpt(layers), base, l, d, sys, SimulateOptions{});
    EXPECT_FALSE(e.feasible);
    return e.reason;
  };
  EXPECT_NE(why({.pp = 8, .global_batch = 8}).find("fewer than 8 stages"), std::string::npos);
  EXPECT_NE(why({.dp = 2, .micro_batch = 2, .global_batch = 6}).find("not a multiple"), std::string::npos);
  EXPECT_NE(why({.tp = 3, .global_batch = 1}).find("divisible"), std::string::npos);
  EXPECT_NE(why({.pp = 2, .global_batch = 3, .virtual_stages = 2}).find("multiple of pp"), std::string::npos);
  DeviceSpec tiny = d;
  tiny.memory_bytes = 1e6;
  const TrainingEstimate e = estimate_training(testing::small_gpt(4), base, {.global_batch = 1}, tiny, sys, SimulateOptions{});
  EXPECT_FALSE(e.fits);
  EXPECT_NE(e.reason.find("per GPU"), std::string::npos);
}

TEST(TrainingTest, ZeroStagesShardStatesGradientsAndParameters) {
  // DP 4 in one domain, 2 micro-batches: ZeRO-1 moves the gradients and parameters once per step,
  // ZeRO-2 reduce-scatters every micro-batch, ZeRO-3 gathers twice and reduce-scatters every
  // micro-batch; each shards one more of states, gradients, parameters.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128};
  auto at = [&](int zero, bool overlap) {
    ParallelLayout l{.dp = 4, .micro_batch = 1, .global_batch = 8, .zero = zero};
    l.overlap_grad_reduce = l.overlap_param_gather = overlap;
    const TrainingEstimate e = estimate_training(m, base, l, d, sys, SimulateOptions{});
    EXPECT_TRUE(e.feasible) << e.reason;
    return e;
  };
  const Graph g = build_graph(m, {.phase = Phase::train, .batch = 1, .seq = 128});
  double params = 0, grads = 0, states = 0;
  for (const Storage& st : g.storages()) {
    if (st.kind == StorageKind::parameter) params += static_cast<double>(st.size_bytes);
    if (st.kind == StorageKind::gradient) grads += static_cast<double>(st.size_bytes);
    if (st.kind == StorageKind::optimizer_state) states += static_cast<double>(st.size_bytes);
  }
  // Over 4 ranks in the domain the fastest is halving-doubling (Rabenseifner): log2(4) = 2
  // steps of alpha each way, and the ring's bandwidth term, 3/4 S / B per pass.
  const double ar = 4e-6 + 1.5 * grads / 100e9, rs = 2e-6 + 0.75 * grads / 100e9;
  const double ag = 2e-6 + 0.75 * params / 100e9;
  const TrainingEstimate z0 = at(0, false), z1 = at(1, false), z2 = at(2, false), z3 = at(3, false);
  EXPECT_NEAR(z0.dp_comm_s, ar, 1e-12);
  EXPECT_NEAR(z1.dp_comm_s, rs + ag, 1e-12);
  EXPECT_NEAR(z2.dp_comm_s, 2 * rs + ag, 1e-12);
  EXPECT_NEAR(z3.dp_comm_s, 2 * (2 * ag + rs), 1e-12);
  // Memory: each stage drops 3/4 of one more kind (ZeRO-2 keeps one layer's gradients whole,
  // ZeRO-3 two layers' parameters).
  EXPECT_NEAR(z0.memory_per_gpu_bytes - z1.memory_per_gpu_bytes, 0.75 * states, 1.0);
  ModelSpec three = m;
  three.num_layers = 3;
  double grads3 = 0;
  const Graph g3 = build_graph(three, {.phase = Phase::train, .batch = 1, .seq = 128});
  for (const Storage& st : g3.storages()) {
    if (st.kind == StorageKind::gradient) grads3 += static_cast<double>(st.size_bytes);
  }
  const double layer_grads = grads - grads3;
  EXPECT_NEAR(z1.memory_per_gpu_bytes - z2.memory_per_gpu_bytes, 0.75 * grads - layer_grads, 1.0);
  // With overlap, a step hides what the forward and backward cover.
  EXPECT_LE(at(3, true).dp_comm_s, z3.dp_comm_s);
}

// A profile of round figures, linear in the layers: a layer's forward 0.25 s and backward 0.5 s,
// 1 GB of 16-bit parameters (0.5 G of them), 2 GB of fp32 gradients, 6 GB of Adam's states
// (12 bytes a parameter), 1 GB saved for the backward; one layer's activation peak 2 GB, and
// 1 GB more for each further layer.
StageProfile round_profile() {
  StageProfile p;
  p.feasible = true;
  p.forward_s = {0.25, 0.25};
  p.backward_s = {0.5, 0.5};
  p.optimizer_s = {0.01, 0.01};
  p.parameter_bytes = p.trainable_parameter_bytes = {1e9, 1e9};
  p.gradient_bytes = {2e9, 2e9};
  p.state_bytes = {6e9, 6e9};
  p.saved_bytes = {1e9, 1e9};
  p.peak_activation_bytes = p.body_peak_activation_bytes = {2e9, 1e9};
  p.optimizer_peak_bytes = {0.5e9, 0.5e9};
  return p;
}

SystemSpec round_host_system() {
  SystemSpec sys = round_system();
  sys.host = {.memory_bytes = 1e12, .memory_bandwidth_bytes_per_s = 100e9, .link_bytes_per_s = 10e9};
  return sys;
}

TEST(TrainingTest, OptimizerOffloadMovesStatesAndTheStepToTheHost) {
  // One GPU, 4 layers, 2 micro-batches, ZeRO-2 (one rank: nothing sharded, no collectives).
  // Stage: 4 GB of parameters, 8 GB of gradients, 24 GB of states; forward 1 s, backward 2 s.
  const ModelSpec m = testing::small_gpt(4);
  DeviceSpec d = testing::round_device();
  d.memory_bytes = 1e12;
  d.runtime_reserved_bytes = 0.0;
  const SystemSpec sys = round_host_system();
  const BuildOptions base{.seq = 128};
  ParallelLayout l{.micro_batch = 1, .global_batch = 2, .zero = 2};
  const TrainingEstimate plain = compose_training(m, base, l, round_profile(), d, sys);
  l.offload_optimizer = true;
  const TrainingEstimate e = compose_training(m, base, l, round_profile(), d, sys);
  ASSERT_TRUE(plain.feasible && e.feasible) << e.reason;
  // Each backward sends its 8 GB of gradients at 10 GB/s, 0.8 s, behind its 2 s; the 4 GB of
  // updated parameters come back after the step, 0.4 s.
  EXPECT_NEAR(e.offload_s, 0.4, 1e-12);
  // The CPU reads and writes 24 GB of states, reads 8 GB of gradients and writes 4 GB of 16-bit
  // parameters, 30 bytes for every 12 of states: 60 GB at 0.53 x 100 GB/s.
  EXPECT_NEAR(e.host_optimizer_s, 60e9 / 53e9, 1e-12);
  EXPECT_DOUBLE_EQ(e.optimizer_s, 0.0);
  EXPECT_NEAR(plain.optimizer_s, 0.04, 1e-12);
  EXPECT_NEAR(e.step_s - plain.step_s, 0.4 + 60e9 / 53e9 - 0.04, 1e-9);
  // On the GPU: 4 GB of parameters and one layer's 2 GB gradient bucket, where the plain step
  // holds 8 GB of gradients, the 2 GB bucket and 24 GB of states; 5 GB of activations (the
  // optimizer's 2 GB of temporaries fit under them). On the host: 24 + 8 + 4 GB.
  EXPECT_NEAR(plain.memory_per_gpu_bytes, 4e9 + 8e9 + 2e9 + 24e9 + 5e9, 1.0);
  EXPECT_NEAR(e.memory_per_gpu_bytes, 4e9 + 2e9 + 5e9, 1.0);
  EXPECT_NEAR(e.host_memory_per_node_bytes, 36e9, 1.0);
  EXPECT_DOUBLE_EQ(plain.host_memory_per_node_bytes, 0.0);
  // What a trace of the step moves: the stage's 4 GB of parameters, 8 GB of gradients, over one
  // data-parallel rank; nothing sent between stages.
  EXPECT_DOUBLE_EQ(e.stage_parameter_bytes, 4e9);
  EXPECT_DOUBLE_EQ(e.stage_gradient_bytes, 8e9);
  EXPECT_EQ(e.dp_ranks, 1);
  EXPECT_DOUBLE_EQ(e.p2p_bytes, 0.0);

  // A slower link (2 GB/s): each backward waits 8 / 2 - 2 = 2 s, twice, and the parameters
  // take 2 s to come back.
  SystemSpec slow = sys;
  slow.host.link_bytes_per_s = 2e9;
  EXPECT_NEAR(compose_training(m, base, l, round_profile(), d, slow).offload_s, 2 * 2.0 + 2.0, 1e-12);
  // ZeRO-1 sends the gradients once, in the last backward: 2 s of wait, then 2 s back.
  l.zero = 1;
  const TrainingEstimate z1 = compose_training(m, base, l, round_profile(), d, slow);
  EXPECT_NEAR(z1.offload_s, 2.0 + 2.0, 1e-12);
  // ZeRO-1 keeps its gradients on the GPU (8 GB, no bucket).
  EXPECT_NEAR(z1.memory_per_gpu_bytes, 4e9 + 8e9 + 5e9, 1.0);
}

TEST(TrainingTest, ParameterAndActivationOffloadFetchEachPass) {
  const ModelSpec m = testing::small_gpt(4);
  DeviceSpec d = testing::round_device();
  d.memory_bytes = 1e12;
  d.runtime_reserved_bytes = 0.0;
  SystemSpec sys = round_host_system();
  sys.host.link_bytes_per_s = 2e9;
  const BuildOptions base{.seq = 128};
  // ZeRO-3 on one GPU with parameters and optimizer offloaded: each pass fetches the 4 GB of
  // parameters (2 s: forward waits 1 s, backward's 2 s covers it but the gradients going out,
  // 8 GB, take 4 s: 2 s of wait), and each pass's first layer, 1 GB, is fetched with nothing to
  // hide behind: 2 x 0.5 s. Two micro-batches; nothing to bring back after the step.
  ParallelLayout l{.micro_batch = 1, .global_batch = 2, .zero = 3, .offload_optimizer = true,
                   .offload_parameters = true};
  const TrainingEstimate e = compose_training(m, base, l, round_profile(), d, sys);
  ASSERT_TRUE(e.feasible) << e.reason;
  EXPECT_NEAR(e.offload_s, 2 * (1.0 + 2.0 + 1.0), 1e-12);
  // The GPU keeps two gathered layers (2 GB) and a layer's gradient bucket (2 GB), beside the
  // 5 GB of activations; the host the states, the gradients and the parameters, which are the
  // copy the CPU step writes.
  EXPECT_NEAR(e.memory_per_gpu_bytes, 2e9 + 2e9 + 5e9, 1.0);
  EXPECT_NEAR(e.host_memory_per_node_bytes, 24e9 + 8e9 + 4e9, 1.0);
  // Parameters alone: the GPU's optimizer updates the shard and sends it back, 4 GB at 2 GB/s.
  ParallelLayout params_only = l;
  params_only.offload_optimizer = false;
  const TrainingEstimate p = compose_training(m, base, params_only, round_profile(), d, sys);
  ASSERT_TRUE(p.feasible) << p.reason;
  // Each pass fetches 4 GB (2 s: the forward waits 1 s; the backward's 2 s covers it), the first
  // layer twice (0.5 s each), twice; then 2 s back.
  EXPECT_NEAR(p.offload_s, 2 * (1.0 + 0.0 + 1.0) + 2.0, 1e-12);

  // Activation offload alone (ZeRO-0): the forward sends 4 layers' 1 GB (2 s, 1 s of wait),
  // the backward brings them back (2 s, covered).
  ParallelLayout a{.micro_batch = 1, .global_batch = 2, .zero = 0, .offload_activations = true};
  const TrainingEstimate act = compose_training(m, base, a, round_profile(), d, sys);
  ASSERT_TRUE(act.feasible) << act.reason;
  EXPECT_NEAR(act.offload_s, 2 * 1.0, 1e-12);
  // The running chunk keeps one layer's 2 GB peak and the 1 GB on the link, not its 5 GB; the
  // other 2 GB wait on the host.
  EXPECT_NEAR(act.activation_bytes, 3e9, 1.0);
  EXPECT_NEAR(act.host_memory_per_node_bytes, 2e9, 1.0);
}

TEST(TrainingTest, TheNodesGpusShareTheHost) {
  // DP 2 on one node, ZeRO-1: each GPU's CPU step covers half the 24 GB of states, and the two
  // run on the same CPUs at once: 2 x 30 GB at 53 GB/s. The host holds both GPUs' shards of
  // the states, of the reduce-scattered gradients and of the 16-bit parameters.
  const ModelSpec m = testing::small_gpt(4);
  DeviceSpec d = testing::round_device();
  d.memory_bytes = 1e12;
  const SystemSpec sys = round_host_system();
  const ParallelLayout l{.dp = 2, .micro_batch = 1, .global_batch = 2, .zero = 1, .offload_optimizer = true};
  const TrainingEstimate e = compose_training(m, {.seq = 128}, l, round_profile(), d, sys);
  ASSERT_TRUE(e.feasible) << e.reason;
  EXPECT_NEAR(e.host_optimizer_s, 2 * 30e9 / 53e9, 1e-12);
  EXPECT_NEAR(e.host_memory_per_node_bytes, 2 * (12e9 + 4e9 + 2e9), 1.0);
  // A host too small for them is a reason, not a fit.
  SystemSpec small = sys;
  small.host.memory_bytes = 30e9;
  const TrainingEstimate over = compose_training(m, {.seq = 128}, l, round_profile(), d, small);
  EXPECT_FALSE(over.feasible);
  EXPECT_NE(over.reason.find("host memory"), std::string::npos) << over.reason;
}

TEST(TrainingTest, OffloadNeedsItsZeroStageAndAHost) {
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const BuildOptions base{.seq = 128};
  const TrainingEstimate z0 = compose_training(
      m, base, {.global_batch = 2, .zero = 0, .offload_optimizer = true}, round_profile(), d, round_host_system());
  EXPECT_NE(z0.reason.find("ZeRO >= 1"), std::string::npos) << z0.reason;
  const TrainingEstimate z2 = compose_training(
      m, base, {.global_batch = 2, .zero = 2, .offload_parameters = true}, round_profile(), d, round_host_system());
  EXPECT_NE(z2.reason.find("ZeRO-3"), std::string::npos) << z2.reason;
  // Megatron-Core's activation offload: one pipeline stage, no recomputation.
  const TrainingEstimate piped = compose_training(
      m, base, {.pp = 2, .global_batch = 2, .zero = 0, .offload_activations = true}, round_profile(), d,
      round_host_system());
  EXPECT_NE(piped.reason.find("pp = 1"), std::string::npos) << piped.reason;
  const TrainingEstimate recomputed = compose_training(
      m, {.seq = 128, .recompute = Recompute::full}, {.global_batch = 2, .zero = 0, .offload_activations = true},
      round_profile(), d, round_host_system());
  EXPECT_NE(recomputed.reason.find("without recomputation"), std::string::npos) << recomputed.reason;
  EXPECT_THROW(compose_training(m, base, {.global_batch = 2, .zero = 0, .offload_activations = true}, round_profile(),
                                d, round_system()),
               ConfigError);
}

TEST(TrainingTest, SummaShardsTheWeightsOverTheGridAndZeroOverTheDataParallelRanks) {
  // A 4-layer GPT without biases (e 256, f 1024) on TP 2 x CP 2 with SP, DP 2. 1D TP holds each
  // layer's 12 e^2 weights over TP (/2), 2D SUMMA over the grid (/4): 12 x 65,536 / 4 = 196,608
  // elements fewer a layer, 2 bytes each as weights, 4 as fp32 gradients, 12 as fp32 masters
  // and moments.
  ModelSpec m = testing::small_gpt(4);
  m.qkv_bias = m.output_bias = m.ffn_bias = false;
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128};
  const std::vector<CommGroup> groups{{.name = "tp", .size = 2, .ranks_per_domain = 2},
                                      {.name = "cp", .size = 2, .ranks_per_domain = 2},
                                      {.name = "ep"}};
  ParallelLayout one_d{.tp = 2, .dp = 2, .cp = 2, .sequence_parallel = true, .global_batch = 4, .zero = 0};
  ParallelLayout two_d = one_d;
  two_d.summa = true;
  const StageProfile p1 = profile_stage(m, base, one_d, groups, d, sys, {});
  const StageProfile p2 = profile_stage(m, base, two_d, groups, d, sys, {});
  ASSERT_TRUE(p1.feasible && p2.feasible) << p2.reason;
  const double fewer = 12.0 * 256 * 256 / 2 - 12.0 * 256 * 256 / 4;
  EXPECT_DOUBLE_EQ(p1.parameter_bytes.per_layer - p2.parameter_bytes.per_layer, 2 * fewer);
  EXPECT_DOUBLE_EQ(p1.gradient_bytes.per_layer - p2.gradient_bytes.per_layer, 4 * fewer);
  EXPECT_DOUBLE_EQ(p1.state_bytes.per_layer - p2.state_bytes.per_layer, 12 * fewer);
  // ZeRO-1 shards the states over DP x CP (4) under 1D; under SUMMA the blocks' over DP (2),
  // their CP ranks holding different weights, and the embedding's and head's, whole on every CP
  // rank, over DP x CP.
  auto states_saved = [&](ParallelLayout l, const StageProfile& p) {
    const double z0 = compose_training(m, base, l, p, d, sys).memory_per_gpu_bytes;
    l.zero = 1;
    return z0 - compose_training(m, base, l, p, d, sys).memory_per_gpu_bytes;
  };
  const auto stage_states = [](const StageProfile& p) {
    return 4 * p.state_bytes.per_layer + p.embedding.state_bytes + p.head.state_bytes;
  };
  EXPECT_NEAR(states_saved(one_d, p1), 0.75 * stage_states(p1), 1.0);
  const double blocks = 4 * p2.state_bytes.per_layer;
  EXPECT_NEAR(states_saved(two_d, p2), 0.5 * blocks + 0.75 * (stage_states(p2) - blocks), 1.0);
  // With no data parallelism SUMMA still all-reduces the embedding's gradients (whole on both
  // CP ranks) over CP: halving-doubling over 2 ranks in the domain, 2 alpha + S / B, nothing
  // hidden; the blocks' need nothing.
  ParallelLayout alone = two_d;
  alone.dp = 1;
  alone.global_batch = 2;
  alone.overlap_grad_reduce = alone.overlap_param_gather = false;
  const TrainingEstimate e = compose_training(m, base, alone, p2, d, sys);
  ASSERT_TRUE(e.feasible) << e.reason;
  const double rest = p2.embedding.gradient_bytes + p2.head.gradient_bytes;
  ASSERT_GT(rest, 0.0);
  EXPECT_NEAR(e.dp_comm_s, 2e-6 + rest / 100e9, 1e-12);
}

TEST(TrainingTest, InterleavingKeepsMoreMicroBatchesInFlight) {
  // 8 layers on 2 stages, 8 micro-batches: 1F1B keeps pp = 2 micro-batches of 4 layers in flight
  // on the first stage; interleaving over 2 chunks of 2 layers keeps
  // 2 (pp - 1) + (v - 1) pp + 1 = 5 chunks (Megatron-LM's warm-up plus one), 2 more layers'
  // saved activations (pp + (pp - 1) / v = 2.5 stages' worth, Korthikanti et al. 2022).
  const ModelSpec m = testing::small_gpt(8);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const TrainingEstimate plain = estimate_training(m, {.seq = 128}, {.pp = 2, .global_batch = 8}, d, sys, {});
  const TrainingEstimate inter =
      estimate_training(m, {.seq = 128}, {.pp = 2, .global_batch = 8, .virtual_stages = 2}, d, sys, {});
  ASSERT_TRUE(plain.feasible && inter.feasible);
  const StageProfile p = profile_stage(m, {.seq = 128}, {.pp = 2, .global_batch = 8},
                                       {{.name = "tp"}, {.name = "cp"}, {.name = "ep"}}, d, sys, {});
  const double saved_layers = 4 * p.saved_bytes.per_layer;
  EXPECT_NEAR(inter.activation_bytes - plain.activation_bytes, 0.5 * saved_layers, 1.0);
}

TEST(TrainingTest, ReservedMemoryKeepsTheAllocatorsFreeBlocksOfTheRunningChunk) {
  // What the caching allocator reserves beyond what is live is the running chunk's free blocks:
  // a profile whose replay left 5 MiB free reserves 5 MiB more, on 4 layers as on 2, beside the
  // same parameters, gradients, states and saved activations. What must fit
  // (memory_per_gpu_bytes) does not move.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128, .optimizer_impl = OptimizerImpl::fused};
  const ParallelLayout layout{.global_batch = 8};
  const std::vector<CommGroup> groups{{.name = "tp"}, {.name = "cp"}, {.name = "ep"}};
  StageProfile p = profile_stage(m, base, layout, groups, d, sys, {});
  ASSERT_TRUE(p.feasible) << p.reason;
  constexpr double kMiB = 1024.0 * 1024.0;
  p.allocator_slack_bytes = 0.0;
  const TrainingEstimate plain = compose_training(m, base, layout, p, d, sys);
  EXPECT_DOUBLE_EQ(plain.reserved_per_gpu_bytes, plain.memory_per_gpu_bytes);
  p.allocator_slack_bytes = 5 * kMiB;
  const TrainingEstimate e = compose_training(m, base, layout, p, d, sys);
  EXPECT_DOUBLE_EQ(e.memory_per_gpu_bytes, plain.memory_per_gpu_bytes);
  EXPECT_NEAR(e.reserved_per_gpu_bytes - e.memory_per_gpu_bytes, 5 * kMiB, 1e-3);
}

TEST(TrainingTest, AForeachOptimizersTemporariesAreApartFromTheMicroBatchAndSharded) {
  // torch's foreach AdamW holds the denominators of every parameter it updates at once, fp32, 4
  // bytes each: small_gpt's layer has 789,760 parameters (qkv 256 x 768 + 768, proj 256 x 256 +
  // 256, fc1 256 x 1,024 + 1,024, fc2 1,024 x 256 + 256, two LayerNorms 2 x 512). The fused
  // kernel holds none. They are not a micro-batch's activations: the step runs once, after the
  // last backward, over the parameters this rank updates (ZeRO >= 1: 1/dp of them).
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const std::vector<CommGroup> groups{{.name = "tp"}, {.name = "cp"}, {.name = "ep"}};
  const BuildOptions foreach{.seq = 128, .optimizer_impl = OptimizerImpl::foreach};
  const BuildOptions fused{.seq = 128, .optimizer_impl = OptimizerImpl::fused};
  const StageProfile pf = profile_stage(m, foreach, {.global_batch = 8}, groups, d, sys, {});
  const StageProfile pu = profile_stage(m, fused, {.global_batch = 8}, groups, d, sys, {});
  EXPECT_DOUBLE_EQ(pf.optimizer_peak_bytes.per_layer, 4.0 * 789760);
  EXPECT_DOUBLE_EQ(pu.optimizer_peak_bytes.per_layer, 0.0);
  EXPECT_DOUBLE_EQ(pf.peak_activation_bytes.per_layer, pu.peak_activation_bytes.per_layer);
  // Over 8 data-parallel ranks with ZeRO-1 each rank's eighth of them fits beside what the
  // micro-batch held: the step needs no more than with the fused kernel.
  const ParallelLayout zero1{.dp = 8, .global_batch = 8, .zero = 1};
  const TrainingEstimate ef = estimate_training(m, foreach, zero1, d, sys, {});
  const TrainingEstimate eu = estimate_training(m, fused, zero1, d, sys, {});
  ASSERT_TRUE(ef.feasible && eu.feasible);
  EXPECT_LT(pf.optimizer_peak_bytes.at(4) / 8, ef.activation_bytes);
  EXPECT_DOUBLE_EQ(ef.memory_per_gpu_bytes, eu.memory_per_gpu_bytes);
  EXPECT_DOUBLE_EQ(ef.activation_bytes, eu.activation_bytes);
}

// Every feasible layout of `space` (its first rank order; cp and ep 1) through
// estimate_training, one by one: their step times, fastest first.
std::vector<double> feasible_steps(const ModelSpec& m, const BuildOptions& base, const PlanSpace& space,
                                   const DeviceSpec& d, const SystemSpec& sys) {
  std::vector<double> steps;
  for (int64_t tp : space.tp)
    for (int64_t pp : space.pp)
      for (int64_t mb : space.micro_batch)
        for (int64_t v : space.virtual_stages)
          for (int zero : space.zero)
            for (Recompute rc : space.recompute)
              for (int sp : space.sequence_parallel) {
                if ((sp && tp == 1) || (v > 1 && pp == 1)) continue;
                const int64_t dp = space.gpus / (tp * pp);
                const ParallelLayout l{.tp = tp, .pp = pp, .dp = dp, .sequence_parallel = sp != 0,
                                       .micro_batch = mb, .global_batch = space.global_batch,
                                       .virtual_stages = v, .zero = zero};
                if (dp < 1 || (zero > 0 && dp == 1)) continue;
                BuildOptions b = base;
                b.recompute = rc;
                const TrainingEstimate e = estimate_training(m, b, l, d, sys, SimulateOptions{});
                if (e.feasible) steps.push_back(e.step_s);
              }
  std::sort(steps.begin(), steps.end());
  return steps;
}

TEST(TrainingTest, PlanFindsTheFastestOfItsSpace) {
  // 8 GPUs, a 4-layer model: every layout of the space through estimate_training, one by one,
  // against the search's answer.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128};
  PlanSpace space{.gpus = 8, .global_batch = 16, .tp = {1, 2, 4}, .cp = {1}, .ep = {1},
                  .pp = {1, 2, 4}, .micro_batch = {1, 2}, .virtual_stages = {1, 2}, .zero = {0, 1, 3},
                  .recompute = {Recompute::none, Recompute::full}, .sequence_parallel = {0, 1},
                  .orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"}};
  const PlanResult r = plan_training(m, base, space, d, sys, SimulateOptions{}, 3, 2);
  // tp x pp x micro_batch x virtual_stages x zero x recompute x sequence_parallel x orders.
  EXPECT_EQ(r.candidates, 3 * 3 * 2 * 2 * 3 * 2 * 2 * 2);
  ASSERT_FALSE(r.best.empty());
  const std::vector<double> steps = feasible_steps(m, base, space, d, sys);
  ASSERT_FALSE(steps.empty());
  const double fastest = steps.front();
  const auto feasible = static_cast<int64_t>(steps.size());
  EXPECT_NEAR(r.best[0].estimate.step_s, fastest, 1e-12);
  EXPECT_LE(r.best[0].estimate.step_s, r.best[1].estimate.step_s);
  EXPECT_GE(r.feasible, feasible);  // the second rank order adds its own where placement differs
  // The same answer on one thread.
  const PlanResult one = plan_training(m, base, space, d, sys, SimulateOptions{}, 3, 1);
  EXPECT_EQ(one.best[0].layout.tp, r.best[0].layout.tp);
  EXPECT_EQ(one.best[0].layout.pp, r.best[0].layout.pp);
  EXPECT_EQ(one.best[0].estimate.step_s, r.best[0].estimate.step_s);
  EXPECT_EQ(one.evaluated, r.evaluated);
  // Everything not composed is counted under a reason.
  int64_t pruned = 0;
  for (const auto& [why, n] : r.pruned) pruned += n;
  EXPECT_EQ(pruned + r.evaluated, r.candidates);
}

TEST(TrainingTest, PlanKeepsTheKFastestWhateverTheOrderTheyArriveIn) {
  // Every feasible layout of the space composed one by one and sorted: the search's top 5 are
  // the first 5, on one thread and on two.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128};
  const PlanSpace space{.gpus = 8, .global_batch = 16, .tp = {1, 2, 4}, .cp = {1}, .ep = {1}, .pp = {1, 2, 4},
                        .micro_batch = {1, 2}, .virtual_stages = {1, 2}, .zero = {0, 1, 3},
                        .recompute = {Recompute::none, Recompute::full}, .sequence_parallel = {0, 1},
                        .orders = {"tp-cp-ep-dp-pp"}};
  const std::vector<double> steps = feasible_steps(m, base, space, d, sys);
  ASSERT_GT(steps.size(), 40u);  // more than a trim's worth, so the kept k-th is tested
  for (int threads : {1, 2}) {
    const PlanResult r = plan_training(m, base, space, d, sys, SimulateOptions{}, 5, threads);
    ASSERT_EQ(r.best.size(), 5u);
    for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(r.best[i].estimate.step_s, steps[i], 1e-12) << i;
  }
}

TEST(TrainingTest, PlanPlacesEveryOrderOfTheGroupsAndPrunesTheSamePlacement) {
  // The default space's 24 rank orders (tp, cp, dp, pp in every order, ep inside dp). With one
  // layout of pure data parallelism every order places it alike: 23 are pruned as the same
  // placement. With TP 2 x CP 2 x DP 2 on 2-GPU domains, the order decides which group the
  // domain holds: every distinct placement is composed, and the fastest holds TP or CP there,
  // whose collectives run every layer, not DP, whose run once a step.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  SystemSpec sys = round_system();
  const PlanSpace all = default_plan_space(m, 8, 8, 128);
  ASSERT_EQ(all.orders.size(), 24u);
  EXPECT_EQ(all.orders[0], "tp-cp-ep-dp-pp");
  PlanSpace one = all;
  one.tp = one.cp = one.ep = one.pp = one.micro_batch = one.virtual_stages = {1};
  one.zero = {0};
  one.recompute = {Recompute::none};
  one.sequence_parallel = {0};
  const PlanResult r = plan_training(m, {.seq = 128}, one, d, sys, SimulateOptions{}, 3, 1);
  EXPECT_EQ(r.candidates, 24);
  EXPECT_EQ(r.evaluated, 1);
  EXPECT_EQ(r.pruned.at("the same placement as an earlier rank order"), 23);
  sys.scaleup_domain = 2;
  PlanSpace grid = one;
  grid.tp = grid.cp = {2};
  grid.sequence_parallel = {1};
  const PlanResult g = plan_training(m, {.seq = 128}, grid, d, sys, SimulateOptions{}, 24, 1);
  // Three placements: TP, CP or DP in the domain (PP is 1).
  EXPECT_EQ(g.evaluated, 3);
  double slowest = 0;
  for (const PlanCandidate& c : g.best) slowest = std::max(slowest, c.estimate.step_s);
  EXPECT_LT(g.best[0].estimate.step_s, slowest);
  EXPECT_NE(g.best[0].layout.order.rfind("ep-dp", 0), 0u);  // a model-parallel group inside, not DP
}

TEST(TrainingTest, PlanSearchesOffloadWhereItFitsWhatNothingElseDoes) {
  // One GPU whose memory holds the step only with the optimizer states on the host: the search
  // over no offload and optimizer offload finds only the offloaded ones feasible, each as
  // estimate_training composes it, and counts the ZeRO-0 offloads it prunes.
  const ModelSpec m = testing::small_gpt(4);
  DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_host_system();
  const BuildOptions base{.seq = 128};
  const ParallelLayout plain{.micro_batch = 1, .global_batch = 2, .zero = 0};
  ParallelLayout offloaded{.micro_batch = 1, .global_batch = 2, .zero = 1, .offload_optimizer = true};
  const TrainingEstimate big = estimate_training(m, base, plain, d, sys, {});
  const TrainingEstimate small = estimate_training(m, base, offloaded, d, sys, {});
  ASSERT_LT(small.memory_per_gpu_bytes, big.memory_per_gpu_bytes);
  d.memory_bytes = 0.5 * (small.memory_per_gpu_bytes + big.memory_per_gpu_bytes);
  const PlanSpace space{.gpus = 1, .global_batch = 2, .tp = {1}, .cp = {1}, .ep = {1}, .pp = {1},
                        .micro_batch = {1}, .virtual_stages = {1}, .zero = {0, 1, 2},
                        .recompute = {Recompute::none}, .sequence_parallel = {0}, .orders = {"tp-cp-ep-dp-pp"},
                        .offload = {0, kOffloadOptimizer}};
  const PlanResult r = plan_training(m, base, space, d, sys, SimulateOptions{}, 5, 1);
  EXPECT_EQ(r.candidates, 3 * 2);
  // ZeRO-0 without offload is infeasible; ZeRO-1 and -2 offload the optimizer; the rest pruned.
  EXPECT_EQ(r.evaluated, 3);
  EXPECT_EQ(r.feasible, 2);
  ASSERT_EQ(r.best.size(), 2u);
  for (const PlanCandidate& c : r.best) EXPECT_TRUE(c.layout.offload_optimizer);
  EXPECT_EQ(r.pruned.at("optimizer offload needs ZeRO >= 1"), 1);
  EXPECT_EQ(r.pruned.at("ZeRO with dp x cp = 1 is ZeRO-0"), 2);
  offloaded.zero = r.best[0].layout.zero;
  EXPECT_DOUBLE_EQ(r.best[0].estimate.step_s, estimate_training(m, base, offloaded, d, sys, {}).step_s);
  // A system without a host refuses an offloading space.
  EXPECT_THROW(plan_training(m, base, space, d, round_system(), SimulateOptions{}, 5, 1), ConfigError);
}

// The plan search of PlanFindsTheFastestOfItsSpace: 48 outer items, 18 stage profiles.
PlanResult small_plan(int threads, const std::function<void(int64_t, int64_t)>& progress = {},
                      const PlanThreadStart& start_thread = {}) {
  const PlanSpace space{.gpus = 8, .global_batch = 16, .tp = {1, 2, 4}, .cp = {1}, .ep = {1},
                        .pp = {1, 2, 4}, .micro_batch = {1, 2}, .virtual_stages = {1, 2}, .zero = {0, 1, 3},
                        .recompute = {Recompute::none, Recompute::full}, .sequence_parallel = {0, 1},
                        .orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"}};
  return plan_training(testing::small_gpt(4), {.seq = 128}, space, testing::round_device(), round_system(),
                       SimulateOptions{}, 3, threads, progress, start_thread);
}

TEST(TrainingTest, PlanThreadsTheSystemCannotStartAreDoneWithout) {
  // A thread start that refuses once `allowed` threads have started, as std::thread's
  // constructor does (std::system_error, EAGAIN) when the system has no thread or no room for
  // its stack left. The threads that start do the work and find what one thread finds, where
  // the search used to end in std::terminate; with none started the calling thread does it all.
  const PlanResult one = small_plan(1);
  ASSERT_FALSE(one.best.empty());
  for (int allowed : {0, 1, 3}) {
    int asked = 0;
    auto refusing = [&](std::function<void()> work) {
      if (asked++ >= allowed) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
      return std::thread(std::move(work));
    };
    const PlanResult r = small_plan(8, {}, refusing);
    EXPECT_GT(asked, allowed) << "the search never asked for more threads than it got";
    ASSERT_FALSE(r.best.empty()) << allowed;
    EXPECT_EQ(r.best[0].estimate.step_s, one.best[0].estimate.step_s) << allowed;
    EXPECT_EQ(r.evaluated, one.evaluated) << allowed;
    EXPECT_EQ(r.feasible, one.feasible) << allowed;
  }
}

TEST(TrainingTest, PlanThreadsAreBoundedAndAFailingProgressCallbackLeavesCleanly) {
  EXPECT_THROW(small_plan(-1), ConfigError);
  EXPECT_THROW(small_plan(kMaxPlanThreads + 1), ConfigError);
  // A callback that throws (a Python KeyboardInterrupt, say) stops the search: the exception
  // leaves plan_training after its threads are joined, not through std::terminate.
  EXPECT_THROW(small_plan(2, [](int64_t, int64_t) { throw std::runtime_error("interrupted"); }), std::runtime_error);
}

TEST(TrainingTest, OverlappedTpCommAndCachedWeightCastsCountAsTheStageSaysThey) {
  // TP 2 with SP and fp8 GEMMs, 4 micro-batches: what the stage's simulation hides behind its GEMMs
  // leaves every micro-batch, and the cached fp8 weight casts run once per step, not four times.
  const ModelSpec m = testing::small_gpt(2);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128, .fp8_gemms = true};
  const ParallelLayout l{.tp = 2, .sequence_parallel = true, .micro_batch = 1, .global_batch = 4};
  SimulateOptions plain;
  SimulateOptions tuned;
  tuned.overlap_tp_comm = true;
  tuned.fp8_weight_cache = true;
  const TrainingEstimate a = estimate_training(m, base, l, d, sys, plain);
  const TrainingEstimate b = estimate_training(m, base, l, d, sys, tuned);
  ASSERT_TRUE(a.feasible && b.feasible);
  const Graph g = build_graph(m, {.phase = Phase::train, .batch = 1, .seq = 128, .tensor_parallel = 2,
                                  .sequence_parallel = true, .fp8_gemms = true});
  tuned.system = sys;
  tuned.groups = {{.name = "tp", .size = 2, .ranks_per_domain = 2}};
  const SimulationResult r = simulate(g, d, tuned);
  ASSERT_GT(r.overlapped_communication_s, 0.0);
  ASSERT_GT(r.once_per_step_time_s, 0.0);
  EXPECT_NEAR(b.compute_s, a.compute_s - 4 * r.overlapped_communication_s - 3 * r.once_per_step_time_s, 1e-12);
  EXPECT_NEAR(b.tp_comm_s, a.tp_comm_s - 4 * r.overlapped_communication_s, 1e-12);
}

TEST(TrainingTest, GpipeKeepsEveryMicroBatchInFlight) {
  // 8 layers on 2 stages: GPipe runs every forward before any backward, so each stage holds all
  // m micro-batches' saved activations, and the last stage, which the head makes the heaviest,
  // also keeps each one's head and loss (their loss is computed in the forward). By hand, bf16,
  // s = 128, b = 1, h = 256 (sbh = 32,768), 8 heads, no dropout:
  //   a layer: Korthikanti's 34sbh less the two dropout masks, 32sbh = 1,048,576, and the fp32
  //     statistics of two LayerNorms (2 x 2 x 4 x 128 = 2,048) and of attention (the
  //     log-sum-exp, 4 x 8 x 128 = 4,096): 1,054,720;
  //   the stage's input (the embedding's output, kept by the first LayerNorm): 2sbh = 65,536;
  //   the head: the final LayerNorm's statistics (1,024), the LM head's input (65,536), the
  //     log-softmax's fp32 output [128, 1,024] (524,288) and the loss and its token count (8):
  //     590,856.
  // So 4 more micro-batches keep 4 x (4 x 1,054,720 + 65,536 + 590,856) = 19,501,088 bytes more
  // on the last stage; 1F1B's step takes the same time (the same bubble, Huang et al. 2019).
  const ModelSpec m = testing::small_gpt(8);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const TrainingEstimate four =
      estimate_training(m, {.seq = 128}, {.pp = 2, .global_batch = 4, .gpipe = true}, d, sys, {});
  const TrainingEstimate eight =
      estimate_training(m, {.seq = 128}, {.pp = 2, .global_batch = 8, .gpipe = true}, d, sys, {});
  ASSERT_TRUE(four.feasible && eight.feasible);
  EXPECT_DOUBLE_EQ(eight.memory_per_gpu_bytes - four.memory_per_gpu_bytes, 19501088.0);
  EXPECT_DOUBLE_EQ(eight.activation_bytes - four.activation_bytes, 19501088.0);
  const TrainingEstimate f1b = estimate_training(m, {.seq = 128}, {.pp = 2, .global_batch = 8}, d, sys, {});
  EXPECT_DOUBLE_EQ(eight.step_s, f1b.step_s);
  // 1F1B keeps at most pp = 2 micro-batches in flight (the first stage: 2 x (4 layers + its
  // input)), GPipe's last stage all 8 (8 x (4 layers + input + head)): more than 6 x 4 layers more.
  EXPECT_GT(eight.activation_bytes, f1b.activation_bytes + 6 * 4 * 1054720.0);
}

TEST(TrainingTest, FirstStageHoldsTheEmbeddingAndTheLastStageTheHead) {
  // 8 layers on 4 stages, 8 micro-batches, untied embeddings: the first stage, with pp = 4
  // micro-batches (1F1B) or 2 (pp - 1) + (v - 1) pp + 1 = 11 chunks (interleaved, v = 2) in
  // flight, needs the most, and it holds the embedding but neither the LM head nor what the
  // head and the loss keep. Doubling the vocabulary (1,024 to 2,048 rows of 256) so adds only
  // the embedding's 1,024 x 256 more parameters in bf16, their fp32 gradients and fp32 master
  // weights and Adam moments: 18 bytes each, 4,718,592 bytes.
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  auto memory = [&](int64_t vocab, int64_t v) {
    ModelSpec m = testing::small_gpt(8);
    m.tied_embeddings = false;
    m.vocab_size = vocab;
    const TrainingEstimate e =
        estimate_training(m, {.seq = 128}, {.pp = 4, .global_batch = 8, .virtual_stages = v}, d, sys, {});
    EXPECT_TRUE(e.feasible) << e.reason;
    return e.memory_per_gpu_bytes;
  };
  EXPECT_DOUBLE_EQ(memory(2048, 1) - memory(1024, 1), 4718592.0);
  EXPECT_DOUBLE_EQ(memory(2048, 2) - memory(1024, 2), 4718592.0);
}

TEST(TrainingTest, ShardingSpansTheDataAndContextParallelRanks) {
  // CP 2 x DP 2 in one domain: the distributed optimizer shards the states over all 4 ranks and
  // the gradients are reduced over them (each CP rank holds its own tokens' gradients), as
  // Megatron-LM's data-parallel group with context parallelism does. The small GPT's 3,552,768
  // parameters (4 layers of 789,760: QKV 196,608 + 768, output 65,536 + 256, MLP 2 x 262,144 +
  // 1,024 + 256, two LayerNorms 1,024; token and position tables 262,144 and 131,072; the final
  // LayerNorm 512) have 14,211,072 bytes of fp32 gradients and 42,633,216 of fp32 states.
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  auto at = [&](int zero, int64_t dp, int64_t cp) {
    ParallelLayout l{.dp = dp, .cp = cp, .micro_batch = 1, .global_batch = 4, .zero = zero};
    l.overlap_grad_reduce = l.overlap_param_gather = false;
    const TrainingEstimate e = estimate_training(m, {.seq = 128}, l, d, sys, {});
    EXPECT_TRUE(e.feasible) << e.reason;
    return e;
  };
  const double grads = 14211072.0, states = 42633216.0, params = 2 * 3552768.0;
  const TrainingEstimate z0 = at(0, 2, 2), z1 = at(1, 2, 2);
  // ZeRO-1 keeps 1/4 of the states, not 1/2.
  EXPECT_DOUBLE_EQ(z0.memory_per_gpu_bytes - z1.memory_per_gpu_bytes, 0.75 * states);
  EXPECT_NEAR(z1.optimizer_s, z0.optimizer_s / 4, 1e-15);
  // Over 4 ranks: an all-reduce in log2(4) = 2 steps of 1 us each way and 2 x 3/4 S / B; a
  // reduce-scatter and an all-gather 2 steps and 3/4 S / B each.
  EXPECT_NEAR(z0.dp_comm_s, 4e-6 + 1.5 * grads / 100e9, 1e-15);
  EXPECT_NEAR(z1.dp_comm_s, (2e-6 + 0.75 * grads / 100e9) + (2e-6 + 0.75 * params / 100e9), 1e-15);
  // With no data parallelism the CP ranks still all-reduce their gradients: 2 ranks, one step
  // each way and S / B.
  EXPECT_NEAR(at(0, 1, 2).dp_comm_s, 2e-6 + grads / 100e9, 1e-15);
}

TEST(TrainingTest, MoeWithDenseLeadingLayersProfilesItsHeaviestLayers) {
  // DeepSeek-V3 (3 dense layers, then 58 MoE): a one-layer stage is one MoE layer, whatever
  // stage holds the dense ones, and the model FLOPs are the real model's (its graph's own).
  const ModelSpec m = testing::deepseek_v3();
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 64, .optimizer = Optimizer::none};
  const TrainingEstimate one = estimate_training(m, base, {.pp = 61, .global_batch = 61}, d, sys, {});
  EXPECT_EQ(one.stage_layers, 1);
  EXPECT_GT(one.memory_per_gpu_bytes, 0.0);
  const TrainingEstimate whole = estimate_training(m, base, {.global_batch = 1}, d, sys, {});
  const Graph g = build_graph(m, {.phase = Phase::train, .seq = 64, .optimizer = Optimizer::none});
  const SimulationResult r = simulate(g, d, SimulateOptions{});
  EXPECT_NEAR(whole.model_flops, r.model_flops, 1e-9 * r.model_flops);
}

TEST(TrainingTest, Fp8WeightCastsUnderFullRecomputeAreNotSubtractedFromSavedActivations) {
  // Full recompute with fp8 GEMMs: each layer keeps only its input, [1, 128, 256] bf16 =
  // 65,536 bytes; the forward frees its fp8 weight casts (the backward casts again), so they are
  // not among the bytes live at the end of the forward. They are held once per step instead: a
  // layer's four linears in e4m3, (768 + 256 + 1024) x 256 + 256 x 1024 = 786,432 bytes.
  // Subtracting the casts from the saved bytes made them negative (65,536 - 786,432 per layer).
  const ModelSpec m = testing::small_gpt(4);
  const DeviceSpec d = testing::round_device();
  const SystemSpec sys = round_system();
  const BuildOptions base{.seq = 128, .recompute = Recompute::full, .fp8_gemms = true};
  const ParallelLayout l{.pp = 2, .micro_batch = 1, .global_batch = 8};
  const StageProfile p = profile_stage(m, base, l, {{.name = "tp"}, {.name = "cp"}, {.name = "ep"}}, d,
                                       sys, {});
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_DOUBLE_EQ(p.saved_bytes.per_layer, 65536.0);
  EXPECT_DOUBLE_EQ(p.weight_copy_bytes.per_layer, 786432.0);
  EXPECT_GE(p.peak_activation_bytes.at(2), 0.0);
  const TrainingEstimate e = estimate_training(m, base, l, d, sys, {});
  // 2 layers on the first stage x 2 micro-batches in flight keep at least 4 layer inputs.
  EXPECT_GE(e.activation_bytes, 4 * 65536.0);
  EXPECT_GE(e.memory_per_gpu_bytes, e.activation_bytes + 2 * 786432.0);
}

}  // namespace
}  // namespace accelsim
