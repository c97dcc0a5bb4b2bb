// simulate(): one device, one graph, executed op by op in order on a single stream.
//
//   SimulationResult r = simulate(graph, device, SimulateOptions{});
//   r.latency_s, r.memory.peak_bytes, r.fits, r.ops[i].cost.time_s ...
//
// Each op is counted by the op catalogue and timed by the chosen cost model; ops run back to
// back, so an op starts when the previous one ends. Memory comes from the liveness analysis
// (memory.h) and is compared against the device's capacity.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accelsim/collective.h"
#include "accelsim/cost_model.h"
#include "accelsim/device.h"
#include "accelsim/graph.h"
#include "accelsim/memory.h"
#include "accelsim/op_catalog.h"

namespace accelsim {

struct SimulateOptions {
  std::string cost_model = "roofline";  // a name make_cost_model() knows
  CostOptions cost;
  // How activations are released (memory.h). Default: as the captured program released them.
  ReleasePolicy release_policy = ReleasePolicy::recorded;
  // Cost each chain of consecutive memory-bound ops (pointwise, casts, copies, reductions,
  // norms, softmax), each consuming the chain's own results, as one kernel, the way
  // torch.compile (Inductor) fuses them: one launch, and only the tensors that enter or leave the
  // chain touch memory. The first op of a chain carries its cost; the others are marked fused.
  bool fuse_elementwise = false;
  // Gradient accumulation: the graph's forward and backward run this many times (one
  // micro-batch each) before its optimizer ops run once. Times, FLOPs, bytes, energy and model
  // FLOPs count every micro-batch; the per-op timeline shows one; memory is the graph's (which
  // should keep its gradient buffers live across micro-batches: the builder's
  // persistent_gradients, a capture's accumulation buffers).
  int64_t micro_batches = 1;
  // The cluster the graph's collectives (accel_sim::all_reduce, ..., attr "group") run on, and
  // each group's size and placement; without a system they are not timed (one device).
  std::optional<SystemSpec> system;
  std::vector<CommGroup> groups;
  // Tensor-parallel communication overlap, as Megatron-LM's --tp-comm-overlap runs it with
  // Transformer Engine's userbuffers (on in NeMo's performance recipes for TP > 1 with sequence
  // parallelism): each "tp" all-gather or reduce-scatter timed on `system` is split into chunks
  // and pipelined with the GEMMs beside it (Wang et al., ASPLOS'23, "Overlap Communication with
  // Dependent Computation via Decomposition in Large Deep Learning Models"). Its partners, found
  // in the graph by storage (so through views) in the collective's own pass, follow TE's default
  // methods (transformer_engine/pytorch/module/base.py, initialize_ub; NeMo's
  // recipes/tp_overlap_configs/userbuffers.py):
  //   forward all-gather (qkv_fprop, fc1_fprop: ring exchange): the GEMMs reading its output,
  //     directly or through one dtype cast (_to_copy: the fp8 input cast);
  //   forward reduce-scatter (proj_fprop, fc2_fprop: pipeline or ring exchange): the GEMMs
  //     writing its input, directly or through an add (a bias);
  //   backward all-gather of an output gradient (proj_dgrad, fc2_dgrad: ring exchange): the
  //     dgrad GEMMs reading it;
  //   backward reduce-scatter of an input gradient (qkv_wgrad, fc1_wgrad: bulk): not the dgrad
  //     GEMMs that produce it (through the add_ that sums them) but the wgrad GEMMs reading the
  //     same output gradients, which run beside it.
  // Forward and dgrad GEMMs are those that read a weight (a parameter or a cast of one), wgrad
  // GEMMs those that do not; a GEMM partners one collective at most. With C the collective's
  // time, G its partners' and n = the group's size, a pipelined pair takes max(C, G) +
  // min(C, G) / n (the first or last chunk of the shorter side is exposed) and a bulk pair
  // max(C, G); the collective is charged what the pair adds to G (never below 0): its
  // cost.time_s; the rest is OpResult::overlapped_s and SimulationResult::
  // overlapped_communication_s. n is a simplification where TE pipelines (proj_fprop and
  // fc2_fprop in NeMo's bf16 H100 configs) with num_splits = 4 chunks: the same at TP 4.
  // All-reduces (TP without sequence parallelism) stay exposed: userbuffers need sequence
  // parallelism (Megatron-LM requires --sequence-parallel with --tp-comm-overlap).
  bool overlap_tp_comm = false;
  // Transformer Engine's fp8 weight cache (TE modules' is_first_microbatch, which Megatron-LM's
  // TE wrappers pass under gradient accumulation): the fp8 casts of the weights run on a step's
  // first micro-batch and are reused by the others. Ops the graph marks with attr
  // "once_per_step" (the builder's weight casts under BuildOptions::fp8_gemms) are then counted
  // once per step, like the optimizer, whatever micro_batches is, and their time is reported in
  // SimulationResult::once_per_step_time_s. Off: they run every micro-batch.
  bool fp8_weight_cache = false;

