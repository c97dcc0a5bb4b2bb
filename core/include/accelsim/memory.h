// Liveness of storages over a graph's execution: live memory per op and its peak.
//
// Parameters, buffers, inputs and optimizer states are resident from start to end. An activation
// or gradient storage becomes
// live at the first node that outputs a tensor on it and dies after the last node that reads or
// writes any tensor on it (so views and in-place results keep their base alive), unless one of
// its tensors is a graph output, which keeps it to the end. During a node, its inputs, its
// outputs and everything still needed later are live; that is where the peak is measured.
//
// Two release policies: `recorded` (default) keeps a storage at least until its recorded
// Storage::released_after node, as the captured eager program does; `last_use` frees every
// activation right after its last use, as a compiler that plans memory (torch.compile) would.
#pragma once

#include <cstdint>
#include <vector>

#include "accelsim/graph.h"

namespace accelsim {

struct MemoryProfile {
  int64_t parameter_bytes = 0;
  int64_t buffer_bytes = 0;
  int64_t input_bytes = 0;
  int64_t optimizer_state_bytes = 0;  // Adam moments, momentum, fp32 master weights
  int64_t resident_bytes = 0;         // parameters + buffers + inputs + optimizer states
  int64_t peak_bytes = 0;             // resident + activations and gradients live at the peak
  int64_t peak_activation_bytes = 0;  // activations live at the peak
  int64_t peak_gradient_bytes = 0;    // parameter gradients live at the peak
  NodeId peak_node = kNoNode;         // node during which the peak occurs; kNoNode if no nodes
  std::vector<int64_t> live_bytes;    // per node: bytes live while it runs
  std::vector<int64_t> live_bytes_after;  // per node: bytes live after its dead storages are freed
};

enum class ReleasePolicy : uint8_t { recorded, last_use };

MemoryProfile compute_memory_profile(const Graph& graph,
                                     ReleasePolicy policy = ReleasePolicy::recorded);

}  // namespace accelsim
