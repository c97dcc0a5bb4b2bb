// estimate_training(): one step of a data-, pipeline-, tensor-, context- and expert-parallel
// training run on a cluster (plan.h searches such runs for the fastest).
//
// A stage profile is one micro-batch through one pipeline stage on one rank (TP/SP/CP/EP
// shapes), simulated on the device with its TP/CP/EP collectives timed on the system. It is
// built from two model-builder graphs, of one and two of the model's heaviest layers (an MoE
// model's dense layers counted as MoE ones) with the embedding, the LM head and the loss (and,
// for their bytes only, two without the final norm and the head: a stage before the last), and
// is linear in the layers: every time and byte count of a stage of n layers is
// v(1) + (n - 1) (v(2) - v(1)). Model FLOPs (for MFU) are the real model's. The step's heaviest stage holds
// v ceil(layers / (pp v)) layers (v virtual stages; Megatron-LM gives uneven splits' spare
// layers to some stages and the step waits for them) plus the embedding and the head.
//
// The step, as Megatron-LM runs it (Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters"):
//   compute    m micro-batches x (forward + backward of the stage), m = global batch / (dp x
//              micro-batch); TP/CP/EP collectives inside, what overlaps its GEMMs hidden
//              (SimulateOptions::overlap_tp_comm); cached fp8 weight casts once per step
//              (SimulateOptions::fp8_weight_cache);
//   bubble     (pp - 1) / v x (forward + backward) for 1F1B with v virtual stages (v = 1: plain
//              1F1B; GPipe has the same bubble, Huang et al. 2019, but keeps all m micro-batches
//              in flight);
//   pp comm    the pipeline's fill and drain: 2 (pp - 1) v activation sends of one micro-batch
//              between neighbouring stages (the steady state overlaps them);
//   dp comm    this rank's gradients and parameters over the data-parallel x context-parallel
//              group (every CP rank holds gradients of its own tokens; Megatron-LM reduces and
//              shards over it, torchtitan's FSDP2 over dp_shard x cp), exposed only where the
//              framework cannot hide them behind compute:
//                ZeRO-0  all-reduce of the gradients once per step, overlapped with the last
//                        micro-batch's backward (DDP / Megatron gradient buckets);
//                ZeRO-1  Megatron's distributed optimizer: reduce-scatter of the gradients once
//                        per step (behind the last backward) and all-gather of the parameters
//                        (behind the next step's first forward);
//                ZeRO-2  DeepSpeed: the gradients reduce-scattered in every micro-batch's
//                        backward (only this rank's shard is kept), the parameters gathered once;
//                ZeRO-3  FSDP / DeepSpeed stage 3: every micro-batch gathers the parameters for
//                        its forward and again for its backward and reduce-scatters the
//                        gradients, each layer's collective prefetched behind the previous
//                        layer's compute (the first gather and the last reduce-scatter of a pass
//                        stay exposed; Zhao et al. 2023, "PyTorch FSDP");
//   optimizer  the fused optimizer over this rank's parameters (ZeRO >= 1: its 1/(dp cp) shard).
// Memory per GPU, of the pipeline stage that needs the most (the first or the last): parameters
// (ZeRO-3: 1/(dp cp), plus two layers gathered) and their fp8 copies, gradients (ZeRO >= 2:
// 1/(dp cp), plus a layer's unsharded), optimizer states (ZeRO >= 1: 1/(dp cp)), the embedding's
// on the first stage and the head's on the last; the activations of the model chunks in flight
// on that stage as Megatron-LM's schedules run them (1F1B: min(pp - r, m) on stage r;
// interleaved with v chunks of 1/v of the layers: min(2 (pp - r - 1) + (v - 1) pp + 1, m v);
// GPipe: m): one of them at its own liveness peak (the head's on the last stage), the others
// holding what they saved for their backward; and the runtime reserve.
//
// Offload to the node's host memory over each GPU's host link (SystemSpec::host):
//   optimizer    ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model
//                Training", USENIX ATC; DeepSpeed's offload_optimizer, ZeRO >= 1): the fp32 master
//                weights and optimizer states live in host memory and the CPU runs the optimizer
//                step. This rank's gradient shard goes to the host behind the backward (every
//                micro-batch under ZeRO >= 2, which keeps only a layer's bucket on the GPU; once
//                under ZeRO-1), the CPU updates the shards of all the node's GPUs at once, bound
//                by the host's DRAM bandwidth (kCpuOptimizerBytesPerParameterState), and the
//                updated 16-bit shard comes back before the all-gather. The step waits for the
//                CPU (DeepSpeed's delayed parameter update, off by default, is not modelled).
//   parameters   ZeRO-Infinity (Rajbhandari et al. 2021, SC21; offload_param, ZeRO-3): the
//                parameter shards live in host memory; each forward and backward fetches this
//                rank's shard of every layer over its own link (bandwidth-centric partitioning)
//                before the all-gather, prefetched behind the previous layer's compute.
//   activations  what each layer saves for its backward goes to the host during the forward and
//                comes back ahead of its backward (Megatron-Core's cpu_offloading, Transformer
//                Engine's get_cpu_offload_context): the GPU holds one chunk's working peak of one
//                layer and the layer being moved. Megatron-Core runs it only with pp = 1 and no
//                recomputation (transformer_config.py), and so does the estimate.
// A micro-batch's forward and backward each wait for what their link transfers take beyond
// them (the two directions run at once); every figure is per GPU, the host memory the node's
// GPUs hold together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/collective.h"
#include "accelsim/device.h"
#include "accelsim/model.h"
#include "accelsim/simulate.h"

