#include "accelsim/tensor.h"

#include <string>

#include "accelsim/error.h"

namespace accelsim {

std::string_view storage_kind_name(StorageKind kind) {
  switch (kind) {
    case StorageKind::parameter: return "parameter";
    case StorageKind::buffer: return "buffer";
    case StorageKind::input: return "input";
    case StorageKind::activation: return "activation";
    case StorageKind::gradient: return "gradient";
    case StorageKind::optimizer_state: return "optimizer_state";
  }
  return "activation";
}

StorageKind parse_storage_kind(std::string_view name) {
  if (name == "parameter") return StorageKind::parameter;
  if (name == "buffer") return StorageKind::buffer;
  if (name == "input") return StorageKind::input;
  if (name == "activation") return StorageKind::activation;
  if (name == "gradient") return StorageKind::gradient;
  if (name == "optimizer_state") return StorageKind::optimizer_state;
  throw ConfigError("unknown storage kind '" + std::string(name) +
                    "' (known: parameter, buffer, input, activation, gradient, optimizer_state)");
}

namespace {

// "tensor 'name' [d0, d1, ...]" for an error message.
std::string describe(const TensorMeta& t) {
  std::string s = "tensor" + (t.name.empty() ? std::string() : " '" + t.name + "'") + " [";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(t.shape[i]);
  return s + "] of " + std::string(dtype_name(t.dtype));
}

// An overflowing product: 0 for an empty tensor (a zero dimension anywhere), else an error.
[[gnu::cold, gnu::noinline]] int64_t overflowed(const TensorMeta& t) {
  for (int64_t d : t.shape) {
    if (d == 0) return 0;
  }
  throw ConfigError(describe(t) + ": its element count x bytes overflows 64-bit byte counts");
}

}  // namespace

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) overflow |= __builtin_mul_overflow(n, d, &n);
  return overflow ? overflowed(*this) : n;
}

int64_t TensorMeta::logical_bytes() const {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) overflow |= __builtin_mul_overflow(n, d, &n);
  overflow |= __builtin_mul_overflow(n, size_bytes(dtype), &n);
  return overflow ? overflowed(*this) : n;
}

int64_t TensorMeta::accessed_bytes() const {
  // Broadcast dimensions (stride 0) repeat the same elements: count them once, as PyTorch's
  // torch/utils/_runtime_estimation.py get_num_bytes does.
  int64_t n = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    if (!strides.empty() && strides[i] == 0) continue;
    overflow |= __builtin_mul_overflow(n, shape[i], &n);
  }
  overflow |= __builtin_mul_overflow(n, size_bytes(dtype), &n);
  return overflow ? overflowed(*this) : n;
}

}  // namespace accelsim
