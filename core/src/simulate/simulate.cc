#include "accelsim/simulate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include "accelsim/error.h"
#include "accelsim/physical_range.h"

namespace accelsim {
namespace {

// A collective node timed on the options' system: its kind from the op, nccl-tests' size S from
// its tensors (all-gather: the gathered output; reduce-scatter: the input, the output times the
// group; all-reduce and all-to-all: the tensor), its group's size and placement.
OpCost collective_cost(const Node& node, const OpCount& count, const SimulateOptions& options) {
  const AttrValue* value = node.attr("group");
  const std::string* named = value != nullptr ? std::get_if<std::string>(value) : nullptr;
  const std::string group = named != nullptr ? *named : std::string();
  const auto it = std::find_if(options.groups.begin(), options.groups.end(),
                               [&](const CommGroup& g) { return g.name == group; });
  ACCELSIM_CHECK(it != options.groups.end(),
                 "the graph has a '" + group + "' collective (" + node.op +
                     ") but the parallel layout gives no '" + group + "' group size");
  CollectiveQuery q;
  q.ranks = it->size;
  q.ranks_per_domain = it->ranks_per_domain;
  q.bytes = count.communication_bytes;
  if (node.op == "accel_sim::all_reduce") {
    q.kind = CollectiveKind::all_reduce;
  } else if (node.op == "accel_sim::all_gather") {
    q.kind = CollectiveKind::all_gather;
  } else if (node.op == "accel_sim::reduce_scatter") {
    q.kind = CollectiveKind::reduce_scatter;
    q.bytes *= static_cast<double>(it->size);
  } else {
    q.kind = CollectiveKind::all_to_all;
  }
  OpCost c;
  c.time_s = estimate_collective(q, *options.system).time_s;
  c.bound = Bound::none;
  return c;
}


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

// Activity-based energy of one op, an estimate:
//   E = t * P_idle + FLOPs * e_flop + bytes * e_byte, at most t * TDP.
// P_idle = kIdleFractionOfTdp (device.h) of the TDP. e_byte = 32 pJ/B:
// HBM2 moves data at about 3.9 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO 2017).
// e_flop apportions what is left of the TDP at the op's peak rate, (TDP - P_idle) / peak, so an
// op running at its peak draws the TDP (a power-at-peak bound, not a measurement).
constexpr double kJoulesPerByte = 32e-12;

double op_energy(const OpCount& count, const OpCost& cost, const DeviceSpec& device) {
  if (device.tdp_w <= 0 || cost.time_s <= 0) return 0.0;
  const double idle = kIdleFractionOfTdp * device.tdp_w;
  const double per_flop = cost.peak_flops_per_s > 0 ? (device.tdp_w - idle) / cost.peak_flops_per_s : 0.0;
  const double energy = cost.time_s * idle + count.flops * per_flop + count.bytes() * kJoulesPerByte;
  return std::min(energy, cost.time_s * device.tdp_w);
}

bool fusible(const OpCount& c) {
  switch (c.op_class) {
    case OpClass::elementwise:
    case OpClass::copy:
    case OpClass::reduction:
    case OpClass::normalization:
    case OpClass::softmax: return c.known && c.launches_kernel;
    default: return false;
  }
}

// Chains of fusible ops (SimulateOptions::fuse_elementwise): per node, the first node of its
// chain (itself when alone). A node joins the running chain when it is fusible and reads a
// storage the chain wrote.
// Nodes counted once per step (`once`) stay out of chains: a chain is counted per micro-batch.
std::vector<NodeId> fusion_chains(const Graph& g, const std::vector<OpCount>& counts,
                                  const std::vector<char>& once) {
  const auto nodes = g.nodes();
  std::vector<NodeId> leader(nodes.size());
  std::vector<NodeId> writer_chain(g.storages().size(), kNoNode);  // chain that last wrote it
  NodeId current = kNoNode;
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    leader[n] = n;
    if (!fusible(counts[n]) || once[n]) {
      current = kNoNode;
      continue;
    }
    bool joins = false;
    for (TensorId t : nodes[n].inputs) {
      joins = joins || (current != kNoNode && writer_chain[g.tensor(t).storage] == current);
    }
    current = joins ? current : n;
    leader[n] = current;
    for (TensorId t : nodes[n].outputs) writer_chain[g.tensor(t).storage] = current;
  }
  return leader;
}

// The work of each chain as one kernel: its FLOPs, and the bytes of the storages that are not
// internal to it (an internal storage is an activation first and last touched inside the chain
// and not a graph output), each read or written once. Members other than the leader are zeroed.
void fuse_counts(const Graph& g, const std::vector<NodeId>& leader, std::vector<OpCount>& counts) {
  const auto nodes = g.nodes();
  const size_t storages = g.storages().size();
  std::vector<NodeId> first(storages, kNoNode), last(storages, kNoNode);
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    for (const auto* list : {&nodes[n].inputs, &nodes[n].outputs}) {
      for (TensorId t : *list) {
        const StorageId s = g.tensor(t).storage;
        if (first[s] == kNoNode) first[s] = n;
        last[s] = n;
      }
    }
  }
  std::vector<char> is_output(storages, 0);
  for (TensorId t : g.outputs()) is_output[g.tensor(t).storage] = 1;
  std::vector<NodeId> seen_read(storages, kNoNode), seen_write(storages, kNoNode);
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    const NodeId lead = leader[n];
    const bool chained = lead != n || (n + 1 < static_cast<NodeId>(nodes.size()) && leader[n + 1] == n);
    if (!chained) continue;
    OpCount& head = counts[lead];
    if (lead == n) {
      head.bytes_read = head.bytes_written = 0;
    } else {
      head.flops += counts[n].flops;
    }
    auto internal = [&](StorageId s) {
      return g.storage(s).kind == StorageKind::activation && !is_output[s] &&
             first[s] != kNoNode && leader[first[s]] == lead && leader[last[s]] == lead;
    };
    for (TensorId t : nodes[n].inputs) {
      const StorageId s = g.tensor(t).storage;
      if (internal(s) || seen_read[s] == lead) continue;
      seen_read[s] = lead;
      head.bytes_read += static_cast<double>(g.tensor(t).accessed_bytes());
    }
    for (TensorId t : nodes[n].outputs) {
      const StorageId s = g.tensor(t).storage;
      if (internal(s) || seen_write[s] == lead) continue;
      seen_write[s] = lead;
      head.bytes_written += static_cast<double>(g.tensor(t).accessed_bytes());
    }
    if (lead != n) {
      const OpClass cls = counts[n].op_class;
      counts[n] = OpCount{.op_class = cls, .compute_dtype = counts[n].compute_dtype,
                          .launches_kernel = false};
    }
  }
}

