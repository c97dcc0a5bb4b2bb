#include "accelsim/simulate.h"

#include <gtest/gtest.h>

#include "accelsim/error.h"
#include "testing/graph_builder.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

using testing::new_tensor;

using testing::sample_graph;  // testing/graph_builder.h works its costs on the round device

TEST(SimulateTest, OpsRunBackToBack) {
  const SimulationResult r = simulate(sample_graph(), testing::round_device(), {});
  ASSERT_EQ(r.ops.size(), 4u);
  EXPECT_NEAR(r.ops[0].cost.time_s, 21e-6, 1e-15);
  EXPECT_EQ(r.ops[0].cost.bound, Bound::compute);
  EXPECT_DOUBLE_EQ(r.ops[1].cost.time_s, 0.0);
  EXPECT_NEAR(r.ops[2].cost.time_s, 5e-6, 1e-15);
  EXPECT_EQ(r.ops[2].cost.bound, Bound::memory);
  EXPECT_NEAR(r.latency_s, 31e-6, 1e-15);
  EXPECT_DOUBLE_EQ(r.ops[2].start_s, r.ops[1].end_s);
  EXPECT_EQ(r.num_kernels, 3);
  EXPECT_DOUBLE_EQ(r.total_flops, 2.001e9);
  EXPECT_DOUBLE_EQ(r.total_bytes, 1.4e7);
  EXPECT_NEAR(r.launch_overhead_time_s, 3e-6, 1e-15);
  // Utilization against the bf16 matrix peak and the bandwidth over 31 us.
  EXPECT_NEAR(r.compute_utilization, 2.001e9 / (31e-6 * 100e12), 1e-12);
  EXPECT_NEAR(r.bandwidth_utilization, 1.4e7 / (31e-6 * 1e12), 1e-12);
}

TEST(SimulateTest, TheHostRunsAheadOfLongKernels) {
  // Host 10 us per kernel; one 100 us kernel then nine of 1 us. The host issues kernel i at
  // 10 i us: the long one runs 10-110 us while the host issues the other nine (by 100 us), which
  // then run back to back: 119 us, not 100 + 9 x 10 (each short kernel charged the host's 10 us).
  std::vector<OpResult> ops(10);
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].count.launches_kernel = true;
    ops[i].cost.time_s = i == 0 ? 100e-6 : 1e-6;
  }
  OpResult view;  // a view launches nothing and waits for nothing
  ops.insert(ops.begin() + 3, view);
  charge_launch_queue(ops, 10e-6);
  double total = 0;
  for (const OpResult& op : ops) total += op.cost.time_s;
  EXPECT_NEAR(total, 119e-6, 1e-15);
  EXPECT_NEAR(ops[0].cost.launch_overhead_s, 10e-6, 1e-15);
  EXPECT_NEAR(ops[1].cost.launch_overhead_s, 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(ops[3].cost.time_s, 0.0);
  // Ten short kernels alone: the device waits for each, 10 x 10 us + the last one's 1 us.
  std::vector<OpResult> short_ones(10);
  for (OpResult& op : short_ones) {
    op.count.launches_kernel = true;
    op.cost.time_s = 1e-6;
  }
  charge_launch_queue(short_ones, 10e-6);
  total = 0;
  for (const OpResult& op : short_ones) total += op.cost.time_s;
  EXPECT_NEAR(total, 101e-6, 1e-15);
}

TEST(SimulateTest, AFourTimesFasterPeakTurnsTheGemmMemoryBound) {
  // 400 TFLOP/s (x4 every rate, with_device_parameter): n0 compute 2e9 / 400e12 = 5 us < memory
  // 6 us -> memory, 7 us; n2 compute 1e6 / 4e12 = 0.25 us < 4 us -> 5 us; n3 5 us. 17 us.
  const DeviceSpec fast = with_device_parameter(testing::round_device(),
                                                DeviceParameter::peak_flops_per_s, 400e12, DType::bf16);
  const SimulationResult r = simulate(sample_graph(), fast, {});
  EXPECT_EQ(r.reference_dtype, DType::bf16);
  EXPECT_EQ(r.ops[0].cost.bound, Bound::memory);
  EXPECT_NEAR(r.ops[0].cost.time_s, 7e-6, 1e-15);
  EXPECT_NEAR(r.latency_s, 17e-6, 1e-15);
  // Half the bandwidth instead: n0 memory 12 us < compute 20 us -> 21 us; n2 8 + 1 = 9 us; n3
  // (an unknown op, costed on its bytes) 8 + 1 = 9 us. 39 us.
  const DeviceSpec slow = with_device_parameter(testing::round_device(),
                                                DeviceParameter::memory_bandwidth_bytes_per_s, 0.5e12);
  EXPECT_NEAR(simulate(sample_graph(), slow, {}).latency_s, 39e-6, 1e-15);
}

