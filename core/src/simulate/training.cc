// Stage profiles and one training step composed from them (training.h); the plan search, which
// shares the profiles, is plan.cc. Its 640 lines are one derivation: a stage's two graphs, their
// bytes and times, and the step's terms (compute, bubble, pipeline sends, data-parallel
// communication, optimizer, memory per stage) as training.h states them.
#include "accelsim/training.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/memory.h"
#include "accelsim/physical_range.h"
#include "training_stage.h"

namespace accelsim {
namespace training_detail {

TrainingEstimate infeasible(std::string reason) {
  TrainingEstimate e;
  e.reason = std::move(reason);
  return e;
}

// A layout's rank order as group names, innermost first; empty if it is not a permutation of
// tp, cp, ep, dp, pp.
std::vector<std::string> parse_order(const std::string& order) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= order.size()) {
    const size_t dash = order.find('-', start);
    names.push_back(order.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::vector<std::string>{"cp", "dp", "ep", "pp", "tp"}) return {};
  return names;
}

Placement place(const ParallelLayout& l, const SystemSpec& system) {
  Placement p;
  const std::vector<std::string> names = parse_order(l.order);
  if (names.empty() || l.dp % l.ep != 0) return p;
  static const std::array<std::string, 5> kNames{"tp", "cp", "ep", "dp", "pp"};
  const std::array<int64_t, 5> sizes{l.tp, l.cp, l.ep, l.dp / l.ep, l.pp};
  std::vector<std::pair<std::string, int64_t>> ordered;
  for (const std::string& name : names) {
    const auto i = std::find(kNames.begin(), kNames.end(), name) - kNames.begin();
    ordered.emplace_back(name, sizes[i]);
  }
  const auto placed = place_groups(system, ordered).first;
  for (const CommGroup& g : placed) {
    const auto i = std::find(kNames.begin(), kNames.end(), g.name) - kNames.begin();
    p.groups[i] = g;
  }
  p.valid = true;
  return p;
}

// A stage graph's times on the device, for the linear stage profile.
struct StageTimes {
  double forward_s = 0, backward_s = 0, communication_s = 0, overlapped_s = 0, optimizer_s = 0, once_per_step_s = 0;
  double model_flops = 0, reference = 0;
};

// The graph of a stage of `layers` of `model`'s layers.
Graph build_stage(const ModelSpec& model, int64_t layers, const BuildOptions& b) {
  ModelSpec stage = model;
  stage.num_layers = layers;
  return build_graph(stage, b);
}

StageTimes stage_times(const Graph& g, const DeviceSpec& device, const SimulateOptions& o) {
  const SimulationResult r = simulate(g, device, o);
  StageTimes t;
  t.forward_s = r.forward_time_s;
  t.backward_s = r.backward_time_s;
  t.communication_s = r.communication_time_s - r.overlapped_communication_s;  // exposed
  t.overlapped_s = r.overlapped_communication_s;
  t.once_per_step_s = r.once_per_step_time_s;
  t.optimizer_s = r.optimizer_time_s;
  t.model_flops = r.model_flops;
  t.reference = r.reference_peak_flops_per_s;
  return t;
}

StageBytes stage_bytes(const Graph& g, ReleasePolicy policy) {
  StageBytes s;
  for (const Storage& st : g.storages()) {
    const auto bytes = static_cast<double>(st.size_bytes);
    if (st.kind == StorageKind::parameter) s.parameter_bytes += bytes;
    if (st.kind == StorageKind::parameter && !st.frozen) s.trainable_parameter_bytes += bytes;
    if (st.kind == StorageKind::gradient) s.gradient_bytes += bytes;
    if (st.kind == StorageKind::optimizer_state) s.state_bytes += bytes;
  }
  const auto nodes = g.nodes();
  const auto storages = g.storages();
  const auto node_count = static_cast<NodeId>(nodes.size());
  NodeId last_forward = kNoNode, first_layer = kNoNode, last_layer = kNoNode;
  for (NodeId n = 0; n < node_count; ++n) {
    if (nodes[n].pass != Pass::forward) continue;
    last_forward = n;
    if (nodes[n].module_path.rfind("model.layers.", 0) == 0) {
      if (first_layer == kNoNode) first_layer = n;
      last_layer = n;
    }
  }
  // Weight casts (fp8 GEMMs) are a copy of the weights: Transformer Engine casts them on a
  // step's first micro-batch and keeps them for the rest, so they are held once (the forward's
  // casts: weight_copy_bytes), not per micro-batch in flight, and are not activations. (Which of
  // them the graph holds where depends on the recompute policy: without it the forward keeps
  // them for the backward's data gradients; under full recompute the forward frees them and the
  // backward casts each layer's again.) torchao's casts (Fp8Recipe::torchao) are not marked
  // once_per_step: each lives from its cast to its GEMM, an activation like any other.
  std::vector<char> is_copy(storages.size(), 0);
  for (NodeId n = 0; n < node_count; ++n) {
    const Node& node = nodes[n];
    if (node.op != "_to_copy" || node.inputs.empty() || node.outputs.empty() ||
        !node.attr_bool("once_per_step", false)) {
      continue;
    }
    if (storages[g.tensor(node.inputs[0]).storage].kind != StorageKind::parameter) continue;
    const StorageId st = g.tensor(node.outputs[0]).storage;
    if (!is_copy[st] && n <= last_forward) s.weight_copy_bytes += static_cast<double>(storages[st].size_bytes);
    is_copy[st] = 1;
  }
  // The activations, each over its lifetime as the liveness analysis has it (memory.h): saved,
  // those live at the end of the forward, by the part of the model that wrote them (before the
  // first layer: the embedding; after the last: the final norm, the head and the loss); and the
  // most one micro-batch holds at once, over every node of its forward and backward. The weight
  // casts are not among them (held once, above); nor are the gradients, which Megatron-LM keeps
  // in a buffer for the whole step (counted apart).
  const StorageLifetimes lifetimes = storage_lifetimes(g, policy);
  const std::vector<NodeId>& first = lifetimes.first;
  const std::vector<NodeId>& last = lifetimes.last;  // the node count for a graph output's
  std::vector<double> born(static_cast<size_t>(node_count) + 1, 0.0), dead(static_cast<size_t>(node_count) + 1, 0.0);
  std::vector<double> step_born(born.size(), 0.0), step_dead(born.size(), 0.0);  // the optimizer's
  for (size_t st = 0; st < storages.size(); ++st) {
    if (first[st] == kNoNode || is_copy[st] || storages[st].kind != StorageKind::activation) continue;
    const auto bytes = static_cast<double>(storages[st].size_bytes);
    if (nodes[first[st]].pass == Pass::optimizer) {
      step_born[static_cast<size_t>(first[st])] += bytes;
      step_dead[static_cast<size_t>(last[st])] += bytes;
      continue;
    }
    born[static_cast<size_t>(first[st])] += bytes;
    dead[static_cast<size_t>(last[st])] += bytes;
    if (last_forward == kNoNode || first[st] > last_forward || last[st] <= last_forward) continue;
    s.saved_bytes += bytes;
    if (first_layer == kNoNode || first[st] < first_layer) s.embedding_saved_bytes += bytes;
    if (last_layer != kNoNode && first[st] > last_layer) s.head_saved_bytes += bytes;
  }
  double live = 0.0, step_live = 0.0;
  for (size_t n = 0; n < static_cast<size_t>(node_count); ++n) {
    live += born[n];
    step_live += step_born[n];
    s.peak_activation_bytes = std::max(s.peak_activation_bytes, live);
    s.optimizer_peak_bytes = std::max(s.optimizer_peak_bytes, step_live);
    live -= dead[n];
    step_live -= step_dead[n];
  }
  // The same activations, request by request in node order, through the caching allocator.
  std::vector<char> replayed(storages.size(), 0);
  for (size_t st = 0; st < storages.size(); ++st) {
    replayed[st] = first[st] != kNoNode && !is_copy[st] && storages[st].kind == StorageKind::activation &&
                   nodes[first[st]].pass != Pass::optimizer;
  }
  const AllocatorPeaks replay = replay_caching_allocator(allocation_events(g, lifetimes, replayed));
  s.allocator_slack_bytes = std::max(0.0, static_cast<double>(replay.peak_reserved_bytes) - s.peak_activation_bytes);
  return s;
}

PerLayer line(double at_base, double at_next) { return {at_base, at_next - at_base}; }

// estimate_training()'s and plan_training()'s promise (physical_range.h): every figure of the
// step finite and not negative.
void require_physical(const TrainingEstimate& e) {
  constexpr const char* kWhere = "the training estimate";
  const std::pair<const char*, double> figures[] = {
      {"step_s", e.step_s},
      {"compute_s", e.compute_s},
      {"tp_comm_s", e.tp_comm_s},
      {"bubble_s", e.bubble_s},
      {"pp_comm_s", e.pp_comm_s},
      {"p2p_send_s", e.p2p_send_s},
      {"dp_comm_s", e.dp_comm_s},
      {"overlap_slowdown_s", e.overlap_slowdown_s},
      {"optimizer_s", e.optimizer_s},
      {"offload_s", e.offload_s},
      {"host_optimizer_s", e.host_optimizer_s},
      {"host_memory_per_node_bytes", e.host_memory_per_node_bytes},
      {"stage_parameter_bytes", e.stage_parameter_bytes},
      {"stage_gradient_bytes", e.stage_gradient_bytes},
      {"p2p_bytes", e.p2p_bytes},
      {"forward_s", e.forward_s},
      {"backward_s", e.backward_s},
      {"tokens_per_s", e.tokens_per_s},
      {"model_flops", e.model_flops},
      {"tflops_per_gpu", e.tflops_per_gpu},
      {"mfu", e.mfu},
      {"memory_per_gpu_bytes", e.memory_per_gpu_bytes},
      {"activation_bytes", e.activation_bytes},
      {"reserved_per_gpu_bytes", e.reserved_per_gpu_bytes},
  };
  for (const auto& [figure, value] : figures) require_non_negative(kWhere, figure, value);
}

int recompute_rank(Recompute r) { return static_cast<int>(r); }

}  // namespace training_detail

