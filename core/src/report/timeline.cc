#include "accelsim/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "accelsim/error.h"
#include "accelsim/op_catalog.h"

namespace accelsim {

namespace {

// Ops simulate() counts once per step, not once per micro-batch (simulate.cc keeps the same rule).
bool runs_once_per_step(const Node& node, const SimulateOptions& options) {
  return node.pass == Pass::optimizer ||
         (options.fp8_weight_cache && node.attr_bool("once_per_step", false));
}

void add_sample(std::vector<MemorySample>& memory, double t_s, int64_t live_bytes) {
  if (!memory.empty() && memory.back().live_bytes == live_bytes) return;
  memory.push_back({t_s, live_bytes});
}

}  // namespace

ExecutionTimeline execution_timeline(const Graph& graph, const SimulationResult& result,
                                     const SimulateOptions& options) {
  const auto nodes = graph.nodes();
  ACCELSIM_CHECK(result.ops.size() == nodes.size(), "the simulation result is not of this graph");
  ACCELSIM_CHECK(options.micro_batches >= 1, "micro_batches must be at least 1");
  const MemoryProfile& mem = result.memory;
  const bool have_memory = mem.live_bytes.size() == nodes.size();

  // Execution order: each micro-batch's forward and backward (ops run once per step only in the
  // first), then the optimizer. With one micro-batch, simply the graph's order.
  std::vector<std::pair<NodeId, int32_t>> order;
  order.reserve(nodes.size() * static_cast<size_t>(options.micro_batches));
  if (options.micro_batches == 1) {
    for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) order.emplace_back(n, 0);
  } else {
    for (int32_t mb = 0; mb < options.micro_batches; ++mb) {
      for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
        if (nodes[n].pass == Pass::optimizer) continue;
        if (mb > 0 && runs_once_per_step(nodes[n], options)) continue;
        order.emplace_back(n, mb);
      }
    }
    for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
      if (nodes[n].pass == Pass::optimizer) order.emplace_back(n, 0);
    }
  }

  ExecutionTimeline t;
  double clock_s = 0.0;
  for (const auto& [n, mb] : order) {
    const OpResult& op = result.ops[n];
    if (have_memory) add_sample(t.memory, clock_s, mem.live_bytes[n]);
    if (op.cost.time_s > 0.0) {
      const Stream stream =
          op.count.op_class == OpClass::communication ? Stream::communication : Stream::compute;
      t.spans.push_back({n, mb, stream, clock_s, clock_s + op.cost.time_s});
      clock_s += op.cost.time_s;
    }
  }
  t.latency_s = clock_s;
  if (have_memory) {
    const int64_t end_bytes = order.empty() ? mem.resident_bytes : mem.live_bytes_after[order.back().first];
    if (t.memory.empty() || t.memory.back().live_bytes != end_bytes) {
      t.memory.push_back({clock_s, end_bytes});
    } else if (t.memory.back().t_s < clock_s) {
      t.memory.push_back({clock_s, end_bytes});
    }
  }
  return t;
}

std::vector<MemorySample> downsample_memory(const std::vector<MemorySample>& memory,
                                            size_t max_points) {
  ACCELSIM_CHECK(max_points >= 4, "downsample_memory keeps at least 4 points");
  if (memory.size() <= max_points) return memory;
  // The first and last samples are kept as they are; the rest fall into equal time bins.
  const size_t bins = max_points - 2;
  const double t0 = memory.front().t_s;
  const double span = memory.back().t_s - t0;
  std::vector<MemorySample> out;
  out.reserve(max_points);
  out.push_back(memory.front());
  size_t current = bins;  // no bin open yet
  for (size_t i = 1; i + 1 < memory.size(); ++i) {
    const MemorySample& s = memory[i];
    size_t bin = span > 0.0 ? static_cast<size_t>((s.t_s - t0) / span * static_cast<double>(bins)) : 0;
    bin = std::min(bin, bins - 1);
    if (bin != current) {
      out.push_back(s);
      current = bin;
    } else if (s.live_bytes > out.back().live_bytes) {
      out.back().live_bytes = s.live_bytes;
    }
  }
  out.push_back(memory.back());
  return out;
}

std::vector<std::pair<double, double>> empirical_cdf(const std::vector<double>& values, size_t max_points) {
  ACCELSIM_CHECK(max_points >= 2, "empirical_cdf keeps at least 2 points");
  std::vector<double> sorted;
  sorted.reserve(values.size());
  for (double v : values) {
    if (!std::isnan(v)) sorted.push_back(v);
  }
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<double, double>> out;
  const size_t n = sorted.size();
  if (n == 0) return out;
  const size_t points = std::min(n, max_points);
  out.reserve(points);
  for (size_t k = 0; k < points; ++k) {
    // Rank r (0-based) of the k-th kept point, evenly spaced from 0 to n - 1; the fraction of
    // values <= sorted[r] counts ties up to the last equal value.
    const size_t r = points == 1 ? n - 1 : (k * (n - 1)) / (points - 1);
    const size_t last = static_cast<size_t>(std::upper_bound(sorted.begin(), sorted.end(), sorted[r]) - sorted.begin());
    out.emplace_back(sorted[r], static_cast<double>(last) / static_cast<double>(n));
  }
  return out;
}

RooflineChart roofline_chart(const Graph& graph, const SimulationResult& result,
                             const DeviceSpec& device, const CostOptions& cost) {
  device.validate();
  const auto nodes = graph.nodes();
  ACCELSIM_CHECK(result.ops.size() == nodes.size(), "the simulation result is not of this graph");
  RooflineChart chart;
  chart.bandwidth_bytes_per_s = device.memory_bandwidth_bytes_per_s;
  std::map<std::string, double> units;
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    const OpResult& op = result.ops[n];
    const double bytes = op.count.bytes();
    if (op.count.flops <= 0.0 || bytes <= 0.0 || op.cost.time_s <= 0.0) continue;
    if (op.count.op_class == OpClass::communication) continue;  // network traffic, not memory
    const PeakRate peak = peak_rate(device, op.count.compute_dtype,
                                    uses_matrix_units(op.count.op_class), cost.allow_tf32);
    units.emplace(peak.unit, peak.flops_per_s);
    chart.points.push_back({n, op.count.flops, bytes, op.cost.time_s, op.count.flops / bytes,
                            op.count.flops / op.cost.time_s, std::string(peak.unit), op.cost.bound});
  }
  // The device's highest peak, so a chart always shows the top of the roof.
  const PeakRate top = peak_rate(device, DType::bf16, true, cost.allow_tf32);
  units.emplace(top.unit, top.flops_per_s);
  for (const auto& [unit, rate] : units) {
    if (rate <= 0.0) continue;
    chart.ceilings.push_back({unit, rate, rate / device.memory_bandwidth_bytes_per_s});
  }
  std::sort(chart.ceilings.begin(), chart.ceilings.end(),
            [](const RooflineCeiling& a, const RooflineCeiling& b) { return a.flops_per_s > b.flops_per_s; });
  return chart;
}

}  // namespace accelsim
