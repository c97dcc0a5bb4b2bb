// Advice: hints about what would make a simulated run faster or fit, and the verdict of a
// comparison across devices. The thresholds are stated with each rule in advice.cc.
#pragma once

#include <string>
#include <vector>

#include "accelsim/graph.h"
#include "accelsim/simulate.h"

namespace accelsim {

enum class HintKind : uint8_t {
  out_of_memory,          // peak > capacity: smaller batch/sequence, lower precision, more devices
  fuse_memory_bound,      // memory-bound pointwise/softmax/norm ops hold much of the time
  use_flash_attention,    // attention materializes its score matrix (matmul -> softmax)
  matmul_dominated,       // matmuls fill the time: shapes, dtype or a bigger device
  low_precision_available,  // fp32 matmuls on a device with much faster 16-bit units
  launch_bound,           // launch overhead is a large share: CUDA graphs, bigger batches
  peak_fallback,          // the device file lacks the rate for some op's unit
  uncovered_ops,          // ops not in the catalogue were costed conservatively
  communication_not_timed,  // the graph holds collectives; one device does not time them
  // Eager attention GEMMs compute query-key pairs their mask discards (OpCount::masked_flops):
  // value = those FLOPs in the forward, fraction = their share of the forward's eager attention
  // GEMM FLOPs, subject = the module of the first such GEMM.
  masked_attention_pairs,
};

std::string_view hint_kind_name(HintKind kind);

struct Hint {
  HintKind kind;
  double fraction = 0.0;  // share of latency the hint is about (or memory over capacity)
  double value = 0.0;     // a rule-specific figure (e.g. speed-up ratio, count)
  std::string subject;    // an op, module or unit the hint names, when there is one
};

std::vector<Hint> advise(const Graph& graph, const SimulationResult& result,
                         const DeviceSpec& device);

// The bound holding most of a run's time: compute when its compute-bound ops take at least as
// long as its memory-bound ones, memory otherwise (launch overhead and communication aside).
Bound dominant_bound(const SimulationResult& result);

// Verdict over simulations of one graph on several devices (same order as `devices`).
struct DeviceVerdict {
  std::string device_id;
  bool fits = false;
  Bound dominant_bound = Bound::none;  // bound holding most of the time
  double cost_per_run_usd = 0.0;       // latency * hourly price; 0 when the price is unknown
  double speedup_vs_slowest = 0.0;
  bool overkill = false;
  std::string overkill_reason;  // device id that does as well for less, or "underused"
  // SimulationResult::narrower_precision: the device ran some matrix ops in a narrower format
  // than the graph's dtype, so it is left out of fastest, best value and overkill.
  bool narrower_precision = false;
  // Among the devices fastest, best value and overkill are chosen from: it fits and ran the
  // graph's own precision (fits && !narrower_precision).
  bool ranked = false;
};

struct Comparison {
  std::vector<DeviceVerdict> devices;
  // Among the ranked devices (DeviceVerdict::ranked):
  int fastest_index = -1;     // the fastest; -1 if none
  int best_value_index = -1;  // the lowest cost per run among those with a price; -1 if none
};

// REQUIRES: results.size() == devices.size().
Comparison compare_devices(const std::vector<SimulationResult>& results,
                           const std::vector<DeviceSpec>& devices);

}  // namespace accelsim