// ---- TP communication overlap (SimulateOptions::overlap_tp_comm) ---------------------------

// The nodes that read and that write each storage, in execution order (views share their
// base's storage, so a consumer of a view is a reader of the base).
struct StorageUses {
  std::vector<std::vector<NodeId>> readers, writers;
};

StorageUses storage_uses(const Graph& g) {
  StorageUses u;
  u.readers.resize(g.storages().size());
  u.writers.resize(g.storages().size());
  const auto nodes = g.nodes();
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    for (TensorId t : nodes[n].inputs) {
      auto& list = u.readers[g.tensor(t).storage];
      if (list.empty() || list.back() != n) list.push_back(n);
    }
    for (TensorId t : nodes[n].outputs) {
      auto& list = u.writers[g.tensor(t).storage];
      if (list.empty() || list.back() != n) list.push_back(n);
    }
  }
  return u;
}

class TpOverlap {
 public:
  TpOverlap(const Graph& g, const std::vector<OpResult>& ops, int64_t chunks)
      : g_(g), ops_(ops), uses_(storage_uses(g)), chunks_(static_cast<double>(chunks)),
        weight_(g.storages().size(), 0), taken_(g.nodes().size(), 0) {
    // Weights: parameters, and the storages a cast of a parameter writes (the fp8 weights).
    for (StorageId s = 0; s < static_cast<StorageId>(g.storages().size()); ++s) {
      weight_[s] = g.storage(s).kind == StorageKind::parameter;
    }
    for (const Node& n : g.nodes()) {
      if (n.op != "_to_copy" || n.inputs.empty() || !weight_[storage(n.inputs[0])]) continue;
      for (TensorId t : n.outputs) weight_[storage(t)] = 1;
    }
  }