  // Throws ConfigError naming the option when one is out of range: micro_batches below 1, a
  // clock override that is negative or not finite, a system that does not validate, a group of
  // fewer than one rank.
  void validate() const;
};

struct OpResult {
  NodeId node = kNoNode;
  NodeId fused_into = kNoNode;  // with fuse_elementwise: the chain's first op, which carries its cost
  OpCount count;
  OpCost cost;
  double start_s = 0.0;
  double end_s = 0.0;
  double energy_j = 0.0;  // estimate (see SimulationResult::energy_j)
  // A collective's time hidden under its GEMMs (SimulateOptions::overlap_tp_comm): its full time
  // on the system is cost.time_s + overlapped_s; cost.time_s, what it is charged, is what the
  // timeline, the pass times and the latency hold.
  double overlapped_s = 0.0;
};

// Every figure of `op` by name, its count's and cost's first (for_each_figure(OpCount), op_catalog.h).
template <typename F>
void for_each_figure(const OpResult& op, F&& f) {
  for_each_figure(op.count, f);
  for_each_figure(op.cost, f);
  f("start_s", op.start_s);
  f("end_s", op.end_s);
  f("energy_j", op.energy_j);
  f("overlapped_s", op.overlapped_s);
}

// An op the catalogue does not know: how often it ran and the time it was charged.
struct UncoveredOp {
  std::string op;
  int64_t count = 0;
  double time_s = 0.0;
};

// Ops of a dtype the device has no unit for, and the unit they ran at instead (peak_rate's
// fallback chain), so a report can say what a device really ran.
struct UnitSubstitution {
  DType dtype = DType::fp32;
  bool matrix = false;    // matrix (tensor-core) ops, or vector ops
  std::string unit;       // the unit whose rate they ran at, e.g. "bf16_matrix"
  bool narrower = false;  // PeakRate::narrower: that unit's format does not hold the dtype
  int64_t ops = 0;
  double time_s = 0.0;    // their time in one pass over the graph
};

struct SimulationResult {
  std::string device_id;
  double latency_s = 0.0;
  double total_flops = 0.0;
  double total_bytes = 0.0;
  double compute_bound_time_s = 0.0;  // time of ops whose bound is compute
  double memory_bound_time_s = 0.0;   // time of ops whose bound is memory
  double launch_overhead_time_s = 0.0;
  // Time by pass of a training step (Node::pass); an inference graph is all forward.
  double forward_time_s = 0.0;
  double backward_time_s = 0.0;
  double optimizer_time_s = 0.0;
  int64_t num_kernels = 0;
  int64_t num_collectives = 0;       // communication ops (not timed on one device)
  double communication_bytes = 0.0;  // their payload on this rank
  // Their full time on SimulateOptions::system, whether or not GEMMs hide part of it.
  double communication_time_s = 0.0;
  // The part of communication_time_s hidden under GEMMs (SimulateOptions::overlap_tp_comm), not
  // in latency_s or the pass times: the exposed communication is the difference.
  double overlapped_communication_s = 0.0;
  // Time of the forward and backward ops that run once per step, not once per micro-batch
  // (SimulateOptions::fp8_weight_cache: the cached fp8 weight casts), counted once. It is part of
  // forward_time_s / backward_time_s and latency_s; the optimizer, also once per step, is not in
  // it (optimizer_time_s). A caller that simulates one micro-batch and scales it by m micro-batches
  // takes m x (forward + backward - once_per_step_time_s) + once_per_step_time_s.
  double once_per_step_time_s = 0.0;
  // Achieved rates over the whole run relative to the device's peak for the graph's dominant
  // matmul dtype (compute) and its memory bandwidth.
  double compute_utilization = 0.0;
  double bandwidth_utilization = 0.0;
  double reference_peak_flops_per_s = 0.0;  // the peak compute_utilization is relative to
  DType reference_dtype = DType::fp32;  // its dtype: the one holding most matrix FLOPs
  // Model FLOPs, counted the standard way whatever the implementation recomputes: the forward's
  // matmul and attention FLOPs (2 N per token for the N parameters in matmuls, plus attention),
  // times 3 when the graph has a backward (forward + a backward of twice the forward: 6 N per
  // token, PaLM's accounting, Chowdhery et al. 2022 app. B). Attention counts the query-key
  // pairs its mask allows only, whether a fused kernel skips the others or an eager core computes
  // them (OpCount::useful_flops). Recomputed forward ops, norms and elementwise ops do not
  // count. model_flops_utilization (MFU) = model_flops / (latency x reference peak).
  double model_flops = 0.0;
  double model_flops_utilization = 0.0;
  // Energy estimate of the run from an activity model: each op draws the device's idle power
  // for its time plus energy per FLOP and per byte moved, and never more than the TDP for its
  // time (core/src/simulate/simulate.cc names the constants). 0 when the TDP is unknown.
  double energy_j = 0.0;
  MemoryProfile memory;
  double memory_capacity_bytes = 0.0;
  // What must fit: the caching allocator's segments in use at their peak
  // (MemoryProfile::peak_segment_bytes) plus the runtime's reserve (DeviceSpec).
  double required_bytes = 0.0;
  bool fits = true;
  // Empty unless some op ran at another unit's rate (OpCost::peak_fallback): by dtype and op
  // kind, in order of appearance.
  std::vector<UnitSubstitution> substitutions;
  // Some matrix op ran on a unit narrower than its dtype: the figures are not those of the
  // precision the graph asks for, so a comparison does not rank this run against others.
  bool narrower_precision = false;
  std::vector<OpResult> ops;  // one per node, in execution order
  std::vector<UncoveredOp> uncovered_ops;
};

// The run's own figures by name, f("latency_s", r.latency_s), ... (each op's: for_each_figure(
// OpResult)); simulate()'s check walks this list, so a new figure goes here too.
template <typename F>
void for_each_figure(const SimulationResult& r, F&& f) {
  f("latency_s", r.latency_s);
  f("total_flops", r.total_flops);
  f("total_bytes", r.total_bytes);
  f("compute_bound_time_s", r.compute_bound_time_s);
  f("memory_bound_time_s", r.memory_bound_time_s);
  f("launch_overhead_time_s", r.launch_overhead_time_s);
  f("forward_time_s", r.forward_time_s);
  f("backward_time_s", r.backward_time_s);
  f("optimizer_time_s", r.optimizer_time_s);
  f("communication_bytes", r.communication_bytes);
  f("communication_time_s", r.communication_time_s);
  f("overlapped_communication_s", r.overlapped_communication_s);
  f("once_per_step_time_s", r.once_per_step_time_s);
  f("compute_utilization", r.compute_utilization);
  f("bandwidth_utilization", r.bandwidth_utilization);
  f("reference_peak_flops_per_s", r.reference_peak_flops_per_s);
  f("model_flops", r.model_flops);
  f("model_flops_utilization", r.model_flops_utilization);
  f("energy_j", r.energy_j);
  f("memory_capacity_bytes", r.memory_capacity_bytes);
  f("required_bytes", r.required_bytes);
}

// The kernel model's launch waits over a graph's ops in order, the host issuing each kernel
// after `host_s` of its own work and running ahead of the device while long kernels execute:
// each kernel's cost.launch_overhead_s becomes the time the device waits for it and its
// cost.time_s its device time plus that wait. simulate() applies it under the kernel model.
void charge_launch_queue(std::vector<OpResult>& ops, double host_s);

// REQUIRES: device.validate() and options.validate() pass (checked; throws ConfigError
// otherwise). Every figure of the result is finite and every byte count non-negative: a result
// that is not (an input out of physical range that validation let through) throws ConfigError
// naming the figure instead of being returned.
SimulationResult simulate(const Graph& graph, const DeviceSpec& device,
                          const SimulateOptions& options);

// The time fusing elementwise chains would save (SimulateOptions::fuse_elementwise): the latency
// of `simulated`, the result of simulate(graph, device, options), minus that of the same run with
// fusion on. 0 when `options` already fuses.
double fusion_saving_s(const Graph& graph, const DeviceSpec& device, const SimulateOptions& options,
                       const SimulationResult& simulated);

}  // namespace accelsim
