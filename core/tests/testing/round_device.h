// A synthetic device with round numbers, so that expected times can be worked out by hand.
#pragma once

#include "accelsim/collective.h"
#include "accelsim/device.h"

namespace accelsim::testing {

inline DeviceSpec round_device() {
  DeviceSpec d;
  d.id = "round";
  d.name = "Round-number test device";
  d.memory_bytes = 1e9;                    // 1 GB
  d.memory_bandwidth_bytes_per_s = 1e12;   // 1 TB/s
  d.fp64_flops_per_s = 0.5e12;
  d.fp32_flops_per_s = 1e12;               // 1 TFLOP/s vector
  d.tf32_matrix_flops_per_s = 50e12;
  d.fp16_matrix_flops_per_s = 100e12;
  d.bf16_matrix_flops_per_s = 100e12;      // 100 TFLOP/s matrix
  d.kernel_launch_overhead_s = 1e-6;       // 1 us
  d.price_usd_per_hour = 2.0;
  return d;
}

// One 8-GPU scale-up domain at 100 GB/s and 1 us per step, NICs at 10 GB/s and 5 us, every
// efficiency 1 and no launch cost.
inline SystemSpec round_system() {
  SystemSpec s;
  s.id = "round";
  s.scaleup_domain = 8;
  s.scaleup = {.bandwidth_bytes_per_s = 100e9, .latency_s = 1e-6, .efficiency = 1.0};
  s.scaleout = {.bandwidth_bytes_per_s = 10e9, .latency_s = 5e-6, .efficiency = 1.0};
  return s;
}

}  // namespace accelsim::testing
