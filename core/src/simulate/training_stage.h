// Internal to the training step and the plan search (training.cc, plan.cc), not a public header:
// a layout's groups placed on the system, and a stage's graphs and their bytes, from which both
// compose steps.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accelsim/collective.h"
#include "accelsim/graph.h"
#include "accelsim/memory.h"
#include "accelsim/training.h"

namespace accelsim::training_detail {

// A layout's rank order as group names, innermost first; empty if it is not a permutation of
// tp, cp, ep, dp, pp.
std::vector<std::string> parse_order(const std::string& order);

// The layout's groups placed on the system in its rank order; indexed tp, cp, ep, dp (the data-
// parallel ranks outside EP), pp.
struct Placement {
  std::array<CommGroup, 5> groups;
  bool valid = false;
};

// A stage graph's bytes, for the linear stage profile.
struct StageBytes {
  double parameter_bytes = 0, gradient_bytes = 0, state_bytes = 0, saved_bytes = 0, peak_activation_bytes = 0;
  double weight_copy_bytes = 0;
  double trainable_parameter_bytes = 0;  // of parameter_bytes: those not frozen (Storage::frozen)
  // Of saved_bytes: what the nodes before the first layer (the embedding) and after the last
  // (the final norm, the head and the loss) wrote.
  double embedding_saved_bytes = 0, head_saved_bytes = 0;
  // The most the optimizer step's own temporaries hold at once (a foreach AdamW's denominators
  // of every parameter), apart from peak_activation_bytes: the step runs once, after every
  // micro-batch, over the parameters this rank updates.
  double optimizer_peak_bytes = 0;
  // The same micro-batch's activations replayed through PyTorch's caching allocator
  // (replay_caching_allocator, memory.h): how much more than peak_activation_bytes it reserves
  // from the driver and keeps (torch.cuda.max_memory_reserved), the free blocks a later, larger
  // request could not reuse (the loss's logits-sized tensors beside the layers' smaller ones).
  // Not a per-layer quantity: each layer's blocks are reused by the next layer's requests of
  // the same sizes, so it is taken as it is, not brought to a mean layer.
  double allocator_slack_bytes = 0;
};

// A stage's graphs and their bytes: all that its build options decide, whatever the placement
// of its ranks (which enters only the simulated times), so that every placement of the same
// degrees shares them.
struct StageGraphs {
  std::string reason;  // the builder's, when it rejects the shapes (nothing else is set)
  // One and two of the model's heaviest layers (an MoE model's dense leading layers and
  // interleaved dense layers made MoE) with the embedding and the head; `two` is absent for a
  // one-layer model (one stands for both).
  std::optional<Graph> one, two;
  StageBytes one_bytes, two_bytes;
  // The body: the same layers without the final norm, the head and the pooler, a stage before
  // the last (its loss stands for the next stage's gradient); only its bytes are needed.
  StageBytes body_one_bytes, body_two_bytes;
  // An MoE model with dense layers: the real model's leading layers through the first MoE layer
  // (`whole_layers` of them), and one more, for the whole model's FLOPs.
  std::optional<Graph> whole_one, whole_two;
  int64_t whole_layers = 0;
  // Layers per repeat of the model's layer pattern (ModelSpec::layer_pattern(): gpt-oss
  // alternates windowed and full attention, 2). `one` and `two` then hold one and two repeats,
  // and their figures are brought back to one and two mean layers (per_mean_layer).
  int64_t unit = 1;
};

Placement place(const ParallelLayout& l, const SystemSpec& system);

// The order of the recompute policies (none < selective < full): how much a step recomputes.
int recompute_rank(Recompute r);

// A stage's build options: `base` with the layout's TP/SP/CP/EP degrees and micro-batch.
BuildOptions stage_build_options(const BuildOptions& base, const ParallelLayout& layout);

// The stage graphs of build options `b`, or the builder's reason for rejecting their shapes.
StageGraphs build_or_reject(const ModelSpec& model, const BuildOptions& b, ReleasePolicy policy);

// The profile of built stage graphs with the placement `groups` (tp, cp, ep).
StageProfile profile_built_stage(const ModelSpec& model, const StageGraphs& s, const std::vector<CommGroup>& groups,
                                 const DeviceSpec& device, const SystemSpec& system, const SimulateOptions& options);

}  // namespace accelsim::training_detail
