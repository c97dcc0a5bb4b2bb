#include "accelsim/advice.h"

#include <algorithm>
#include <set>
#include <string>

#include "accelsim/error.h"

namespace accelsim {
namespace {

// Thresholds of the rules (shares of the simulated latency). They decide when a hint is worth
// showing, not any number the tool predicts.
constexpr double kFuseShare = 0.20;        // memory-bound pointwise/softmax/norm/copy time
constexpr double kMatmulShare = 0.60;      // matrix-unit time
constexpr double kFp32MatmulShare = 0.20;  // fp32 matmul time on a part with faster 16-bit units
constexpr double kLowPrecisionGain = 4.0;  // 16-bit matrix peak / rate fp32 matmuls ran at
constexpr double kLaunchShare = 0.30;      // launch overhead
constexpr double kOverkillSlack = 1.25;    // a smaller device within 25% of the latency
constexpr int kAttentionLookback = 6;      // producers walked back from a softmax

bool is_pointwise_like(OpClass c) {
  return c == OpClass::elementwise || c == OpClass::softmax || c == OpClass::normalization ||
         c == OpClass::copy || c == OpClass::fill;
}

bool is_batched_matmul(const Node& node) {
  return node.op == "bmm" || node.op == "baddbmm" || node.op == "matmul";
}

// Softmaxes fed (through at most a few pointwise/view ops) by a batched matmul: attention
// computed eagerly, with its [.., S, S] score matrix written to and read from memory.
std::vector<NodeId> eager_attention_softmaxes(const Graph& graph,
                                              const SimulationResult& result) {
  const std::vector<NodeId> producer = graph.producers();
  std::vector<NodeId> found;
  for (const OpResult& op : result.ops) {
    if (op.count.op_class != OpClass::softmax) continue;
    const Node& node = graph.node(op.node);
    if (node.inputs.empty() || graph.tensor(node.inputs[0]).shape.size() < 3) continue;
    NodeId p = producer[node.inputs[0]];
    for (int step = 0; step < kAttentionLookback && p != kNoNode; ++step) {
      const Node& pn = graph.node(p);
      if (is_batched_matmul(pn)) {
        found.push_back(op.node);
        break;
      }
      const OpClass pc = result.ops[p].count.op_class;
      if (pn.inputs.empty() || !(pc == OpClass::view || pc == OpClass::elementwise ||
                                 pc == OpClass::copy)) {
        break;
      }
      p = producer[pn.inputs[0]];
    }
  }
  return found;
}

}  // namespace

std::string_view hint_kind_name(HintKind kind) {
  switch (kind) {
    case HintKind::out_of_memory: return "out_of_memory";
    case HintKind::fuse_memory_bound: return "fuse_memory_bound";
    case HintKind::use_flash_attention: return "use_flash_attention";
    case HintKind::matmul_dominated: return "matmul_dominated";
    case HintKind::low_precision_available: return "low_precision_available";
    case HintKind::launch_bound: return "launch_bound";
    case HintKind::peak_fallback: return "peak_fallback";
    case HintKind::uncovered_ops: return "uncovered_ops";
    case HintKind::communication_not_timed: return "communication_not_timed";
    case HintKind::masked_attention_pairs: return "masked_attention_pairs";
  }
  return "unknown";
}

std::vector<Hint> advise(const Graph& graph, const SimulationResult& result,
                         const DeviceSpec& device) {
  std::vector<Hint> hints;
  const double total = result.latency_s;
  auto share = [&](double t) { return total > 0 ? t / total : 0.0; };

  if (!result.fits) {
    hints.push_back({HintKind::out_of_memory,
                     static_cast<double>(result.memory.peak_bytes) / result.memory_capacity_bytes,
                     static_cast<double>(result.memory.peak_bytes), ""});
  }

  double fusable_s = 0, matrix_s = 0, fp32_matrix_s = 0;
  for (const OpResult& op : result.ops) {
    if (is_pointwise_like(op.count.op_class) && op.cost.bound == Bound::memory) {
      fusable_s += op.cost.time_s;
    }
    if (uses_matrix_units(op.count.op_class)) {
      matrix_s += op.cost.time_s;
      if (op.count.compute_dtype == DType::fp32 &&
          op.cost.peak_flops_per_s < device.tf32_matrix_flops_per_s) {
        fp32_matrix_s += op.cost.time_s;
      }
    }
  }

  const std::vector<NodeId> eager = eager_attention_softmaxes(graph, result);
  if (!eager.empty()) {
    double t = 0;
    for (NodeId n : eager) t += result.ops[n].cost.time_s;
    hints.push_back({HintKind::use_flash_attention, share(t), static_cast<double>(eager.size()),
                     graph.node(eager.front()).module_path});
  }
  // Work on discarded pairs is worth a hint whenever there is any: model FLOPs and MFU leave it
  // out, and a fused kernel would not spend the time.
  double attention_flops = 0, masked_flops = 0;
  std::string masked_module;
  for (const OpResult& op : result.ops) {
    const Node& node = graph.node(op.node);
    if (node.pass != Pass::forward || node.attr("attention_gemm") == nullptr) continue;
    attention_flops += op.count.flops;
    masked_flops += op.count.masked_flops;
    if (op.count.masked_flops > 0 && masked_module.empty()) masked_module = node.module_path;
  }
  if (masked_flops > 0) {
    hints.push_back({HintKind::masked_attention_pairs, masked_flops / attention_flops, masked_flops,
                     masked_module});
  }
  if (share(fusable_s) >= kFuseShare) {
    hints.push_back({HintKind::fuse_memory_bound, share(fusable_s), 0.0, ""});
  }
  if (share(matrix_s) >= kMatmulShare) {
    hints.push_back({HintKind::matmul_dominated, share(matrix_s), 0.0, ""});
  }
  const double fast16 = std::max(device.bf16_matrix_flops_per_s, device.fp16_matrix_flops_per_s);
  const double fp32_rate = peak_rate(device, DType::fp32, true, false).flops_per_s;
  if (share(fp32_matrix_s) >= kFp32MatmulShare && fp32_rate > 0 &&
      fast16 >= kLowPrecisionGain * fp32_rate) {
    hints.push_back({HintKind::low_precision_available, share(fp32_matrix_s), fast16 / fp32_rate,
                     device.bf16_matrix_flops_per_s > 0 ? "bf16" : "fp16"});
  }
  if (share(result.launch_overhead_time_s) >= kLaunchShare) {
    hints.push_back({HintKind::launch_bound, share(result.launch_overhead_time_s),
                     static_cast<double>(result.num_kernels), ""});
  }
  std::set<std::string> fallback_units;  // "bf16 matrix", "fp64 vector": sorted
  for (const UnitSubstitution& u : result.substitutions) {
    fallback_units.insert(std::string(dtype_name(u.dtype)) + (u.matrix ? " matrix" : " vector"));
  }
  if (!fallback_units.empty()) {
    std::string units;
    for (const std::string& u : fallback_units) units += (units.empty() ? "" : ", ") + u;
    hints.push_back({HintKind::peak_fallback, 0.0, 0.0, units});
  }
  if (!result.uncovered_ops.empty()) {
    double t = 0;
    for (const UncoveredOp& u : result.uncovered_ops) t += u.time_s;
    hints.push_back({HintKind::uncovered_ops, share(t),
                     static_cast<double>(result.uncovered_ops.size()), ""});
  }
  // Collectives timed on a cluster (SimulateOptions::system) carry their time; only untimed
  // ones are worth a hint.
  if (result.num_collectives > 0 && result.communication_time_s <= 0) {
    hints.push_back({HintKind::communication_not_timed, 0.0, result.communication_bytes,
                     std::to_string(result.num_collectives)});
  }
  return hints;
}

Bound dominant_bound(const SimulationResult& result) {
  return result.compute_bound_time_s >= result.memory_bound_time_s ? Bound::compute : Bound::memory;
}

Comparison compare_devices(const std::vector<SimulationResult>& results,
                           const std::vector<DeviceSpec>& devices) {
  ACCELSIM_CHECK(results.size() == devices.size(),
                 "compare_devices needs one result per device");
  Comparison c;
  double slowest = 0;
  for (const SimulationResult& r : results) slowest = std::max(slowest, r.latency_s);

  for (size_t i = 0; i < results.size(); ++i) {
    const SimulationResult& r = results[i];
    DeviceVerdict v;
    v.device_id = devices[i].id;
    v.fits = r.fits;
    v.dominant_bound = dominant_bound(r);
    v.cost_per_run_usd = r.latency_s * devices[i].price_usd_per_hour / 3600.0;
    v.speedup_vs_slowest = r.latency_s > 0 ? slowest / r.latency_s : 0.0;
    v.narrower_precision = r.narrower_precision;
    // Like with like: a device that ran the graph in a narrower format is not ranked.
    v.ranked = r.fits && !r.narrower_precision;
    c.devices.push_back(v);
    if (!v.ranked) continue;
    if (c.fastest_index < 0 || r.latency_s < results[c.fastest_index].latency_s) {
      c.fastest_index = static_cast<int>(i);
    }
    if (devices[i].price_usd_per_hour > 0 &&
        (c.best_value_index < 0 ||
         v.cost_per_run_usd < c.devices[c.best_value_index].cost_per_run_usd)) {
      c.best_value_index = static_cast<int>(i);
    }
  }

  // Overkill: another fitting device that is smaller (cheaper per hour when both prices are
  // known, otherwise less memory and a lower peak) runs within kOverkillSlack of the latency.
  for (size_t i = 0; i < results.size(); ++i) {
    if (!c.devices[i].ranked) continue;
    for (size_t j = 0; j < results.size(); ++j) {
      if (j == i || !c.devices[j].ranked) continue;
      const DeviceSpec& a = devices[i];
      const DeviceSpec& b = devices[j];
      const bool priced = a.price_usd_per_hour > 0 && b.price_usd_per_hour > 0;
      const bool smaller = priced ? b.price_usd_per_hour < a.price_usd_per_hour
                                  : b.memory_bytes < a.memory_bytes &&
                                        results[j].reference_peak_flops_per_s <
                                            results[i].reference_peak_flops_per_s;
      if (smaller && results[j].latency_s <= kOverkillSlack * results[i].latency_s) {
        c.devices[i].overkill = true;
        c.devices[i].overkill_reason = b.id;
        break;
      }
    }
  }
  return c;
}

}  // namespace accelsim
