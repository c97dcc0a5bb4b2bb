// serve.h: serving replicas, workloads and the serving simulation.
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "accelsim/serve.h"
#include "accelsim/serve_plan.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {
namespace {

std::function<void(int64_t, int64_t)> callback(nb::object progress) {
  if (progress.is_none()) return {};
  return [progress](int64_t done, int64_t total) {
    nb::gil_scoped_acquire acquire;
    progress(done, total);
  };
}

}  // namespace

void bind_serve(nb::module_& m) {
  nb::enum_<SpeculativeKind>(m, "SpeculativeKind")
      .value("none", SpeculativeKind::none)
      .value("draft_model", SpeculativeKind::draft_model)
      .value("eagle", SpeculativeKind::eagle)
      .value("mtp", SpeculativeKind::mtp);
  nb::class_<SpeculativeConfig>(m, "SpeculativeConfig")
      .def(nb::init<>())
      .def_rw("kind", &SpeculativeConfig::kind)
      .def_rw("tokens", &SpeculativeConfig::tokens)
      .def_rw("acceptance", &SpeculativeConfig::acceptance)
      .def_rw("draft", &SpeculativeConfig::draft)
      .def_prop_ro("expected_tokens", &SpeculativeConfig::expected_tokens);

  nb::class_<ReplicaConfig>(m, "ReplicaConfig")
      .def(nb::init<>())
      .def_rw("tp", &ReplicaConfig::tp)
      .def_rw("pp", &ReplicaConfig::pp)
      .def_rw("dp_attention", &ReplicaConfig::dp_attention)
      .def_rw("system", &ReplicaConfig::system)
      .def_rw("build", &ReplicaConfig::build)
      .def_rw("simulate", &ReplicaConfig::simulate)
      .def_rw("gpu_memory_utilization", &ReplicaConfig::gpu_memory_utilization)
      .def_rw("block_size", &ReplicaConfig::block_size)
      .def_rw("max_batched_tokens", &ReplicaConfig::max_batched_tokens)
      .def_rw("decode_kv_per_query_head", &ReplicaConfig::decode_kv_per_query_head)
      .def_rw("custom_allreduce", &ReplicaConfig::custom_allreduce)
      .def_rw("speculative", &ReplicaConfig::speculative)
      .def_rw("host_kv_bytes", &ReplicaConfig::host_kv_bytes)
      .def_rw("host_link_bytes_per_s", &ReplicaConfig::host_link_bytes_per_s);

  nb::class_<StepBatch>(m, "StepBatch")
      .def(nb::init<>())
      .def_rw("prefill", &StepBatch::prefill)
      .def_rw("decode_seqs", &StepBatch::decode_seqs)
      .def_rw("decode_context", &StepBatch::decode_context)
      .def_rw("sampling", &StepBatch::sampling)
      .def_rw("host_loaded_tokens", &StepBatch::host_loaded_tokens);

  nb::class_<StepTime>(m, "StepTime")
      .def_ro("body_s", &StepTime::body_s)
      .def_ro("head_s", &StepTime::head_s)
      .def_ro("attention_s", &StepTime::attention_s)
      .def_ro("pipeline_s", &StepTime::pipeline_s)
      .def_ro("draft_s", &StepTime::draft_s)
      .def_ro("host_load_s", &StepTime::host_load_s)
      .def_prop_ro("total_s", &StepTime::total_s);

  nb::class_<ReplicaMemory>(m, "ReplicaMemory")
      .def_ro("capacity_bytes", &ReplicaMemory::capacity_bytes)
      .def_ro("usable_bytes", &ReplicaMemory::usable_bytes)
      .def_ro("weight_bytes", &ReplicaMemory::weight_bytes)
      .def_ro("activation_bytes", &ReplicaMemory::activation_bytes)
      .def_ro("kv_bytes", &ReplicaMemory::kv_bytes)
      .def_ro("kv_bytes_per_token", &ReplicaMemory::kv_bytes_per_token)
      .def_ro("draft_weight_bytes", &ReplicaMemory::draft_weight_bytes)
      .def_ro("kv_blocks", &ReplicaMemory::kv_blocks)
      .def_ro("host_kv_blocks", &ReplicaMemory::host_kv_blocks);

  nb::class_<IterationModel>(m, "IterationModel")
      .def(nb::init<const ModelSpec&, const DeviceSpec&, const ReplicaConfig&>(), nb::arg("model"),
           nb::arg("device"), nb::arg("replica"))
      .def("step_time", &IterationModel::step_time)
      .def("body_time", &IterationModel::body_time)
      .def("head_time", &IterationModel::head_time)
      .def("prefill_attention_time", &IterationModel::prefill_attention_time)
      .def("decode_attention_time", &IterationModel::decode_attention_time)
      .def("verify_attention_time", &IterationModel::verify_attention_time)
      .def_prop_ro("memory", &IterationModel::memory)
      .def_prop_ro("replica", &IterationModel::replica)
      .def_prop_ro("gpus", &IterationModel::gpus)
      .def_prop_ro("profiles_built", &IterationModel::profiles_built);

  nb::enum_<ArrivalProcess>(m, "ArrivalProcess")
      .value("poisson", ArrivalProcess::poisson)
      .value("gamma", ArrivalProcess::gamma)
      .value("constant", ArrivalProcess::constant);
  nb::enum_<LengthDistribution>(m, "LengthDistribution")
      .value("fixed", LengthDistribution::fixed)
      .value("uniform", LengthDistribution::uniform)
      .value("lognormal", LengthDistribution::lognormal);

  nb::class_<LengthSpec>(m, "LengthSpec")
      .def(nb::init<>())
      .def_rw("kind", &LengthSpec::kind)
      .def_rw("value", &LengthSpec::value)
      .def_rw("min", &LengthSpec::min)
      .def_rw("max", &LengthSpec::max)
      .def_rw("mu", &LengthSpec::mu)
      .def_rw("sigma", &LengthSpec::sigma);

  nb::class_<WorkloadSpec>(m, "WorkloadSpec")
      .def(nb::init<>())
      .def_rw("requests", &WorkloadSpec::requests)
      .def_rw("qps", &WorkloadSpec::qps)
      .def_rw("arrival", &WorkloadSpec::arrival)
      .def_rw("burstiness", &WorkloadSpec::burstiness)
      .def_rw("input", &WorkloadSpec::input)
      .def_rw("output", &WorkloadSpec::output)
      .def_rw("seed", &WorkloadSpec::seed)
      .def_rw("shared_prefix", &WorkloadSpec::shared_prefix);

  nb::class_<Workload>(m, "Workload")
      .def_prop_ro("size", [](const Workload& w) { return static_cast<int64_t>(w.requests.size()); })
      .def_prop_ro("arrival_s",
                   [](const Workload& w) {
                     std::vector<double> v;
                     v.reserve(w.requests.size());
                     for (const Request& r : w.requests) v.push_back(r.arrival_s);
                     return v;
                   })
      .def_prop_ro("input_len",
                   [](const Workload& w) {
                     std::vector<int64_t> v;
                     v.reserve(w.requests.size());
                     for (const Request& r : w.requests) v.push_back(r.input_len);
                     return v;
                   })
      .def_prop_ro("output_len", [](const Workload& w) {
        std::vector<int64_t> v;
        v.reserve(w.requests.size());
        for (const Request& r : w.requests) v.push_back(r.output_len);
        return v;
      });

  m.def("generate_workload", &generate_workload, nb::arg("spec"));
  m.def("workload_from_arrays", &workload_from_arrays, nb::arg("arrival_s"), nb::arg("input_len"),
        nb::arg("output_len"), nb::arg("hashes"), nb::arg("hash_offsets"), nb::arg("hash_block_tokens"),
        nb::arg("spec"), nb::arg("rescale_to_qps") = false);
  m.def("fit_lognormal", &fit_lognormal, nb::arg("lengths"));

  nb::enum_<SchedulerKind>(m, "SchedulerKind")
      .value("static", SchedulerKind::static_batch)
      .value("orca", SchedulerKind::orca)
      .value("vllm", SchedulerKind::vllm)
      .value("sarathi", SchedulerKind::sarathi);
  nb::enum_<AdmissionOrder>(m, "AdmissionOrder").value("fcfs", AdmissionOrder::fcfs).value("sjf", AdmissionOrder::sjf);
  nb::enum_<RouterKind>(m, "RouterKind")
      .value("round_robin", RouterKind::round_robin)
      .value("least_outstanding", RouterKind::least_outstanding);

  nb::class_<SchedulerConfig>(m, "SchedulerConfig")
      .def(nb::init<>())
      .def_rw("kind", &SchedulerConfig::kind)
      .def_rw("order", &SchedulerConfig::order)
      .def_rw("max_seqs", &SchedulerConfig::max_seqs)
      .def_rw("max_batched_tokens", &SchedulerConfig::max_batched_tokens)
      .def_rw("chunk", &SchedulerConfig::chunk)
      .def_rw("watermark", &SchedulerConfig::watermark)
      .def_rw("prefix_caching", &SchedulerConfig::prefix_caching);

  nb::class_<ServeConfig>(m, "ServeConfig")
      .def(nb::init<>())
      .def_rw("replicas", &ServeConfig::replicas)
      .def_rw("router", &ServeConfig::router)
      .def_rw("scheduler", &ServeConfig::scheduler)
      .def_rw("prefill_replicas", &ServeConfig::prefill_replicas)
      .def_rw("kv_transfer_bytes_per_s", &ServeConfig::kv_transfer_bytes_per_s)
      .def_rw("slo_ttft_s", &ServeConfig::slo_ttft_s)
      .def_rw("slo_tpot_s", &ServeConfig::slo_tpot_s)
      .def_rw("price_usd_per_gpu_hour", &ServeConfig::price_usd_per_gpu_hour)
      .def_rw("record_steps", &ServeConfig::record_steps)
      .def_rw("timeline_bins", &ServeConfig::timeline_bins);

  nb::class_<Percentiles>(m, "Percentiles")
      .def_ro("mean", &Percentiles::mean)
      .def_ro("p50", &Percentiles::p50)
      .def_ro("p90", &Percentiles::p90)
      .def_ro("p99", &Percentiles::p99)
      .def_ro("max", &Percentiles::max);

  nb::class_<StepRecord>(m, "StepRecord")
      .def_ro("engine", &StepRecord::engine)
      .def_ro("start_s", &StepRecord::start_s)
      .def_ro("end_s", &StepRecord::end_s)
      .def_ro("prefill_tokens", &StepRecord::prefill_tokens)
      .def_ro("prefill_seqs", &StepRecord::prefill_seqs)
      .def_ro("decode_seqs", &StepRecord::decode_seqs)
      .def_ro("kv_utilization", &StepRecord::kv_utilization);

  nb::class_<TimelinePoint>(m, "TimelinePoint")
      .def_ro("start_s", &TimelinePoint::start_s)
      .def_ro("t_s", &TimelinePoint::t_s)
      .def_ro("kv_utilization", &TimelinePoint::kv_utilization)
      .def_ro("waiting", &TimelinePoint::waiting)
      .def_ro("running", &TimelinePoint::running)
      .def_ro("kv_utilization_max", &TimelinePoint::kv_utilization_max)
      .def_ro("waiting_max", &TimelinePoint::waiting_max)
      .def_ro("running_max", &TimelinePoint::running_max);

  nb::class_<ServeResult>(m, "ServeResult")
      .def_ro("requests", &ServeResult::requests)
      .def_ro("completed", &ServeResult::completed)
      .def_ro("rejected", &ServeResult::rejected)
      .def_ro("makespan_s", &ServeResult::makespan_s)
      .def_ro("gpus", &ServeResult::gpus)
      .def_ro("ttft", &ServeResult::ttft)
      .def_ro("tpot", &ServeResult::tpot)
      .def_ro("itl", &ServeResult::itl)
      .def_ro("e2e", &ServeResult::e2e)
      .def_ro("queueing", &ServeResult::queueing)
      .def_ro("requests_per_s", &ServeResult::requests_per_s)
      .def_ro("output_tokens_per_s", &ServeResult::output_tokens_per_s)
      .def_ro("output_tokens_per_s_per_gpu", &ServeResult::output_tokens_per_s_per_gpu)
      .def_ro("total_tokens_per_s", &ServeResult::total_tokens_per_s)
      .def_ro("goodput_requests_per_s", &ServeResult::goodput_requests_per_s)
      .def_ro("slo_attainment", &ServeResult::slo_attainment)
      .def_ro("preemptions", &ServeResult::preemptions)
      .def_ro("steps", &ServeResult::steps)
      .def_ro("prefix_hit_rate", &ServeResult::prefix_hit_rate)
      .def_ro("mean_batch_size", &ServeResult::mean_batch_size)
      .def_ro("kv_utilization_mean", &ServeResult::kv_utilization_mean)
      .def_ro("kv_utilization_max", &ServeResult::kv_utilization_max)
      .def_ro("waiting_mean", &ServeResult::waiting_mean)
      .def_ro("waiting_max", &ServeResult::waiting_max)
      .def_ro("busy_fraction", &ServeResult::busy_fraction)
      .def_ro("cost_per_million_output_tokens_usd", &ServeResult::cost_per_million_output_tokens_usd)
      .def_ro("cost_per_million_total_tokens_usd", &ServeResult::cost_per_million_total_tokens_usd)
      .def_ro("timeline", &ServeResult::timeline)
      .def_ro("steps_recorded", &ServeResult::steps_recorded)
      .def_ro("request_ttft_s", &ServeResult::request_ttft_s)
      .def_ro("request_e2e_s", &ServeResult::request_e2e_s);

  nb::class_<MaxQpsResult>(m, "MaxQpsResult")
      .def_ro("qps", &MaxQpsResult::qps)
      .def_ro("at_max", &MaxQpsResult::at_max)
      .def_ro("trials", &MaxQpsResult::trials)
      .def_ro("unbounded", &MaxQpsResult::unbounded)
      .def_ro("qps_per_replica", &MaxQpsResult::qps_per_replica)
      .def_ro("qps_per_gpu", &MaxQpsResult::qps_per_gpu);
  m.def("replicas_for_rate", &replicas_for_rate, nb::arg("found"), nb::arg("qps"));

  // The simulations run without the GIL; progress callbacks take it back.
  m.def(
      "simulate_serving",
      [](IterationModel& costs, const Workload& w, const ServeConfig& c, nb::object progress) {
        auto report = callback(progress);
        nb::gil_scoped_release release;
        return simulate_serving(costs, w, c, report);
      },
      nb::arg("costs"), nb::arg("workload"), nb::arg("config"), nb::arg("progress") = nb::none());
  m.def(
      "find_max_qps",
      [](IterationModel& costs, const WorkloadSpec& spec, const ServeConfig& c, nb::object progress) {
        auto report = callback(progress);
        nb::gil_scoped_release release;
        return find_max_qps(costs, spec, c, report);
      },
      nb::arg("costs"), nb::arg("spec"), nb::arg("config"), nb::arg("progress") = nb::none());
  // serve_plan.h: the serving planner.
  nb::enum_<ServeQuantization>(m, "ServeQuantization")
      .value("bf16", ServeQuantization::bf16)
      .value("fp8", ServeQuantization::fp8)
      .value("int4", ServeQuantization::int4)
      .value("nvfp4", ServeQuantization::nvfp4)
      .value("mxfp4", ServeQuantization::mxfp4);
  m.def("parse_quantization", &parse_quantization, nb::arg("name"));
  m.def("quantization_unsupported", &quantization_unsupported, nb::arg("device"), nb::arg("quantization"));
  m.def("quantized_model", &quantized_model, nb::arg("model"), nb::arg("quantization"));
  nb::enum_<ServeObjective>(m, "ServeObjective")
      .value("gpus", ServeObjective::gpus)
      .value("cost", ServeObjective::cost)
      .value("throughput", ServeObjective::throughput);
  nb::enum_<LayoutVerdict>(m, "LayoutVerdict")
      .value("best", LayoutVerdict::best)
      .value("feasible", LayoutVerdict::feasible)
      .value("invalid", LayoutVerdict::invalid)
      .value("unsupported", LayoutVerdict::unsupported)
      .value("does_not_fit", LayoutVerdict::does_not_fit)
      .value("misses_ttft", LayoutVerdict::misses_ttft)
      .value("misses_tpot", LayoutVerdict::misses_tpot)
      .value("misses_slo", LayoutVerdict::misses_slo)
      .value("over_budget", LayoutVerdict::over_budget)
      .value("screened_out", LayoutVerdict::screened_out);

  nb::class_<ServePlanEngine>(m, "ServePlanEngine")
      .def(nb::init<>())
      .def_rw("label", &ServePlanEngine::label)
      .def_rw("stack", &ServePlanEngine::stack)
      .def_rw("device", &ServePlanEngine::device)
      .def_rw("replica", &ServePlanEngine::replica)
      .def_rw("scheduler", &ServePlanEngine::scheduler);

  nb::class_<ServePlanSpace>(m, "ServePlanSpace")
      .def(nb::init<>())
      .def_rw("tp", &ServePlanSpace::tp)
      .def_rw("pp", &ServePlanSpace::pp)
      .def_rw("dp_attention", &ServePlanSpace::dp_attention)
      .def_rw("quantizations", &ServePlanSpace::quantizations)
      .def_rw("max_seqs", &ServePlanSpace::max_seqs)
      .def_rw("token_budgets", &ServePlanSpace::token_budgets)
      .def_rw("aggregated", &ServePlanSpace::aggregated)
      .def_rw("disaggregated", &ServePlanSpace::disaggregated)
      .def_rw("speculative", &ServePlanSpace::speculative)
      .def_rw("max_gpus", &ServePlanSpace::max_gpus);

  nb::class_<ServePlanRequest>(m, "ServePlanRequest")
      .def(nb::init<>())
      .def_rw("model", &ServePlanRequest::model)
      .def_rw("engines", &ServePlanRequest::engines)
      .def_rw("space", &ServePlanRequest::space)
      .def_rw("workload", &ServePlanRequest::workload)
      .def_rw("target_qps", &ServePlanRequest::target_qps)
      .def_rw("slo_ttft_s", &ServePlanRequest::slo_ttft_s)
      .def_rw("slo_tpot_s", &ServePlanRequest::slo_tpot_s)
      .def_rw("objective", &ServePlanRequest::objective)
      .def_rw("verify", &ServePlanRequest::verify)
      .def_rw("exhaustive", &ServePlanRequest::exhaustive)
      .def_rw("threads", &ServePlanRequest::threads);

  nb::class_<ServeLayout>(m, "ServeLayout")
      .def_ro("engine", &ServeLayout::engine)
      .def_ro("quantization", &ServeLayout::quantization)
      .def_ro("tp", &ServeLayout::tp)
      .def_ro("pp", &ServeLayout::pp)
      .def_ro("max_seqs", &ServeLayout::max_seqs)
      .def_ro("token_budget", &ServeLayout::token_budget)
      .def_ro("dp_attention", &ServeLayout::dp_attention)
      .def_ro("prefill_replicas", &ServeLayout::prefill_replicas)
      .def_ro("decode_replicas", &ServeLayout::decode_replicas)
      .def_ro("speculative", &ServeLayout::speculative)
      .def_prop_ro("unit_replicas", &ServeLayout::unit_replicas)
      .def_prop_ro("unit_gpus", &ServeLayout::unit_gpus)
      .def_prop_ro("disaggregated", &ServeLayout::disaggregated);

  nb::class_<ServeLayoutResult>(m, "ServeLayoutResult")
      .def_ro("layout", &ServeLayoutResult::layout)
      .def_ro("verdict", &ServeLayoutResult::verdict)
      .def_ro("reason", &ServeLayoutResult::reason)
      .def_ro("weight_bytes_per_gpu", &ServeLayoutResult::weight_bytes_per_gpu)
      .def_ro("kv_bytes_per_gpu", &ServeLayoutResult::kv_bytes_per_gpu)
      .def_ro("kv_blocks", &ServeLayoutResult::kv_blocks)
      .def_ro("ttft_floor_s", &ServeLayoutResult::ttft_floor_s)
      .def_ro("tpot_floor_s", &ServeLayoutResult::tpot_floor_s)
      .def_ro("estimated_qps_per_unit", &ServeLayoutResult::estimated_qps_per_unit)
      .def_ro("simulated", &ServeLayoutResult::simulated)
      .def_ro("qps_per_unit", &ServeLayoutResult::qps_per_unit)
      .def_ro("units", &ServeLayoutResult::units)
      .def_ro("gpus", &ServeLayoutResult::gpus)
      .def_ro("usd_per_hour", &ServeLayoutResult::usd_per_hour)
      .def_ro("output_tokens_per_s_per_gpu", &ServeLayoutResult::output_tokens_per_s_per_gpu)
      .def_ro("tokens_per_s_per_user", &ServeLayoutResult::tokens_per_s_per_user)
      .def_ro("ttft", &ServeLayoutResult::ttft)
      .def_ro("tpot", &ServeLayoutResult::tpot)
      .def_ro("cost_per_million_output_tokens_usd", &ServeLayoutResult::cost_per_million_output_tokens_usd)
      .def_ro("verified", &ServeLayoutResult::verified)
      .def_ro("slo_attainment", &ServeLayoutResult::slo_attainment)
      .def_ro("verified_ttft_p99_s", &ServeLayoutResult::verified_ttft_p99_s)
      .def_ro("verified_tpot_p99_s", &ServeLayoutResult::verified_tpot_p99_s)
      .def_ro("pareto", &ServeLayoutResult::pareto);

  nb::class_<ServePlanResult>(m, "ServePlanResult")
      .def_ro("layouts", &ServePlanResult::layouts)
      .def_ro("pareto", &ServePlanResult::pareto)
      .def_ro("ranked", &ServePlanResult::ranked)
      .def_ro("simulated", &ServePlanResult::simulated)
      .def_ro("trials", &ServePlanResult::trials)
      .def_ro("mean_input_tokens", &ServePlanResult::mean_input_tokens)
      .def_ro("mean_output_tokens", &ServePlanResult::mean_output_tokens);

  m.def(
      "plan_serving",
      [](const ServePlanRequest& q, nb::object progress) {
        auto report = callback(progress);
        nb::gil_scoped_release release;
        return plan_serving(q, report);
      },
      nb::arg("request"), nb::arg("progress") = nb::none());
  m.def("pareto_front", &pareto_front, nb::arg("points"));
}

}  // namespace accelsim::bindings
