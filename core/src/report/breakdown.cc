#include "accelsim/breakdown.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

namespace accelsim {
namespace {

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string key_of(const Node& node, const OpResult& op, GroupBy by) {
  switch (by) {
    case GroupBy::op: return node.op;
    case GroupBy::op_class: return std::string(op_class_name(op.count.op_class));
    case GroupBy::module: return node.module_path.empty() ? "(top level)" : node.module_path;
    case GroupBy::layer:
      return node.module_path.empty() ? "(top level)" : layer_of(node.module_path);
    case GroupBy::module_type: return node.module_type.empty() ? "(top level)" : node.module_type;
  }
  return node.op;
}

}  // namespace

std::string layer_of(const std::string& module_path) {
  size_t start = 0;
  while (start <= module_path.size()) {
    size_t dot = module_path.find('.', start);
    if (dot == std::string::npos) dot = module_path.size();
    if (all_digits(std::string_view(module_path).substr(start, dot - start))) {
      return module_path.substr(0, dot);
    }
    start = dot + 1;
  }
  return module_path;
}

std::vector<Group> group_ops(const Graph& graph, const SimulationResult& result, GroupBy by) {
  std::vector<Group> groups;
  std::unordered_map<std::string, size_t> index;
  for (const OpResult& op : result.ops) {
    if (!op.count.launches_kernel) continue;
    const std::string key = key_of(graph.node(op.node), op, by);
    auto [it, inserted] = index.try_emplace(key, groups.size());
    if (inserted) groups.push_back(Group{.name = key});
    Group& g = groups[it->second];
    g.count += 1;
    g.time_s += op.cost.time_s;
    g.flops += op.count.flops;
    g.bytes += op.count.bytes();
    if (op.cost.bound == Bound::compute) g.compute_bound_time_s += op.cost.time_s;
    if (op.cost.bound == Bound::memory) g.memory_bound_time_s += op.cost.time_s;
  }
  for (Group& g : groups) {
    g.fraction = result.latency_s > 0 ? g.time_s / result.latency_s : 0.0;
    g.dominant_bound =
        g.compute_bound_time_s >= g.memory_bound_time_s ? Bound::compute : Bound::memory;
    if (g.time_s == 0) g.dominant_bound = Bound::none;
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.time_s > b.time_s; });
  return groups;
}

}  // namespace accelsim
