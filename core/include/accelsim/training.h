// estimate_training(): one step of a data-, pipeline-, tensor-, context- and expert-parallel
// training run on a cluster, composed from the model builder's graph of one pipeline stage.
//
// The stage graph (the model with ceil(layers / pp) of its layers, the embedding and the LM
// head: the heaviest, first-or-last stage) is built for one micro-batch on one rank (TP/SP/CP/EP shapes)
// and simulated on the device with its TP/CP/EP collectives timed on the system. Then, as
// Megatron-LM runs a step (Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters"):
//   compute    m micro-batches x (forward + backward of the stage), m = global batch / (dp x
//              micro-batch);
//   bubble     (pp - 1) / v x (forward + backward) for 1F1B with v virtual stages (v = 1: plain
//              1F1B; the same bubble as GPipe);
//   pp comm    the pipeline's fill and drain: 2 (pp - 1) v activation sends of one micro-batch
//              between neighbouring stages (the steady state overlaps them);
//   dp comm    the gradients of this rank's parameters: ZeRO-0 all-reduce; ZeRO-1 (Megatron's
//              distributed optimizer) reduce-scatter of the fp32 gradients and all-gather of the
//              16-bit parameters; with overlap, only what the last micro-batch's backward (and
//              the next step's first forward, for the gather) cannot hide is exposed;
//   optimizer  the fused optimizer over this rank's parameters (ZeRO-1: its 1/dp shard).
// Memory per GPU: weights, gradients, optimizer states (ZeRO-1: 1/dp of them) and the stage's
// activations times the micro-batches 1F1B keeps in flight (pp on the first stage; interleaving
// adds (pp - 1) / (pp v)), plus the runtime reserve.
#pragma once

#include <cstdint>
#include <string>

#include "accelsim/builder.h"
#include "accelsim/collective.h"
#include "accelsim/device.h"
#include "accelsim/model.h"
#include "accelsim/simulate.h"

namespace accelsim {

struct ParallelLayout {
  int64_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;  // ep: expert parallelism inside dp
  bool sequence_parallel = false;
  int64_t micro_batch = 1;    // sequences per micro-batch
  int64_t global_batch = 1;   // sequences per step, all data-parallel ranks together
  int64_t virtual_stages = 1; // interleaved 1F1B: model chunks per pipeline rank
  int zero = 1;               // 0: all-reduce the gradients; 1: distributed optimizer
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;

  int64_t gpus() const { return tp * pp * dp * cp; }
};

struct TrainingEstimate {
  bool feasible = false;
  std::string reason;  // why not, when infeasible
  int64_t micro_batches = 0;
  double step_s = 0.0;
  double compute_s = 0.0;    // m x (forward + backward), TP/CP/EP collectives inside
  double tp_comm_s = 0.0;    // the part of compute spent in TP/CP/EP collectives
  double bubble_s = 0.0;
  double pp_comm_s = 0.0;
  double dp_comm_s = 0.0;    // exposed
  double optimizer_s = 0.0;
  double tokens_per_s = 0.0;
  double model_flops = 0.0;  // per step, whole model (6 N T + attention, SimulationResult)
  double tflops_per_gpu = 0.0;  // model FLOP/s per GPU, in TFLOP/s
  double mfu = 0.0;
  double memory_per_gpu_bytes = 0.0;
  bool fits = false;
};

// `base` gives the sequence length, recompute policy, precision and optimizer of the step (its
// batch and parallel degrees come from the layout). Never throws for a layout that does not
// divide or does not fit: the estimate says why (`feasible`, `reason`); throws ConfigError for
// a malformed model, device or system.
TrainingEstimate estimate_training(const ModelSpec& model, const BuildOptions& base,
                                   const ParallelLayout& layout, const DeviceSpec& device,
                                   const SystemSpec& system, const SimulateOptions& options);

}  // namespace accelsim