TEST(SimulateTest, UnknownOpsAreListed) {
  const SimulationResult r = simulate(sample_graph(), testing::round_device(), {});
  ASSERT_EQ(r.uncovered_ops.size(), 1u);
  EXPECT_EQ(r.uncovered_ops[0].op, "frobnicate");
  EXPECT_EQ(r.uncovered_ops[0].count, 1);
  EXPECT_NEAR(r.uncovered_ops[0].time_s, 5e-6, 1e-15);
}

TEST(SimulateTest, MemoryVerdictAgainstCapacity) {
  // resident 4 MB; y (2 MB) lives n0..n2; z (2 MB) n2..n3; u (2 MB) from n3 to the end.
  // Peak at n2: 4 + 2 + 2 = 8 MB.
  DeviceSpec d = testing::round_device();
  SimulationResult r = simulate(sample_graph(), d, {});
  EXPECT_EQ(r.memory.peak_bytes, 8000000);
  EXPECT_EQ(r.memory.peak_node, 2);
  EXPECT_TRUE(r.fits);
  d.memory_bytes = 7.9e6;
  r = simulate(sample_graph(), d, {});
  EXPECT_FALSE(r.fits);
}

TEST(SimulateTest, RejectsInvalidDeviceAndCostModel) {
  DeviceSpec d = testing::round_device();
  d.memory_bandwidth_bytes_per_s = 0;
  EXPECT_THROW(simulate(sample_graph(), d, {}), ConfigError);
  EXPECT_THROW(simulate(sample_graph(), testing::round_device(), {.cost_model = "nope"}),
               ConfigError);
}

}  // namespace
}  // namespace accelsim

namespace accelsim {
namespace {

TEST(FusionTest, ElementwiseChainBecomesOneKernelTouchingOnlyItsInputsAndOutputs) {
  // x [1M] fp32 -> relu -> mul -> add(., x) -> graph output; then an mm breaks the chain and a
  // lone relu after it stays alone. Unfused the chain moves 8 + 8 + 12 MB in three launches;
  // fused it reads x once and writes the output once: 8 MB, one 1 us launch (round device:
  // 1 TB/s): 9 us instead of 31 us.
  Graph g;
  const TensorId x = testing::new_tensor(g, {1000000}, DType::fp32, StorageKind::input);
  const TensorId a = testing::new_tensor(g, {1000000});
  const TensorId b = testing::new_tensor(g, {1000000});
  const TensorId c = testing::new_tensor(g, {1000000});
  testing::add(g, "relu", {x}, {a});
  testing::add(g, "mul", {a}, {b});
  testing::add(g, "add", {b, x}, {c});
  const TensorId m = testing::new_tensor(g, {1000, 1000});
  const TensorId w = testing::new_tensor(g, {1000, 1000}, DType::fp32, StorageKind::parameter);
  const TensorId y = testing::new_tensor(g, {1000, 1000});
  testing::add(g, "mm", {testing::view_of(g, c, {1000, 1000}), w}, {y});
  const TensorId z = testing::new_tensor(g, {1000, 1000});
  testing::add(g, "relu", {y}, {z});
  g.add_output(z);
  SimulateOptions fused;
  fused.fuse_elementwise = true;
  const SimulationResult plain = simulate(g, testing::round_device(), {});
  const SimulationResult r = simulate(g, testing::round_device(), fused);
  EXPECT_NEAR(plain.ops[0].cost.time_s + plain.ops[1].cost.time_s + plain.ops[2].cost.time_s, 31e-6, 1e-12);
  EXPECT_NEAR(r.ops[0].cost.time_s, 9e-6, 1e-12);
  EXPECT_DOUBLE_EQ(r.ops[0].count.flops, 3e6);
  EXPECT_EQ(r.ops[1].fused_into, 0);
  EXPECT_EQ(r.ops[2].fused_into, 0);
  EXPECT_EQ(r.ops[1].cost.time_s, 0.0);
  EXPECT_EQ(r.ops[3].fused_into, kNoNode);  // the mm
  EXPECT_EQ(r.ops[4].fused_into, kNoNode);  // the lone relu after it
  EXPECT_DOUBLE_EQ(r.ops[4].cost.time_s, plain.ops[4].cost.time_s);
  EXPECT_EQ(r.num_kernels, plain.num_kernels - 2);
  EXPECT_NEAR(plain.latency_s - r.latency_s, 22e-6, 1e-12);
}

}  // namespace
}  // namespace accelsim

