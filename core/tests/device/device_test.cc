#include "accelsim/device.h"

#include <gtest/gtest.h>

#include "accelsim/error.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

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

}  // namespace
}  // namespace accelsim
