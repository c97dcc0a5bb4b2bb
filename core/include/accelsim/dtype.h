// Element types of tensors and their sizes.
//
// The spelling of each enumerator is also its spelling in graph files, device files and the CLI
// (`bf16`, `fp8_e4m3`, ...), except `boolean`, which files spell `bool`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace accelsim {

enum class DType : uint8_t {
  fp64,
  fp32,
  fp16,
  bf16,
  fp8_e4m3,
  fp8_e5m2,
  int64,
  int32,
  int16,
  int8,
  uint8,
  boolean,
  complex64,
  complex128,
  // FP4 (OCP e2m1: 1 sign, 2 exponent, 1 mantissa bit) as a GEMM's compute type only: fp4 values
  // are stored packed two per byte in uint8 tensors with their block scales (NVFP4, MXFP4), so
  // no tensor holds this dtype (Graph::add_tensor refuses one); size_bytes gives the byte a pair
  // shares.
  fp4_e2m1,
};

// Bytes per element (PyTorch's element sizes: bool is one byte, complex64 is eight).
int64_t size_bytes(DType dtype);

// True for floating-point and complex types.
bool is_floating(DType dtype);

// The file spelling of `dtype` ("bf16", "bool", ...).
std::string_view dtype_name(DType dtype);

// Parses a file spelling. Throws ConfigError naming the unknown spelling and the valid ones.
DType parse_dtype(std::string_view name);

}  // namespace accelsim
