#include "accelsim/device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "accelsim/error.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

TEST(DeviceSpecTest, TheSustainedClockFollowsThePowerLimit) {
  // An H100 SXM: 1,830 MHz, 0.922 of it sustained under training load at its 700 W limit. The
  // same part capped at 500 W keeps the idle 15% of 700 W = 105 W and scales the rest, the cube
  // of the clock: 1,830 x 0.922 x ((500 - 105) / (700 - 105))^(1/3) = 1,687.3 x 0.87236 =
  // 1,471.9 MHz.
  DeviceSpec d = testing::round_device();
  d.clock_hz = 1830e6;
  d.tdp_w = 700;
  d.kernel.sustained_clock_fraction = 0.922;
  d.kernel.sustained_clock_power_w = 700;
  EXPECT_NEAR(sustained_clock_hz(d), 1830e6 * 0.922, 1.0);
  d.tdp_w = 500;
  EXPECT_NEAR(sustained_clock_hz(d) / 1e6, 1471.9, 0.1);
  // Unset, the fraction was measured at the device's own limit: no scaling.
  d.kernel.sustained_clock_power_w = 0;
  EXPECT_NEAR(sustained_clock_hz(d), 1830e6 * 0.922, 1.0);
  // A higher limit raises the clock, never above the device's: ((1,000 - 105) / 595)^(1/3) =
  // 1.146 would take it to 1,933 MHz.
  d.kernel.sustained_clock_power_w = 700;
  d.tdp_w = 1000;
  EXPECT_EQ(sustained_clock_hz(d), 1830e6);
  // A limit below the idle power cannot run; without a measured fraction there is no clock.
  d.tdp_w = 100;
  EXPECT_THROW(sustained_clock_hz(d), ConfigError);
  d.kernel.sustained_clock_fraction = 0;
  EXPECT_EQ(sustained_clock_hz(d), 0.0);
}

TEST(DeviceSpecTest, ValidateRejectsMissingNumbers) {
  DeviceSpec d = testing::round_device();
  EXPECT_NO_THROW(d.validate());
  DeviceSpec no_memory = d;
  no_memory.memory_bytes = 0;
  EXPECT_THROW(no_memory.validate(), ConfigError);
  DeviceSpec no_bandwidth = d;
  no_bandwidth.memory_bandwidth_bytes_per_s = 0;
  EXPECT_THROW(no_bandwidth.validate(), ConfigError);
  DeviceSpec no_peaks{.id = "x", .memory_bytes = 1, .memory_bandwidth_bytes_per_s = 1};
  EXPECT_THROW(no_peaks.validate(), ConfigError);
  DeviceSpec negative = d;
  negative.fp8_matrix_flops_per_s = -1;
  EXPECT_THROW(negative.validate(), ConfigError);
}

TEST(PeakRateTest, MatmulsUseTheDtypeMatrixUnit) {
  const DeviceSpec d = testing::round_device();
  EXPECT_DOUBLE_EQ(peak_rate(d, DType::bf16, true, false).flops_per_s, 100e12);
  EXPECT_EQ(peak_rate(d, DType::bf16, true, false).unit, "bf16_matrix");
  // fp32 matmuls stay on the vector units unless TF32 is allowed, as in PyTorch.
  EXPECT_DOUBLE_EQ(peak_rate(d, DType::fp32, true, false).flops_per_s, 1e12);
  EXPECT_DOUBLE_EQ(peak_rate(d, DType::fp32, true, true).flops_per_s, 50e12);
  // Pointwise ops run on the vector units whatever their dtype.
  EXPECT_DOUBLE_EQ(peak_rate(d, DType::bf16, false, false).flops_per_s, 1e12);
  EXPECT_FALSE(peak_rate(d, DType::bf16, true, false).fallback);
}

