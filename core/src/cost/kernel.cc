// The kernel cost model (layer 3, docs/architecture.md): each op timed as the kernel that runs it.
//
// GEMMs (NVIDIA, "Matrix Multiplication Background User's Guide",
// https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/): the
// library tiles C into Tm x Tn output tiles, one CTA each, processed in waves over the device's
// SMs/CUs. Time = waves x the time of one tile (2 Tm Tn K at the per-unit sustained
// matrix rate, K rounded up to the 64-wide main-loop step, plus the tile's fixed prologue and
// epilogue, as AMD's Origami model charges per tile), or the DRAM time of the operands at the
// bandwidth GEMM loads reach, whichever is longer, plus the device's kernel floor. The tile shape (and a split-K factor for
// problems with too few tiles to fill the device) is the one that minimises the time, as the
// library's heuristic aims to; tile and wave quantization, skinny decode GEMMs (bandwidth-bound
// on the weights) and batched/grouped GEMMs all follow from that.
//
// Attention (FlashAttention-2, Dao 2023; FlashAttention-3, Shah et al. 2024): one CTA per
// (batch x head, 128-query block), waves over the SMs; the FLOPs over the unmasked pairs at the
// device's sustained attention rate, or the traffic of q, k, v and the output at the achievable
// bandwidth (decode: the KV cache), plus the floor. The backward adds its preprocess and
// postprocess kernels (the fp32 dQ accumulator cleared, then converted) and a K/V block load and
// dK/dV store per wave of CTAs. FlashAttention-1 runs the same work at kFlash1OverFlash2 of
// FlashAttention-2's sustained rate, forward and backward.
//
// Everything else is a streaming kernel: the kernel floor plus its bytes at the achievable
// bandwidth, or its FLOPs at the vector peak if that is longer. PyTorch's softmax and norms over
// rows and its widening casts reach only a measured share of that bandwidth.
//
// The sustained fractions (KernelConstants) come from the device file, with sources.
#include <algorithm>
#include <array>
#include <cmath>

#include "accelsim/cost_model.h"