namespace accelsim {

struct ParallelLayout {
  int64_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;  // ep: expert parallelism inside dp
  bool sequence_parallel = false;
  // 2D SUMMA tensor parallelism on the tp x cp grid (BuildOptions::summa): the blocks' weights
  // sharded over both, gathered over CP before each GEMM; their data-parallel collectives and
  // ZeRO then span the data-parallel ranks only, the embedding's and the head's (whole on every
  // CP rank) still DP x CP. Needs sequence_parallel and tp, cp above 1.
  bool summa = false;
  int64_t micro_batch = 1;    // sequences per micro-batch
  int64_t global_batch = 1;   // sequences per step, all data-parallel ranks together
  int64_t virtual_stages = 1; // interleaved 1F1B: model chunks per pipeline rank
  bool gpipe = false;         // GPipe (all forwards, then all backwards): 1F1B's bubble, m in flight
  int zero = 1;               // 0: all-reduce; 1: distributed optimizer; 2: + gradients; 3: FSDP
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  // Rank order, innermost first, as Megatron-LM's RankGenerator spells it: the groups listed
  // first get the scale-up domain first. A permutation of tp, cp, ep, dp, pp.
  std::string order = "tp-cp-ep-dp-pp";
  // Offload to host memory (see the top of this file). Optimizer offload needs ZeRO >= 1,
  // parameter offload ZeRO-3; the system must give its host (SystemSpec::host).
  bool offload_optimizer = false;
  bool offload_parameters = false;
  bool offload_activations = false;
  bool offloads() const { return offload_optimizer || offload_parameters || offload_activations; }

