#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "accelsim/advice.h"
#include "accelsim/breakdown.h"
#include "accelsim/fit.h"
#include "accelsim/kernel_query.h"
#include "accelsim/regression.h"
#include "accelsim/timeline.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {

void bind_report(nb::module_& m) {
  nb::enum_<GroupBy>(m, "GroupBy")
      .value("op", GroupBy::op)
      .value("op_class", GroupBy::op_class)
      .value("module", GroupBy::module)
      .value("layer", GroupBy::layer)
      .value("module_type", GroupBy::module_type);

  nb::class_<Group>(m, "Group")
      .def_ro("name", &Group::name)
      .def_ro("count", &Group::count)
      .def_ro("time_s", &Group::time_s)
      .def_ro("fraction", &Group::fraction)
      .def_ro("flops", &Group::flops)
      .def_ro("bytes", &Group::bytes)
      .def_ro("compute_bound_time_s", &Group::compute_bound_time_s)
      .def_ro("memory_bound_time_s", &Group::memory_bound_time_s)
      .def_ro("dominant_bound", &Group::dominant_bound);
  m.def("group_ops", &group_ops, nb::arg("graph"), nb::arg("result"), nb::arg("by"));
  m.def("layer_of", &layer_of, nb::arg("module_path"));

  nb::enum_<HintKind>(m, "HintKind")
      .value("out_of_memory", HintKind::out_of_memory)
      .value("fuse_memory_bound", HintKind::fuse_memory_bound)
      .value("use_flash_attention", HintKind::use_flash_attention)
      .value("matmul_dominated", HintKind::matmul_dominated)
      .value("low_precision_available", HintKind::low_precision_available)
      .value("launch_bound", HintKind::launch_bound)
      .value("peak_fallback", HintKind::peak_fallback)
      .value("uncovered_ops", HintKind::uncovered_ops)
      .value("communication_not_timed", HintKind::communication_not_timed)
      .value("masked_attention_pairs", HintKind::masked_attention_pairs);

  nb::class_<Hint>(m, "Hint")
      .def_ro("kind", &Hint::kind)
      .def_ro("fraction", &Hint::fraction)
      .def_ro("value", &Hint::value)
      .def_ro("subject", &Hint::subject);
  m.def("advise", &advise, nb::arg("graph"), nb::arg("result"), nb::arg("device"));

  nb::class_<DeviceVerdict>(m, "DeviceVerdict")
      .def_ro("device_id", &DeviceVerdict::device_id)
      .def_ro("fits", &DeviceVerdict::fits)
      .def_ro("dominant_bound", &DeviceVerdict::dominant_bound)
      .def_ro("cost_per_run_usd", &DeviceVerdict::cost_per_run_usd)
      .def_ro("speedup_vs_slowest", &DeviceVerdict::speedup_vs_slowest)
      .def_ro("overkill", &DeviceVerdict::overkill)
      .def_ro("overkill_reason", &DeviceVerdict::overkill_reason)
      .def_ro("narrower_precision", &DeviceVerdict::narrower_precision)
      .def_ro("ranked", &DeviceVerdict::ranked);
  nb::class_<Comparison>(m, "Comparison")
      .def_ro("devices", &Comparison::devices)
      .def_ro("fastest_index", &Comparison::fastest_index)
      .def_ro("best_value_index", &Comparison::best_value_index);
  m.def("compare_devices", &compare_devices, nb::arg("results"), nb::arg("devices"));
  m.def("dominant_bound", &dominant_bound, nb::arg("result"));

  nb::class_<MetricCheck>(m, "MetricCheck")
      .def_ro("metric", &MetricCheck::metric)
      .def_ro("baseline", &MetricCheck::baseline)
      .def_ro("current", &MetricCheck::current)
      .def_ro("change_fraction", &MetricCheck::change_fraction)
      .def_ro("max_increase_fraction", &MetricCheck::max_increase_fraction)
      .def_ro("exceeded", &MetricCheck::exceeded);
  m.def("check_metric", &check_metric, nb::arg("metric"), nb::arg("baseline"),
        nb::arg("current"), nb::arg("max_increase_fraction"));

  nb::enum_<KernelKind>(m, "KernelKind")
      .value("matmul", KernelKind::matmul)
      .value("attention", KernelKind::attention)
      .value("memory", KernelKind::memory);
  nb::class_<KernelQuery>(m, "KernelQuery")
      .def(nb::init<>())
      .def_rw("kind", &KernelQuery::kind)
      .def_rw("dtype", &KernelQuery::dtype)
      .def_rw("m", &KernelQuery::m)
      .def_rw("n", &KernelQuery::n)
      .def_rw("k", &KernelQuery::k)
      .def_rw("batch", &KernelQuery::batch)
      .def_rw("heads", &KernelQuery::heads)
      .def_rw("kv_heads", &KernelQuery::kv_heads)
      .def_rw("seq_q", &KernelQuery::seq_q)
      .def_rw("seq_k", &KernelQuery::seq_k)
      .def_rw("head_dim", &KernelQuery::head_dim)
      .def_rw("causal", &KernelQuery::causal)
      .def_rw("forward", &KernelQuery::forward)
      .def_rw("backward", &KernelQuery::backward)
      .def_rw("impl", &KernelQuery::impl)
      .def_rw("bytes", &KernelQuery::bytes)
      .def_rw("elements", &KernelQuery::elements)
      .def_rw("op", &KernelQuery::op)
      .def_rw("timed_alone", &KernelQuery::timed_alone)
      .def_rw("heads_first_inputs", &KernelQuery::heads_first_inputs)
      .def_rw("aten_kernel", &KernelQuery::aten_kernel);
  nb::class_<KernelEstimate>(m, "KernelEstimate")
      .def_ro("time_s", &KernelEstimate::time_s)
      .def_ro("roofline_time_s", &KernelEstimate::roofline_time_s)
      .def_ro("flops", &KernelEstimate::flops)
      .def_ro("bytes", &KernelEstimate::bytes)
      .def_ro("achieved_flops_per_s", &KernelEstimate::achieved_flops_per_s)
      .def_ro("achieved_bytes_per_s", &KernelEstimate::achieved_bytes_per_s)
      .def_ro("bound", &KernelEstimate::bound);
  m.def(
      "estimate_kernel",
      [](const KernelQuery& q, const DeviceSpec& d, const std::string& model, const CostOptions& o) {
        return estimate_kernel(q, d, model, o);
      },
      nb::arg("query"), nb::arg("device"), nb::arg("cost_model"), nb::arg("options"));
  nb::class_<ErrorStats>(m, "ErrorStats")
      .def_ro("rows", &ErrorStats::rows)
      .def_ro("median_abs_error", &ErrorStats::median_abs_error)
      .def_ro("p90_abs_error", &ErrorStats::p90_abs_error)
      .def_ro("max_abs_error", &ErrorStats::max_abs_error)
      .def_ro("median_signed_error", &ErrorStats::median_signed_error);
  m.def("error_stats", &error_stats, nb::arg("predicted"), nb::arg("measured"));
  nb::class_<ClassErrors>(m, "ClassErrors")
      .def(nb::init<>())
      .def_rw("gemm", &ClassErrors::gemm)
      .def_rw("attention", &ClassErrors::attention)
      .def_rw("memory", &ClassErrors::memory);
  m.def("latency_error_band", &latency_error_band, nb::arg("result"), nb::arg("errors"));
  m.def(
      "fit_kernel_constants",
      [](const std::vector<KernelQuery>& q, const std::vector<double>& t, const DeviceSpec& d,
         const std::vector<std::string>& keep) {
        nb::gil_scoped_release release;
        return fit_kernel_constants(q, t, d, keep);
      },
      nb::arg("queries"), nb::arg("measured_s"), nb::arg("device"),
      nb::arg("keep") = std::vector<std::string>{});
  m.def(
      "fit_sustained_clock_fraction",
      [](const std::vector<KernelQuery>& q, const std::vector<double>& t, const DeviceSpec& d) {
        int used = 0;
        const double fraction = fit_sustained_clock_fraction(q, t, d, &used);
        return std::make_pair(fraction, used);
      },
      nb::arg("queries"), nb::arg("measured_s"), nb::arg("device"));
  m.attr("SUSTAINED_KERNEL_S") = kSustainedKernelS;
  nb::class_<FitResult>(m, "FitResult")
      .def_ro("largest", &FitResult::largest)
      .def_ro("peak_bytes", &FitResult::peak_bytes)
      .def_ro("next_peak_bytes", &FitResult::next_peak_bytes)
      .def_ro("at_limit", &FitResult::at_limit)
      .def_ro("probes", &FitResult::probes)
      .def_ro("monotone", &FitResult::monotone);
  // The probe calls back into Python (a build or a capture): the GIL stays held.
  m.def("largest_fitting", &largest_fitting, nb::arg("peak_at"), nb::arg("capacity_bytes"),
        nb::arg("max_value"));

  nb::enum_<Stream>(m, "Stream")
      .value("compute", Stream::compute)
      .value("communication", Stream::communication);
  nb::class_<TimelineSpan>(m, "TimelineSpan")
      .def_ro("node", &TimelineSpan::node)
      .def_ro("micro_batch", &TimelineSpan::micro_batch)
      .def_ro("stream", &TimelineSpan::stream)
      .def_ro("start_s", &TimelineSpan::start_s)
      .def_ro("end_s", &TimelineSpan::end_s);
  nb::class_<MemorySample>(m, "MemorySample")
      .def_ro("t_s", &MemorySample::t_s)
      .def_ro("live_bytes", &MemorySample::live_bytes);
  nb::class_<ExecutionTimeline>(m, "ExecutionTimeline")
      .def_ro("spans", &ExecutionTimeline::spans)
      .def_ro("memory", &ExecutionTimeline::memory)
      .def_ro("latency_s", &ExecutionTimeline::latency_s);
  m.def("execution_timeline", &execution_timeline, nb::arg("graph"), nb::arg("result"), nb::arg("options"));
  m.def("empirical_cdf", &empirical_cdf, nb::arg("values"), nb::arg("max_points"));
  m.def("downsample_memory", &downsample_memory, nb::arg("memory"), nb::arg("max_points"));
  nb::class_<RooflineCeiling>(m, "RooflineCeiling")
      .def_ro("unit", &RooflineCeiling::unit)
      .def_ro("flops_per_s", &RooflineCeiling::flops_per_s)
      .def_ro("ridge_intensity", &RooflineCeiling::ridge_intensity);
  nb::class_<RooflinePoint>(m, "RooflinePoint")
      .def_ro("node", &RooflinePoint::node)
      .def_ro("flops", &RooflinePoint::flops)
      .def_ro("bytes", &RooflinePoint::bytes)
      .def_ro("time_s", &RooflinePoint::time_s)
      .def_ro("intensity", &RooflinePoint::intensity)
      .def_ro("achieved_flops_per_s", &RooflinePoint::achieved_flops_per_s)
      .def_ro("unit", &RooflinePoint::unit)
      .def_ro("bound", &RooflinePoint::bound);
  nb::class_<RooflineChart>(m, "RooflineChart")
      .def_ro("bandwidth_bytes_per_s", &RooflineChart::bandwidth_bytes_per_s)
      .def_ro("ceilings", &RooflineChart::ceilings)
      .def_ro("points", &RooflineChart::points);
  m.def("roofline_chart", &roofline_chart, nb::arg("graph"), nb::arg("result"), nb::arg("device"),
        nb::arg("cost"));
}

}  // namespace accelsim::bindings