namespace accelsim {
namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

// FlashAttention-1's sustained rate over FlashAttention-2's on the same device: "up to
// 124 TFLOPs/s on A100" for FlashAttention against "up to 230 TFLOPs/s on A100" for
// FlashAttention-2 (T. Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
// Partitioning", https://hazyresearch.stanford.edu/blog/2023-07-17-flash2, and arXiv 2307.08691
// section 1). One ratio for forward and backward, as the paper's "about 2x" is for both.
constexpr double kFlash1OverFlash2 = 124.0 / 230.0;

// Output tile shapes the GEMM libraries pick from, most efficient first (cuBLAS tile list of the
// NVIDIA matmul performance guide; CUTLASS/hipBLASLt use the same family).
constexpr std::array<std::array<double, 2>, 8> kTiles = {{{256, 128},
                                                          {128, 256},
                                                          {128, 128},
                                                          {256, 64},
                                                          {64, 256},
                                                          {128, 64},
                                                          {64, 128},
                                                          {64, 64}}};
constexpr double kTileK = 64;  // main-loop step along K

// The share of the streaming bandwidth a streaming op's kernel reaches (KernelConstants): ATen's
// softmax and norms over rows, and casts that widen their elements (more bytes written than
// read: a bf16 to fp32 copy); 0 for the rest, which stream at the full rate.
double streaming_share(const OpCount& count, const KernelConstants& k) {
  switch (count.op_class) {
    case OpClass::softmax: return k.softmax_bandwidth_share;
    case OpClass::normalization: return k.norm_bandwidth_share;
    case OpClass::copy:
      return count.bytes_read > 0 && count.bytes_written > count.bytes_read
                 ? k.widening_cast_bandwidth_share
                 : 0.0;
    default: return 0.0;
  }
}

// Seconds for a GEMM of `d` whose operands are `in_bytes` and result `out_bytes` per element;
// `tile_overhead` is the fixed time of each wave of tiles. Split-K partial tiles that fit in the
// L2 cache are reduced there, at an assumed 4x the DRAM bandwidth (an L2 streams at several times
// DRAM bandwidth: ~17 vs ~4 TB/s on MI300X in AMD's Origami constants, ROCm/rocm-libraries
// shared/origami/src/origami/hardware.cpp).
double gemm_time(const GemmDims& d, double peak, double bandwidth, int units, double in_bytes,
                 double out_bytes, double l2_bytes, double tile_overhead) {
  const double m = static_cast<double>(d.m), n = static_cast<double>(d.n);
  const double k = static_cast<double>(d.k), batch = static_cast<double>(std::max<int64_t>(1, d.batch));
  const double traffic = batch * (in_bytes * (m * k + k * n) + out_bytes * m * n);
  const double memory = traffic / bandwidth;
  if (units <= 0) return std::max(2.0 * m * n * k * batch / peak, memory);
  const double per_unit = peak / units;
  double best = 1e300;
  for (const auto& [tm, tn] : kTiles) {
    const double tiles = ceil_div(m, tm) * ceil_div(n, tn) * batch;
    for (double split : {1.0, 2.0, 4.0, 8.0}) {
      // Split-K only to fill an under-occupied device, and not below one 512-deep slice.
      if (split > 1 && (tiles * split > 2.0 * units || k / split < 512)) break;
      const double waves = ceil_div(tiles * split, units);
      const double k_slice = ceil_div(k / split, kTileK) * kTileK;
      const double compute = waves * (2.0 * tm * tn * k_slice / per_unit + tile_overhead);
      // Split-K writes fp32 partial tiles and reduces them: one more pass over C per slice.
      const double partial_bytes = split > 1 ? batch * m * n * 4.0 * 2.0 * split : 0.0;
      const double partials = partial_bytes / (partial_bytes <= l2_bytes ? 4.0 * bandwidth : bandwidth);
      best = std::min(best, std::max(compute, memory) + partials);
    }
  }
  return best;
}

// The softmax of each score (max, exp, sum, rescale) runs on the special-function units beside
// the matmuls: H100 SXM5 has 989 TFLOPS of fp16 matmul but 3.9 TFLOPS of exp (FlashAttention-3,
// Shah et al. 2024, sec. 3), so one exp costs as much time as 989 / 3.9 / 4 = 63 head-dim units of
// the 4 d matmul FLOPs per score. A device that states its special-function rate
// (DeviceSpec::special_function_ops_per_clock) gets its own ratio, fp16 matrix FLOPs per clock per
// unit / that rate / 4 (device_softmax_head_dims): NVIDIA SMs from Maxwell to Blackwell issue 16 exp2 a
// clock (CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table), so an A100 SM's
// 2,048 fp16 FLOPs a clock give 32, an H100's 4,096 give 64 (3.87 TFLOPS of exp at 1.83 GHz, the
// paper's 3.9). The others keep H100's 63. Kernel efficiencies are calibrated at head dim 128;
// other head dims scale by (1 + r/d) / (1 + r/128).
constexpr double kSoftmaxHeadDims = 63.0;

// The head-dim units of matmul time one score's softmax costs on `device` at its fp16 matrix rate
// (see kSoftmaxHeadDims). A clock override scales both rates alike.
double device_softmax_head_dims(const DeviceSpec& device) {
  const double special = device.special_function_ops_per_clock * device.num_compute_units * device.clock_hz;
  if (special <= 0 || device.fp16_matrix_flops_per_s <= 0) return kSoftmaxHeadDims;
  return device.fp16_matrix_flops_per_s / special / 4.0;
}
// The backward recomputes each score's exp once against five matmuls (10 d FLOPs per score) where
// the forward runs two (4 d): the exp weighs 4/10 as much per FLOP (FlashAttention-2, Dao 2023,
// sec. 3.2).
constexpr double kBackwardSoftmaxShare = 4.0 / 10.0;
// Query rows up to which attention runs as decode (split-KV) rather than in query blocks.
constexpr int64_t kDecodeQueries = 16;

// Seconds for a fused attention kernel.
// `softmax_head_dims`: the device's (device_softmax_head_dims) scaled by the matrix rate of the
// kernel's dtype over the fp16 rate (the exp units do not speed up with fp8 matmuls). `block_overhead`: the fixed time of
// each wave of query blocks (load Q, initialise, normalise and store O and the log-sum-exp).
double attention_time(const OpCount& c, double peak, double bandwidth, int units,
                      double softmax_head_dims, double block_overhead) {
  const AttentionDims& a = c.attention;
  const double memory = c.bytes() / bandwidth;
  if (peak <= 0) return memory;
  double compute = c.flops / peak;
  if (a.head_dim > 0) {
    compute *= (1.0 + softmax_head_dims / static_cast<double>(a.head_dim)) /
               (1.0 + softmax_head_dims / 128.0);
  }
  if (a.causal && a.seq_q > kDecodeQueries) {
    // The kernel skips key blocks above the diagonal but computes the diagonal ones whole: each
    // query row pays for the keys up to the end of its 128-query block, (128 - 1) / 2 more on
    // average than the causal mask lets through (FlashAttention-2, Dao 2023, sec. 3.1.1).
    const double sq = static_cast<double>(a.seq_q), sk = static_cast<double>(a.seq_k);
    const double pairs = sq <= sk ? sq * (sq + 1.0) / 2.0 : sq * sk;
    compute *= std::min(sq * sk, pairs + sq * (128.0 - 1.0) / 2.0) / pairs;
  }
  if (units > 0 && a.seq_q > kDecodeQueries) {
    // Wave quantization over (batch x head, 128-query block) CTAs. Under a causal mask the
    // blocks' work grows with their position (block i of n sees (i + 1/2) / n of the keys on
    // average), so a single wave lasts as long as its last block: 2 (n - 1/2) / n average blocks.
    const double blocks = ceil_div(static_cast<double>(a.seq_q), 128.0);
    const double ctas = a.batch_heads * blocks;
    double waves = ceil_div(ctas, units);
    if (a.causal && blocks > 1) waves = std::max(waves, 2.0 * (blocks - 0.5) / blocks);
    compute *= waves * units / std::max(ctas, 1.0);
    compute += ceil_div(ctas, units) * block_overhead;
  }
  // Decode (a few queries against a long cache) splits the keys across CTAs (split-KV,
  // FlashDecoding), filling the device: no wave penalty, bandwidth-bound on the cache.
  return std::max(compute, memory);
}

}  // namespace

