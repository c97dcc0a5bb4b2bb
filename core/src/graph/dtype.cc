#include "accelsim/dtype.h"

#include <array>
#include <string>

#include "accelsim/error.h"

namespace accelsim {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t size_bytes;
  bool floating;
};

// Element sizes as in PyTorch (torch.finfo/iinfo bits / 8; bool is stored as one byte).
constexpr std::array<DTypeInfo, 15> kDTypes = {{
    {DType::fp64, "fp64", 8, true},
    {DType::fp32, "fp32", 4, true},
    {DType::fp16, "fp16", 2, true},
    {DType::bf16, "bf16", 2, true},
    {DType::fp8_e4m3, "fp8_e4m3", 1, true},
    {DType::fp8_e5m2, "fp8_e5m2", 1, true},
    {DType::int64, "int64", 8, false},
    {DType::int32, "int32", 4, false},
    {DType::int16, "int16", 2, false},
    {DType::int8, "int8", 1, false},
    {DType::uint8, "uint8", 1, false},
    {DType::boolean, "bool", 1, false},
    {DType::complex64, "complex64", 8, true},
    {DType::complex128, "complex128", 16, true},
    {DType::fp4_e2m1, "fp4_e2m1", 1, true},  // a compute type only (dtype.h)
}};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

}  // namespace

int64_t size_bytes(DType dtype) { return info(dtype).size_bytes; }

bool is_floating(DType dtype) { return info(dtype).floating; }

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

DType parse_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  std::string valid;
  for (const DTypeInfo& d : kDTypes) {
    if (!valid.empty()) valid += ", ";
    valid += d.name;
  }
  throw ConfigError("unknown dtype '" + std::string(name) + "' (known: " + valid + ")");
}

}  // namespace accelsim