using namespace training_detail;

double training_clock_hz(const DeviceSpec& device, const SimulateOptions& options) {
  if (options.cost.clock_hz > 0) return options.cost.clock_hz;
  if (options.cost_model != "kernel") return 0.0;  // the roofline has no clock
  return sustained_clock_hz(device);
}

namespace training_detail {

// A stage's build options: `base` with the layout's TP/SP/CP/EP degrees and micro-batch.
BuildOptions stage_build_options(const BuildOptions& base, const ParallelLayout& layout) {
  BuildOptions b = base;
  b.phase = Phase::train;
  b.batch = layout.micro_batch;
  b.tensor_parallel = layout.tp;
  b.sequence_parallel = layout.sequence_parallel;
  b.context_parallel = layout.cp;
  b.expert_parallel = layout.ep;
  b.summa = layout.summa;
  b.persistent_gradients = false;
  return b;
}

// Figures measured at `unit` and 2 x `unit` layers, brought to one and two layers of the
// pattern's mean: the slope per layer is a repeat's over `unit`, and the one-layer figure the
// `unit`-layer one less the other unit - 1 layers.
void per_mean_layer(double& at_unit, double& at_two_units, int64_t unit) {
  if (unit <= 1) return;
  const double slope = (at_two_units - at_unit) / static_cast<double>(unit);
  at_unit -= static_cast<double>(unit - 1) * slope;
  at_two_units = at_unit + slope;
}

void per_mean_layer(StageBytes& a, StageBytes& b, int64_t unit) {
  for (auto field : {&StageBytes::parameter_bytes, &StageBytes::gradient_bytes, &StageBytes::state_bytes,
                     &StageBytes::saved_bytes, &StageBytes::peak_activation_bytes, &StageBytes::weight_copy_bytes,
                     &StageBytes::embedding_saved_bytes, &StageBytes::head_saved_bytes, &StageBytes::optimizer_peak_bytes,
                     &StageBytes::trainable_parameter_bytes}) {
    per_mean_layer(a.*field, b.*field, unit);
  }
}

void per_mean_layer(StageTimes& a, StageTimes& b, int64_t unit) {
  for (auto field : {&StageTimes::forward_s, &StageTimes::backward_s, &StageTimes::communication_s,
                     &StageTimes::overlapped_s, &StageTimes::optimizer_s, &StageTimes::once_per_step_s,
                     &StageTimes::model_flops}) {
    per_mean_layer(a.*field, b.*field, unit);
  }
}

// Throws ConfigError when the builder rejects the shapes.
StageGraphs build_stage_graphs(const ModelSpec& model, const BuildOptions& b, ReleasePolicy policy) {
  StageGraphs s;
  ModelSpec heavy = model;
  const bool mixed = model.moe.enabled() && (model.moe.first_dense_layers > 0 || model.moe.sparse_step > 1);
  if (mixed) {
    heavy.moe.first_dense_layers = 0;
    heavy.moe.sparse_step = 1;
  }
  // A pattern longer than the model is laid out once (its layers are then all there are). A
  // recompute policy applied to every n-th layer repeats with the layers' own pattern.
  int64_t pattern = model.layer_pattern();
  if (b.recompute != Recompute::none) pattern = std::lcm(pattern, b.recompute_interval);
  s.unit = pattern < model.num_layers ? pattern : 1;
  const int64_t u = s.unit;
  s.one = build_stage(heavy, u, b);
  s.one_bytes = stage_bytes(*s.one, policy);
  if (model.num_layers > 1) {
    s.two = build_stage(heavy, 2 * u, b);
    s.two_bytes = stage_bytes(*s.two, policy);
  } else {
    s.two_bytes = s.one_bytes;
  }
  if (!heavy.final_norm && !heavy.lm_head && !heavy.pooler) {
    s.body_one_bytes = s.one_bytes;
    s.body_two_bytes = s.two_bytes;
  } else {
    ModelSpec body = heavy;
    body.final_norm = body.lm_head = body.pooler = false;
    s.body_one_bytes = stage_bytes(build_stage(body, u, b), policy);
    s.body_two_bytes = model.num_layers > 1 ? stage_bytes(build_stage(body, 2 * u, b), policy) : s.body_one_bytes;
  }
  per_mean_layer(s.one_bytes, s.two_bytes, u);
  per_mean_layer(s.body_one_bytes, s.body_two_bytes, u);
  if (mixed) {
    s.whole_layers = 1;
    while (s.whole_layers < model.num_layers && !model.moe.is_moe_layer(s.whole_layers - 1)) ++s.whole_layers;
    s.whole_one = build_stage(model, s.whole_layers, b);
    if (model.num_layers > s.whole_layers) s.whole_two = build_stage(model, s.whole_layers + 1, b);
  }
  return s;
}

// The profile of the stage whose graphs are `s`, its ranks placed as `groups` say.
StageProfile profile_built_stage(const ModelSpec& model, const StageGraphs& s, const std::vector<CommGroup>& groups,
                                 const DeviceSpec& device, const SystemSpec& system, const SimulateOptions& options) {
  StageProfile p;
  if (!s.reason.empty()) {
    p.reason = s.reason;
    return p;
  }
  SimulateOptions o = options;
  o.system = system;
  o.groups = groups;
  o.micro_batches = 1;
  o.cost.clock_hz = training_clock_hz(device, options);
  p.clock_hz = o.cost.clock_hz;
  StageTimes t0, t1;
  double whole_flops = 0.0;
  try {
    t0 = stage_times(*s.one, device, o);
    t1 = s.two ? stage_times(*s.two, device, o) : t0;
    per_mean_layer(t0, t1, s.unit);
    // The model FLOPs of the real model: its leading layers through the first MoE layer, then
    // one more layer at a time.
    whole_flops = t0.model_flops + static_cast<double>(model.num_layers - 1) * (t1.model_flops - t0.model_flops);
    if (s.whole_one) {
      const StageTimes r0 = stage_times(*s.whole_one, device, o);
      const StageTimes r1 = s.whole_two ? stage_times(*s.whole_two, device, o) : r0;
      whole_flops = r0.model_flops +
                    static_cast<double>(model.num_layers - s.whole_layers) * (r1.model_flops - r0.model_flops);
    }
  } catch (const PhysicalRangeError&) {
    throw;  // a device or system out of physical range, not a shape the builder rejects
  } catch (const ConfigError& e) {
    p.reason = e.what();
    return p;
  }
  const StageBytes &s0 = s.one_bytes, &s1 = s.two_bytes, &b0 = s.body_one_bytes, &b1 = s.body_two_bytes;
  p.forward_s = line(t0.forward_s, t1.forward_s);
  p.backward_s = line(t0.backward_s, t1.backward_s);
  p.communication_s = line(t0.communication_s, t1.communication_s);
  p.overlapped_communication_s = line(t0.overlapped_s, t1.overlapped_s);
  p.optimizer_s = line(t0.optimizer_s, t1.optimizer_s);
  p.once_per_step_s = line(t0.once_per_step_s, t1.once_per_step_s);
  p.parameter_bytes = line(s0.parameter_bytes, s1.parameter_bytes);
  p.gradient_bytes = line(s0.gradient_bytes, s1.gradient_bytes);
  p.trainable_parameter_bytes = line(s0.trainable_parameter_bytes, s1.trainable_parameter_bytes);
  p.state_bytes = line(s0.state_bytes, s1.state_bytes);
  p.saved_bytes = line(s0.saved_bytes, s1.saved_bytes);
  p.weight_copy_bytes = line(s0.weight_copy_bytes, s1.weight_copy_bytes);
  p.peak_activation_bytes = line(s0.peak_activation_bytes, s1.peak_activation_bytes);
  p.optimizer_peak_bytes = line(s0.optimizer_peak_bytes, s1.optimizer_peak_bytes);
  p.body_peak_activation_bytes = line(b0.peak_activation_bytes, b1.peak_activation_bytes);
  // The deeper of the two stages' slack (s1, b1: two layers, or the one of a one-layer model).
  p.allocator_slack_bytes = s1.allocator_slack_bytes;
  p.body_allocator_slack_bytes = b1.allocator_slack_bytes;
  p.embedding = {.parameter_bytes = b0.parameter_bytes - p.parameter_bytes.per_layer,
                 .gradient_bytes = b0.gradient_bytes - p.gradient_bytes.per_layer,
                 .state_bytes = b0.state_bytes - p.state_bytes.per_layer,
                 .trainable_parameter_bytes = b0.trainable_parameter_bytes - p.trainable_parameter_bytes.per_layer};
  p.head = {.parameter_bytes = s0.parameter_bytes - b0.parameter_bytes,
            .gradient_bytes = s0.gradient_bytes - b0.gradient_bytes,
            .state_bytes = s0.state_bytes - b0.state_bytes,
            .trainable_parameter_bytes = s0.trainable_parameter_bytes - b0.trainable_parameter_bytes};
  p.input_saved_bytes = s0.embedding_saved_bytes;
  p.head_saved_bytes = s0.head_saved_bytes;
  p.model_flops = whole_flops;
  p.reference_peak_flops_per_s = t0.reference;
  p.feasible = true;
  return p;
}

// The stage's graphs, or the builder's reason for rejecting its shapes.
StageGraphs build_or_reject(const ModelSpec& model, const BuildOptions& b, ReleasePolicy policy) {
  try {
    return build_stage_graphs(model, b, policy);
  } catch (const PhysicalRangeError&) {
    throw;
  } catch (const ConfigError& e) {
    StageGraphs s;
    s.reason = e.what();
    return s;
  }
}

}  // namespace training_detail

