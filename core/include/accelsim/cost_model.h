// CostModel: the time of one op on one device.
//
// Layer 2 of the cost model (docs/architecture.md) is the roofline,
// time = max(flops / peak, bytes / bandwidth) plus the device's kernel launch overhead. Higher-fidelity models (kernel realism, calibration) implement
// the same interface and are chosen by name with make_cost_model().
//
//   auto model = make_cost_model("roofline");
//   OpCost c = model->cost(count_op(graph, node), device, CostOptions{});
//
// Thread safety: cost models are immutable; cost() may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accelsim/device.h"
#include "accelsim/op_catalog.h"

namespace accelsim {

// What limits an op's time.
enum class Bound : uint8_t { none, compute, memory };

std::string_view bound_name(Bound bound);

// Attention implementations the kernel model times: PyTorch SDPA's flash backend
// (FlashAttention-2), FlashAttention-3 (Hopper), cuDNN's fused attention, eager attention
// (two batched GEMMs around a softmax over the materialised scores), and FlashAttention-1
// (flash-attn 1.x and the Triton kernels of its time, which 2023 stacks ran).
enum class AttentionImpl : uint8_t { flash2, flash3, cudnn, eager, flash1 };

std::string_view attention_impl_name(AttentionImpl impl);
AttentionImpl parse_attention_impl(std::string_view name);  // throws ConfigError

struct CostOptions {
  // Run fp32 matmuls on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32). Default: off,
  // as in PyTorch.
  bool allow_tf32 = false;
  // Add the device's per-kernel launch overhead to every op that launches a kernel. Default: on.
  bool include_launch_overhead = true;
  // Kernels replayed from a CUDA graph: no host launch overhead per kernel (the device-side
  // kernel floor of the kernel model stays).
  bool cuda_graphs = false;
  // The host's cost of issuing one kernel in the software stack that runs the graph (Python
  // module code, the dispatcher, the launch itself); 0: the device's kernel_launch_overhead_s,
  // the bare CUDA launch. HF transformers' eager decode spends about 21 us per kernel on an H100
  // host (validation/measured/h100_sxm-2026-11-24/step_profile.csv); a stack file's
  // runtime.host_overhead_per_kernel_us sets it.
  double host_overhead_per_kernel_s = 0.0;
  // Core clock override in Hz (a power-capped or down-clocked part); 0: the device's clock.
  // Scales compute rates by clock / device clock in the kernel model; memory is unaffected.
  double clock_hz = 0.0;
  // Which kernel runs fused attention ops (the kernel model; the roofline ignores it).
  AttentionImpl attention_impl = AttentionImpl::flash2;
};

struct OpCost {
  double time_s = 0.0;          // total: max(compute, memory) + launch overhead
  double compute_time_s = 0.0;  // flops / peak
  double memory_time_s = 0.0;   // bytes / bandwidth
  double launch_overhead_s = 0.0;
  double peak_flops_per_s = 0.0;  // the peak used for compute_time_s
  Bound bound = Bound::none;
  bool peak_fallback = false;  // the device had no rate for this op's unit
  // The unit whose rate it ran at, and whether that unit's format does not hold the op's dtype
  // (PeakRate::unit, PeakRate::narrower).
  std::string_view peak_unit;
  bool peak_narrower = false;
};

// Every figure of `c` by name, as for_each_figure(OpCount) (op_catalog.h).
// The host's time to issue one kernel under `options` on `device` (0 when replayed from a CUDA
// graph or when launch overhead is off).
double host_launch_s(const DeviceSpec& device, const CostOptions& options);

template <typename F>
void for_each_figure(const OpCost& c, F&& f) {
  f("time_s", c.time_s);
  f("compute_time_s", c.compute_time_s);
  f("memory_time_s", c.memory_time_s);
  f("launch_overhead_s", c.launch_overhead_s);
  f("peak_flops_per_s", c.peak_flops_per_s);
}

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view name() const = 0;
  // REQUIRES: device.validate() passes.
  virtual OpCost cost(const OpCount& count, const DeviceSpec& device,
                      const CostOptions& options) const = 0;
  // Whether simulate() charges this model's launch waits as one queue over the step
  // (charge_launch_queue, simulate.h), the host running ahead of long kernels; otherwise each
  // op keeps the launch overhead its cost() added.
  virtual bool queues_launches() const { return false; }
};

// Roofline with launch overhead (layer 2).
class RooflineCostModel final : public CostModel {
 public:
  std::string_view name() const override { return "roofline"; }
  OpCost cost(const OpCount& count, const DeviceSpec& device,
              const CostOptions& options) const override;
};

// The kernel model (layer 3): GEMM tiles and waves over the compute units, fused attention
// with its CTA waves, streaming kernels at achievable bandwidth, each with the device's kernel
// floor; sustained rates from the device's KernelConstants (core/src/cost/kernel.cc).
class KernelCostModel final : public CostModel {
 public:
  std::string_view name() const override { return "kernel"; }
  OpCost cost(const OpCount& count, const DeviceSpec& device,
              const CostOptions& options) const override;
  bool queues_launches() const override { return true; }
};

// Makes a cost model by name. Throws ConfigError listing the known names.
std::unique_ptr<CostModel> make_cost_model(std::string_view name);

// Names make_cost_model() accepts.
std::vector<std::string> cost_model_names();

// Whether a GEMM's leading dimensions suit cuBLAS's fast kernels: K (the operands' rows) and
// N (B's and the result's rows) each a multiple of 16 bytes, as TMA (Hopper) and 16-byte
// cp.async (Ampere) need. M does not matter (M = 4,095 and 4,097 ran as fast as 4,096 on H100,
// N or K = 10,922 bf16 at a third of the speed of 10,944: validation/measured/h100_sxm-2026-11-24).
// The result is in the operands' dtype, bf16 for fp8 operands (torch._scaled_mm, Transformer
// Engine).
bool gemm_leading_dims_aligned(int64_t n, int64_t k, DType operand);

// An unaligned GEMM's share of the aligned efficiency where the device has no constant for it:
// H100 SXM, 4,096 x 10,922 x 4,096 bf16 at 240 TFLOP/s against 741 at N = 10,944 (the fit
// split of validation/measured/h100_sxm-2026-11-24/measurements.csv).
inline constexpr double kUnalignedMatmulShare = 0.32;

}  // namespace accelsim
