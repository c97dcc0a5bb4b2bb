#include <gtest/gtest.h>

#include "accelsim/cost_model.h"
#include "accelsim/error.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

TEST(RooflineTest, ComputeBoundMatmul) {
  // 2e12 bf16 FLOPs at 100 TFLOP/s = 20 ms; 1e9 bytes at 1 TB/s = 1 ms; plus 1 us launch.
  OpCount c{.flops = 2e12, .bytes_read = 0.5e9, .bytes_written = 0.5e9,
            .op_class = OpClass::matmul, .compute_dtype = DType::bf16};
  const OpCost t = RooflineCostModel().cost(c, testing::round_device(), {});
  EXPECT_DOUBLE_EQ(t.compute_time_s, 0.02);
  EXPECT_DOUBLE_EQ(t.memory_time_s, 1e-3);
  EXPECT_DOUBLE_EQ(t.launch_overhead_s, 1e-6);
  EXPECT_DOUBLE_EQ(t.time_s, 0.02 + 1e-6);
  EXPECT_EQ(t.bound, Bound::compute);
}

TEST(RooflineTest, MemoryBoundElementwise) {
  // add of two 1M-element fp32 tensors: 12 MB at 1 TB/s = 12 us; 1e6 FLOPs at 1 TFLOP/s = 1 us.
  OpCount c{.flops = 1e6, .bytes_read = 8e6, .bytes_written = 4e6,
            .op_class = OpClass::elementwise, .compute_dtype = DType::fp32};
  const OpCost t = RooflineCostModel().cost(c, testing::round_device(), {});
  EXPECT_DOUBLE_EQ(t.memory_time_s, 12e-6);
  EXPECT_DOUBLE_EQ(t.compute_time_s, 1e-6);
  EXPECT_DOUBLE_EQ(t.time_s, 13e-6);
  EXPECT_EQ(t.bound, Bound::memory);
  const OpCost no_launch =
      RooflineCostModel().cost(c, testing::round_device(), {.include_launch_overhead = false});
  EXPECT_DOUBLE_EQ(no_launch.time_s, 12e-6);
}

TEST(RooflineTest, Fp32MatmulUsesTf32OnlyWhenAllowed) {
  OpCount c{.flops = 1e12, .op_class = OpClass::matmul, .compute_dtype = DType::fp32};
  const DeviceSpec d = testing::round_device();
  EXPECT_DOUBLE_EQ(RooflineCostModel().cost(c, d, {}).compute_time_s, 1.0);
  EXPECT_DOUBLE_EQ(RooflineCostModel().cost(c, d, {.allow_tf32 = true}).compute_time_s, 0.02);
}

TEST(RooflineTest, ViewsTakeNoTime) {
  OpCount c{.op_class = OpClass::view, .launches_kernel = false};
  const OpCost t = RooflineCostModel().cost(c, testing::round_device(), {});
  EXPECT_DOUBLE_EQ(t.time_s, 0.0);
  EXPECT_EQ(t.bound, Bound::none);
}

TEST(CostModelFactoryTest, KnownAndUnknownNames) {
  EXPECT_EQ(make_cost_model("roofline")->name(), "roofline");
  // The kernel model's launch waits are one queue over the step; the roofline adds its own to each op.
  EXPECT_TRUE(make_cost_model("kernel")->queues_launches());
  EXPECT_FALSE(make_cost_model("roofline")->queues_launches());
  EXPECT_THROW(make_cost_model("magic"), ConfigError);
}

}  // namespace
}  // namespace accelsim
