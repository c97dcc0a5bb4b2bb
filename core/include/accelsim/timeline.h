// Views of a simulation for reports: the run as it executes (spans per stream and live memory
// over time, for traces and timelines) and the device's roofline with every op placed on it.
//
//   ExecutionTimeline t = execution_timeline(graph, result, options);
//   t.spans (op, micro-batch, stream, start, end), t.memory (time, live bytes)
//   RooflineChart c = roofline_chart(graph, result, device, options.cost);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "accelsim/cost_model.h"
#include "accelsim/device.h"
#include "accelsim/graph.h"
#include "accelsim/simulate.h"

namespace accelsim {

// The stream an op runs on: kernels on the compute stream, collectives on the communication
// stream (NCCL's own stream). simulate() runs them back to back, so the two never overlap in
// time; a collective's part hidden under GEMMs (OpResult::overlapped_s) is not in its span.
enum class Stream : uint8_t { compute, communication };

struct TimelineSpan {
  NodeId node = kNoNode;
  int32_t micro_batch = 0;  // 0-based; ops run once per step (optimizer, cached fp8 casts) have 0
  Stream stream = Stream::compute;
  double start_s = 0.0;
  double end_s = 0.0;
};

// Live memory from t_s until the next sample (a step function).
struct MemorySample {
  double t_s = 0.0;
  int64_t live_bytes = 0;
};

struct ExecutionTimeline {
  // Every op that takes time, in execution order: the forward and backward ops once per
  // micro-batch (SimulateOptions::micro_batches), then those run once per step. The spans tile
  // [0, latency_s] without gaps, so their durations sum to SimulationResult::latency_s.
  std::vector<TimelineSpan> spans;
  // Live bytes over the run: at each op's start what is live while it runs
  // (MemoryProfile::live_bytes; what the op before freed is gone, what it allocates is there),
  // a sample where the value changes, and at latency_s what is live after the last op. An op
  // that takes no time gives a sample at the same time as the next one, so its bytes show as a
  // spike of zero width: the curve's maximum is MemoryProfile::peak_bytes.
  std::vector<MemorySample> memory;
  double latency_s = 0.0;
};

// REQUIRES: `result` = simulate(graph, device, options).
ExecutionTimeline execution_timeline(const Graph& graph, const SimulationResult& result,
                                     const SimulateOptions& options);

// At most `max_points` samples of `memory` (max_points >= 4) for a chart: time is cut into
// equal bins and each bin keeps its first sample's time with the highest live bytes in it, so
// the peak survives exactly. Returns `memory` itself when it is short enough.
std::vector<MemorySample> downsample_memory(const std::vector<MemorySample>& memory,
                                            size_t max_points);

// The empirical CDF of `values` for a chart (NaNs, e.g. requests that did not complete, left
// out): (value, fraction of values <= it) at the sorted values, thinned to at most `max_points`
// (max_points >= 2) by keeping evenly spaced ranks and always the smallest and largest.
std::vector<std::pair<double, double>> empirical_cdf(const std::vector<double>& values, size_t max_points);

// A ceiling of the roofline: a peak compute rate and the arithmetic intensity (FLOP per byte of
// memory traffic) where the bandwidth line meets it: ridge = flops_per_s / bandwidth.
struct RooflineCeiling {
  std::string unit;  // PeakRate::unit: "bf16_matrix", "fp32", ...
  double flops_per_s = 0.0;
  double ridge_intensity = 0.0;
};

// One op on the roofline (Williams, Waterman & Patterson, CACM 2009): its arithmetic intensity
// flops / bytes and the rate it achieves in the simulation, flops / time (launch overhead
// included), against the ceiling of its unit.
struct RooflinePoint {
  NodeId node = kNoNode;
  double flops = 0.0;
  double bytes = 0.0;
  double time_s = 0.0;
  double intensity = 0.0;             // FLOP/byte
  double achieved_flops_per_s = 0.0;  // flops / time_s
  std::string unit;                   // the ceiling that applies
  Bound bound = Bound::none;
};

struct RooflineChart {
  double bandwidth_bytes_per_s = 0.0;
  // The ceilings the points use, highest first; the device's bf16 matrix peak (its tensor-core
  // roof, or the fallback PeakRate names) is always among them.
  std::vector<RooflineCeiling> ceilings;
  // Every op with FLOPs, bytes and time (a fused chain: its first op, which carries the cost),
  // in execution order.
  std::vector<RooflinePoint> points;
};

// REQUIRES: `result` = simulate(graph, device, options) with options.cost == `cost`.
RooflineChart roofline_chart(const Graph& graph, const SimulationResult& result,
                             const DeviceSpec& device, const CostOptions& cost);

}  // namespace accelsim