TEST(PeakRateTest, NarrowerFallbacksAreMarked) {
  // A TPU-like part: bf16 tensor units only. fp32 matmuls fall back to them (one bf16 pass:
  // 8 significand bits for fp32's 24), which cannot hold fp32's values: narrower.
  DeviceSpec tpu{.id = "tpu", .memory_bytes = 1, .memory_bandwidth_bytes_per_s = 1,
                 .bf16_matrix_flops_per_s = 100e12};
  const PeakRate fp32 = peak_rate(tpu, DType::fp32, true, false);
  EXPECT_EQ(fp32.unit, "bf16_matrix");
  EXPECT_TRUE(fp32.fallback);
  EXPECT_TRUE(fp32.narrower);
  // fp16 (5 exponent bits) on bf16 units (7 + 1 significand bits for fp16's 10 + 1): narrower.
  EXPECT_TRUE(peak_rate(tpu, DType::fp16, true, false).narrower);
  // fp8 e4m3 (3 + 1, 4) and int8 (8 bits) are exact in bf16 (7 + 1, 8): wider, not narrower.
  EXPECT_FALSE(peak_rate(tpu, DType::fp8_e4m3, true, false).narrower);
  EXPECT_FALSE(peak_rate(tpu, DType::int8, true, false).narrower);
  // A vector op's fallback fills a gap in the device's numbers, not its arithmetic: every part
  // computes elementwise fp32; it is never marked narrower.
  EXPECT_FALSE(peak_rate(tpu, DType::fp32, false, false).narrower);
  // A V100-like part: fp32 and fp16 but no bf16 units. bf16 runs on fp32 units exactly.
  DeviceSpec v100{.id = "v100", .memory_bytes = 1, .memory_bandwidth_bytes_per_s = 1,
                  .fp32_flops_per_s = 15e12, .fp16_matrix_flops_per_s = 120e12};
  const PeakRate bf16 = peak_rate(v100, DType::bf16, true, false);
  EXPECT_EQ(bf16.unit, "fp32");
  EXPECT_TRUE(bf16.fallback);
  EXPECT_FALSE(bf16.narrower);
}

TEST(PeakRateTest, MissingUnitsFallBackAndSaySo) {
  DeviceSpec v100_like = testing::round_device();
  v100_like.bf16_matrix_flops_per_s = 0;  // no bf16 tensor cores: runs at the fp32 rate
  const PeakRate bf16 = peak_rate(v100_like, DType::bf16, true, false);
  EXPECT_DOUBLE_EQ(bf16.flops_per_s, 1e12);
  EXPECT_TRUE(bf16.fallback);
  // fp8 without fp8 units upcasts to fp16.
  const PeakRate fp8 = peak_rate(v100_like, DType::fp8_e4m3, true, false);
  EXPECT_DOUBLE_EQ(fp8.flops_per_s, 100e12);
  EXPECT_TRUE(fp8.fallback);
  // A chip on paper given a single bf16 number uses it for everything, flagged.
  DeviceSpec paper{.id = "paper", .memory_bytes = 1, .memory_bandwidth_bytes_per_s = 1,
                   .bf16_matrix_flops_per_s = 7e12};
  EXPECT_DOUBLE_EQ(peak_rate(paper, DType::fp32, false, false).flops_per_s, 7e12);
  EXPECT_TRUE(peak_rate(paper, DType::fp32, false, false).fallback);
}

