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
  // The same allocations and frees replayed through PyTorch's CUDA caching allocator
  // (replay_caching_allocator): the peak of the rounded live blocks (torch.cuda's
  // max_memory_allocated), the peak of the segments it reserved from the driver when it never
  // gives any back (max_memory_reserved), and the peak of the segments holding at least one live
  // block, the least it must hold (on a failed cudaMalloc it frees its empty segments and
  // retries): what has to fit beside the CUDA context.
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t peak_segment_bytes = 0;
  // With the optimizer on the host (compute_memory_profile's `optimizer_on_host`): what the host
  // holds, the optimizer states, the parameter gradients and a copy of the trainable parameters
  // (ZeRO-Offload's pinned buffers); 0 otherwise. Not in any of the device figures above.
  int64_t host_bytes = 0;
};

// One allocator request or release, in execution order.
struct AllocatorEvent {
  int64_t id;        // the storage
  int64_t bytes;     // requested size (allocations)
  bool allocate;     // false: free
};

struct AllocatorPeaks {
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t peak_segment_bytes = 0;
};

// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, default settings; see
// https://docs.pytorch.org/docs/stable/generated/torch.cuda.memory.memory_stats.html): requests
// round up to 512 bytes; up to 1 MiB they come from a small pool of 2 MiB segments, above it
// from a large pool (20 MiB segments for requests under 10 MiB, otherwise the request rounded up
// to 2 MiB); the best-fitting cached free block is split when more than 512 bytes (small pool)
// or 1 MiB (large pool) would remain; freed blocks merge with free neighbours in their segment.
// Segments are never moved.
AllocatorPeaks replay_caching_allocator(const std::vector<AllocatorEvent>& events);

enum class ReleasePolicy : uint8_t { recorded, last_use };

// Each storage's lifetime as described above, indexed by StorageId: `first`, the first node
// that reads or writes a tensor on it (kNoNode if none does); `last`, the last node during which
// it is live, or the node count (past the last node) for a graph output's, live to the end.
struct StorageLifetimes {
  std::vector<NodeId> first;
  std::vector<NodeId> last;
};

StorageLifetimes storage_lifetimes(const Graph& graph, ReleasePolicy policy = ReleasePolicy::recorded);

// The caching allocator's requests for the storages `include` selects (indexed by StorageId; a
// storage no node touches or of no bytes is left out), in execution order: at each node the
// storages it creates, then those it is the last to use, each group by StorageId. A storage
// live to the end (`last` is the node count) is never freed. For replay_caching_allocator.
std::vector<AllocatorEvent> allocation_events(const Graph& graph, const StorageLifetimes& lifetimes,
                                              const std::vector<char>& include);

// `optimizer_on_host`: a training step whose optimizer runs on the CPU (ZeRO-Offload on one GPU,
// DeepSpeed's offload_optimizer): the optimizer states stay on the host, the optimizer pass's
// nodes run there (their temporaries take no device memory), and each gradient and activation
// leaves the device after the last node before the optimizer pass that touches it (the
// gradients stream to the host behind the backward). ConfigError for a graph without an
// optimizer pass.
MemoryProfile compute_memory_profile(const Graph& graph,
                                     ReleasePolicy policy = ReleasePolicy::recorded,
                                     bool optimizer_on_host = false);

}  // namespace accelsim
