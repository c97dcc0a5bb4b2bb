// Tensor metadata and storages: what a captured graph knows about each value.
//
// A Storage is a block of device memory; a TensorMeta is a view onto a storage (shape, strides,
// offset, dtype). Views and in-place results share their base's storage, which is how the
// liveness analysis sees aliasing: memory is allocated and freed per storage, never per tensor.
//
//   Storage s{.size_bytes = 4096 * 4, .kind = StorageKind::activation};
//   TensorMeta t{.shape = {64, 64}, .strides = {64, 1}, .dtype = DType::fp32, .storage = 0};
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accelsim/dtype.h"

namespace accelsim {

using StorageId = int32_t;
using TensorId = int32_t;
using NodeId = int32_t;

inline constexpr NodeId kNoNode = -1;

// Where a storage comes from. Parameters, buffers, inputs and optimizer states (Adam moments,
// fp32 master weights) are resident for the whole run; activations and gradients live from the
// op that creates them to the last op that uses them (a parameter's gradient is created by the
// backward pass and read by the optimizer step).
enum class StorageKind : uint8_t { parameter, buffer, input, activation, gradient, optimizer_state };

std::string_view storage_kind_name(StorageKind kind);
StorageKind parse_storage_kind(std::string_view name);  // throws ConfigError

struct Storage {
  int64_t size_bytes = 0;
  StorageKind kind = StorageKind::activation;
  // The node after which the captured program dropped its last reference to this storage
  // (an eager PyTorch run frees memory then, not after the last use: a tensor held by a local
  // variable lives until its function returns). kNoNode: not recorded.
  NodeId released_after = kNoNode;
  // A parameter that takes no gradient (requires_grad = False: a LoRA fine-tune's frozen model):
  // the backward makes none for it, the optimizer does not update it and a sharded optimizer
  // does not gather it back.
  bool frozen = false;
};

struct TensorMeta {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means contiguous
  int64_t storage_offset = 0;    // in elements
  DType dtype = DType::fp32;
  StorageId storage = 0;
  std::string name;  // parameter/buffer/input name; empty for intermediate values

  // Number of elements (1 for a 0-d tensor).
  int64_t numel() const;
  // Logical size: numel * element size.
  int64_t logical_bytes() const;
  // Bytes a kernel touches when it reads this tensor once: dimensions with stride 0
  // (broadcast/expanded) are read once, not per logical element.
  int64_t accessed_bytes() const;
};

}  // namespace accelsim
