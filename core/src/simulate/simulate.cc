#include "accelsim/simulate.h"

#include <map>
#include <string>

#include "accelsim/error.h"

namespace accelsim {
namespace {

// The matmul dtype holding most matrix FLOPs (the model's compute precision); fp32 if none.
DType dominant_matrix_dtype(const std::vector<OpResult>& ops) {
  std::map<DType, double> flops;
  for (const OpResult& op : ops) {
    if (uses_matrix_units(op.count.op_class)) flops[op.count.compute_dtype] += op.count.flops;
  }
  DType best = DType::fp32;
  double most = 0;
  for (const auto& [dtype, f] : flops) {
    if (f > most) {
      most = f;
      best = dtype;
    }
  }
  return best;
}

}  // namespace

SimulationResult simulate(const Graph& graph, const DeviceSpec& device,
                          const SimulateOptions& options) {
  device.validate();
  const std::unique_ptr<CostModel> model = make_cost_model(options.cost_model);

  SimulationResult r;
  r.device_id = device.id;
  const auto nodes = graph.nodes();
  r.ops.reserve(nodes.size());

  std::map<std::string, size_t> uncovered_index;
  double clock_s = 0.0;
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    OpResult op;
    op.node = n;
    op.count = count_op(graph, nodes[n]);
    op.cost = model->cost(op.count, device, options.cost);
    op.start_s = clock_s;
    clock_s += op.cost.time_s;
    op.end_s = clock_s;

    r.total_flops += op.count.flops;
    r.total_bytes += op.count.bytes();
    r.launch_overhead_time_s += op.cost.launch_overhead_s;
    switch (nodes[n].pass) {
      case Pass::forward: r.forward_time_s += op.cost.time_s; break;
      case Pass::backward: r.backward_time_s += op.cost.time_s; break;
      case Pass::optimizer: r.optimizer_time_s += op.cost.time_s; break;
    }
    if (op.count.launches_kernel) ++r.num_kernels;
    if (op.count.op_class == OpClass::communication) {
      ++r.num_collectives;
      r.communication_bytes += op.count.communication_bytes;
    }
    if (op.cost.bound == Bound::compute) r.compute_bound_time_s += op.cost.time_s;
    if (op.cost.bound == Bound::memory) r.memory_bound_time_s += op.cost.time_s;
    r.used_peak_fallback = r.used_peak_fallback || op.cost.peak_fallback;
    if (!op.count.known) {
      auto [it, inserted] = uncovered_index.try_emplace(nodes[n].op, r.uncovered_ops.size());
      if (inserted) r.uncovered_ops.push_back({nodes[n].op, 0, 0.0});
      r.uncovered_ops[it->second].count += 1;
      r.uncovered_ops[it->second].time_s += op.cost.time_s;
    }
    r.ops.push_back(op);
  }
  r.latency_s = clock_s;

  const PeakRate reference =
      peak_rate(device, dominant_matrix_dtype(r.ops), true, options.cost.allow_tf32);
  r.reference_peak_flops_per_s = reference.flops_per_s;
  if (r.latency_s > 0) {
    if (reference.flops_per_s > 0) {
      r.compute_utilization = r.total_flops / (r.latency_s * reference.flops_per_s);
    }
    r.bandwidth_utilization =
        r.total_bytes / (r.latency_s * device.memory_bandwidth_bytes_per_s);
  }

  r.memory = compute_memory_profile(graph, options.release_policy);
  r.memory_capacity_bytes = device.memory_bytes;
  r.fits = static_cast<double>(r.memory.peak_bytes) <= device.memory_bytes;
  return r;
}

}  // namespace accelsim