TEST(DeviceParameterTest, PeakSetsTheRunsMatmulUnitAndScalesEveryRate) {
  const DeviceSpec d = testing::round_device();
  // bf16 matmuls run at 100 TFLOP/s; asking for 400 scales every rate by 4.
  const DeviceSpec x4 = with_device_parameter(d, DeviceParameter::peak_flops_per_s, 400e12, DType::bf16);
  EXPECT_DOUBLE_EQ(x4.bf16_matrix_flops_per_s, 400e12);
  EXPECT_DOUBLE_EQ(x4.fp16_matrix_flops_per_s, 400e12);
  EXPECT_DOUBLE_EQ(x4.tf32_matrix_flops_per_s, 200e12);
  EXPECT_DOUBLE_EQ(x4.fp32_flops_per_s, 4e12);
  EXPECT_DOUBLE_EQ(x4.fp64_flops_per_s, 2e12);
  EXPECT_DOUBLE_EQ(x4.fp8_matrix_flops_per_s, 0.0);  // a unit the part lacks stays absent
  EXPECT_DOUBLE_EQ(x4.memory_bandwidth_bytes_per_s, 1e12);
  EXPECT_DOUBLE_EQ(x4.memory_bytes, 1e9);
  // fp32 matmuls: on TF32 units (50 TFLOP/s) when allowed, else the vector fp32 rate (1).
  EXPECT_DOUBLE_EQ(with_device_parameter(d, DeviceParameter::peak_flops_per_s, 100e12, DType::fp32, true)
                       .bf16_matrix_flops_per_s, 200e12);
  EXPECT_DOUBLE_EQ(with_device_parameter(d, DeviceParameter::peak_flops_per_s, 2e12, DType::fp32, false)
                       .bf16_matrix_flops_per_s, 200e12);
}

TEST(DeviceParameterTest, BandwidthCapacityAndClock) {
  DeviceSpec d = testing::round_device();
  EXPECT_DOUBLE_EQ(with_device_parameter(d, DeviceParameter::memory_bandwidth_bytes_per_s, 3e12)
                       .memory_bandwidth_bytes_per_s, 3e12);
  const DeviceSpec big = with_device_parameter(d, DeviceParameter::memory_bytes, 80e9);
  EXPECT_DOUBLE_EQ(big.memory_bytes, 80e9);
  EXPECT_DOUBLE_EQ(big.bf16_matrix_flops_per_s, 100e12);
  // The round device gives no clock: nothing to scale against.
  EXPECT_THROW(with_device_parameter(d, DeviceParameter::clock_hz, 1.5e9), ConfigError);
  // At 1 GHz, 1.5 GHz is 1.5x every rate and 1/1.5 of the per-tile overhead (cycles); the
  // bandwidth does not follow the core clock.
  d.clock_hz = 1e9;
  const DeviceSpec fast = with_device_parameter(d, DeviceParameter::clock_hz, 1.5e9);
  EXPECT_DOUBLE_EQ(fast.clock_hz, 1.5e9);
  EXPECT_DOUBLE_EQ(fast.bf16_matrix_flops_per_s, 150e12);
  EXPECT_DOUBLE_EQ(fast.fp32_flops_per_s, 1.5e12);
  EXPECT_NEAR(fast.kernel.gemm_tile_overhead_s, 0.8e-6 / 1.5, 1e-18);
  EXPECT_DOUBLE_EQ(fast.memory_bandwidth_bytes_per_s, 1e12);
}

TEST(DeviceParameterTest, RejectsValuesThatAreNotPositive) {
  const DeviceSpec d = testing::round_device();
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    for (DeviceParameter p : device_parameters()) {
      EXPECT_THROW(with_device_parameter(d, p, bad), ConfigError) << device_parameter_name(p);
    }
  }
  // A part with only fp64 units has no rate a bf16 matmul could run at to scale from.
  DeviceSpec fp64_only{.id = "fp64", .memory_bytes = 1, .memory_bandwidth_bytes_per_s = 1,
                       .fp64_flops_per_s = 1e12};
  EXPECT_THROW(with_device_parameter(fp64_only, DeviceParameter::peak_flops_per_s, 1e12), ConfigError);
  EXPECT_EQ(device_parameters().size(), 4u);
  EXPECT_EQ(device_parameter_name(DeviceParameter::memory_bandwidth_bytes_per_s),
            "memory_bandwidth_bytes_per_s");
}

}  // namespace
}  // namespace accelsim