  // The time of collective `c` hidden under its partner GEMMs (0 when it has none).
  double hidden_s(NodeId c) {
    const Node& n = g_.node(c);
    std::vector<NodeId> partners;
    bool bulk = false;
    if (n.op == "accel_sim::all_gather") {
      partners = weight_gemms_reading(storage(n.outputs[0]), c);
    } else if (n.pass == Pass::forward) {
      partners = weight_gemms_writing(storage(n.inputs[0]), c, 0);
    } else {
      // TE's bulk wgrad overlap: the reduce-scatter of dX runs beside the wgrad GEMMs, those
      // that read the output gradient the dgrad GEMMs producing dX read.
      bulk = true;
      for (NodeId d : weight_gemms_writing(storage(n.inputs[0]), c, 0)) {
        for (TensorId t : g_.node(d).inputs) {
          const StorageId s = storage(t);
          if (weight_[s]) continue;
          for (NodeId k : uses_.readers[s]) {
            if (k != d && g_.node(k).pass == n.pass && gemm(k) && !reads_weight(k) && !taken_[k] &&
                std::find(partners.begin(), partners.end(), k) == partners.end()) {
              partners.push_back(k);
            }
          }
        }
      }
    }
    double gemm_s = 0.0;
    for (NodeId k : partners) {
      taken_[k] = 1;
      gemm_s += ops_[k].cost.time_s;
    }
    const double comm_s = ops_[c].cost.time_s;
    if (gemm_s <= 0.0) return 0.0;
    // The pair takes max(C, G) + min(C, G) / n (pipelined) or max(C, G) (bulk); the collective
    // adds that minus G to the GEMMs' time.
    const double pair_s = std::max(comm_s, gemm_s) + (bulk ? 0.0 : std::min(comm_s, gemm_s) / chunks_);
    const double charged_s = std::max(0.0, pair_s - gemm_s);
    return comm_s - charged_s;
  }

 private:
  StorageId storage(TensorId t) const { return g_.tensor(t).storage; }
  bool gemm(NodeId k) const { return ops_[k].count.op_class == OpClass::matmul; }
  bool reads_weight(NodeId k) const {
    for (TensorId t : g_.node(k).inputs) {
      if (weight_[storage(t)]) return true;
    }
    return false;
  }
  bool partner(NodeId k, Pass pass) const {
    return g_.node(k).pass == pass && gemm(k) && reads_weight(k) && !taken_[k];
  }

  // GEMMs after `c` in its pass that read storage `s` and a weight, directly or through one
  // dtype cast of `s` (the fp8 cast of a GEMM input).
  std::vector<NodeId> weight_gemms_reading(StorageId s, NodeId c) const {
    const Pass pass = g_.node(c).pass;
    std::vector<NodeId> found;
    for (NodeId k : uses_.readers[s]) {
      if (k <= c) continue;
      if (partner(k, pass)) {
        found.push_back(k);
      } else if (g_.node(k).op == "_to_copy" && g_.node(k).pass == pass) {
        for (TensorId t : g_.node(k).outputs) {
          for (NodeId j : uses_.readers[storage(t)]) {
            if (j > k && partner(j, pass)) found.push_back(j);
          }
        }
      }
    }
    return found;
  }

  // GEMMs before `c` in its pass that read a weight and write storage `s`, directly or into an
  // add (a bias add; the accumulation of several dgrads into one gradient) that writes it.
  std::vector<NodeId> weight_gemms_writing(StorageId s, NodeId c, int depth) const {
    const Pass pass = g_.node(c).pass;
    std::vector<NodeId> found;
    for (NodeId k : uses_.writers[s]) {
      if (k >= c || g_.node(k).pass != pass) continue;
      if (partner(k, pass)) {
        found.push_back(k);
      } else if ((g_.node(k).op == "add" || g_.node(k).op == "add_") && depth < 2) {
        for (TensorId t : g_.node(k).inputs) {
          if (storage(t) == s) continue;
          for (NodeId j : weight_gemms_writing(storage(t), k, depth + 1)) {
            if (std::find(found.begin(), found.end(), j) == found.end()) found.push_back(j);
          }
        }
      }
    }
    return found;
  }

