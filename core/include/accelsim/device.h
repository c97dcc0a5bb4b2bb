// DeviceSpec: the numbers of one accelerator that the cost model needs.
//
// A DeviceSpec is plain data, filled from a device file (python/accel_sim/data/devices/*.yaml,
// format in docs/formats/device.md) or built in code. Rates are dense (no sparsity) peaks in
// FLOP/s; a rate of 0 means the device has no such unit or it is not known. Every number's
// source lives in the device file, not here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accelsim/dtype.h"

namespace accelsim {

// Constants of the kernel cost model (layer 3/4). A device file's `kernel:` section sets them,
// each with its source (a measurement such as the maximum achievable matmul FLOPS, or a fit to
// validation data); a device without one uses these defaults and is reported as uncalibrated.
struct KernelConstants {
  bool calibrated = false;
  // Fraction of the matrix peak a large, well-shaped GEMM sustains (sustained clock, issue
  // efficiency): the maximum achievable matmul FLOPS over the datasheet peak.
  double matmul_efficiency = 0.75;
  // The same for fp8 GEMMs (per-block scaling costs extra); 0: as matmul_efficiency.
  double fp8_matmul_efficiency = 0.0;
  // A GEMM whose leading dimensions (K of the operands, N of B and of the result) are not
  // multiples of 16 bytes cannot use the fast kernels (TMA on Hopper, 16-byte cp.async before):
  // fraction of the matrix peak it sustains; 0: kUnalignedMatmulShare of the aligned efficiency.
  double unaligned_matmul_efficiency = 0.0;
  // Fraction of the matrix peak a FlashAttention-style fused attention kernel sustains on large
  // shapes (head dim 128), forward and backward.
  double attention_efficiency = 0.55;
  double attention_backward_efficiency = 0.45;
  // The same for FlashAttention-3 and cuDNN attention (forward); 0: as FlashAttention-2.
  double flash3_efficiency = 0.0;
  double cudnn_efficiency = 0.0;
  // cuDNN's fused attention backward (what Transformer Engine runs from sm_90 on), fraction of the
  // matrix peak; 0: as attention_backward_efficiency. On H100 it sustains about 1.8x
  // FlashAttention-2's backward (validation/measured/h100_sxm-2026-11-24/measurements.csv).
  double cudnn_backward_efficiency = 0.0;
  // Fused attention in fp8, fraction of the fp8 matrix peak (any implementation); 0: as the
  // implementation's own efficiency.
  double fp8_attention_efficiency = 0.0;
  // Fraction of the peak DRAM bandwidth a large streaming kernel reaches.
  double memory_efficiency = 0.85;
  // Fraction of the peak DRAM bandwidth a GEMM's operand loads reach (TMA / cp.async pipelines
  // over weight tiles, not the element-wise loops of a streaming kernel); 0: memory_efficiency.
  double gemm_memory_efficiency = 0.0;
  // Fixed time of each wave of GEMM output tiles (and of fused attention's 128-query blocks)
  // beyond its multiply-adds: the prologue that fills the operand pipeline, the epilogue that
  // converts and stores the tile. Default: the 1500 cycles per tile of AMD's Origami GEMM model
  // (ROCm/rocm-libraries, shared/origami/src/origami/gemm.cpp) at 1.8 GHz.
  double gemm_tile_overhead_s = 0.8e-6;
  // Fixed time of a library kernel (GEMM, attention) beyond its work: launch latency, prologue
  // and epilogue, the tail of the last wave.
  double kernel_floor_s = 3e-6;
  // Fixed time of a streaming (memory-bound) kernel in a step's stream, as back-to-back
  // benchmarks of small ones measure it.
  double stream_floor_s = 3e-6;
  // What a kernel timed alone shows beyond the same kernel in a step's stream: one launch between
  // two CUDA events right after an L2-flushing write (triton.testing.do_bench, `accel-sim
  // calibrate`) pays its launch latency, ramp and drain in full, where a stream (a CUDA graph,
  // back-to-back launches) overlaps them with its neighbours. A KernelQuery with timed_alone adds
  // it; simulated steps never do. Defaults: medians of alone minus in-stream of the same kernels
  // on H100 SXM and H200 (validation/measured/*-2026-11-24/gemm_stream.csv, stream_ops.csv and
  // measurements.csv): decode GEMMs 8.2 and 7.0 us; add, silu and softmax 2.4-2.7 us.
  double alone_kernel_overhead_s = 7.5e-6;   // GEMM and attention (library) kernels
  double alone_stream_overhead_s = 2.5e-6;   // streaming kernels
  // The fraction of the device's clock its compute runs at under sustained load: a training step
  // keeps the tensor cores busy for seconds, and the power limit then holds the core clock below
  // the one a short kernel runs at. 0: not measured, no derate. Fitted per device on the fit
  // split's GEMMs of at least kSustainedKernelS (fit_sustained_clock_fraction, kernel_query.h;
  // validation/fit_sustained_clock.py); training steps and plans run at it unless a clock
  // override is given (training_clock_hz, training.h).
  double sustained_clock_fraction = 0.0;
  // The board power limit, in watts, that sustained_clock_fraction was measured at (0: the
  // device's own tdp_w). A part of the same silicon capped at another limit (a system's variant
  // with its own tdp_w: Meta's H100s at 500 W) sustains another clock: sustained_clock_hz().
  double sustained_clock_power_w = 0.0;
  // The share of the streaming bandwidth (memory_efficiency of the DRAM peak) that PyTorch's own
  // (ATen) kernels reach on three kinds of streaming op that are not plain element-wise loops:
  // softmax over rows (one CTA per row, several reductions between reads), layer and RMS norms
  // over rows (statistics, then the normalised write), and a cast that widens its elements
  // (bf16 to fp32 copies). Fused replacements (Liger, Triton, compiled graphs) stream at the full
  // rate and are not ATen's. 0: as any streaming kernel. Defaults: `calibrate --data` on the fit
  // split of H100 SXM (softmax, norms: validation/measured/h100_sxm-2026-11-24/measurements.csv,
  // eager torch ops over rows of 4,096 bf16 elements, of 32 MB or more) and of H200 (the bf16 to
  // fp32 cast: validation/measured/h200-2026-11-24/, the H100's large cast rows being report
  // rows), every other constant held; a device file may give its own.
  double softmax_bandwidth_share = 0.44;
  double norm_bandwidth_share = 0.84;
  double widening_cast_bandwidth_share = 0.56;
};

struct DeviceSpec {
  std::string id;    // file stem, e.g. "h100_sxm"
  std::string name;  // display name
  std::string vendor;

