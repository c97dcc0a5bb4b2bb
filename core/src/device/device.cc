#include "accelsim/device.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

#include "accelsim/error.h"

namespace accelsim {
namespace {

using Rate = double DeviceSpec::*;

// A number format as significand bits (the implicit bit included) and exponent bits; an
// integer format has no exponent. IEEE 754-2008 (fp64, fp32, fp16); NVIDIA's TF32 (10 + 1
// significand, 8 exponent bits); bf16 (7 + 1, 8); OCP fp8 (e4m3: 3 + 1, 4; e5m2: 2 + 1, 5).
struct Format {
  int significand_bits;
  int exponent_bits;
};

constexpr Format kFp64Format{53, 11};
constexpr Format kFp32Format{24, 8};
constexpr Format kTf32Format{11, 8};
constexpr Format kFp16Format{11, 5};
constexpr Format kBf16Format{8, 8};
constexpr Format kFp8Format{4, 5};  // a unit that runs both e4m3 (4, 4) and e5m2 (3, 5)
constexpr Format kInt8Format{8, 0};
constexpr Format kFp4Format{2, 2};  // OCP e2m1: 1 + 1 significand, 2 exponent bits

struct Unit {
  const char* name;
  Rate rate;
  Format format;
};

constexpr Unit kFp64{"fp64", &DeviceSpec::fp64_flops_per_s, kFp64Format};
constexpr Unit kFp64Matrix{"fp64_matrix", &DeviceSpec::fp64_matrix_flops_per_s, kFp64Format};
constexpr Unit kFp32{"fp32", &DeviceSpec::fp32_flops_per_s, kFp32Format};
constexpr Unit kFp32Matrix{"fp32_matrix", &DeviceSpec::fp32_matrix_flops_per_s, kFp32Format};
constexpr Unit kTf32Matrix{"tf32_matrix", &DeviceSpec::tf32_matrix_flops_per_s, kTf32Format};
constexpr Unit kFp16Matrix{"fp16_matrix", &DeviceSpec::fp16_matrix_flops_per_s, kFp16Format};
constexpr Unit kBf16Matrix{"bf16_matrix", &DeviceSpec::bf16_matrix_flops_per_s, kBf16Format};
constexpr Unit kFp8Matrix{"fp8_matrix", &DeviceSpec::fp8_matrix_flops_per_s, kFp8Format};
constexpr Unit kInt8Matrix{"int8_matrix", &DeviceSpec::int8_matrix_ops_per_s, kInt8Format};
constexpr Unit kFp4Matrix{"fp4_matrix", &DeviceSpec::fp4_matrix_flops_per_s, kFp4Format};

// The format of a dtype's values; integers wider than 8 bits hold more than any unit here.
Format dtype_format(DType dtype) {
  switch (dtype) {
    case DType::fp64:
    case DType::complex128: return kFp64Format;
    case DType::fp32:
    case DType::complex64: return kFp32Format;
    case DType::fp16: return kFp16Format;
    case DType::bf16: return kBf16Format;
    case DType::fp8_e4m3: return {4, 4};
    case DType::fp8_e5m2: return {3, 5};
    case DType::fp4_e2m1: return kFp4Format;
    case DType::int8:
    case DType::uint8:
    case DType::boolean: return kInt8Format;
    default: return {64, 0};
  }
}

// True when every value of `dtype` is a value of `unit`'s format: integers of n bits are exact in
// a float format with at least n significand bits; floats need as many significand and exponent
// bits (an integer unit holds no float).
bool holds(const Format& unit, const Format& dtype) {
  if (dtype.exponent_bits == 0) return unit.significand_bits >= dtype.significand_bits;
  return unit.exponent_bits >= dtype.exponent_bits && unit.significand_bits >= dtype.significand_bits;
}

// Walks `preferred` first, then `fallbacks`; the first unit with a positive rate wins. A matrix
// op's fallback to a unit that does not hold `dtype` is marked narrower.
PeakRate pick(const DeviceSpec& d, DType dtype, bool matrix_op, std::initializer_list<Unit> preferred,
              std::initializer_list<Unit> fallbacks) {
  for (const Unit& u : preferred) {
    if (d.*u.rate > 0) return {d.*u.rate, u.name, false, false};
  }
  for (const Unit& u : fallbacks) {
    if (d.*u.rate > 0) return {d.*u.rate, u.name, true, matrix_op && !holds(u.format, dtype_format(dtype))};
  }
  return {};
}

// Every compute rate of a device, for scaling them together.
constexpr Rate kAllRates[] = {
    &DeviceSpec::fp64_flops_per_s,        &DeviceSpec::fp64_matrix_flops_per_s,
    &DeviceSpec::fp32_flops_per_s,        &DeviceSpec::fp32_matrix_flops_per_s,
    &DeviceSpec::tf32_matrix_flops_per_s, &DeviceSpec::fp16_matrix_flops_per_s,
    &DeviceSpec::bf16_matrix_flops_per_s, &DeviceSpec::fp8_matrix_flops_per_s,
    &DeviceSpec::int8_matrix_ops_per_s,   &DeviceSpec::fp4_matrix_flops_per_s,
};

void scale_compute_rates(DeviceSpec& d, double factor) {
  for (Rate rate : kAllRates) d.*rate *= factor;
}

}  // namespace

void DeviceSpec::validate() const {
  const std::string who = "device '" + (id.empty() ? name : id) + "'";
  // Every number must be finite: an infinite or NaN constant would turn into infinite or NaN
  // times, rates and energies instead of an error.
  require_in_range(who, "memory capacity", memory_bytes, kPositive);
  require_in_range(who, "memory bandwidth", memory_bandwidth_bytes_per_s, kPositive);
  const std::pair<const char*, double> rates[] = {
      {"peak rate fp64", fp64_flops_per_s},          {"peak rate fp64_matrix", fp64_matrix_flops_per_s},
      {"peak rate fp32", fp32_flops_per_s},          {"peak rate fp32_matrix", fp32_matrix_flops_per_s},
      {"peak rate tf32", tf32_matrix_flops_per_s},   {"peak rate fp16", fp16_matrix_flops_per_s},
      {"peak rate bf16", bf16_matrix_flops_per_s},   {"peak rate fp8", fp8_matrix_flops_per_s},
      {"peak rate int8", int8_matrix_ops_per_s},     {"peak rate fp4", fp4_matrix_flops_per_s},
  };
  bool any = false;
  for (const auto& [field, value] : rates) {
    require_in_range(who, field, value, kNonNegative);
    any = any || value > 0;
  }
  ACCELSIM_CHECK(any, who + ": needs at least one positive peak rate");
  ACCELSIM_CHECK(num_compute_units >= 0, who + ": num_compute_units must not be negative");
  // The kernel model's constants: efficiencies are fractions of a peak, in (0, 1]; those whose 0
  // means "as another efficiency" (or unset) may be 0. Times are non-negative.
  const std::pair<const char*, double> non_negative[] = {
      {"launch overhead", kernel_launch_overhead_s},
      {"price", price_usd_per_hour},
      {"runtime_reserved_bytes", runtime_reserved_bytes},
      {"clock_hz", clock_hz},
      {"l2_cache_bytes", l2_cache_bytes},
      {"special_function_ops_per_clock", special_function_ops_per_clock},
      {"tdp_w", tdp_w},
      {"kernel.sustained_clock_power_w", kernel.sustained_clock_power_w},
      {"kernel.gemm_tile_overhead_s", kernel.gemm_tile_overhead_s},
      {"kernel.kernel_floor_s", kernel.kernel_floor_s},
      {"kernel.stream_floor_s", kernel.stream_floor_s},
      {"kernel.alone_kernel_overhead_s", kernel.alone_kernel_overhead_s},
      {"kernel.alone_stream_overhead_s", kernel.alone_stream_overhead_s},
  };
  for (const auto& [field, value] : non_negative) require_in_range(who, field, value, kNonNegative);
  const std::pair<const char*, double> efficiencies[] = {
      {"kernel.matmul_efficiency", kernel.matmul_efficiency},
      {"kernel.attention_efficiency", kernel.attention_efficiency},
      {"kernel.attention_backward_efficiency", kernel.attention_backward_efficiency},
      {"kernel.memory_efficiency", kernel.memory_efficiency},
  };
  for (const auto& [field, value] : efficiencies) require_in_range(who, field, value, kPositiveFraction);
  const std::pair<const char*, double> optional_efficiencies[] = {
      {"kernel.fp8_matmul_efficiency", kernel.fp8_matmul_efficiency},
      {"kernel.flash3_efficiency", kernel.flash3_efficiency},
      {"kernel.cudnn_efficiency", kernel.cudnn_efficiency},
      {"kernel.cudnn_backward_efficiency", kernel.cudnn_backward_efficiency},
      {"kernel.unaligned_matmul_efficiency", kernel.unaligned_matmul_efficiency},
      {"kernel.fp8_attention_efficiency", kernel.fp8_attention_efficiency},
      {"kernel.gemm_memory_efficiency", kernel.gemm_memory_efficiency},
      {"kernel.sustained_clock_fraction", kernel.sustained_clock_fraction},
      {"kernel.softmax_bandwidth_share", kernel.softmax_bandwidth_share},
      {"kernel.norm_bandwidth_share", kernel.norm_bandwidth_share},
      {"kernel.widening_cast_bandwidth_share", kernel.widening_cast_bandwidth_share},
  };
  for (const auto& [field, value] : optional_efficiencies) require_in_range(who, field, value, kFraction);
}

double sustained_clock_hz(const DeviceSpec& device) {
  const KernelConstants& k = device.kernel;
  if (k.sustained_clock_fraction <= 0) return 0.0;
  double clock = device.clock_hz * k.sustained_clock_fraction;
  const double fitted_w = k.sustained_clock_power_w > 0 ? k.sustained_clock_power_w : device.tdp_w;
  if (device.tdp_w > 0 && fitted_w > 0 && device.tdp_w != fitted_w) {
    const double idle_w = kIdleFractionOfTdp * fitted_w;
    ACCELSIM_CHECK(device.tdp_w > idle_w, device.id + ": a power limit of " + std::to_string(device.tdp_w) +
                                              " W is below the idle power of the part its sustained clock was "
                                              "measured on (" + std::to_string(idle_w) + " W)");
    clock *= std::cbrt((device.tdp_w - idle_w) / (fitted_w - idle_w));
  }
  return std::min(clock, device.clock_hz);
}

PeakRate peak_rate(const DeviceSpec& d, DType dtype, bool matrix_op, bool allow_tf32) {
  // Fallback chains: a dtype without its own unit runs where frameworks run it — bf16 on a part
  // without bf16 tensor cores (V100, T4) at the fp32 rate, fp8/int8 without such units upcast to
  // 16-bit — and a device file that lacks a rate entirely (a chip on paper given one number)
  // uses the nearest rate it has, flagged as a fallback.
  PeakRate r;
  if (matrix_op) {
    switch (dtype) {
      case DType::fp64:
        r = pick(d, dtype, matrix_op, {kFp64Matrix, kFp64}, {kFp32Matrix, kFp32, kBf16Matrix, kFp16Matrix});
        break;
      case DType::fp32:
      case DType::complex64:
      case DType::complex128:
        r = allow_tf32 ? pick(d, dtype, matrix_op, {kTf32Matrix, kFp32Matrix, kFp32}, {kBf16Matrix, kFp16Matrix})
                       : pick(d, dtype, matrix_op, {kFp32Matrix, kFp32}, {kTf32Matrix, kBf16Matrix, kFp16Matrix});
        break;
      case DType::fp16:
        r = pick(d, dtype, matrix_op, {kFp16Matrix}, {kBf16Matrix, kFp32Matrix, kFp32});
        break;
      case DType::bf16:
        r = pick(d, dtype, matrix_op, {kBf16Matrix}, {kFp32Matrix, kFp32, kFp16Matrix});
        break;
      case DType::fp8_e4m3:
      case DType::fp8_e5m2:
        r = pick(d, dtype, matrix_op, {kFp8Matrix}, {kFp16Matrix, kBf16Matrix, kFp32Matrix, kFp32});
        break;
      case DType::int8:
      case DType::uint8:
        r = pick(d, dtype, matrix_op, {kInt8Matrix}, {kFp16Matrix, kBf16Matrix, kFp32Matrix, kFp32});
        break;
      case DType::fp4_e2m1:
        // Without fp4 units the values run upcast: on fp8 units, else 16-bit.
        r = pick(d, dtype, matrix_op, {kFp4Matrix}, {kFp8Matrix, kFp16Matrix, kBf16Matrix, kFp32Matrix, kFp32});
        break;
      default:
        r = pick(d, dtype, matrix_op, {kFp32}, {kFp32Matrix, kBf16Matrix, kFp16Matrix});
        break;
    }
  } else if (dtype == DType::fp64 || dtype == DType::complex128) {
    r = pick(d, dtype, matrix_op, {kFp64}, {kFp32, kFp32Matrix, kBf16Matrix, kFp16Matrix});
  } else {
    r = pick(d, dtype, matrix_op, {kFp32}, {kFp32Matrix, kBf16Matrix, kFp16Matrix, kTf32Matrix});
  }
  return r;
}

std::string_view device_parameter_name(DeviceParameter parameter) {
  switch (parameter) {
    case DeviceParameter::peak_flops_per_s: return "peak_flops_per_s";
    case DeviceParameter::memory_bandwidth_bytes_per_s: return "memory_bandwidth_bytes_per_s";
    case DeviceParameter::memory_bytes: return "memory_bytes";
    case DeviceParameter::clock_hz: return "clock_hz";
  }
  return "?";
}

std::vector<DeviceParameter> device_parameters() {
  return {DeviceParameter::peak_flops_per_s, DeviceParameter::memory_bandwidth_bytes_per_s,
          DeviceParameter::memory_bytes, DeviceParameter::clock_hz};
}

DeviceSpec with_device_parameter(const DeviceSpec& device, DeviceParameter parameter, double value,
                                 DType matmul_dtype, bool allow_tf32) {
  const std::string who = "device '" + (device.id.empty() ? device.name : device.id) + "'";
  const std::string what(device_parameter_name(parameter));
  require_in_range(who, what, value, kPositive);
  DeviceSpec d = device;
  switch (parameter) {
    case DeviceParameter::peak_flops_per_s: {
      const PeakRate peak = peak_rate(device, matmul_dtype, true, allow_tf32);
      ACCELSIM_CHECK(peak.flops_per_s > 0, who + ": has no compute rate to scale");
      scale_compute_rates(d, value / peak.flops_per_s);
      break;
    }
    case DeviceParameter::clock_hz: {
      ACCELSIM_CHECK(device.clock_hz > 0,
                     who + ": its device file gives no clock, so a clock cannot be set against it");
      const double factor = value / device.clock_hz;
      scale_compute_rates(d, factor);
      // Cycles, as KernelCostModel scales them under CostOptions::clock_hz.
      d.kernel.gemm_tile_overhead_s /= factor;
      d.clock_hz = value;
      break;
    }
    case DeviceParameter::memory_bandwidth_bytes_per_s:
      d.memory_bandwidth_bytes_per_s = value;
      break;
    case DeviceParameter::memory_bytes:
      d.memory_bytes = value;
      break;
  }
  return d;
}

}  // namespace accelsim
