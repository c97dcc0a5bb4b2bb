#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "accelsim/device.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {

void bind_device(nb::module_& m) {
  nb::class_<KernelConstants>(m, "KernelConstants")
      .def(nb::init<>())
      .def_rw("calibrated", &KernelConstants::calibrated)
      .def_rw("matmul_efficiency", &KernelConstants::matmul_efficiency)
      .def_rw("fp8_matmul_efficiency", &KernelConstants::fp8_matmul_efficiency)
      .def_rw("attention_efficiency", &KernelConstants::attention_efficiency)
      .def_rw("attention_backward_efficiency", &KernelConstants::attention_backward_efficiency)
      .def_rw("flash3_efficiency", &KernelConstants::flash3_efficiency)
      .def_rw("cudnn_efficiency", &KernelConstants::cudnn_efficiency)
      .def_rw("fp8_attention_efficiency", &KernelConstants::fp8_attention_efficiency)
      .def_rw("memory_efficiency", &KernelConstants::memory_efficiency)
      .def_rw("kernel_floor_s", &KernelConstants::kernel_floor_s)
      .def_rw("stream_floor_s", &KernelConstants::stream_floor_s)
      .def_rw("gemm_memory_efficiency", &KernelConstants::gemm_memory_efficiency)
      .def_rw("gemm_tile_overhead_s", &KernelConstants::gemm_tile_overhead_s);

  nb::class_<DeviceSpec>(m, "DeviceSpec")
      .def(nb::init<>())
      .def_rw("id", &DeviceSpec::id)
      .def_rw("name", &DeviceSpec::name)
      .def_rw("vendor", &DeviceSpec::vendor)
      .def_rw("memory_bytes", &DeviceSpec::memory_bytes)
      .def_rw("memory_bandwidth_bytes_per_s", &DeviceSpec::memory_bandwidth_bytes_per_s)
      .def_rw("fp64_flops_per_s", &DeviceSpec::fp64_flops_per_s)
      .def_rw("fp64_matrix_flops_per_s", &DeviceSpec::fp64_matrix_flops_per_s)
      .def_rw("fp32_flops_per_s", &DeviceSpec::fp32_flops_per_s)
      .def_rw("fp32_matrix_flops_per_s", &DeviceSpec::fp32_matrix_flops_per_s)
      .def_rw("tf32_matrix_flops_per_s", &DeviceSpec::tf32_matrix_flops_per_s)
      .def_rw("fp16_matrix_flops_per_s", &DeviceSpec::fp16_matrix_flops_per_s)
      .def_rw("bf16_matrix_flops_per_s", &DeviceSpec::bf16_matrix_flops_per_s)
      .def_rw("fp8_matrix_flops_per_s", &DeviceSpec::fp8_matrix_flops_per_s)
      .def_rw("int8_matrix_ops_per_s", &DeviceSpec::int8_matrix_ops_per_s)
      .def_rw("kernel_launch_overhead_s", &DeviceSpec::kernel_launch_overhead_s)
      .def_rw("runtime_reserved_bytes", &DeviceSpec::runtime_reserved_bytes)
      .def_rw("num_compute_units", &DeviceSpec::num_compute_units)
      .def_rw("clock_hz", &DeviceSpec::clock_hz)
      .def_rw("l2_cache_bytes", &DeviceSpec::l2_cache_bytes)
      .def_rw("tdp_w", &DeviceSpec::tdp_w)
      .def_rw("price_usd_per_hour", &DeviceSpec::price_usd_per_hour)
      .def_rw("kernel", &DeviceSpec::kernel)
      .def("validate", &DeviceSpec::validate);

  nb::class_<PeakRate>(m, "PeakRate")
      .def_ro("flops_per_s", &PeakRate::flops_per_s)
      .def_ro("unit", &PeakRate::unit)
      .def_ro("fallback", &PeakRate::fallback);

  m.def("peak_rate", &peak_rate, nb::arg("device"), nb::arg("dtype"), nb::arg("matrix_op"),
        nb::arg("allow_tf32") = false);
}

}  // namespace accelsim::bindings
