// Round-number devices sized for serving tests: one with room for an 8B model and its cache, and
// one whose KV cache holds a given number of blocks.
#pragma once

#include <cstdint>

#include "accelsim/serve.h"
#include "testing/round_device.h"

namespace accelsim::testing {

// The round-number device with 80 GB: room for Llama-3-8B's 16 GB of weights and its cache.
inline DeviceSpec roomy_device() {
  DeviceSpec d = round_device();
  d.memory_bytes = 80e9;
  return d;
}

// The round-number device with memory for `m`'s weights and activations under `r` and a KV cache
// of `blocks` blocks of 16 tokens (and half a block to spare), at the default 90% utilization.
inline DeviceSpec device_with_blocks(const ModelSpec& m, int64_t blocks, const ReplicaConfig& r) {
  DeviceSpec d = round_device();
  d.memory_bytes = 100e9;
  const IterationModel probe(m, d, r);
  const ReplicaMemory& mem = probe.memory();
  const double kv = (static_cast<double>(blocks) + 0.5) * 16.0 * mem.kv_bytes_per_token;
  d.memory_bytes = (kv + mem.weight_bytes + mem.activation_bytes + d.runtime_reserved_bytes) / 0.9;
  return d;
}

}  // namespace accelsim::testing