  const Graph& g_;
  const std::vector<OpResult>& ops_;
  StorageUses uses_;
  double chunks_;
  std::vector<char> weight_;
  std::vector<char> taken_;  // GEMMs already hiding a collective
};

// 2D SUMMA's collectives (attr "summa", BuildOptions::summa): SUMMA broadcasts its panels of X
// and W while the previous panel's GEMM runs, and reduces each panel's partial dX or dW while the
// next one computes, so a GEMM of G seconds and the gathers feeding it (or the reduce-scatters it
// feeds) of C seconds, in n panels, take G + C / n while G >= C (one panel exposed: the NERSC
// performance model's LinearSumma, Subramanian et al. 2024, arXiv 2410.00273) and C + G / n
// once the collectives outlast the GEMM (the model's code charges C + C / n there). GEMMs that share a collective (q, k and v reading one gathered
// input) and collectives that share a GEMM are taken together. Returns each node's hidden time.
std::vector<double> summa_hidden(const Graph& g, const std::vector<OpResult>& ops) {
  const auto nodes = g.nodes();
  const auto count = static_cast<NodeId>(nodes.size());
  std::vector<double> hidden(nodes.size(), 0.0);
  if (std::none_of(nodes.begin(), nodes.end(), [](const Node& n) { return n.attr("summa") != nullptr; })) {
    return hidden;
  }
  std::vector<NodeId> parent(nodes.size());
  for (NodeId n = 0; n < count; ++n) parent[n] = n;
  std::function<NodeId(NodeId)> root = [&](NodeId n) { return parent[n] == n ? n : parent[n] = root(parent[n]); };
  const StorageUses uses = storage_uses(g);
  auto gemm = [&](NodeId k) { return ops[k].count.op_class == OpClass::matmul; };
  std::vector<char> member(nodes.size(), 0);
  bool any = false;
  for (NodeId c = 0; c < count; ++c) {
    const Node& n = nodes[c];
    if (n.attr("summa") == nullptr) continue;
    std::vector<NodeId> partners;
    if (n.op == "accel_sim::all_gather") {
      for (NodeId k : uses.readers[g.tensor(n.outputs[0]).storage]) {
        if (k > c && nodes[k].pass == n.pass && gemm(k)) partners.push_back(k);
      }
    } else {
      // The GEMMs writing the reduced input, directly or through the adds that sum several
      // GEMMs' outputs into it.
      std::vector<StorageId> frontier{g.tensor(n.inputs[0]).storage};
      for (int depth = 0; depth < 3 && !frontier.empty(); ++depth) {
        std::vector<StorageId> next;
        for (StorageId st : frontier) {
          for (NodeId k : uses.writers[st]) {
            if (k >= c || nodes[k].pass != n.pass) continue;
            if (gemm(k)) {
              partners.push_back(k);
            } else if (nodes[k].op == "add" || nodes[k].op == "add_") {
              for (TensorId t : nodes[k].inputs) {
                if (g.tensor(t).storage != st) next.push_back(g.tensor(t).storage);
              }
            }
          }
        }
        frontier = std::move(next);
      }
    }
    if (partners.empty()) continue;
    any = true;
    member[c] = 1;
    for (NodeId k : partners) {
      member[k] = 1;
      parent[root(k)] = root(c);
    }
  }
  if (!any) return hidden;
  struct Set {
    double comm = 0.0, gemm = 0.0;
    int64_t panels = 1;
  };
  std::unordered_map<NodeId, Set> sets;
  for (NodeId n = 0; n < count; ++n) {
    if (!member[n]) continue;
    Set& set = sets[root(n)];
    if (nodes[n].attr("summa") != nullptr) {
      set.comm += ops[n].cost.time_s;
      set.panels = std::max(set.panels, nodes[n].attr_int("summa", 1));
    } else {
      set.gemm += ops[n].cost.time_s;
    }
  }
  for (NodeId n = 0; n < count; ++n) {
    if (!member[n] || nodes[n].attr("summa") == nullptr) continue;
    const Set& set = sets[root(n)];
    if (set.comm <= 0.0) continue;
    // n panels of c = C / n collectives and g = G / n GEMMs, each panel's collectives beside the
    // previous panel's GEMM: c + (n - 1) max(c, g) + g in all, G + C / n while the GEMMs
    // outlast the collectives, C + G / n once they do not.
    const auto panels = static_cast<double>(set.panels);
    const double c = set.comm / panels, g = set.gemm / panels;
    const double exposed = c + (panels - 1.0) * std::max(c, g) + g - set.gemm;
    const double share = std::max(0.0, set.comm - std::min(exposed, set.comm)) / set.comm;
    hidden[n] = ops[n].cost.time_s * share;
  }
  return hidden;
}

