// Breakdowns of a simulation: where the time goes, grouped by op, op class, module or layer.
#pragma once

#include <string>
#include <vector>

#include "accelsim/graph.h"
#include "accelsim/simulate.h"

namespace accelsim {

enum class GroupBy : uint8_t {
  op,           // Node::op
  op_class,     // OpClass name
  module,       // full module path
  layer,        // module path cut after its first numeric component ("model.layers.3")
  module_type,  // class name of the innermost module
};

struct Group {
  std::string name;
  int64_t count = 0;  // ops in the group
  double time_s = 0.0;
  double fraction = 0.0;  // of the run's latency
  double flops = 0.0;
  double bytes = 0.0;
  double compute_bound_time_s = 0.0;
  double memory_bound_time_s = 0.0;
  Bound dominant_bound = Bound::none;  // bound that holds most of the group's time
};

// Groups the ops of `result` (a simulation of `graph`), sorted by time, largest first. Views
// (no time) are left out. Ops without a module go to the group "(top level)".
std::vector<Group> group_ops(const Graph& graph, const SimulationResult& result, GroupBy by);

// The layer key of a module path: everything up to and including the first all-digit
// component ("model.layers.3.mlp.up_proj" -> "model.layers.3"); the path itself when it has none.
std::string layer_of(const std::string& module_path);

}  // namespace accelsim
