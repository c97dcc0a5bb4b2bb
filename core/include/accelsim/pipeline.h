// schedule_pipeline(): the timeline of one pipeline-parallel training step, Megatron-LM's 1F1B
// schedules simulated op by op.
//
//   PipelineSchedule s = schedule_pipeline(/*stages=*/4, /*virtual_stages=*/2, /*micro_batches=*/8,
//                                          forward_s, backward_s, p2p_s);
//   s.makespan_s, s.bubble_s, s.events ...
//
// The model is cut into stages x virtual_stages model stages; model stage j = chunk x stages +
// stage runs on pipeline rank `stage` as its model chunk `chunk` (Narayanan et al. 2021,
// "Efficient Large-Scale Language Model Training on GPU Clusters", section 2.2).
//
// Each stage runs its list of forward and backward passes in the order Megatron-LM's
// schedules.py issues them:
//   virtual_stages = 1  forward_backward_pipelining_without_interleaving (1F1B): warm-up of
//                       min(stages - stage - 1, m) forwards, then one forward and one backward
//                       at a time, then the remaining backwards;
//   virtual_stages > 1  forward_backward_pipelining_with_interleaving: the m x v passes of a
//                       stage go in groups of `stages` micro-batches per chunk (forward k runs
//                       chunk (k mod stages v) / stages on micro-batch (k / (stages v)) stages +
//                       k mod stages; backwards run the chunks in reverse order); warm-up of
//                       min((stages - stage - 1) x 2 + (v - 1) x stages, m v) forwards, or all of
//                       them when m = stages, then 1F1B, then the remaining backwards. Needs m to
//                       be a multiple of stages (ConfigError otherwise), as Megatron-LM does.
// A pass starts when its stage has finished the previous pass in its list and its input has
// arrived: the forward of model stage j on micro-batch i needs the forward of model stage j - 1
// on i; the backward of j needs the backward of j + 1 on i, and the last model stage's backward
// its own forward.
//
// Sends. An output that goes to another stage (activations forward, their gradients backward)
// is a send of p2p_s on the directed link from the producing stage to the consuming one; it
// starts when its pass ends and the link is free (one message at a time per directed link,
// first come first served) and the input arrives when it ends. Sends do not occupy either
// stage's compute: the steady state overlaps them (Megatron-LM's batched isend/irecv), and the
// blocking of a send on the receiver's matching recv is not modelled. Between model stages on
// the same stage (stages = 1) nothing is sent.
//
// Events: one per forward and backward pass (stage: the rank that runs it) and one per send
// (stage: the sending rank, to_stage: the receiving one, chunk and micro_batch: of the pass that
// produced what is sent, payload: that pass's work). Events are ordered by start time, then
// stage.
#pragma once

#include <cstdint>
#include <vector>

namespace accelsim {

enum class PipelineWork : uint8_t {
  forward,
  backward,
  send,  // activations (forward) or their gradients (backward) between stages
};

struct PipelineEvent {
  int64_t stage = 0;        // the pipeline rank that computes; for a send, the sender
  int64_t chunk = 0;        // model chunk on that rank (virtual stage), 0 .. virtual_stages - 1
  int64_t micro_batch = 0;  // 0 .. micro_batches - 1
  PipelineWork work = PipelineWork::forward;
  double start_s = 0.0;
  double end_s = 0.0;
  int64_t to_stage = -1;    // send only: the receiving rank; -1 for forward and backward
  // Send only: the pass whose output is sent (forward: activations; backward: activation
  // gradients). For a forward or backward event, the same as `work`.
  PipelineWork payload = PipelineWork::forward;
};

struct PipelineSchedule {
  std::vector<PipelineEvent> events;
  // From the first pass's start (0) to the end of the last event (the last backward of model
  // stage 0, on stage 0).
  double makespan_s = 0.0;
  // The time each stage is idle within the makespan: makespan - m x v x (forward + backward).
  // Every stage computes the same m x v forwards and backwards, so this is the same for all
  // stages; it is the pipeline bubble plus the sends that the schedule cannot hide.
  double bubble_s = 0.0;
};

// forward_s, backward_s: one micro-batch through one model chunk on one stage (a stage's whole
// forward or backward of a micro-batch divided by virtual_stages). p2p_s: one send of a
// micro-batch's activations (or gradients) between neighbouring stages. Throws ConfigError for
// counts below 1, negative or non-finite times, or virtual_stages > 1 with micro_batches not a
// multiple of stages.
PipelineSchedule schedule_pipeline(int64_t stages, int64_t virtual_stages, int64_t micro_batches,
                                   double forward_s, double backward_s, double p2p_s);

}  // namespace accelsim