StageProfile profile_stage(const ModelSpec& model, const BuildOptions& base,
                           const ParallelLayout& layout, const std::vector<CommGroup>& groups,
                           const DeviceSpec& device, const SystemSpec& system,
                           const SimulateOptions& options) {
  model.validate();
  device.validate();
  system.validate();
  const StageGraphs graphs = build_or_reject(model, stage_build_options(base, layout), options.release_policy);
  return profile_built_stage(model, graphs, groups, device, system, options);
}

TrainingEstimate compose_training(const ModelSpec& model, const BuildOptions& base,
                                  const ParallelLayout& l, const StageProfile& p,
                                  const DeviceSpec& device, const SystemSpec& system) {
  for (int64_t d : {l.tp, l.pp, l.dp, l.cp, l.ep, l.micro_batch, l.global_batch, l.virtual_stages}) {
    if (d < 1) return infeasible("parallel degrees, batch sizes and virtual stages must be at least 1");
  }
  if (l.zero < 0 || l.zero > 3) return infeasible("ZeRO stage " + std::to_string(l.zero) + " does not exist (0 to 3)");
  if (model.num_layers < l.pp * l.virtual_stages) {
    return infeasible(std::to_string(model.num_layers) + " layers are fewer than " +
                      std::to_string(l.pp) + " stages x " + std::to_string(l.virtual_stages) +
                      " virtual stages");
  }
  if (l.virtual_stages > 1 && l.pp == 1) return infeasible("virtual stages need pipeline parallelism (pp > 1)");
  if (l.virtual_stages > 1 && l.gpipe) return infeasible("GPipe has no virtual stages (interleaving is a 1F1B schedule)");
  if (l.global_batch % (l.dp * l.micro_batch) != 0) {
    return infeasible("the global batch " + std::to_string(l.global_batch) +
                      " is not a multiple of dp x micro-batch = " + std::to_string(l.dp * l.micro_batch));
  }
  if (l.dp % l.ep != 0) return infeasible("the expert-parallel degree must divide the data-parallel degree");
  const int64_t m = l.global_batch / (l.dp * l.micro_batch);
  if (l.virtual_stages > 1 && m % l.pp != 0) {
    return infeasible("interleaved 1F1B needs the micro-batches per step (" + std::to_string(m) +
                      ") to be a multiple of pp");
  }
  if (!p.feasible) return infeasible(p.reason);
  const Placement placed = place(l, system);
  if (!placed.valid) {
    return infeasible("the rank order '" + l.order + "' is not a permutation of tp, cp, ep, dp, pp");
  }
  if (l.offload_optimizer && l.zero < 1) {
    return infeasible("optimizer offload needs ZeRO >= 1 (DeepSpeed's offload_optimizer)");
  }
  if (l.offload_parameters && l.zero != 3) {
    return infeasible("parameter offload needs ZeRO-3 (ZeRO-Infinity's offload_param)");
  }
  // Layer-level activation offload as Megatron-Core runs it refuses pipelines and recomputation
  // (megatron/core/transformer/transformer_config.py: "no support for Pipeline parallelism with
  // CPU offloading", "does not work when activation recomputation is enabled").
  if (l.offload_activations && l.pp > 1) return infeasible("activation offload runs with pp = 1 (Megatron-Core)");
  if (l.offload_activations && base.recompute != Recompute::none) {
    return infeasible("activation offload runs without recomputation (Megatron-Core)");
  }
  ACCELSIM_CHECK(!l.offloads() || system.host.given(),
                 "system '" + system.id + "' gives no host memory, host DRAM bandwidth and host link (its host "
                 "block): offload needs all three");

  TrainingEstimate e;
  e.clock_hz = p.clock_hz;
  e.micro_batches = m;
  const int64_t v = l.virtual_stages;
  const int64_t per_chunk = ceil_div(model.num_layers, l.pp * v);
  const int64_t n = v * per_chunk;
  e.stage_layers = n;
  // Ops that run once per step whatever the micro-batches (cached fp8 weight casts) are in the
  // profile's forward once; a micro-batch's passes are the rest.
  const double once = p.once_per_step_s.at(n);
  e.forward_s = p.forward_s.at(n) - once;
  e.backward_s = p.backward_s.at(n);
  const double per_mb = e.forward_s + e.backward_s;
  const auto md = static_cast<double>(m);
  e.compute_s = md * per_mb + once;
  e.tp_comm_s = md * p.communication_s.at(n);
  e.bubble_s = static_cast<double>(l.pp - 1) / static_cast<double>(v) * per_mb;
  if (l.pp > 1) {
    // One micro-batch's activations [micro-batch, seq / cp (/ tp under SP), hidden] in the
    // activation dtype, to the neighbouring stage: in the same domain when the pipeline group
    // has neighbours there.
    double act = static_cast<double>(l.micro_batch) * static_cast<double>(base.seq) / static_cast<double>(l.cp) *
                 static_cast<double>(model.hidden_size) * size_bytes(model.activation_dtype);
    if (l.sequence_parallel) act /= static_cast<double>(l.tp);
    const CollectiveEstimate p2p = estimate_collective(
        {.kind = CollectiveKind::send_recv, .bytes = act, .ranks = 2,
         .ranks_per_domain = placed.groups[4].ranks_per_domain >= 2 ? 2 : 1},
        system);
    e.p2p_send_s = p2p.time_s;
    e.p2p_bytes = act;
    e.pp_comm_s = 2.0 * static_cast<double>(l.pp - 1) * static_cast<double>(v) * p2p.time_s;
  }

  // This rank's parameters, gradients and optimizer states on the pipeline's first stage (the
  // embedding's) and last stage (the head's; with tied embeddings and pp > 1 a copy of the
  // embedding too, the last stage's output layer weight that Megatron-LM keeps in step with the
  // first stage's: megatron/core/models/gpt/gpt_model.py, shared_embedding_or_output_weight);
  // with one stage, both.
  const auto layers = static_cast<double>(n);
  const bool tied_copy = l.pp > 1 && model.tied_embeddings;
  struct StageState {
    double params, grads, states, trainable;
  };
  // The copy is of the word table alone: the embedding's learned position and token-type tables
  // (GPT-2's wpe, BERT's) stay on the first stage. Its share of the embedding's rows:
  // This rank's word rows are the vocabulary split over TP, as the builder splits it; the other
  // tables are whole on every rank.
  double word_share = 1.0;
  if (tied_copy && !model.vision()) {
    const auto words = static_cast<double>(vocab_rows_per_rank(model.vocab_size, l.tp));
    const auto others = static_cast<double>((model.learned_positions ? model.max_position_embeddings : 0) +
                                            model.type_vocab_size);
    word_share = words / (words + others);
  }
  auto stage_state = [&](bool first, bool last) {
    StageState st{p.parameter_bytes.per_layer * layers, p.gradient_bytes.per_layer * layers,
                  p.state_bytes.per_layer * layers, p.trainable_parameter_bytes.per_layer * layers};
    const double embedding_share = first ? 1.0 : last && tied_copy ? word_share : 0.0;
    for (const auto& [share, part] : {std::pair{embedding_share, p.embedding}, std::pair{last ? 1.0 : 0.0, p.head}}) {
      if (share <= 0.0) continue;
      st.params += share * part.parameter_bytes;
      st.grads += share * part.gradient_bytes;
      st.states += share * part.state_bytes;
      st.trainable += share * part.trainable_parameter_bytes;
    }
    return st;
  };
  const StageState first_state = stage_state(true, l.pp == 1), last_state = stage_state(l.pp == 1, true);
  const double params = std::max(first_state.params, last_state.params);
  const double grads = std::max(first_state.grads, last_state.grads);
  const double trainable = std::max(first_state.trainable, last_state.trainable);
  const double layer_params = p.parameter_bytes.per_layer, layer_grads = p.gradient_bytes.per_layer;
  const auto dp = static_cast<double>(l.dp);
  // The distributed optimizer and FSDP shard over, and the gradients are reduced over, the data-
  // parallel ranks together with the context-parallel ones (every CP rank computes gradients of
  // its own tokens): Megatron-LM puts the dense parameters' gradient buffers on the data-parallel
  // group with context parallelism (megatron/core/distributed/distributed_data_parallel.py,
  // intra_dp_cp_group), torchtitan shards FSDP2 over the flattened dp_shard x cp mesh
  // (torchtitan/distributed/parallel_dims.py, dp_shard_cp).
  // Under 2D SUMMA the CP ranks hold different shards of the blocks' weights (reduce-scattered
  // inside each layer), so only the data-parallel ranks share those; the embedding and the head,
  // whole on every CP rank, are still reduced and sharded over DP x CP. (The blocks' norms and
  // biases, whole on every CP rank too, are taken with the weights.)
  const int64_t shard_ranks = l.dp * l.cp, block_ranks = l.summa ? l.dp : shard_ranks;
  e.dp_ranks = shard_ranks;
  e.stage_parameter_bytes = params;
  e.stage_gradient_bytes = grads;
  e.stage_trainable_bytes = trainable;
  // Each quantity's share held by the blocks, whose ranks are block_ranks (the rest's shard_ranks).
  const double block_params = p.parameter_bytes.per_layer * layers, block_grads = p.gradient_bytes.per_layer * layers;
  const double block_trainable = p.trainable_parameter_bytes.per_layer * layers;
  const double block_states = p.state_bytes.per_layer * layers;
  auto block_share = [&](double block, double total) { return l.summa && total > 0 ? std::min(1.0, block / total) : 0.0; };
  // The divisor that takes a quantity to one rank's shard: its blocks over block_ranks, the rest
  // over shard_ranks.
  auto divisor = [&](double share) {
    return 1.0 / (share / static_cast<double>(block_ranks) + (1.0 - share) / static_cast<double>(shard_ranks));
  };
  const double params_share = block_share(block_params, params), grads_share = block_share(block_grads, grads);
  const double trainable_share = block_share(block_trainable, trainable);
  const double states_share = block_share(block_states, std::max(first_state.states, last_state.states));
  double hidden_dp = 0.0;  // data-parallel communication behind compute, per step
  if (shard_ranks > 1) {
    const int64_t shard_per_domain = std::max<int64_t>(
        1, placed.groups[1].ranks_per_domain * placed.groups[2].ranks_per_domain * placed.groups[3].ranks_per_domain);
    const int64_t block_per_domain =
        l.summa ? std::max<int64_t>(1, placed.groups[2].ranks_per_domain * placed.groups[3].ranks_per_domain)
                : shard_per_domain;
    // A collective of `bytes`, the `share` of them the blocks' over block_ranks and the rest
    // over shard_ranks, one after the other.
    auto collective = [&](CollectiveKind kind, double bytes, double share) {
      double t = 0.0;
      if (share > 0.0 && block_ranks > 1) {
        t += estimate_collective({.kind = kind, .bytes = bytes * share, .ranks = block_ranks,
                                  .ranks_per_domain = block_per_domain}, system).time_s;
      }
      if (share < 1.0) {
        t += estimate_collective({.kind = kind, .bytes = bytes * (1.0 - share), .ranks = shard_ranks,
                                  .ranks_per_domain = shard_per_domain}, system).time_s;
      }
      return t;
    };
    const double hide_bwd = l.overlap_grad_reduce ? e.backward_s : 0.0;
    const double hide_fwd = l.overlap_param_gather ? e.forward_s : 0.0;
    if (l.zero == 0) {
      const double ar = collective(CollectiveKind::all_reduce, grads, grads_share);
      e.dp_comm_s = std::max(0.0, ar - hide_bwd);
      hidden_dp = ar - e.dp_comm_s;
    } else if (l.zero <= 2) {
      const double rs = collective(CollectiveKind::reduce_scatter, grads, grads_share);
      // The updated parameters are gathered back: those not frozen (under LoRA the adapters).
      const double ag = collective(CollectiveKind::all_gather, trainable, trainable_share);
      const double rs_exposed = std::max(0.0, rs - hide_bwd), ag_exposed = std::max(0.0, ag - hide_fwd);
      const double times = l.zero == 2 ? md : 1.0;
      e.dp_comm_s = times * rs_exposed + ag_exposed;
      hidden_dp = times * (rs - rs_exposed) + (ag - ag_exposed);
    } else {
      const double ag = collective(CollectiveKind::all_gather, params, params_share);
      const double rs = collective(CollectiveKind::reduce_scatter, grads, grads_share);
      double per = 2.0 * ag + rs, hidden = 0.0;
      if (l.overlap_param_gather) {
        // The first layer's gather (forward) and the last layer's reduce-scatter (backward) wait
        // for nothing to hide behind; the rest overlaps the passes as far as they last.
        const double fwd = std::min(ag, e.forward_s), bwd = std::min(ag + rs, e.backward_s);
        const double layer_share = l.summa ? 1.0 : 0.0;
        per = (ag - fwd) + collective(CollectiveKind::all_gather, layer_params, layer_share) + (ag + rs - bwd) +
              collective(CollectiveKind::reduce_scatter, layer_grads, layer_share);
        hidden = fwd + bwd;
      }
      e.dp_comm_s = md * per;
      hidden_dp = md * hidden;
    }
  }
  e.overlap_slowdown_s = kOverlapComputeSlowdown * (md * p.overlapped_communication_s.at(n) + hidden_dp);
  const double param_shard = l.zero >= 3 ? divisor(params_share) : 1.0;
  const double grad_shard = l.zero >= 2 ? divisor(grads_share) : 1.0;
  const double state_shard = l.zero >= 1 ? divisor(states_share) : 1.0;
  e.optimizer_s = l.offload_optimizer ? 0.0 : p.optimizer_s.at(n) / state_shard;
  const double states = std::max(first_state.states, last_state.states);
  if (l.offloads()) {
    // What each pass moves over this GPU's host link, per direction (see the top of training.h).
    const double link = system.host.link_bytes_per_s;
    const double fetch = l.offload_parameters ? params / param_shard : 0.0;  // ZeRO-Infinity: the shard, each pass
    const double acts = l.offload_activations ? p.saved_bytes.per_layer * layers : 0.0;
    // This rank's gradient shard (the reduce-scatter's output, ZeRO >= 1) goes to the host.
    const double grads_out = l.offload_optimizer ? grads / state_shard : 0.0;
    const double fwd_h2d = fetch, fwd_d2h = acts, bwd_h2d = fetch + acts;
    // ZeRO >= 2 sends each micro-batch's gradient shard; ZeRO-1 the step's once, in the last backward.
    const double bwd_d2h = l.zero >= 2 ? grads_out : 0.0, last_d2h = l.zero >= 2 ? 0.0 : grads_out;
    auto waits = [&](double h2d, double d2h, double pass_s) { return std::max(0.0, std::max(h2d, d2h) / link - pass_s); };
    // The first layer's fetch of each pass has no compute before it to hide behind.
    const double first_fetch = l.offload_parameters ? 2.0 * layer_params / param_shard / link : 0.0;
    const double per_mb = waits(fwd_h2d, fwd_d2h, e.forward_s) + waits(bwd_h2d, bwd_d2h, e.backward_s) + first_fetch;
    e.offload_s = md * per_mb + (waits(bwd_h2d, bwd_d2h + last_d2h, e.backward_s) - waits(bwd_h2d, bwd_d2h, e.backward_s));
    if (l.offload_optimizer) {
      // The node's CPUs step the shards of all its GPUs at once; the updated 16-bit shard comes
      // back (ZeRO-Infinity keeps it on the host, where the next pass fetches it).
      const double node_gpus = static_cast<double>(std::min<int64_t>(l.gpus(), system.gpus_per_node));
      e.host_optimizer_s = node_gpus * kCpuOptimizerBytesPerParameterState * states / state_shard /
                           (system.host.memory_bandwidth_bytes_per_s * kCpuOptimizerBandwidthEfficiency);
      if (!l.offload_parameters) e.offload_s += trainable / state_shard / link;
    } else if (l.offload_parameters) {
      // The GPU's optimizer step updated the shard: it goes back to the host it lives in.
      e.offload_s += trainable / state_shard / link;
    }
  }
  e.step_s = e.compute_s + e.bubble_s + e.pp_comm_s + e.dp_comm_s + e.overlap_slowdown_s + e.optimizer_s +
             e.offload_s + e.host_optimizer_s;

  const double tokens = static_cast<double>(l.global_batch) * static_cast<double>(base.seq);
  e.tokens_per_s = tokens / e.step_s;
  // The whole model's model FLOPs for one micro-batch on one TP x CP rank group, times the
  // ranks that split it and the micro-batches of every data-parallel replica.
  e.model_flops = p.model_flops * static_cast<double>(l.tp * l.cp) * md * dp;
  e.tflops_per_gpu = e.model_flops / e.step_s / static_cast<double>(l.gpus()) / 1e12;
  if (p.reference_peak_flops_per_s > 0) e.mfu = e.tflops_per_gpu * 1e12 / p.reference_peak_flops_per_s;

  // Memory per GPU, of the pipeline stage that needs the most. A stage keeps the saved
  // activations of each model chunk it has run forward and not yet backward, as Megatron-LM's
  // schedules run them (megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches):
  // 1F1B runs pp - r - 1 warm-up forwards on stage r, interleaved 1F1B with v chunks
  // 2 (pp - r - 1) + (v - 1) pp (micro-batch groups of pp), both capped by the chunks of the step
  // (m v), then one more forward before each backward, so min(warm-up + 1, m v) chunks are in
  // flight: pp on the first stage and 1 on the last for 1F1B. GPipe runs all m forwards first.
  // At the peak one of them runs its backward, holding what its own liveness peak holds, while
  // the others keep their saved activations: a chunk keeps its input (the embedding writes it on
  // the first stage, the previous stage sends it on the others) and not its output, which
  // Megatron-LM frees once sent (deallocate_output_tensor; megatron/training/arguments.py turns
  // deallocate_pipeline_outputs on), so it keeps as much as its layers
  // keep with their outputs counted (the profile's saved bytes per layer); on the last stage a
  // chunk with the head also keeps its output (the final norm's input), and what the head and
  // the loss keep, for the one micro-batch between its loss and its backward (all m under
  // GPipe). The middle stages hold fewer chunks than the first and no more state.
  const auto per_chunk_layers = static_cast<double>(per_chunk);
  auto chunks_in_flight = [&](int64_t stage) -> int64_t {
    if (l.pp == 1) return 1;
    if (l.gpipe) return m;
    const int64_t warmup = v == 1 ? l.pp - stage - 1 : 2 * (l.pp - stage - 1) + (v - 1) * l.pp;
    return std::min(warmup + 1, m * v);
  };
  const double chunk_saved = p.saved_bytes.per_layer * per_chunk_layers;
  const double head_chunk_saved = chunk_saved + p.input_saved_bytes + p.head_saved_bytes;
  // `reserved`: the same stage's memory as the caching allocator reserves it, with the free
  // blocks of the running chunk's segments (StageProfile::allocator_slack_bytes).
  double host_bytes = 0.0;  // host memory per GPU, of the stage that needs the most
  auto stage_memory = [&](int64_t stage, double& activation, double& reserved) {
    const bool first = stage == 0, last = stage == l.pp - 1;
    const StageState st = stage_state(first, last);
    const auto others = static_cast<double>(chunks_in_flight(stage) - 1);
    // The chunk whose backward runs holds its own peak: the head's on the last stage (its
    // backward starts at the loss), a chunk without the head elsewhere.
    double own = last ? p.peak_activation_bytes.at(per_chunk) : p.body_peak_activation_bytes.at(per_chunk);
    const double slack = std::max(0.0, last ? p.allocator_slack_bytes : p.body_allocator_slack_bytes);
    double kept = others * (last && l.gpipe ? head_chunk_saved : chunk_saved);
    double host = 0.0;
    if (l.offload_activations) {
      // The other chunks' saved activations wait on the host; the running chunk holds the
      // working peak of one layer and the saved activations of the layer on the link.
      const double working = (last ? p.peak_activation_bytes.at(1) : p.body_peak_activation_bytes.at(1)) +
                             p.saved_bytes.per_layer;
      const double on_gpu = std::min(std::max(0.0, own), working);
      host += kept + std::max(0.0, own) - on_gpu;
      kept = 0.0;
      own = on_gpu;
    }
    activation = kept + std::max(0.0, own);
    // The optimizer step runs after the last micro-batch's backward has freed its activations,
    // over this rank's share of the parameters (ZeRO >= 1: 1/(dp cp) of them): its temporaries
    // need the room only where they outgrow the activations. Offloaded, it runs on the CPU.
    const double optimizer = l.offload_optimizer ? 0.0 : p.optimizer_peak_bytes.at(n) / state_shard;
    // Offloaded parameters leave the two gathered layers; offloaded optimizer states leave the
    // GPU, and under ZeRO >= 2 so do the gradient shards (a layer's bucket stays).
    const double params_on_gpu = l.offload_parameters ? 0.0 : st.params / param_shard;
    const double grads_on_gpu = l.offload_optimizer && l.zero >= 2 ? 0.0 : st.grads / grad_shard;
    const double resident = params_on_gpu + (l.zero >= 3 ? 2.0 * layer_params : 0.0) + grads_on_gpu +
                            (l.zero >= 2 ? layer_grads : 0.0) + (l.offload_optimizer ? 0.0 : st.states / state_shard) +
                            p.weight_copy_bytes.at(n);
    // The host keeps, for this GPU: the optimizer states, the gradient shard and a 16-bit copy of
    // the parameter shard (ZeRO-Offload's pinned buffers); the parameter shard (ZeRO-Infinity);
    // the saved activations moved out.
    // (Under ZeRO-Infinity the parameter shard on the host is the copy the CPU step writes.)
    if (l.offload_optimizer) host += (st.states + st.grads + (l.offload_parameters ? 0.0 : st.trainable)) / state_shard;
    if (l.offload_parameters) host += st.params / param_shard;
    host_bytes = std::max(host_bytes, host);
    reserved = resident + std::max(kept + std::max(0.0, own) + slack, optimizer);
    return resident + std::max(activation, optimizer);
  };
  double first_activation = 0.0, last_activation = 0.0, first_reserved = 0.0, last_reserved = 0.0;
  const double first_memory = stage_memory(0, first_activation, first_reserved);
  const double last_memory = stage_memory(l.pp - 1, last_activation, last_reserved);
  const bool first_peaks = first_memory >= last_memory;
  e.activation_bytes = first_peaks ? first_activation : last_activation;
  e.memory_per_gpu_bytes = (first_peaks ? first_memory : last_memory) + device.runtime_reserved_bytes;
  e.reserved_per_gpu_bytes = std::max(first_reserved, last_reserved) + device.runtime_reserved_bytes;
  e.host_memory_per_node_bytes =
      host_bytes * static_cast<double>(std::min<int64_t>(l.gpus(), system.gpus_per_node));
  require_physical(e);
  e.fits = e.memory_per_gpu_bytes <= device.memory_bytes &&
           (!l.offloads() || e.host_memory_per_node_bytes <= system.host.memory_bytes);
  e.feasible = e.fits;
  if (e.memory_per_gpu_bytes > device.memory_bytes) {
    e.reason = "needs " + std::to_string(static_cast<int64_t>(e.memory_per_gpu_bytes / 1e9)) +
               " GB per GPU, more than the device's " +
               std::to_string(static_cast<int64_t>(device.memory_bytes / 1e9)) + " GB";
  } else if (!e.fits) {
    e.reason = "offload needs " + std::to_string(static_cast<int64_t>(e.host_memory_per_node_bytes / 1e9)) +
               " GB of host memory per node, more than the system's " +
               std::to_string(static_cast<int64_t>(system.host.memory_bytes / 1e9)) + " GB";
  }
  return e;
}

TrainingEstimate estimate_training(const ModelSpec& model, const BuildOptions& base,
                                   const ParallelLayout& layout, const DeviceSpec& device,
                                   const SystemSpec& system, const SimulateOptions& options) {
  model.validate();
  device.validate();
  system.validate();
  const Placement placed = place(layout, system);
  std::vector<CommGroup> groups;
  if (placed.valid) groups = {placed.groups[0], placed.groups[1], placed.groups[2]};
  StageProfile profile;
  if (placed.valid && layout.tp >= 1 && layout.cp >= 1 && layout.ep >= 1 && layout.micro_batch >= 1) {
    profile = profile_stage(model, base, layout, groups, device, system, options);
  }
  return compose_training(model, base, layout, profile, device, system);
}

}  // namespace accelsim