bool is_tp_overlappable(const Node& node) {
  if (node.op != "accel_sim::all_gather" && node.op != "accel_sim::reduce_scatter") return false;
  if (node.attr("summa") != nullptr) return false;  // summa_hidden's
  const AttrValue* group = node.attr("group");
  const std::string* name = group != nullptr ? std::get_if<std::string>(group) : nullptr;
  return name != nullptr && *name == "tp";
}

bool in_physical_range(double value) { return std::isfinite(value) && value >= 0.0; }

// simulate()'s promise (physical_range.h): every figure of `r` finite, every time, count, rate
// and byte count non-negative. Each op's time (so its start and end), FLOPs, bytes, launch
// overhead, energy, collective bytes and hidden time feed a total, and `unsummed` adds up the
// op figures no total holds (compute and memory times, peak rate, masked FLOPs), so the totals
// and `unsummed` are the check; only when one is out of range are the ops looked at, to name the
// op. (An op's figure cannot be negative where its inputs validated: they are sums, products,
// quotients and maxima of non-negative numbers, and a collective hides at most its own time.)
void require_physical(const Graph& graph, const SimulationResult& r, double unsummed) {
  constexpr const char* kWhere = "simulate";
  bool in_range = std::isfinite(unsummed);
  for_each_figure(r, [&](const char*, double value) { in_range = in_range && in_physical_range(value); });
  if (in_range) return;
  for (const OpResult& op : r.ops) {
    for_each_figure(op, [&](const char* figure, double value) {
      if (in_physical_range(value)) return;
      throw_out_of_physical_range(std::string(kWhere) + ": op #" + std::to_string(op.node) + " (" +
                                      graph.node(op.node).op + ")",
                                  figure, value);
    });
  }
  for_each_figure(r, [&](const char* figure, double value) { require_non_negative(kWhere, figure, value); });
}

}  // namespace

// The kernel model's launch waits over the whole graph rather than per op: the host issues the
// kernels in order, spending `host_s` on each, and runs ahead of the device while long kernels
// execute (CUDA's launch queue holds the ones issued early). A kernel starts once the device is
// free and the host has issued it; its launch_overhead_s is the time the device waits for it.
// Kernels shorter than the host's cost leave the device waiting (a step of n of them takes
// n x host_s plus the last one's time); a long kernel hides the issue of those behind it, which
// the per-op rule (each kernel at least host_s) charged again.
void charge_launch_queue(std::vector<OpResult>& ops, double host_s) {
  double issued_s = 0.0, free_s = 0.0;
  for (OpResult& op : ops) {
    if (!op.count.launches_kernel) continue;
    const double device_s = op.cost.time_s - op.cost.launch_overhead_s;
    issued_s += host_s;
    const double start_s = std::max(free_s, issued_s);
    op.cost.launch_overhead_s = start_s - free_s;
    op.cost.time_s = device_s + op.cost.launch_overhead_s;
    free_s = start_s + device_s;
  }
}