namespace accelsim {
namespace {

TEST(EnergyTest, IdlePowerPlusEnergyPerFlopAndByteCappedAtTdp) {
  // relu over 1M fp32 on the round device with a 100 W TDP: 8 MB at 1 TB/s + 1 us launch = 9 us.
  // Idle 15 W * 9 us = 1.35e-4 J; 1e6 FLOPs * (100 - 15) W / 1e12 FLOP/s = 0.85e-4 J; 8e6 B *
  // 32 pJ = 2.56e-4 J; total 4.76e-4 J, under the cap of 100 W * 9 us = 9e-4 J.
  Graph g;
  const TensorId x = testing::new_tensor(g, {1000000}, DType::fp32, StorageKind::input);
  const TensorId y = testing::new_tensor(g, {1000000});
  testing::add(g, "relu", {x}, {y});
  DeviceSpec d = testing::round_device();
  d.tdp_w = 100;
  const SimulationResult r = simulate(g, d, {});
  EXPECT_NEAR(r.energy_j, 4.76e-4, 1e-12);
  EXPECT_DOUBLE_EQ(r.ops[0].energy_j, r.energy_j);
  // A device without a TDP has no energy estimate.
  EXPECT_EQ(simulate(g, testing::round_device(), {}).energy_j, 0.0);
  // The cap: a TDP so small that the activity terms exceed it for the op's time.
  d.tdp_w = 1;
  EXPECT_NEAR(simulate(g, d, {}).energy_j, 9e-6, 1e-15);
}

}  // namespace
}  // namespace accelsim

namespace accelsim {
namespace {

TEST(MicroBatchTest, CachedFp8WeightCastRunsOncePerStep) {
  // One fp8 linear on the round device with a 200 TFLOP/s fp8 peak:
  //   n0 wq = _to_copy(W [1000, 1000] bf16 -> fp8), marked once_per_step: 2 MB read + 1 MB
  //      written at 1 TB/s = 3 us + 1 us launch = 4 us
  //   n1 xq = _to_copy(x [1000, 1000] bf16 -> fp8): 4 us
  //   n2 y = _scaled_mm(xq, wq^T): 2e9 FLOPs / 200 TFLOP/s = 10 us (4 MB: 4 us) + 1 us = 11 us
  // 4 micro-batches: 4 x 19 = 76 us; with the cache the weight cast runs once: 4 + 4 x 15 = 64 us.
  Graph g;
  const TensorId w = testing::new_tensor(g, {1000, 1000}, DType::bf16, StorageKind::parameter);
  const TensorId x = testing::new_tensor(g, {1000, 1000}, DType::bf16, StorageKind::input);
  const TensorId wq = testing::new_tensor(g, {1000, 1000}, DType::fp8_e4m3);
  const TensorId xq = testing::new_tensor(g, {1000, 1000}, DType::fp8_e4m3);
  const TensorId y = testing::new_tensor(g, {1000, 1000}, DType::bf16);
  testing::add(g, "_to_copy", {w}, {wq}, {{"once_per_step", true}});
  testing::add(g, "_to_copy", {x}, {xq});
  testing::add(g, "_scaled_mm", {xq, testing::view_of(g, wq, {1000, 1000})}, {y});
  g.add_output(y);
  DeviceSpec d = testing::round_device();
  d.fp8_matrix_flops_per_s = 200e12;
  SimulateOptions o;
  o.micro_batches = 4;
  const SimulationResult every = simulate(g, d, o);
  EXPECT_NEAR(every.ops[0].cost.time_s, 4e-6, 1e-12);
  EXPECT_NEAR(every.ops[1].cost.time_s, 4e-6, 1e-12);
  EXPECT_NEAR(every.ops[2].cost.time_s, 11e-6, 1e-12);
  EXPECT_NEAR(every.latency_s, 76e-6, 1e-12);
  EXPECT_EQ(every.once_per_step_time_s, 0.0);
  o.fp8_weight_cache = true;
  const SimulationResult cached = simulate(g, d, o);
  EXPECT_NEAR(cached.latency_s, 64e-6, 1e-12);
  EXPECT_NEAR(cached.forward_time_s, 64e-6, 1e-12);
  EXPECT_NEAR(cached.once_per_step_time_s, 4e-6, 1e-12);
  EXPECT_EQ(cached.num_kernels, 1 + 4 * 2);
  EXPECT_DOUBLE_EQ(cached.total_bytes, 3e6 + 4 * (3e6 + 4e6));
  // One micro-batch, as a caller that scales it would simulate: m x (forward + backward -
  // once_per_step_time_s) + once_per_step_time_s gives the same 64 us.
  o.micro_batches = 1;
  const SimulationResult one = simulate(g, d, o);
  EXPECT_NEAR(one.latency_s, 19e-6, 1e-12);
  EXPECT_NEAR(4 * (one.forward_time_s - one.once_per_step_time_s) + one.once_per_step_time_s,
              64e-6, 1e-12);
}

}  // namespace
}  // namespace accelsim
