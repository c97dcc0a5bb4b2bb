#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "accelsim/collective.h"
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
      .def_rw("cudnn_backward_efficiency", &KernelConstants::cudnn_backward_efficiency)
      .def_rw("unaligned_matmul_efficiency", &KernelConstants::unaligned_matmul_efficiency)
      .def_rw("fp8_attention_efficiency", &KernelConstants::fp8_attention_efficiency)
      .def_rw("sustained_clock_fraction", &KernelConstants::sustained_clock_fraction)
      .def_rw("sustained_clock_power_w", &KernelConstants::sustained_clock_power_w)
      .def_rw("memory_efficiency", &KernelConstants::memory_efficiency)
      .def_rw("kernel_floor_s", &KernelConstants::kernel_floor_s)
      .def_rw("stream_floor_s", &KernelConstants::stream_floor_s)
      .def_rw("alone_kernel_overhead_s", &KernelConstants::alone_kernel_overhead_s)
      .def_rw("alone_stream_overhead_s", &KernelConstants::alone_stream_overhead_s)
      .def_rw("softmax_bandwidth_share", &KernelConstants::softmax_bandwidth_share)
      .def_rw("norm_bandwidth_share", &KernelConstants::norm_bandwidth_share)
      .def_rw("widening_cast_bandwidth_share", &KernelConstants::widening_cast_bandwidth_share)
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
      .def_rw("fp4_matrix_flops_per_s", &DeviceSpec::fp4_matrix_flops_per_s)
      .def_rw("int8_matrix_ops_per_s", &DeviceSpec::int8_matrix_ops_per_s)
      .def_rw("kernel_launch_overhead_s", &DeviceSpec::kernel_launch_overhead_s)
      .def_rw("runtime_reserved_bytes", &DeviceSpec::runtime_reserved_bytes)
      .def_rw("num_compute_units", &DeviceSpec::num_compute_units)
      .def_rw("clock_hz", &DeviceSpec::clock_hz)
      .def_rw("l2_cache_bytes", &DeviceSpec::l2_cache_bytes)
      .def_rw("special_function_ops_per_clock", &DeviceSpec::special_function_ops_per_clock)
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

  nb::enum_<DeviceParameter>(m, "DeviceParameter")
      .value("peak_flops_per_s", DeviceParameter::peak_flops_per_s)
      .value("memory_bandwidth_bytes_per_s", DeviceParameter::memory_bandwidth_bytes_per_s)
      .value("memory_bytes", DeviceParameter::memory_bytes)
      .value("clock_hz", DeviceParameter::clock_hz);
  m.def("device_parameter_name", &device_parameter_name, nb::arg("parameter"));
  m.def("device_parameters", &device_parameters);
  m.def("with_device_parameter", &with_device_parameter, nb::arg("device"), nb::arg("parameter"),
        nb::arg("value"), nb::arg("matmul_dtype") = DType::bf16, nb::arg("allow_tf32") = false);

  nb::class_<Fabric>(m, "Fabric")
      .def(nb::init<>())
      .def_rw("bandwidth_bytes_per_s", &Fabric::bandwidth_bytes_per_s)
      .def_rw("latency_s", &Fabric::latency_s)
      .def_rw("efficiency", &Fabric::efficiency);
  nb::class_<HostSpec>(m, "HostSpec")
      .def(nb::init<>())
      .def_rw("memory_bytes", &HostSpec::memory_bytes)
      .def_rw("memory_bandwidth_bytes_per_s", &HostSpec::memory_bandwidth_bytes_per_s)
      .def_rw("link_bytes_per_s", &HostSpec::link_bytes_per_s)
      .def("given", &HostSpec::given);
  nb::class_<SystemSpec>(m, "SystemSpec")
      .def(nb::init<>())
      .def_rw("id", &SystemSpec::id)
      .def_rw("name", &SystemSpec::name)
      .def_rw("device", &SystemSpec::device)
      .def_rw("gpus_per_node", &SystemSpec::gpus_per_node)
      .def_rw("scaleup_domain", &SystemSpec::scaleup_domain)
      .def_rw("scaleup", &SystemSpec::scaleup)
      .def_rw("in_network_reduction", &SystemSpec::in_network_reduction)
      .def_rw("mesh", &SystemSpec::mesh)
      .def_rw("nvls_efficiency", &SystemSpec::nvls_efficiency)
      .def_rw("nics_per_gpu", &SystemSpec::nics_per_gpu)
      .def_rw("scaleout", &SystemSpec::scaleout)
      .def_rw("launch_s", &SystemSpec::launch_s)
      .def_rw("library", &SystemSpec::library)
      .def_rw("custom_allreduce_s", &SystemSpec::custom_allreduce_s)
      .def_rw("custom_allreduce_bytes_per_s", &SystemSpec::custom_allreduce_bytes_per_s)
      .def_rw("custom_allreduce_max_bytes", &SystemSpec::custom_allreduce_max_bytes)
      .def_rw("host", &SystemSpec::host)
      .def("validate", &SystemSpec::validate);
  nb::enum_<CollectiveLibrary>(m, "CollectiveLibrary")
      .value("none", CollectiveLibrary::none)
      .value("nccl", CollectiveLibrary::nccl)
      .value("rccl", CollectiveLibrary::rccl);
  nb::enum_<CollectiveKind>(m, "CollectiveKind")
      .value("all_reduce", CollectiveKind::all_reduce)
      .value("all_gather", CollectiveKind::all_gather)
      .value("reduce_scatter", CollectiveKind::reduce_scatter)
      .value("all_to_all", CollectiveKind::all_to_all)
      .value("broadcast", CollectiveKind::broadcast)
      .value("send_recv", CollectiveKind::send_recv);
  nb::enum_<CollectiveAlgorithm>(m, "CollectiveAlgorithm")
      .value("automatic", CollectiveAlgorithm::automatic)
      .value("ring", CollectiveAlgorithm::ring)
      .value("tree", CollectiveAlgorithm::tree)
      .value("halving_doubling", CollectiveAlgorithm::halving_doubling)
      .value("nvls", CollectiveAlgorithm::nvls)
      .value("hierarchical", CollectiveAlgorithm::hierarchical)
      .value("pxn", CollectiveAlgorithm::pxn)
      .value("custom", CollectiveAlgorithm::custom);
  nb::class_<CollectiveQuery>(m, "CollectiveQuery")
      .def(nb::init<>())
      .def_rw("kind", &CollectiveQuery::kind)
      .def_rw("bytes", &CollectiveQuery::bytes)
      .def_rw("ranks", &CollectiveQuery::ranks)
      .def_rw("ranks_per_domain", &CollectiveQuery::ranks_per_domain)
      .def_rw("algorithm", &CollectiveQuery::algorithm);
  nb::class_<CollectiveEstimate>(m, "CollectiveEstimate")
      .def_ro("time_s", &CollectiveEstimate::time_s)
      .def_ro("algbw_bytes_per_s", &CollectiveEstimate::algbw_bytes_per_s)
      .def_ro("busbw_bytes_per_s", &CollectiveEstimate::busbw_bytes_per_s)
      .def_ro("algorithm", &CollectiveEstimate::algorithm)
      .def_ro("crosses_domains", &CollectiveEstimate::crosses_domains);
  m.def("estimate_collective", &estimate_collective, nb::arg("query"), nb::arg("system"));
  nb::class_<CommGroup>(m, "CommGroup")
      .def(nb::init<>())
      .def_rw("name", &CommGroup::name)
      .def_rw("size", &CommGroup::size)
      .def_rw("ranks_per_domain", &CommGroup::ranks_per_domain);
  m.def("place_groups", &place_groups, nb::arg("system"), nb::arg("inner_first"));
  m.def("busbw_factor", &busbw_factor, nb::arg("kind"), nb::arg("ranks"));
  m.def("with_scaleup_bandwidth", &with_scaleup_bandwidth, nb::arg("system"), nb::arg("bytes_per_s"));
}

}  // namespace accelsim::bindings