bool gemm_leading_dims_aligned(int64_t n, int64_t k, DType operand) {
  // FP4 operands are packed two per byte: 16-byte rows of K take multiples of 32 values.
  if (operand == DType::fp4_e2m1) return k % 32 == 0 && n % 8 == 0;
  const bool fp8 = operand == DType::fp8_e4m3 || operand == DType::fp8_e5m2;
  const auto a = static_cast<double>(size_bytes(operand));
  const auto r = static_cast<double>(size_bytes(fp8 ? DType::bf16 : operand));
  auto multiple_of_16 = [](double bytes) { return std::fmod(bytes, 16.0) == 0.0; };
  return multiple_of_16(static_cast<double>(k) * a) && multiple_of_16(static_cast<double>(n) * a) &&
         multiple_of_16(static_cast<double>(n) * r);
}

OpCost KernelCostModel::cost(const OpCount& count, const DeviceSpec& device,
                             const CostOptions& options) const {
  OpCost c;
  if (!count.launches_kernel) return c;
  const KernelConstants& k = device.kernel;
  const bool matrix = uses_matrix_units(count.op_class);
  const PeakRate peak = peak_rate(device, count.compute_dtype, matrix, options.allow_tf32);
  // A clock override scales the compute rates (a power-capped or down-clocked part); memory
  // bandwidth does not follow the core clock.
  const double clock_scale =
      options.clock_hz > 0 && device.clock_hz > 0 ? options.clock_hz / device.clock_hz : 1.0;
  const double bandwidth = device.memory_bandwidth_bytes_per_s * k.memory_efficiency;
  const double gemm_bandwidth =
      k.gemm_memory_efficiency > 0 ? device.memory_bandwidth_bytes_per_s * k.gemm_memory_efficiency
                                   : bandwidth;
  // The tile prologue and epilogue are cycles: they follow a clock override.
  const double tile_overhead = k.gemm_tile_overhead_s / clock_scale;
  c.peak_flops_per_s = peak.flops_per_s * clock_scale;
  c.peak_fallback = peak.fallback;
  c.peak_unit = peak.unit;
  c.peak_narrower = peak.narrower;
  c.memory_time_s = count.bytes() / bandwidth;

  double body = 0.0;
  if (count.op_class == OpClass::matmul && count.gemm.m > 0 && peak.flops_per_s > 0) {
    // FP4 GEMMs take the fp8 GEMMs' share of their peak: no FP4 GEMM measurement is in the
    // calibration set (validation/), and both are the low-precision tensor paths of one part.
    const bool fp8 = count.compute_dtype == DType::fp8_e4m3 || count.compute_dtype == DType::fp8_e5m2 ||
                     count.compute_dtype == DType::fp4_e2m1;
    double efficiency =
        fp8 && k.fp8_matmul_efficiency > 0 ? k.fp8_matmul_efficiency : k.matmul_efficiency;
    if (!gemm_leading_dims_aligned(count.gemm.n, count.gemm.k, count.compute_dtype)) {
      efficiency = k.unaligned_matmul_efficiency > 0 ? k.unaligned_matmul_efficiency
                                                     : kUnalignedMatmulShare * efficiency;
    }
    const double sustained = c.peak_flops_per_s * efficiency;
    const double batch = static_cast<double>(count.gemm.batch);
    const double m = static_cast<double>(count.gemm.m), n = static_cast<double>(count.gemm.n);
    const double kk = static_cast<double>(count.gemm.k);
    const double in_elements = batch * (m * kk + kk * n), out_elements = batch * m * n;
    // Bytes per element of the operands and of the result from the op's own traffic (weights
    // may be packed; an fp8 GEMM writes bf16).
    double in_bytes = 2.0, out_bytes = 2.0;
    if (count.bytes_read > 0 && count.bytes_written > 0) {
      in_bytes = count.bytes_read / in_elements;
      out_bytes = count.bytes_written / out_elements;
    } else if (count.bytes() > 0) {
      in_bytes = out_bytes = count.bytes() / (in_elements + out_elements);
    }
    body = gemm_time(count.gemm, sustained, gemm_bandwidth, device.num_compute_units, in_bytes,
                     out_bytes, device.l2_cache_bytes, tile_overhead);
    c.compute_time_s = count.flops / sustained;
  } else if (count.op_class == OpClass::attention && peak.flops_per_s > 0 &&
             options.attention_impl == AttentionImpl::eager && !count.attention.backward) {
    // Eager attention: S = Q K^T and O = P V as batched GEMMs, and the scores written, read by
    // the softmax, written as probabilities and read again: four passes over [sq, sk], six with
    // a causal mask applied to the scores (read and written once more).
    const AttentionDims& a = count.attention;
    const auto batch = static_cast<int64_t>(a.batch_heads);
    const double sustained = c.peak_flops_per_s * k.matmul_efficiency;
    const double element = static_cast<double>(size_bytes(count.compute_dtype));
    const double scores = a.batch_heads * static_cast<double>(a.seq_q) * a.seq_k * element;
    body = gemm_time({.m = a.seq_q, .n = a.seq_k, .k = a.head_dim, .batch = batch}, sustained,
                     gemm_bandwidth, device.num_compute_units, element, element,
                     device.l2_cache_bytes, tile_overhead) +
           gemm_time({.m = a.seq_q, .n = a.value_dim, .k = a.seq_k, .batch = batch}, sustained,
                     gemm_bandwidth, device.num_compute_units, element, element,
                     device.l2_cache_bytes, tile_overhead) +
           (a.causal ? 6.0 : 4.0) * scores / bandwidth + 2.0 * k.kernel_floor_s;
    c.compute_time_s = count.flops / sustained;
    c.memory_time_s += (a.causal ? 6.0 : 4.0) * scores / bandwidth;
  } else if (count.op_class == OpClass::attention && peak.flops_per_s > 0) {
    double efficiency = k.attention_efficiency;
    if (count.attention.backward) {
      efficiency = options.attention_impl == AttentionImpl::cudnn && k.cudnn_backward_efficiency > 0
                       ? k.cudnn_backward_efficiency
                       : k.attention_backward_efficiency;
    } else if (options.attention_impl == AttentionImpl::flash3 && k.flash3_efficiency > 0) {
      efficiency = k.flash3_efficiency;
    } else if (options.attention_impl == AttentionImpl::cudnn && k.cudnn_efficiency > 0) {
      efficiency = k.cudnn_efficiency;
    }
    const bool fp8 = count.compute_dtype == DType::fp8_e4m3 || count.compute_dtype == DType::fp8_e5m2;
    if (fp8 && !count.attention.backward && k.fp8_attention_efficiency > 0) {
      efficiency = k.fp8_attention_efficiency;
    }
    if (options.attention_impl == AttentionImpl::flash1) efficiency *= kFlash1OverFlash2;
    const double sustained = c.peak_flops_per_s * efficiency;
    const double fp16_rate = device.fp16_matrix_flops_per_s * clock_scale;
    const double exp_units = device_softmax_head_dims(device);
    double softmax = fp8 && fp16_rate > 0 ? exp_units * c.peak_flops_per_s / fp16_rate : exp_units;
    // Soft-capping adds a tanh per score on the same special-function units as its exp
    // (FlashAttention 2.6's softcap: tanh(s / c) * c before the softmax).
    if (count.attention.softcap) softmax *= 2.0;
    const AttentionDims& a = count.attention;
    double block_overhead = tile_overhead;
    double side_kernels = 0.0;
    if (a.backward) {
      softmax *= kBackwardSoftmaxShare;
      // FlashAttention-2's backward (FlashAttention-1's, -3's and cuDNN's share its shape) runs
      // three kernels (flash_bwd_launch_template.h; the kernel names in
      // validation/measured/h100_sxm-2026-11-25/attention_kernels.csv):
      //  - a preprocess: D = rowsum(dO * O), reading O and dO, and the fp32 dQ accumulator
      //    cleared;
      //  - the main loop, one CTA per (batch x head, 128-key block): each loads its K and V block
      //    and stores dK and dV once, outside the loop over query blocks, a fixed cost per wave;
      //  - a postprocess converting the fp32 dQ accumulator to the output dtype.
      const double element = static_cast<double>(size_bytes(count.compute_dtype));
      const double rows = a.batch_heads * static_cast<double>(a.seq_q);
      const double dq = rows * static_cast<double>(a.head_dim);
      const double o = rows * static_cast<double>(a.value_dim > 0 ? a.value_dim : a.head_dim);
      const double preprocess = (2.0 * o * element + 4.0 * rows + 4.0 * dq) / bandwidth;
      const double postprocess = (4.0 * dq + element * dq) / bandwidth;
      side_kernels = preprocess + postprocess + 2.0 * k.stream_floor_s;
      const double kv_block_bytes = 4.0 * 128.0 * static_cast<double>(a.head_dim) * element;
      block_overhead += device.num_compute_units * kv_block_bytes / bandwidth;
    }
    body = attention_time(count, sustained, bandwidth, device.num_compute_units, softmax,
                          block_overhead) +
           side_kernels;
    c.compute_time_s = count.flops / sustained;
  } else {
    const double sustained = c.peak_flops_per_s * (matrix ? k.matmul_efficiency : 1.0);
    c.compute_time_s = sustained > 0 ? count.flops / sustained : 0.0;
    const double share = streaming_share(count, k);
    if (share > 0) c.memory_time_s = count.bytes() / (bandwidth * share);
    body = std::max(c.compute_time_s, c.memory_time_s);
  }
  c.bound = c.compute_time_s >= c.memory_time_s ? Bound::compute : Bound::memory;
  // The host issues kernels asynchronously: a kernel shorter than the host's launch cost waits
  // for the next launch (launch-bound), a longer one hides it. launch_overhead_s is the part of
  // the op's time the device spends waiting for the host.
  const bool library = count.op_class == OpClass::matmul || count.op_class == OpClass::attention;
  const double device_time = body + (library ? k.kernel_floor_s : k.stream_floor_s);
  const double launch = host_launch_s(device, options);
  c.launch_overhead_s = std::max(0.0, launch - device_time);
  c.time_s = device_time + c.launch_overhead_s;
  return c;
}

}  // namespace accelsim