  double memory_bytes = 0.0;
  double memory_bandwidth_bytes_per_s = 0.0;

  // Dense peak rates, FLOP/s (int8: op/s). Vector = SIMD/CUDA cores; matrix = tensor/matrix units.
  double fp64_flops_per_s = 0.0;
  double fp64_matrix_flops_per_s = 0.0;
  double fp32_flops_per_s = 0.0;
  double fp32_matrix_flops_per_s = 0.0;
  double tf32_matrix_flops_per_s = 0.0;
  double fp16_matrix_flops_per_s = 0.0;
  double bf16_matrix_flops_per_s = 0.0;
  double fp8_matrix_flops_per_s = 0.0;
  double int8_matrix_ops_per_s = 0.0;
  double fp4_matrix_flops_per_s = 0.0;  // FP4 (NVFP4, MXFP4) tensor/matrix rate; 0: none

  double kernel_launch_overhead_s = 0.0;  // host-side cost per kernel launch
  // Device memory the runtime holds outside PyTorch's allocator: the CUDA/HIP context and the
  // libraries' modules (cuBLAS, cuDNN, NCCL, Triton kernels). Default 512 MiB: "around 400 MB"
  // with CUDA >= 11.7 lazy module loading, growing with the loaded libraries
  // (pytorch/pytorch issue #109888, pull request #86509).
  double runtime_reserved_bytes = 512.0 * 1024 * 1024;
  int num_compute_units = 0;              // SMs / CUs / cores; 0 = unknown
  double clock_hz = 0.0;
  // Special-function results (exp2, log2, reciprocal: the softmax's exponentials) per clock per
  // compute unit; 0 = unknown. Fused attention's softmax costs matrix time in proportion to the
  // matrix rate over this rate (kernel.cc, softmax_head_dims).
  double special_function_ops_per_clock = 0.0;
  double l2_cache_bytes = 0.0;
  double tdp_w = 0.0;
  double price_usd_per_hour = 0.0;  // 0 = unknown
  KernelConstants kernel;

