#include <algorithm>
#include <cstdint>
#include <vector>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/memory.h"

namespace accelsim {

StorageLifetimes storage_lifetimes(const Graph& graph, ReleasePolicy policy) {
  const auto storages = graph.storages();
  const auto tensors = graph.tensors();
  const auto nodes = graph.nodes();
  const auto never = static_cast<NodeId>(nodes.size());  // "until the end"
  StorageLifetimes l{std::vector<NodeId>(storages.size(), kNoNode), std::vector<NodeId>(storages.size(), kNoNode)};
  auto touch = [&](TensorId t, NodeId n) {
    const StorageId s = tensors[t].storage;
    if (l.first[s] == kNoNode) l.first[s] = n;
    l.last[s] = std::max(l.last[s], n);
  };
  for (NodeId n = 0; n < never; ++n) {
    for (TensorId t : nodes[n].inputs) touch(t, n);
    for (TensorId t : nodes[n].outputs) touch(t, n);
  }
  if (policy == ReleasePolicy::recorded) {
    for (size_t s = 0; s < storages.size(); ++s) {
      const NodeId released = storages[s].released_after;
      if (l.first[s] != kNoNode && released != kNoNode) {
        l.last[s] = std::max(l.last[s], std::min(released, never - 1));
      }
    }
  }
  for (TensorId t : graph.outputs()) l.last[tensors[t].storage] = never;
  return l;
}

std::vector<AllocatorEvent> allocation_events(const Graph& graph, const StorageLifetimes& lifetimes,
                                              const std::vector<char>& include) {
  const auto storages = graph.storages();
  const size_t node_count = graph.nodes().size();
  const NodeId never = static_cast<NodeId>(node_count);
  const std::vector<NodeId>& first = lifetimes.first;
  const std::vector<NodeId>& last = lifetimes.last;
  auto wanted = [&](size_t s) {
    return s < include.size() && include[s] && storages[s].size_bytes > 0 && first[s] != kNoNode;
  };
  // Storages bucketed by the node that creates and the node that frees them (counting sort).
  std::vector<int32_t> born_start(node_count + 1, 0), dead_start(node_count + 1, 0);
  for (size_t s = 0; s < storages.size(); ++s) {
    if (!wanted(s)) continue;
    ++born_start[first[s] + 1];
    if (last[s] < never) ++dead_start[last[s] + 1];
  }
  for (size_t n = 0; n < node_count; ++n) {
    born_start[n + 1] += born_start[n];
    dead_start[n + 1] += dead_start[n];
  }
  std::vector<StorageId> born(born_start.back()), dead(dead_start.back());
  {
    std::vector<int32_t> b(born_start.begin(), born_start.end() - 1);
    std::vector<int32_t> d(dead_start.begin(), dead_start.end() - 1);
    for (size_t s = 0; s < storages.size(); ++s) {
      if (!wanted(s)) continue;
      born[b[first[s]]++] = static_cast<StorageId>(s);
      if (last[s] < never) dead[d[last[s]]++] = static_cast<StorageId>(s);
    }
  }
  std::vector<AllocatorEvent> events;
  events.reserve(born.size() + dead.size());
  for (size_t n = 0; n < node_count; ++n) {
    for (int32_t i = born_start[n]; i < born_start[n + 1]; ++i) {
      events.push_back({born[i], storages[born[i]].size_bytes, true});
    }
    for (int32_t i = dead_start[n]; i < dead_start[n + 1]; ++i) events.push_back({dead[i], 0, false});
  }
  return events;
}

MemoryProfile compute_memory_profile(const Graph& graph, ReleasePolicy policy, bool optimizer_on_host) {
  MemoryProfile p;
  const auto storages = graph.storages();
  const auto nodes = graph.nodes();

  // Sums of storages are checked: each storage fits in 64 bits, their sum need not.
  constexpr const char* kOverflow = "the graph's memory (the sum of its storages' bytes)";
  for (const Storage& s : storages) {
    switch (s.kind) {
      case StorageKind::parameter: p.parameter_bytes = checked_add(p.parameter_bytes, s.size_bytes, kOverflow); break;
      case StorageKind::buffer: p.buffer_bytes = checked_add(p.buffer_bytes, s.size_bytes, kOverflow); break;
      case StorageKind::input: p.input_bytes = checked_add(p.input_bytes, s.size_bytes, kOverflow); break;
      case StorageKind::optimizer_state:
        p.optimizer_state_bytes = checked_add(p.optimizer_state_bytes, s.size_bytes, kOverflow);
        if (optimizer_on_host) p.host_bytes = checked_add(p.host_bytes, s.size_bytes, kOverflow);
        break;
      case StorageKind::activation:
      case StorageKind::gradient: break;
    }
  }
  p.resident_bytes = checked_sum(kOverflow, p.parameter_bytes, p.buffer_bytes, p.input_bytes,
                                 optimizer_on_host ? 0 : p.optimizer_state_bytes);

  StorageLifetimes lifetimes = storage_lifetimes(graph, policy);
  if (optimizer_on_host) {
    // The device stops at the last node before the optimizer pass: what the optimizer creates is
    // the host's, and nothing on the device lives past that node. A gradient leaves once the
    // backward has last written it (the graph keeps gradients to its end for the step).
    NodeId before_step = kNoNode;
    bool has_step = false;
    const auto tensors = graph.tensors();
    // Each storage's first and last node outside the optimizer pass (a step that keeps its
    // gradients zeroes them in the optimizer pass before the forward: not on the device then).
    std::vector<NodeId> first_touch(storages.size(), kNoNode), touched(storages.size(), kNoNode);
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (nodes[n].pass == Pass::optimizer) {
        has_step = true;
        continue;
      }
      before_step = static_cast<NodeId>(n);
      for (const auto* list : {&nodes[n].inputs, &nodes[n].outputs}) {
        for (TensorId t : *list) {
          const StorageId st = tensors[t].storage;
          if (first_touch[st] == kNoNode) first_touch[st] = static_cast<NodeId>(n);
          touched[st] = static_cast<NodeId>(n);
        }
      }
    }
    ACCELSIM_CHECK(has_step, "the optimizer on the host needs a training step with an optimizer (the graph has no "
                             "optimizer pass)");
    for (size_t s = 0; s < storages.size(); ++s) {
      const StorageKind kind = storages[s].kind;
      if (kind == StorageKind::gradient) p.host_bytes = checked_add(p.host_bytes, storages[s].size_bytes, kOverflow);
      if (kind == StorageKind::parameter && !storages[s].frozen) {
        p.host_bytes = checked_add(p.host_bytes, storages[s].size_bytes, kOverflow);
      }
      if ((kind != StorageKind::activation && kind != StorageKind::gradient) || lifetimes.first[s] == kNoNode) continue;
      if (kind == StorageKind::gradient) {
        lifetimes.first[s] = first_touch[s];  // kNoNode: never on the device
        lifetimes.last[s] = first_touch[s] == kNoNode ? kNoNode : touched[s];
      } else if (before_step == kNoNode || nodes[lifetimes.first[s]].pass == Pass::optimizer) {
        lifetimes.first[s] = lifetimes.last[s] = kNoNode;  // never on the device
      } else {
        lifetimes.last[s] = std::min(lifetimes.last[s], before_step);
      }
    }
  }
  const std::vector<NodeId>& first = lifetimes.first;
  const std::vector<NodeId>& last = lifetimes.last;

