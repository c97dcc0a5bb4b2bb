#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "accelsim/cost_model.h"
#include "accelsim/memory.h"
#include "accelsim/simulate.h"
#include "accelsim/plan.h"
#include "accelsim/training.h"
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
      .value("eager", AttentionImpl::eager)
      .value("flash1", AttentionImpl::flash1);

  // The options are plain values: copy.copy / copy.deepcopy (or the copy constructor) give an
  // independent copy of every field, nested options, system and groups included.
  nb::class_<CostOptions>(m, "CostOptions")
      .def(nb::init<>())
      .def(nb::init<const CostOptions&>(), nb::arg("other"))
      .def("__copy__", [](const CostOptions& o) { return CostOptions(o); })
      .def("__deepcopy__", [](const CostOptions& o, nb::handle) { return CostOptions(o); }, nb::arg("memo"))
      .def_rw("allow_tf32", &CostOptions::allow_tf32)
      .def_rw("include_launch_overhead", &CostOptions::include_launch_overhead)
      .def_rw("cuda_graphs", &CostOptions::cuda_graphs)
      .def_rw("host_overhead_per_kernel_s", &CostOptions::host_overhead_per_kernel_s)
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
      .def_ro("peak_segment_bytes", &MemoryProfile::peak_segment_bytes)
      .def_ro("host_bytes", &MemoryProfile::host_bytes);
  m.def("compute_memory_profile", &compute_memory_profile, nb::arg("graph"),
        nb::arg("policy") = ReleasePolicy::recorded, nb::arg("optimizer_on_host") = false);

  nb::class_<SimulateOptions>(m, "SimulateOptions")
      .def(nb::init<>())
      .def(nb::init<const SimulateOptions&>(), nb::arg("other"))
      .def("__copy__", [](const SimulateOptions& o) { return SimulateOptions(o); })
      .def("__deepcopy__", [](const SimulateOptions& o, nb::handle) { return SimulateOptions(o); },
           nb::arg("memo"))
      .def_rw("cost_model", &SimulateOptions::cost_model)
      .def_rw("cost", &SimulateOptions::cost)
      .def_rw("release_policy", &SimulateOptions::release_policy)
      .def_rw("fuse_elementwise", &SimulateOptions::fuse_elementwise)
      .def_rw("micro_batches", &SimulateOptions::micro_batches)
      .def_rw("system", &SimulateOptions::system)
      .def_rw("groups", &SimulateOptions::groups)
      .def_rw("overlap_tp_comm", &SimulateOptions::overlap_tp_comm)
      .def_rw("fp8_weight_cache", &SimulateOptions::fp8_weight_cache);

  nb::class_<OpResult>(m, "OpResult")
      .def_ro("node", &OpResult::node)
      .def_ro("fused_into", &OpResult::fused_into)
      .def_ro("count", &OpResult::count)
      .def_ro("cost", &OpResult::cost)
      .def_ro("start_s", &OpResult::start_s)
      .def_ro("end_s", &OpResult::end_s)
      .def_ro("energy_j", &OpResult::energy_j)
      .def_ro("overlapped_s", &OpResult::overlapped_s);

  nb::class_<UncoveredOp>(m, "UncoveredOp")
      .def_ro("op", &UncoveredOp::op)
      .def_ro("count", &UncoveredOp::count)
      .def_ro("time_s", &UncoveredOp::time_s);

  nb::class_<UnitSubstitution>(m, "UnitSubstitution")
      .def_ro("dtype", &UnitSubstitution::dtype)
      .def_ro("matrix", &UnitSubstitution::matrix)
      .def_ro("unit", &UnitSubstitution::unit)
      .def_ro("narrower", &UnitSubstitution::narrower)
      .def_ro("ops", &UnitSubstitution::ops)
      .def_ro("time_s", &UnitSubstitution::time_s);

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
      .def_ro("overlapped_communication_s", &SimulationResult::overlapped_communication_s)
      .def_ro("once_per_step_time_s", &SimulationResult::once_per_step_time_s)
      .def_ro("compute_utilization", &SimulationResult::compute_utilization)
      .def_ro("bandwidth_utilization", &SimulationResult::bandwidth_utilization)
      .def_ro("reference_peak_flops_per_s", &SimulationResult::reference_peak_flops_per_s)
      .def_ro("reference_dtype", &SimulationResult::reference_dtype)
      .def_ro("model_flops", &SimulationResult::model_flops)
      .def_ro("model_flops_utilization", &SimulationResult::model_flops_utilization)
      .def_ro("memory", &SimulationResult::memory)
      .def_ro("memory_capacity_bytes", &SimulationResult::memory_capacity_bytes)
      .def_ro("required_bytes", &SimulationResult::required_bytes)
      .def_ro("fits", &SimulationResult::fits)
      .def_ro("substitutions", &SimulationResult::substitutions)
      .def_ro("narrower_precision", &SimulationResult::narrower_precision)
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

  nb::class_<ParallelLayout>(m, "ParallelLayout")
      .def(nb::init<>())
      .def_rw("tp", &ParallelLayout::tp)
      .def_rw("pp", &ParallelLayout::pp)
      .def_rw("dp", &ParallelLayout::dp)
      .def_rw("cp", &ParallelLayout::cp)
      .def_rw("ep", &ParallelLayout::ep)
      .def_rw("sequence_parallel", &ParallelLayout::sequence_parallel)
      .def_rw("summa", &ParallelLayout::summa)
      .def_rw("micro_batch", &ParallelLayout::micro_batch)
      .def_rw("global_batch", &ParallelLayout::global_batch)
      .def_rw("virtual_stages", &ParallelLayout::virtual_stages)
      .def_rw("gpipe", &ParallelLayout::gpipe)
      .def_rw("zero", &ParallelLayout::zero)
      .def_rw("overlap_grad_reduce", &ParallelLayout::overlap_grad_reduce)
      .def_rw("overlap_param_gather", &ParallelLayout::overlap_param_gather)
      .def_rw("order", &ParallelLayout::order)
      .def_rw("offload_optimizer", &ParallelLayout::offload_optimizer)
      .def_rw("offload_parameters", &ParallelLayout::offload_parameters)
      .def_rw("offload_activations", &ParallelLayout::offload_activations)
      .def("offloads", &ParallelLayout::offloads)
      .def("gpus", &ParallelLayout::gpus);
  nb::class_<TrainingEstimate>(m, "TrainingEstimate")
      .def_ro("feasible", &TrainingEstimate::feasible)
      .def_ro("reason", &TrainingEstimate::reason)
      .def_ro("micro_batches", &TrainingEstimate::micro_batches)
      .def_ro("stage_layers", &TrainingEstimate::stage_layers)
      .def_ro("forward_s", &TrainingEstimate::forward_s)
      .def_ro("backward_s", &TrainingEstimate::backward_s)
      .def_ro("activation_bytes", &TrainingEstimate::activation_bytes)
      .def_ro("clock_hz", &TrainingEstimate::clock_hz)
      .def_ro("step_s", &TrainingEstimate::step_s)
      .def_ro("compute_s", &TrainingEstimate::compute_s)
      .def_ro("tp_comm_s", &TrainingEstimate::tp_comm_s)
      .def_ro("bubble_s", &TrainingEstimate::bubble_s)
      .def_ro("pp_comm_s", &TrainingEstimate::pp_comm_s)
      .def_ro("p2p_send_s", &TrainingEstimate::p2p_send_s)
      .def_ro("dp_comm_s", &TrainingEstimate::dp_comm_s)
      .def_ro("overlap_slowdown_s", &TrainingEstimate::overlap_slowdown_s)
      .def_ro("optimizer_s", &TrainingEstimate::optimizer_s)
      .def_ro("offload_s", &TrainingEstimate::offload_s)
      .def_ro("host_optimizer_s", &TrainingEstimate::host_optimizer_s)
      .def_ro("host_memory_per_node_bytes", &TrainingEstimate::host_memory_per_node_bytes)
      .def_ro("stage_parameter_bytes", &TrainingEstimate::stage_parameter_bytes)
      .def_ro("stage_gradient_bytes", &TrainingEstimate::stage_gradient_bytes)
      .def_ro("stage_trainable_bytes", &TrainingEstimate::stage_trainable_bytes)
      .def_ro("dp_ranks", &TrainingEstimate::dp_ranks)
      .def_ro("p2p_bytes", &TrainingEstimate::p2p_bytes)
      .def_ro("tokens_per_s", &TrainingEstimate::tokens_per_s)
      .def_ro("model_flops", &TrainingEstimate::model_flops)
      .def_ro("tflops_per_gpu", &TrainingEstimate::tflops_per_gpu)
      .def_ro("mfu", &TrainingEstimate::mfu)
      .def_ro("memory_per_gpu_bytes", &TrainingEstimate::memory_per_gpu_bytes)
      .def_ro("reserved_per_gpu_bytes", &TrainingEstimate::reserved_per_gpu_bytes)
      .def_ro("fits", &TrainingEstimate::fits);
  m.def(
      "estimate_training",
      [](const ModelSpec& model, const BuildOptions& base, const ParallelLayout& layout,
         const DeviceSpec& device, const SystemSpec& system, const SimulateOptions& options) {
        nb::gil_scoped_release release;
        return estimate_training(model, base, layout, device, system, options);
      },
      nb::arg("model"), nb::arg("base"), nb::arg("layout"), nb::arg("device"), nb::arg("system"),
      nb::arg("options"));

  nb::class_<PlanSpace>(m, "PlanSpace")
      .def(nb::init<>())
      .def_rw("gpus", &PlanSpace::gpus)
      .def_rw("global_batch", &PlanSpace::global_batch)
      .def_rw("tp", &PlanSpace::tp)
      .def_rw("cp", &PlanSpace::cp)
      .def_rw("ep", &PlanSpace::ep)
      .def_rw("pp", &PlanSpace::pp)
      .def_rw("micro_batch", &PlanSpace::micro_batch)
      .def_rw("virtual_stages", &PlanSpace::virtual_stages)
      .def_rw("zero", &PlanSpace::zero)
      .def_rw("recompute", &PlanSpace::recompute)
      .def_rw("sequence_parallel", &PlanSpace::sequence_parallel)
      .def_rw("summa", &PlanSpace::summa)
      .def_rw("orders", &PlanSpace::orders)
      .def_rw("offload", &PlanSpace::offload);
  m.attr("OFFLOAD_OPTIMIZER") = kOffloadOptimizer;
  m.attr("OFFLOAD_PARAMETERS") = kOffloadParameters;
  m.attr("OFFLOAD_ACTIVATIONS") = kOffloadActivations;
  nb::class_<PlanCandidate>(m, "PlanCandidate")
      .def_ro("layout", &PlanCandidate::layout)
      .def_ro("recompute", &PlanCandidate::recompute)
      .def_ro("estimate", &PlanCandidate::estimate);
  nb::class_<PlanResult>(m, "PlanResult")
      .def_ro("candidates", &PlanResult::candidates)
      .def_ro("evaluated", &PlanResult::evaluated)
      .def_ro("feasible", &PlanResult::feasible)
      .def_ro("profiles", &PlanResult::profiles)
      .def_ro("best", &PlanResult::best)
      .def_ro("best_infeasible", &PlanResult::best_infeasible)
      .def_ro("pruned", &PlanResult::pruned);
  m.def("default_plan_space", &default_plan_space, nb::arg("model"), nb::arg("gpus"),
        nb::arg("global_batch"), nb::arg("seq"));
  // The search runs without the GIL; the progress callback takes it back for each call.
  m.def(
      "plan_training",
      [](const ModelSpec& model, const BuildOptions& base, const PlanSpace& space,
         const DeviceSpec& device, const SystemSpec& system, const SimulateOptions& options,
         int64_t top, int threads, nb::object progress) {
        std::function<void(int64_t, int64_t)> report;
        if (!progress.is_none()) {
          report = [progress](int64_t done, int64_t total) {
            nb::gil_scoped_acquire acquire;
            progress(done, total);
          };
        }
        nb::gil_scoped_release release;
        return plan_training(model, base, space, device, system, options, top, threads, report);
      },
      nb::arg("model"), nb::arg("base"), nb::arg("space"), nb::arg("device"), nb::arg("system"),
      nb::arg("options"), nb::arg("top") = 10, nb::arg("threads") = 0,
      nb::arg("progress") = nb::none());
}

}  // namespace accelsim::bindings
