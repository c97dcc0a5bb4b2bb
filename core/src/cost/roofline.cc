#include <algorithm>
#include <string>

#include "accelsim/cost_model.h"
#include "accelsim/error.h"

namespace accelsim {

std::string_view bound_name(Bound bound) {
  switch (bound) {
    case Bound::none: return "none";
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
  }
  return "none";
}

std::string_view attention_impl_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::flash2: return "flash2";
    case AttentionImpl::flash3: return "flash3";
    case AttentionImpl::cudnn: return "cudnn";
    case AttentionImpl::eager: return "eager";
    case AttentionImpl::flash1: return "flash1";
  }
  return "flash2";
}

AttentionImpl parse_attention_impl(std::string_view name) {
  if (name == "flash2") return AttentionImpl::flash2;
  if (name == "flash3") return AttentionImpl::flash3;
  if (name == "cudnn") return AttentionImpl::cudnn;
  if (name == "eager") return AttentionImpl::eager;
  if (name == "flash1") return AttentionImpl::flash1;
  throw ConfigError("unknown attention implementation '" + std::string(name) +
                    "' (known: flash2, flash3, cudnn, eager, flash1)");
}

OpCost RooflineCostModel::cost(const OpCount& count, const DeviceSpec& device,
                               const CostOptions& options) const {
  OpCost c;
  if (!count.launches_kernel) return c;  // views and allocations: no kernel, no time
  // Roofline (Williams, Waterman, Patterson, CACM 2009): an op takes at least its arithmetic
  // at peak rate and at least its memory traffic at peak bandwidth; the longer one bounds it.
  const PeakRate peak = peak_rate(device, count.compute_dtype, uses_matrix_units(count.op_class),
                                  options.allow_tf32);
  c.peak_flops_per_s = peak.flops_per_s;
  c.peak_fallback = peak.fallback;
  c.peak_unit = peak.unit;
  c.peak_narrower = peak.narrower;
  c.compute_time_s = peak.flops_per_s > 0 ? count.flops / peak.flops_per_s : 0.0;
  c.memory_time_s = count.bytes() / device.memory_bandwidth_bytes_per_s;
  c.bound = c.compute_time_s > c.memory_time_s ? Bound::compute : Bound::memory;
  c.launch_overhead_s = host_launch_s(device, options);
  c.time_s = std::max(c.compute_time_s, c.memory_time_s) + c.launch_overhead_s;
  return c;
}

double host_launch_s(const DeviceSpec& device, const CostOptions& options) {
  if (!options.include_launch_overhead || options.cuda_graphs) return 0.0;
  return options.host_overhead_per_kernel_s > 0 ? options.host_overhead_per_kernel_s
                                                : device.kernel_launch_overhead_s;
}

std::unique_ptr<CostModel> make_cost_model(std::string_view name) {
  if (name == "roofline") return std::make_unique<RooflineCostModel>();
  if (name == "kernel") return std::make_unique<KernelCostModel>();
  std::string known;
  for (const std::string& n : cost_model_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown cost model '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> cost_model_names() { return {"kernel", "roofline"}; }

}  // namespace accelsim