  // Allocation and free events per node, for activation and gradient storages (the latter
  // also tallied on their own, to split the peak by category).
  std::vector<int64_t> allocated_at(nodes.size() + 1, 0);
  std::vector<int64_t> freed_after(nodes.size() + 1, 0);
  std::vector<int64_t> gradient_allocated_at(nodes.size() + 1, 0);
  std::vector<int64_t> gradient_freed_after(nodes.size() + 1, 0);
  for (size_t s = 0; s < storages.size(); ++s) {
    const StorageKind kind = storages[s].kind;
    if ((kind != StorageKind::activation && kind != StorageKind::gradient) || first[s] == kNoNode) {
      continue;
    }
    allocated_at[first[s]] = checked_add(allocated_at[first[s]], storages[s].size_bytes, kOverflow);
    freed_after[last[s]] = checked_add(freed_after[last[s]], storages[s].size_bytes, kOverflow);
    if (kind == StorageKind::gradient) {
      gradient_allocated_at[first[s]] += storages[s].size_bytes;  // at most allocated_at
      gradient_freed_after[last[s]] += storages[s].size_bytes;
    }
  }

  p.live_bytes.resize(nodes.size());
  p.live_bytes_after.resize(nodes.size());
  int64_t live = p.resident_bytes;
  int64_t gradients = 0;
  p.peak_bytes = p.resident_bytes;
  for (size_t n = 0; n < nodes.size(); ++n) {
    live = checked_add(live, allocated_at[n], kOverflow);
    gradients += gradient_allocated_at[n];  // at most live
    p.live_bytes[n] = live;
    if (p.peak_node == kNoNode || live > p.peak_bytes) {  // the first node reaching the peak
      p.peak_bytes = live;
      p.peak_node = static_cast<NodeId>(n);
      p.peak_gradient_bytes = gradients;
    }
    live -= freed_after[n];
    gradients -= gradient_freed_after[n];
    p.live_bytes_after[n] = live;
  }
  p.peak_activation_bytes = p.peak_bytes - p.resident_bytes - p.peak_gradient_bytes;

  // The same lifetimes through the caching allocator: resident storages first (loaded before
  // the step), then per node its new storages, then the ones it was the last to use.
  std::vector<AllocatorEvent> events;
  std::vector<char> per_node(storages.size(), 0);
  for (size_t s = 0; s < storages.size(); ++s) {
    const StorageKind kind = storages[s].kind;
    if (kind == StorageKind::activation || kind == StorageKind::gradient) {
      per_node[s] = 1;
    } else if (storages[s].size_bytes > 0 && !(optimizer_on_host && kind == StorageKind::optimizer_state)) {
      events.push_back({static_cast<int64_t>(s), storages[s].size_bytes, true});
    }
  }
  const std::vector<AllocatorEvent> stepped = allocation_events(graph, lifetimes, per_node);
  events.insert(events.end(), stepped.begin(), stepped.end());
  const AllocatorPeaks a = replay_caching_allocator(events);
  p.peak_allocated_bytes = a.peak_allocated_bytes;
  p.peak_reserved_bytes = a.peak_reserved_bytes;
  p.peak_segment_bytes = a.peak_segment_bytes;
  return p;
}

}  // namespace accelsim
