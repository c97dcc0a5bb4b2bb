// One kernel described by its problem, timed by a cost model; error statistics and the fit of a
// device's kernel constants against measured kernels.
//
// The `kernel` command answers what-if questions with estimate_kernel(); `validate` and
// `calibrate` compare it with measurements (validation/kernels.csv). A matmul or attention
// query is turned into a one-node graph so the op catalogue counts it exactly as it counts the
// same op inside a model.
//
//   KernelQuery q{.kind = KernelKind::matmul, .m = 4096, .n = 4096, .k = 4096};
//   KernelEstimate e = estimate_kernel(q, device, "kernel", CostOptions{});
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "accelsim/cost_model.h"
#include "accelsim/device.h"
#include "accelsim/op_catalog.h"
#include "accelsim/simulate.h"

namespace accelsim {

enum class KernelKind : uint8_t { matmul, attention, memory };

struct KernelQuery {
  KernelKind kind = KernelKind::matmul;
  DType dtype = DType::bf16;
  // matmul: batch products of [m, k] x [k, n]
  int64_t m = 0, n = 0, k = 0, batch = 1;
  // attention: q [batch, heads, seq_q, head_dim], k and v [batch, kv_heads, seq_k, head_dim]
  int64_t heads = 0, kv_heads = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  bool causal = false;
  bool forward = true;    // time the forward kernel
  bool backward = false;  // and/or the backward kernel
  AttentionImpl impl = AttentionImpl::flash2;
  // Attention backward: q, k, v, the output and its gradient are contiguous [batch, heads, seq,
  // head_dim] tensors, as a benchmark allocates them. PyTorch's FlashAttention-2 backward then
  // copies the output and its gradient to [batch, seq, heads, head_dim] before its kernels; an
  // attention module's q, k, v are views of [batch, seq, heads * head_dim] projections and need
  // no copy (validation/measured/h100_sxm-2026-11-25/module_kernels.csv).
  bool heads_first_inputs = false;
  // memory: a streaming kernel moving `bytes` (read + written) over `elements` elements; with
  // bytes = 0, the bytes follow from `op` (unary ops read and write each element once, binary
  // ones read two operands; norms, softmax and RoPE read and write once) at the dtype's size.
  double bytes = 0, elements = 0;
  std::string op;
  // memory: the op as PyTorch eager runs it, ATen's own kernel. Its softmax and norms over rows
  // and a cast (elements of `dtype` widened to `bytes` / `elements` - their size each) then
  // reach only their measured share of the streaming bandwidth (KernelConstants); false: a
  // fused replacement (Liger, Triton, a compiled graph) that streams at the full rate.
  bool aten_kernel = false;
  // How the measurement it is compared with was taken: alone, one launch between CUDA events
  // after an L2-flushing write (do_bench, `accel-sim calibrate`), which adds the device's
  // alone_*_overhead_s; otherwise as a step's stream runs it (CUDA graph replays, back-to-back
  // loops, profiler kernel durations).
  bool timed_alone = false;
};

struct KernelEstimate {
  // The chosen cost model's time per kernel; with CostOptions::include_launch_overhead, as a
  // benchmark launching it back to back measures it (a short kernel waits for the host).
  double time_s = 0;
  double roofline_time_s = 0;  // the roofline's, for comparison
  double flops = 0;
  double bytes = 0;
  double achieved_flops_per_s = 0;  // flops / time_s
  double achieved_bytes_per_s = 0;  // bytes / time_s
  Bound bound = Bound::none;
};

// REQUIRES: the query's sizes for its kind are positive (finite for a memory kernel's bytes and
// elements). Throws ConfigError otherwise, and PhysicalRangeError (physical_range.h) when the
// estimate would not be finite.
KernelEstimate estimate_kernel(const KernelQuery& query, const DeviceSpec& device,
                               std::string_view cost_model, const CostOptions& options);

struct ErrorStats {
  int64_t rows = 0;
  double median_abs_error = 0;  // median of |predicted / measured - 1|
  double p90_abs_error = 0;
  double max_abs_error = 0;  // the worst row
  double median_signed_error = 0;  // median of predicted / measured - 1 (> 0: overestimates)
};

// REQUIRES: equal lengths, measured values > 0.
ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured);

// Fits the device's kernel constants to measured kernels by minimising the mean
// |log(predicted / measured)| of each class over a grid: the matmul efficiencies on the GEMM rows
// (fp8 apart),
// the attention efficiencies on the FlashAttention-2 forward and backward rows, the memory
// efficiency and floor of streaming kernels on the memory-bound rows, the library kernel floor
// on the GEMM and attention rows, the GEMM bandwidth and tile overhead on the GEMM rows, the
// alone overheads on the timed-alone rows. A class with rows of both timings fits its floor and
// its alone overhead apart; with timed-alone rows only, the two add up and cannot be told apart,
// and the sum is the timing's: the overhead is fitted and the in-stream floor keeps the device's
// value; with in-stream rows only, the floor is fitted. A constant whose class has no rows
// keeps the device's value. Last, with those constants, the sustained clock fraction
// (fit_sustained_clock_fraction) where kSustainedMinRows GEMMs are long enough. The result is
// marked calibrated when any class had rows. Rows are
// device times without host launch waits; timed_alone rows add the alone overhead. Constants
// named in `keep` (kernel_constant_names()) hold the device's values.
KernelConstants fit_kernel_constants(const std::vector<KernelQuery>& queries,
                                     const std::vector<double>& measured_s,
                                     const DeviceSpec& device,
                                     const std::vector<std::string>& keep = {});

// GEMMs at least this long (measured) show the clock a device keeps under sustained tensor-core
// load: on H100 and H200 the kernel model, whose rates rest on short kernels, times GEMMs under
// 3 ms a few percent slow and longer ones 2-26% fast, in bf16, fp16 and fp8 alike
// (validation/measured/*-2026-11-24/measurements.csv).
inline constexpr double kSustainedKernelS = 3e-3;
// The fewest such GEMMs a sustained clock is fitted from.
inline constexpr int kSustainedMinRows = 3;

// KernelConstants::sustained_clock_fraction from measured kernels: for each GEMM row of at least
// kSustainedKernelS, the clock at which the kernel model (with the device's other constants, at
// full clock otherwise) times it as measured; the median of those clocks over the device's clock,
// at most 1. 0 when fewer than kSustainedMinRows rows are that long. `rows_used` (optional) gets
// their number.
double fit_sustained_clock_fraction(const std::vector<KernelQuery>& queries,
                                    const std::vector<double>& measured_s, const DeviceSpec& device,
                                    int* rows_used = nullptr);

// The names of KernelConstants' fitted fields, as fit_kernel_constants' `keep` takes them.
const std::set<std::string>& kernel_constant_names();

// Measured |error| of a cost model per op class on one device (median over validation rows).
struct ClassErrors {
  double gemm = 0;       // matmul and convolution kernels
  double attention = 0;  // fused attention
  double memory = 0;     // every other kernel (memory-bound)
};

// The error band of a simulated latency as a fraction: the op classes' errors weighted by the
// time each class takes in `result` (errors of one class are taken to add up, not to cancel).
// Throws ConfigError when an error is negative or not finite.
double latency_error_band(const SimulationResult& result, const ClassErrors& errors);

}  // namespace accelsim