  int64_t gpus() const { return tp * pp * dp * cp; }
};

// Compute that runs beside a collective is slowed: NCCL/RCCL kernels take SMs and memory
// bandwidth from the GEMMs and attention kernels they overlap. Measured on A100, H100, MI250 and
// MI210 running GPT and Llama layers with overlapped collectives: an average computational
// slowdown of 18.9% (at most 40.0%) against the same compute with no communication beside it
// ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning:
// Performance and Power Implications", arXiv 2507.03114, abstract).
// The step pays this fraction of every second of communication it hides.
inline constexpr double kOverlapComputeSlowdown = 0.189;

// Host DRAM traffic of a CPU optimizer step, as a multiple of the bytes of the optimizer states
// it updates: it reads and writes every state (the fp32 master weights and Adam's two moments),
// reads the gradients and writes the 16-bit parameters (DeepSpeed's CPU Adam, csrc/adam/
// cpu_adam_impl.cpp: Step_AVX loads param, grad, exp_avg, exp_avg_sq and stores param,
// exp_avg, exp_avg_sq and the half-precision copy), 4 + 4 + 4 + 4 read and 4 + 4 + 4 + 2 written
// per fp32 Adam parameter, 30 bytes for 12 of states.
inline constexpr double kCpuOptimizerBytesPerParameterState = 30.0 / 12.0;
// The share of the host's peak DRAM bandwidth the CPU optimizer step reaches: ZeRO-Offload's
// CPU-Adam updates 1B parameters in 0.22 s on a DGX-2 host (2x Xeon Platinum 8168, 12 channels
// of DDR4-2666, 256 GB/s peak; Ren et al. 2021, Table 3), 30 GB in 0.22 s, 136 GB/s: 0.53.
inline constexpr double kCpuOptimizerBandwidthEfficiency = 0.53;

// The core clock a training step's kernels are costed at: the caller's override
// (CostOptions::clock_hz) where given, else under the kernel cost model the device's sustained
// clock (sustained_clock_hz, device.h: its clock times KernelConstants::sustained_clock_fraction,
// at its power limit) where that was measured, else
// 0 (the device's clock; the roofline has none). A step keeps the tensor cores busy for seconds,
// long enough for the power limit to hold the clock below the one a short kernel measures at.
double training_clock_hz(const DeviceSpec& device, const SimulateOptions& options);

struct TrainingEstimate {
  bool feasible = false;
  std::string reason;  // why not, when infeasible
  int64_t micro_batches = 0;
  int64_t stage_layers = 0;  // layers on the heaviest pipeline stage
  double step_s = 0.0;
  double compute_s = 0.0;    // m x (forward + backward), TP/CP/EP collectives inside
  double tp_comm_s = 0.0;    // the part of compute spent in TP/CP/EP collectives (exposed)
  double bubble_s = 0.0;
  double pp_comm_s = 0.0;
  double p2p_send_s = 0.0;  // one micro-batch's activations to the next stage
  double dp_comm_s = 0.0;    // exposed
  // What the collectives that overlap compute (hidden TP/CP/EP collectives, data-parallel
  // gradient reduction and parameter gathers behind the backward and forward) cost the compute
  // beside them: kOverlapComputeSlowdown of the overlapped time.
  double overlap_slowdown_s = 0.0;
  double optimizer_s = 0.0;
  // Offload (ParallelLayout::offload_*): the host-link transfers the passes wait for, the CPU's
  // optimizer step and the updated parameters' return, all in step_s; and the host memory the
  // node's GPUs hold (at most min(gpus, gpus per node) of them).
  double offload_s = 0.0;
  double host_optimizer_s = 0.0;
  double host_memory_per_node_bytes = 0.0;
  // What the data-parallel collectives and the pipeline sends move, for a trace of the step
  // (Chakra): the heaviest stage's parameters, gradients and the trainable parameters of one
  // rank before any ZeRO sharding (the gathers and reductions over the dp_ranks ranks move
  // these), and one micro-batch's activations sent to the next stage.
  double stage_parameter_bytes = 0.0;
  double stage_gradient_bytes = 0.0;
  double stage_trainable_bytes = 0.0;
  int64_t dp_ranks = 1;  // the ranks the data-parallel collectives span (dp x cp; dp under SUMMA)
  double p2p_bytes = 0.0;
  double forward_s = 0.0;    // one micro-batch through the heaviest stage
  double backward_s = 0.0;
  double tokens_per_s = 0.0;
  double model_flops = 0.0;  // per step, whole model (6 N T + attention, SimulationResult)
  double tflops_per_gpu = 0.0;  // model FLOP/s per GPU, in TFLOP/s
  double mfu = 0.0;
  double memory_per_gpu_bytes = 0.0;
  double activation_bytes = 0.0;  // of memory_per_gpu_bytes: the activations of the chunks in flight
  // memory_per_gpu_bytes as PyTorch's caching allocator reserves it (torch.cuda's
  // max_memory_reserved plus the runtime's reserve): the peak stage's activations replayed
  // through the allocator keep the free blocks of their segments
  // (StageProfile::allocator_slack_bytes). What must fit is memory_per_gpu_bytes (the allocator frees its cached
  // segments and retries before it fails); this is what a run's reserved-memory log shows.
  double reserved_per_gpu_bytes = 0.0;
  bool fits = false;
  double clock_hz = 0.0;  // the core clock the kernels were costed at (training_clock_hz); 0: the device's
};

// A quantity of a stage of n layers, from its value with one layer: at(n) = one + (n - 1) per_layer.
struct PerLayer {
  double one = 0.0;
  double per_layer = 0.0;
  double at(int64_t layers) const { return one + static_cast<double>(layers - 1) * per_layer; }
};

// One micro-batch through one pipeline stage on one rank (see the top of this file).
struct StageProfile {
  bool feasible = false;
  std::string reason;
  double clock_hz = 0.0;  // the core clock its kernels were costed at (training_clock_hz); 0: the device's
  PerLayer forward_s, backward_s, optimizer_s;
  PerLayer communication_s;  // TP/CP/EP collectives' exposed time (SimulateOptions::overlap_tp_comm)
  PerLayer overlapped_communication_s;  // and the time of theirs that overlaps compute
  PerLayer once_per_step_s;  // in forward_s: ops run once per step (SimulateOptions::fp8_weight_cache)
  PerLayer parameter_bytes, gradient_bytes, state_bytes;
  PerLayer trainable_parameter_bytes;  // of parameter_bytes: those not frozen (LoRA's adapters alone)
  PerLayer saved_bytes;    // activations live at the end of the forward (kept for the backward)
  PerLayer weight_copy_bytes;  // low-precision weight copies the backward keeps (fp8 GEMMs)
  // The most activations one micro-batch holds at once over its forward, loss and backward
  // (neither weight copies nor parameter gradients).
  PerLayer peak_activation_bytes;
  // The most the optimizer step's temporaries hold at once, over the stage's whole parameters
  // (a foreach AdamW's per-parameter buffers); the step holds it after the micro-batches' own.
  PerLayer optimizer_peak_bytes;
  // The parts of the stage that are not its layers, for the pipeline stages that hold them: the
  // embedding's parameters, gradients and optimizer states (the first stage's), the final
  // norm's, head's and loss's (the last stage's), the saved activations the nodes before the
  // first layer wrote (the stage's input) and after the last (the head's and the loss's), and
  // the activation peak of a stage without the head (the stages before the last).
  struct Part {
    double parameter_bytes = 0.0, gradient_bytes = 0.0, state_bytes = 0.0, trainable_parameter_bytes = 0.0;
  };
  Part embedding, head;
  double input_saved_bytes = 0.0;
  double head_saved_bytes = 0.0;
  PerLayer body_peak_activation_bytes;
  // How much more than peak_activation_bytes (body_: body_peak_activation_bytes) PyTorch's
  // caching allocator reserves for one micro-batch: its free blocks that a later, larger request
  // could not reuse, from replaying the two-layer stage's requests (replay_caching_allocator).
  // Taken as constant in depth: a layer's freed blocks serve the next layer's same-size requests.
  double allocator_slack_bytes = 0.0, body_allocator_slack_bytes = 0.0;
  double model_flops = 0.0;  // the whole model's, one micro-batch (SimulationResult::model_flops)
  double reference_peak_flops_per_s = 0.0;
};

// The profile of `layout`'s TP/SP/CP/EP degrees and micro-batch (its pp, dp, virtual stages and
// ZeRO stage do not enter) with the placement `groups` (tp, cp, ep as place_groups gives them).
// Infeasible (with the reason) when the builder rejects the shapes; throws ConfigError for a
// malformed model, device or system (PhysicalRangeError when one passes validation but the
// stage's simulation comes out infinite, NaN or negative).
StageProfile profile_stage(const ModelSpec& model, const BuildOptions& base,
                           const ParallelLayout& layout, const std::vector<CommGroup>& groups,
                           const DeviceSpec& device, const SystemSpec& system,
                           const SimulateOptions& options);

// The step of `layout` from its stage profile.
TrainingEstimate compose_training(const ModelSpec& model, const BuildOptions& base,
                                  const ParallelLayout& layout, const StageProfile& profile,
                                  const DeviceSpec& device, const SystemSpec& system);

// `base` gives the sequence length, recompute policy, precision and optimizer of the step (its
// batch and parallel degrees come from the layout). Never throws for a layout that does not
// divide or does not fit: the estimate says why (`feasible`, `reason`); throws ConfigError for
// a malformed model, device or system. Every figure of the estimate is finite and not negative
// (compose_training checks before returning; physical_range.h), as is every candidate's of
// plan_training.
TrainingEstimate estimate_training(const ModelSpec& model, const BuildOptions& base,
                                   const ParallelLayout& layout, const DeviceSpec& device,
                                   const SystemSpec& system, const SimulateOptions& options);

}  // namespace accelsim
