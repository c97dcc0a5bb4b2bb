// Collectives over a cluster: systems (scale-up domains and scale-out NICs) and the time of one
// all-reduce, all-gather, reduce-scatter, all-to-all, broadcast or send/recv.
//
// Sizes follow nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md): `bytes` is the whole
// array S (all-reduce: the buffer; all-gather: the gathered output; reduce-scatter: the input;
// all-to-all: what one rank sends in total; broadcast and send/recv: the message). algbw =
// S / t; busbw = algbw x the collective's factor (all-reduce 2(p-1)/p; all-gather,
// reduce-scatter and all-to-all (p-1)/p; broadcast and send/recv 1), comparable with a link's
// bandwidth whatever p is.
//
// Times are alpha-beta models (Thakur, Rabenseifner and Gropp, IJHPCA 19(1), 2005) with each
// fabric's per-step latency alpha and its bandwidth times the efficiency collectives reach on it
// (protocol overheads; NCCL's own model, NVIDIA/nccl src/graph/tuning.cc, scales bandwidths the
// same way):
//   ring all-reduce      2(p-1) alpha + 2(p-1)/p S / B
//   tree all-reduce      2 log2(p) alpha + 2(p-1)/p S / B  (NCCL's double binary tree)
//   halving-doubling     2 log2(p) alpha + 2(p-1)/p S / B  (Rabenseifner)
//   NVLS all-reduce      alpha + S / B_nvls                  (the switch reduces: each GPU sends and
//                                                             receives S once)
//   ring AG / RS / A2A   (p-1) alpha + (p-1)/p S / B
//   broadcast            (p-1) alpha + S / B (pipelined ring); send/recv alpha + S / B
// Across scale-up domains a flat ring runs at the slower of the scale-up bandwidth and the
// domain's NICs together (NCCL puts one ring channel on each NIC); the hierarchical form runs
// inside each domain, then across domains on each GPU's own NICs (rails in parallel), then
// inside again; all-to-all sends the share bound
// for other domains over one NIC per GPU (NCCL does not aggregate NICs for all-to-all,
// nccl-tests#267) while the rest crosses the scale-up fabric. `automatic` picks the fastest
// algorithm the system supports, as NCCL's tuner does.
//
//   CollectiveEstimate e = estimate_collective({.kind = CollectiveKind::all_reduce,
//                                               .bytes = 1e9, .ranks = 64}, dgx_h100);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accelsim {

// One tier of a system's network, per GPU and per direction.
struct Fabric {
  double bandwidth_bytes_per_s = 0.0;  // scale-up: per GPU; scale-out: per NIC
  double latency_s = 0.0;              // per algorithm step
  double efficiency = 1.0;             // fraction of the bandwidth ring collectives reach
};

// The host side of one node: its CPUs' memory and each GPU's link to it. Offloading a training
// step's optimizer, parameters or activations (ParallelLayout::offload_*) needs all three; 0:
// not given.
struct HostSpec {
  double memory_bytes = 0.0;                  // CPU memory of one node
  double memory_bandwidth_bytes_per_s = 0.0;  // peak DRAM bandwidth of the node's CPUs together
  // Host link per GPU and direction with every GPU of the node transferring at once (PCIe x16,
  // halved where two GPUs share a switch's uplink; NVLink-C2C on Grace Hopper and Blackwell).
  double link_bytes_per_s = 0.0;
  bool given() const { return memory_bytes > 0 && memory_bandwidth_bytes_per_s > 0 && link_bytes_per_s > 0; }
};

// The collective library a system runs, whose tuning model times collectives inside a scale-up
// domain (collective.cc): none keeps the plain alpha-beta forms above.
enum class CollectiveLibrary : uint8_t { none, nccl, rccl };

