#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "accelsim/cost_model.h"
#include "accelsim/memory.h"
#include "accelsim/simulate.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {

void bind_simulate(nb::module_& m) {
  nb::enum_<Bound>(m, "Bound")
      .value("none", Bound::none)
      .value("compute", Bound::compute)
      .value("memory", Bound::memory);

  nb::enum_<AttentionImpl>(m, "AttentionImpl")
      .value("flash2", AttentionImpl::flash2)
      .value("flash3", AttentionImpl::flash3)
      .value("cudnn", AttentionImpl::cudnn)
      .value("eager", AttentionImpl::eager);

  nb::class_<CostOptions>(m, "CostOptions")
      .def(nb::init<>())
      .def_rw("allow_tf32", &CostOptions::allow_tf32)
      .def_rw("include_launch_overhead", &CostOptions::include_launch_overhead)
      .def_rw("cuda_graphs", &CostOptions::cuda_graphs)
      .def_rw("clock_hz", &CostOptions::clock_hz)
      .def_rw("attention_impl", &CostOptions::attention_impl);

  nb::class_<OpCost>(m, "OpCost")
      .def_ro("time_s", &OpCost::time_s)
      .def_ro("compute_time_s", &OpCost::compute_time_s)
      .def_ro("memory_time_s", &OpCost::memory_time_s)
      .def_ro("launch_overhead_s", &OpCost::launch_overhead_s)
      .def_ro("peak_flops_per_s", &OpCost::peak_flops_per_s)
      .def_ro("bound", &OpCost::bound)
      .def_ro("peak_fallback", &OpCost::peak_fallback);

  m.def("cost_model_names", &cost_model_names);

  nb::enum_<ReleasePolicy>(m, "ReleasePolicy")
      .value("recorded", ReleasePolicy::recorded)
      .value("last_use", ReleasePolicy::last_use);

  nb::class_<MemoryProfile>(m, "MemoryProfile")
      .def_ro("parameter_bytes", &MemoryProfile::parameter_bytes)
      .def_ro("buffer_bytes", &MemoryProfile::buffer_bytes)
      .def_ro("input_bytes", &MemoryProfile::input_bytes)
      .def_ro("optimizer_state_bytes", &MemoryProfile::optimizer_state_bytes)
      .def_ro("peak_gradient_bytes", &MemoryProfile::peak_gradient_bytes)
      .def_ro("resident_bytes", &MemoryProfile::resident_bytes)
      .def_ro("peak_bytes", &MemoryProfile::peak_bytes)
      .def_ro("peak_activation_bytes", &MemoryProfile::peak_activation_bytes)
      .def_ro("peak_node", &MemoryProfile::peak_node)
      .def_ro("live_bytes", &MemoryProfile::live_bytes)
      .def_ro("live_bytes_after", &MemoryProfile::live_bytes_after)
      .def_ro("peak_allocated_bytes", &MemoryProfile::peak_allocated_bytes)
      .def_ro("peak_reserved_bytes", &MemoryProfile::peak_reserved_bytes)
      .def_ro("peak_segment_bytes", &MemoryProfile::peak_segment_bytes);
  m.def("compute_memory_profile", &compute_memory_profile, nb::arg("graph"),
        nb::arg("policy") = ReleasePolicy::recorded);

  nb::class_<SimulateOptions>(m, "SimulateOptions")
      .def(nb::init<>())
      .def_rw("cost_model", &SimulateOptions::cost_model)
      .def_rw("cost", &SimulateOptions::cost)
      .def_rw("release_policy", &SimulateOptions::release_policy)
      .def_rw("fuse_elementwise", &SimulateOptions::fuse_elementwise)
      .def_rw("micro_batches", &SimulateOptions::micro_batches)
      .def_rw("system", &SimulateOptions::system)
      .def_rw("groups", &SimulateOptions::groups);
  nb::class_<CommGroup>(m, "CommGroup")
      .def(nb::init<>())
      .def_rw("name", &CommGroup::name)
      .def_rw("size", &CommGroup::size)
      .def_rw("ranks_per_domain", &CommGroup::ranks_per_domain);

  nb::class_<OpResult>(m, "OpResult")
      .def_ro("node", &OpResult::node)
      .def_ro("fused_into", &OpResult::fused_into)
      .def_ro("count", &OpResult::count)
      .def_ro("cost", &OpResult::cost)
      .def_ro("start_s", &OpResult::start_s)
      .def_ro("end_s", &OpResult::end_s)
      .def_ro("energy_j", &OpResult::energy_j);

  nb::class_<UncoveredOp>(m, "UncoveredOp")
      .def_ro("op", &UncoveredOp::op)
      .def_ro("count", &UncoveredOp::count)
      .def_ro("time_s", &UncoveredOp::time_s);

  nb::class_<SimulationResult>(m, "SimulationResult")
      .def_ro("device_id", &SimulationResult::device_id)
      .def_ro("latency_s", &SimulationResult::latency_s)
      .def_ro("total_flops", &SimulationResult::total_flops)
      .def_ro("total_bytes", &SimulationResult::total_bytes)
      .def_ro("compute_bound_time_s", &SimulationResult::compute_bound_time_s)
      .def_ro("memory_bound_time_s", &SimulationResult::memory_bound_time_s)
      .def_ro("launch_overhead_time_s", &SimulationResult::launch_overhead_time_s)
      .def_ro("forward_time_s", &SimulationResult::forward_time_s)
      .def_ro("backward_time_s", &SimulationResult::backward_time_s)
      .def_ro("optimizer_time_s", &SimulationResult::optimizer_time_s)
      .def_ro("energy_j", &SimulationResult::energy_j)
      .def_ro("num_kernels", &SimulationResult::num_kernels)
      .def_ro("num_collectives", &SimulationResult::num_collectives)
      .def_ro("communication_bytes", &SimulationResult::communication_bytes)
      .def_ro("communication_time_s", &SimulationResult::communication_time_s)
      .def_ro("compute_utilization", &SimulationResult::compute_utilization)
      .def_ro("bandwidth_utilization", &SimulationResult::bandwidth_utilization)
      .def_ro("reference_peak_flops_per_s", &SimulationResult::reference_peak_flops_per_s)
      .def_ro("model_flops", &SimulationResult::model_flops)
      .def_ro("model_flops_utilization", &SimulationResult::model_flops_utilization)
      .def_ro("memory", &SimulationResult::memory)
      .def_ro("memory_capacity_bytes", &SimulationResult::memory_capacity_bytes)
      .def_ro("required_bytes", &SimulationResult::required_bytes)
      .def_ro("fits", &SimulationResult::fits)
      .def_ro("used_peak_fallback", &SimulationResult::used_peak_fallback)
      .def_ro("ops", &SimulationResult::ops)
      .def_ro("uncovered_ops", &SimulationResult::uncovered_ops);

  m.def(
      "fusion_saving_s",
      [](const Graph& g, const DeviceSpec& d, const SimulateOptions& o, const SimulationResult& r) {
        nb::gil_scoped_release release;
        return fusion_saving_s(g, d, o, r);
      },
      nb::arg("graph"), nb::arg("device"), nb::arg("options"), nb::arg("simulated"));
  m.def(
      "simulate",
      [](const Graph& graph, const DeviceSpec& device, const SimulateOptions& options) {
        nb::gil_scoped_release release;
        return simulate(graph, device, options);
      },
      nb::arg("graph"), nb::arg("device"), nb::arg("options") = SimulateOptions{});
}

}  // namespace accelsim::bindings