  // Throws ConfigError naming the device and field when a number is not finite, a required one
  // is missing or one is out of physical range: memory, bandwidth and at least one peak rate must
  // be positive; rates, times, power, price and sizes not negative; the kernel model's
  // efficiencies in (0, 1] (those documented as "0: as ..." may be 0).
  void validate() const;
};

// The share of its TDP a datacenter GPU draws idle: 10-20% (e.g. 62 W measured on a 400 W
// A100-80GB, github.com/chuyishang/inference-energy results_paste.md; 98 W on a 700 W H100 SXM,
// validation/measured/h100_sxm-2026-11-24/nvidia-smi.txt). The energy estimate and the
// power-limited clock take it as the power that does not scale with the clock.
inline constexpr double kIdleFractionOfTdp = 0.15;

// The core clock `device` sustains under seconds of tensor-core load (a training step), in Hz:
// clock_hz x kernel.sustained_clock_fraction, at the power limit the fraction was measured at
// (kernel.sustained_clock_power_w). Under another limit P (tdp_w), the power above idle goes as
// the cube of the clock (CMOS switching power a C V^2 f, Weste & Harris, "CMOS VLSI Design", 4th
// ed., sec. 5.1, with the supply voltage following the clock along the DVFS curve):
//   f(P) = f(P_fit) x ((P - P_idle) / (P_fit - P_idle))^(1/3),  P_idle = kIdleFractionOfTdp x P_fit,
// at most clock_hz. 0 when the fraction is not measured.
double sustained_clock_hz(const DeviceSpec& device);

// The peak rate an op of `dtype` runs at, and whether it had to fall back to another unit.
struct PeakRate {
  double flops_per_s = 0.0;
  std::string_view unit;  // "bf16_matrix", "fp32", "tf32_matrix", ... (a name that lives forever)
  bool fallback = false;  // true when the device has no rate for the requested unit
  // A matrix op fell back to a unit whose format cannot hold the dtype's values (fewer
  // mantissa bits or a smaller exponent range: fp32 on bf16 tensor cores, as a TPU's MXU runs
  // it in one pass): its figure is not that of the dtype asked for. A wider unit (bf16 on fp32
  // units) computes the dtype exactly, only slower, and is not narrower.
  bool narrower = false;
};

// Selects the peak for an op: matrix ops use the dtype's matrix unit (fp32 uses TF32 only when
// `allow_tf32`, as PyTorch does with allow_tf32); other ops use the vector fp32 (fp64) rate.
// When the device has no rate for that unit, falls back along a fixed chain (see device.cc)
// and sets `fallback`, so reports can say which number was used.
PeakRate peak_rate(const DeviceSpec& device, DType dtype, bool matrix_op, bool allow_tf32);

// The numbers of a device that a design sweep varies (`accel-sim sweep --vary`), in SI units.
enum class DeviceParameter : uint8_t {
  peak_flops_per_s,              // the dense matrix peak of one dtype; every compute rate follows
  memory_bandwidth_bytes_per_s,  // peak DRAM bandwidth
  memory_bytes,                  // DRAM capacity
  clock_hz,                      // core clock; compute rates and per-tile cycles follow
};

std::string_view device_parameter_name(DeviceParameter parameter);
std::vector<DeviceParameter> device_parameters();  // all of them, in declaration order

// `device` with one parameter set to `value` (positive and finite, else ConfigError), keeping the
// part self-consistent:
//   peak_flops_per_s: the matrix peak that a matmul of `matmul_dtype` runs at on `device`
//     (peak_rate with `allow_tf32`, fallbacks included) becomes `value`, and every other compute
//     rate (vector, matrix, every dtype) is scaled by the same factor, as a wider or faster chip
//     of the same design would scale them all; the compute-unit count and clock stay, so the
//     kernel model's tile waves are unchanged and each wave is faster.
//   clock_hz: every compute rate is scaled by value / the device's clock, and the kernel model's
//     per-tile overhead (cycles: KernelConstants::gemm_tile_overhead_s) by its inverse, as
//     CostOptions::clock_hz does; memory bandwidth does not follow the core clock. ConfigError
//     when the device file gives no clock.
//   memory_bandwidth_bytes_per_s, memory_bytes: set; nothing else changes (the kernel model's
//     efficiencies are fractions of the bandwidth, so they follow it).
// ConfigError also when the device has no rate for `matmul_dtype` at all.
DeviceSpec with_device_parameter(const DeviceSpec& device, DeviceParameter parameter, double value,
                                 DType matmul_dtype = DType::bf16, bool allow_tf32 = false);

}  // namespace accelsim