struct SystemSpec {
  std::string id;      // file stem, e.g. "dgx_h100"
  std::string name;
  std::string device;  // device id of its accelerators
  int gpus_per_node = 8;
  int scaleup_domain = 8;  // GPUs sharing the scale-up fabric (NVLink/NVSwitch, xGMI, ICI)
  Fabric scaleup;
  bool in_network_reduction = false;  // NVLink SHARP (NVLS): all-reduce reduced in the switch
  bool mesh = false;  // scale-up links wired GPU to GPU (xGMI), not through a switch
  double nvls_efficiency = 0.0;       // NVLS algbw over the scale-up bandwidth
  double nics_per_gpu = 1.0;  // NICs per GPU (0.5: two GPUs share one)
  Fabric scaleout;     // per NIC
  double launch_s = 0.0;  // fixed cost of launching one collective kernel
  // With a library, a collective inside one scale-up domain runs the ring under the protocol
  // (LL, LL128, Simple) that finishes first, each with the library's base latency, per-step
  // latency and bandwidth share, or NVLS at its fixed latency: what NCCL's and RCCL's tuners
  // estimate (src/graph/tuning.cc of each). Small messages then pay tens of microseconds, as
  // nccl-tests and rccl-tests measure them, where the plain forms charge one.
  CollectiveLibrary library = CollectiveLibrary::none;
  // A one-shot all-reduce kernel of the serving engine's own (vLLM's and SGLang's custom
  // all-reduce over NVLink / xGMI peer memory) for all-reduces inside one domain up to
  // custom_allreduce_max_bytes: custom_allreduce_s + bytes / custom_allreduce_bytes_per_s, when
  // it beats the library. 0: none (serve sets it for an engine that runs one, serve.h).
  double custom_allreduce_s = 0.0;
  double custom_allreduce_bytes_per_s = 0.0;
  double custom_allreduce_max_bytes = 0.0;
  HostSpec host;

  // REQUIRES: every number finite; positive domain, GPUs per node and scale-up bandwidth;
  // latencies, NICs, scale-out bandwidth and host figures not negative; efficiencies in (0, 1]. Throws
  // ConfigError naming the field otherwise.
  void validate() const;
};

enum class CollectiveKind : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv };
enum class CollectiveAlgorithm : uint8_t { automatic, ring, tree, halving_doubling, nvls, hierarchical, custom, pxn };

std::string_view collective_kind_name(CollectiveKind kind);
std::string_view collective_algorithm_name(CollectiveAlgorithm algorithm);

struct CollectiveQuery {
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0.0;  // nccl-tests' S (see above)
  int64_t ranks = 1;
  // Ranks per scale-up domain; 0: as many as fit (min(ranks, the system's domain size)).
  int64_t ranks_per_domain = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic;
};

struct CollectiveEstimate {
  double time_s = 0.0;
  double algbw_bytes_per_s = 0.0;
  double busbw_bytes_per_s = 0.0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic;  // the one timed
  bool crosses_domains = false;
};

// A communication group of a parallel layout: its name as the graph's collectives carry it
// ("tp", "cp", "ep", "dp"), its size, and how many of its ranks share a scale-up domain (0: as
// many as fit).
struct CommGroup {
  std::string name;
  int64_t size = 1;
  int64_t ranks_per_domain = 0;
};

// Places a layout's groups on the system, innermost first (as Megatron-LM orders its ranks: TP,
// then CP, then EP, then DP): each takes the largest divisor of its size that fits the room its
// predecessors left in a scale-up domain. The room left after the last is the second value (2 or
// more: pipeline neighbours share a domain).
std::pair<std::vector<CommGroup>, int64_t> place_groups(
    const SystemSpec& system, const std::vector<std::pair<std::string, int64_t>>& inner_first);

// `system` with its scale-up fabric's bandwidth per GPU (NVLink-class links) set to `bytes_per_s`,
// for a design sweep; its efficiency, latency and the NVLS bandwidth (a fraction of this one)
// follow. REQUIRES: bytes_per_s positive and finite (ConfigError otherwise).
SystemSpec with_scaleup_bandwidth(const SystemSpec& system, double bytes_per_s);

// The busbw factor of nccl-tests for `kind` over `ranks`.
double busbw_factor(CollectiveKind kind, int64_t ranks);

// REQUIRES: bytes finite and >= 0; ranks >= 1; ranks_per_domain divides ranks and fits the
// domain; an explicit algorithm the system supports for the collective (NVLS needs in-network
// reduction and an all-reduce within one domain). Throws ConfigError otherwise, and
// PhysicalRangeError (physical_range.h) when the estimate would not be finite.
CollectiveEstimate estimate_collective(const CollectiveQuery& query, const SystemSpec& system);

}  // namespace accelsim