void SimulateOptions::validate() const {
  ACCELSIM_CHECK(micro_batches >= 1, "micro_batches must be at least 1");
  require_in_range("", "the clock override (clock_hz; 0: the device's)", cost.clock_hz, kNonNegative);
  require_in_range("", "the host overhead per kernel (host_overhead_per_kernel_s; 0: the device's launch cost)",
                   cost.host_overhead_per_kernel_s, kNonNegative);
  if (system.has_value()) system->validate();
  for (const CommGroup& g : groups) {
    ACCELSIM_CHECK(g.size >= 1 && g.ranks_per_domain >= 0,
                   "the '" + g.name + "' group needs at least one rank and a non-negative count per domain");
  }
}

SimulationResult simulate(const Graph& graph, const DeviceSpec& device,
                          const SimulateOptions& options) {
  device.validate();
  options.validate();
  const std::unique_ptr<CostModel> model = make_cost_model(options.cost_model);

  SimulationResult r;
  r.device_id = device.id;
  const auto nodes = graph.nodes();
  r.ops.reserve(nodes.size());

  // Ops counted once per step rather than per micro-batch: the optimizer, and with the fp8
  // weight cache the ops the graph marks "once_per_step".
  std::vector<char> once(nodes.size(), 0);
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    once[n] = nodes[n].pass == Pass::optimizer ||
              (options.fp8_weight_cache && nodes[n].attr_bool("once_per_step", false));
  }
  std::vector<OpCount> counts(nodes.size());
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) counts[n] = count_op(graph, nodes[n]);
  std::vector<NodeId> leader;
  if (options.fuse_elementwise) {
    leader = fusion_chains(graph, counts, once);
    fuse_counts(graph, leader, counts);
  }

  // Every op's cost first: a collective's overlap depends on GEMMs after it.
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    OpResult op;
    op.node = n;
    if (!leader.empty() && leader[n] != n) op.fused_into = leader[n];
    op.count = counts[n];
    op.cost = model->cost(op.count, device, options.cost);
    if (op.count.op_class == OpClass::communication && options.system.has_value()) {
      op.cost = collective_cost(nodes[n], op.count, options);
    }
    r.ops.push_back(op);
  }
  if (options.overlap_tp_comm && options.system.has_value()) {
    const auto tp = std::find_if(options.groups.begin(), options.groups.end(),
                                 [](const CommGroup& g) { return g.name == "tp"; });
    if (tp != options.groups.end() && tp->size > 1) {
      TpOverlap overlap(graph, r.ops, tp->size);
      for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
        if (!is_tp_overlappable(nodes[n])) continue;
        r.ops[n].overlapped_s = overlap.hidden_s(n);
      }
      for (OpResult& op : r.ops) op.cost.time_s -= op.overlapped_s;
    }
  }
  if (options.system.has_value()) {
    const std::vector<double> hidden = summa_hidden(graph, r.ops);
    for (size_t n = 0; n < hidden.size(); ++n) {
      if (hidden[n] <= 0.0) continue;
      r.ops[n].overlapped_s += hidden[n];
      r.ops[n].cost.time_s -= hidden[n];
    }
  }
  if (model->queues_launches()) charge_launch_queue(r.ops, host_launch_s(device, options.cost));

  std::map<std::string, size_t> uncovered_index;
  double clock_s = 0.0;
  double forward_model_flops = 0.0;
  bool has_backward = false;
  const double micro = static_cast<double>(options.micro_batches);
  double step_s = 0.0;  // every micro-batch's forward and backward, then the optimizer
  double unsummed = 0.0;  // the op figures no total holds (require_physical)
  for (NodeId n = 0; n < static_cast<NodeId>(nodes.size()); ++n) {
    OpResult& op = r.ops[n];
    op.energy_j = op_energy(op.count, op.cost, device);
    unsummed += op.cost.compute_time_s + op.cost.memory_time_s + op.cost.peak_flops_per_s + op.count.masked_flops;
    // Forward and backward ops run once per micro-batch (gradient accumulation).
    const double times = once[n] ? 1.0 : micro;
    r.energy_j += times * op.energy_j;
    op.start_s = clock_s;
    clock_s += op.cost.time_s;
    op.end_s = clock_s;
    step_s += times * op.cost.time_s;

    r.total_flops += times * op.count.flops;
    if (nodes[n].pass == Pass::forward &&
        (op.count.op_class == OpClass::matmul || op.count.op_class == OpClass::attention)) {
      forward_model_flops += op.count.useful_flops();
    }
    has_backward = has_backward || nodes[n].pass == Pass::backward;
    r.total_bytes += times * op.count.bytes();
    r.launch_overhead_time_s += times * op.cost.launch_overhead_s;
    switch (nodes[n].pass) {
      case Pass::forward: r.forward_time_s += times * op.cost.time_s; break;
      case Pass::backward: r.backward_time_s += times * op.cost.time_s; break;
      case Pass::optimizer: r.optimizer_time_s += op.cost.time_s; break;
    }
    if (once[n] && nodes[n].pass != Pass::optimizer) r.once_per_step_time_s += op.cost.time_s;
    if (op.count.launches_kernel) r.num_kernels += static_cast<int64_t>(times);
    if (op.count.op_class == OpClass::communication) {
      r.num_collectives += static_cast<int64_t>(times);
      r.communication_bytes += times * op.count.communication_bytes;
      r.communication_time_s += times * (op.cost.time_s + op.overlapped_s);
      r.overlapped_communication_s += times * op.overlapped_s;
    }
    if (op.cost.bound == Bound::compute) r.compute_bound_time_s += times * op.cost.time_s;
    if (op.cost.bound == Bound::memory) r.memory_bound_time_s += times * op.cost.time_s;
    if (op.cost.peak_fallback) {
      const bool matrix = uses_matrix_units(op.count.op_class);
      auto same = [&](const UnitSubstitution& u) {
        return u.dtype == op.count.compute_dtype && u.matrix == matrix;
      };
      auto it = std::find_if(r.substitutions.begin(), r.substitutions.end(), same);
      if (it == r.substitutions.end()) {
        r.substitutions.push_back({op.count.compute_dtype, matrix, std::string(op.cost.peak_unit),
                                   op.cost.peak_narrower, 0, 0.0});
        it = r.substitutions.end() - 1;
      }
      ++it->ops;
      it->time_s += op.cost.time_s;
      r.narrower_precision = r.narrower_precision || op.cost.peak_narrower;
    }
    if (!op.count.known) {
      auto [it, inserted] = uncovered_index.try_emplace(nodes[n].op, r.uncovered_ops.size());
      if (inserted) r.uncovered_ops.push_back({nodes[n].op, 0, 0.0});
      r.uncovered_ops[it->second].count += 1;
      r.uncovered_ops[it->second].time_s += op.cost.time_s;
    }
  }
  r.latency_s = step_s;
  r.model_flops = (has_backward ? 3.0 : 1.0) * micro * forward_model_flops;

  r.reference_dtype = dominant_matrix_dtype(r.ops);
  const PeakRate reference = peak_rate(device, r.reference_dtype, true, options.cost.allow_tf32);
  r.reference_peak_flops_per_s = reference.flops_per_s;
  if (r.latency_s > 0) {
    if (reference.flops_per_s > 0) {
      r.compute_utilization = r.total_flops / (r.latency_s * reference.flops_per_s);
      r.model_flops_utilization = r.model_flops / (r.latency_s * reference.flops_per_s);
    }
    r.bandwidth_utilization =
        r.total_bytes / (r.latency_s * device.memory_bandwidth_bytes_per_s);
  }

  r.memory = compute_memory_profile(graph, options.release_policy);
  r.memory_capacity_bytes = device.memory_bytes;
  r.required_bytes = static_cast<double>(r.memory.peak_segment_bytes) + device.runtime_reserved_bytes;
  r.fits = r.required_bytes <= device.memory_bytes;
  require_physical(graph, r, unsummed);
  return r;
}

double fusion_saving_s(const Graph& graph, const DeviceSpec& device, const SimulateOptions& options,
                       const SimulationResult& simulated) {
  if (options.fuse_elementwise) return 0.0;
  SimulateOptions fused = options;
  fused.fuse_elementwise = true;
  // Both latencies were checked finite by simulate().
  return simulated.latency_s - simulate(graph, device, fused).latency_s;
}

}  // namespace accelsim
