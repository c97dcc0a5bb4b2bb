#include "accelsim/collective.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "accelsim/error.h"
#include "accelsim/physical_range.h"

namespace accelsim {

void SystemSpec::validate() const {
  const std::string who = "system '" + id + "'";
  ACCELSIM_CHECK(gpus_per_node > 0, who + ": gpus_per_node must be positive");
  ACCELSIM_CHECK(scaleup_domain > 0, who + ": the scale-up domain size must be positive");
  const std::pair<const char*, double> non_negative[] = {
      {"scaleup.latency_s", scaleup.latency_s},
      {"scaleout.bandwidth_bytes_per_s", scaleout.bandwidth_bytes_per_s},
      {"scaleout.latency_s", scaleout.latency_s},
      {"nics_per_gpu", nics_per_gpu},
      {"launch_s", launch_s},
      {"custom_allreduce_s", custom_allreduce_s},
      {"custom_allreduce_max_bytes", custom_allreduce_max_bytes},
      {"host.memory_bytes", host.memory_bytes},
      {"host.memory_bandwidth_bytes_per_s", host.memory_bandwidth_bytes_per_s},
      {"host.link_bytes_per_s", host.link_bytes_per_s},
  };
  for (const auto& [field, value] : non_negative) require_in_range(who, field, value, kNonNegative);
  if (custom_allreduce_s > 0) {
    require_in_range(who, "custom_allreduce_bytes_per_s", custom_allreduce_bytes_per_s, kPositive);
  }
  require_in_range(who, "scaleup.bandwidth_bytes_per_s", scaleup.bandwidth_bytes_per_s, kPositive);
  require_in_range(who, "scaleup.efficiency", scaleup.efficiency, kPositiveFraction);
  require_in_range(who, "scaleout.efficiency", scaleout.efficiency, kPositiveFraction);
  // Unused without in-network reduction, where 0 may stand for "none".
  if (in_network_reduction) {
    require_in_range(who, "nvls_efficiency (in-network reduction is on)", nvls_efficiency, kPositiveFraction);
  } else {
    require_in_range(who, "nvls_efficiency", nvls_efficiency, kFraction);
  }
}

std::string_view collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::send_recv: return "send_recv";
  }
  return "?";
}

std::string_view collective_algorithm_name(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::automatic: return "automatic";
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::halving_doubling: return "halving_doubling";
    case CollectiveAlgorithm::nvls: return "nvls";
    case CollectiveAlgorithm::hierarchical: return "hierarchical";
    case CollectiveAlgorithm::custom: return "custom";
    case CollectiveAlgorithm::pxn: return "pxn";
  }
  return "?";
}

std::pair<std::vector<CommGroup>, int64_t> place_groups(
    const SystemSpec& system, const std::vector<std::pair<std::string, int64_t>>& inner_first) {
  int64_t room = system.scaleup_domain;
  std::vector<CommGroup> groups;
  for (const auto& [name, size] : inner_first) {
    ACCELSIM_CHECK(size >= 1, "the '" + name + "' group needs at least one rank");
    int64_t inside = std::max<int64_t>(1, std::min(size, room));
    while (size % inside != 0) --inside;
    groups.push_back({.name = name, .size = size, .ranks_per_domain = inside});
    room = std::max<int64_t>(1, room / inside);
  }
  return {groups, room};
}

SystemSpec with_scaleup_bandwidth(const SystemSpec& system, double bytes_per_s) {
  require_in_range("system '" + system.id + "'", "the scale-up bandwidth", bytes_per_s, kPositive);
  SystemSpec s = system;
  s.scaleup.bandwidth_bytes_per_s = bytes_per_s;
  return s;
}

double busbw_factor(CollectiveKind kind, int64_t ranks) {
  const double p = static_cast<double>(ranks);
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (p - 1.0) / p;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return (p - 1.0) / p;
    case CollectiveKind::broadcast:
    case CollectiveKind::send_recv: return 1.0;
  }
  return 1.0;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One tier: `p` ranks on a fabric with bandwidth `bw` (already times its efficiency) and
// per-step latency `alpha`.
double flat_time(CollectiveKind kind, CollectiveAlgorithm algo, double s, double p, double bw,
                 double alpha) {
  if (p <= 1) return 0.0;
  const double log_p = std::ceil(std::log2(p));
  switch (kind) {
    case CollectiveKind::all_reduce:
      if (algo == CollectiveAlgorithm::ring) return 2 * (p - 1) * alpha + 2 * (p - 1) / p * s / bw;
      if (algo == CollectiveAlgorithm::tree || algo == CollectiveAlgorithm::halving_doubling) {
        return 2 * log_p * alpha + 2 * (p - 1) / p * s / bw;
      }
      return kInf;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
      if (algo == CollectiveAlgorithm::ring) return (p - 1) * alpha + (p - 1) / p * s / bw;
      if (algo == CollectiveAlgorithm::halving_doubling) return log_p * alpha + (p - 1) / p * s / bw;
      return kInf;
    case CollectiveKind::all_to_all:
      return algo == CollectiveAlgorithm::ring ? (p - 1) * alpha + (p - 1) / p * s / bw : kInf;
    case CollectiveKind::broadcast:
      if (algo == CollectiveAlgorithm::ring) return (p - 1) * alpha + s / bw;
      if (algo == CollectiveAlgorithm::tree) return log_p * alpha + s / bw;
      return kInf;
    case CollectiveKind::send_recv:
      return algo == CollectiveAlgorithm::ring ? alpha + s / bw : kInf;
  }
  return kInf;
}

// A library's tuning constants for the ring inside a scale-up domain, per protocol LL, LL128,
// Simple: the fixed latency of a collective, the latency of each ring step over NVLink (xGMI) and
// the share of the bus bandwidth the protocol reaches.
struct RingProtocols {
  double base_s[3];
  double step_s[3];
  double bandwidth_share[3];
  double nvls_s;  // NVLS all-reduce's fixed latency (0: the library has no NVLS)
};

// NCCL (NVIDIA/nccl src/graph/tuning.cc, 2.18-2.19): baseLat Ring {6.6, 14.0, 8.4} us, hwLat
// NVLink Ring {0.6, 1.9, 3.4} us, NVLS Simple 23 us; the LL protocol moves half its bytes as flags
// and the tuner takes a quarter of the bus bandwidth for an all-reduce, a third otherwise
// (busBw * 1/4 or 1/3), LL128 120/128 less its overheads (0.92), Simple all of it.
// RCCL (ROCm/rccl src/graph/tuning.cc): baseLat Ring {12, 12, 17} us, hwLat xGMI Ring
// {0.8, 2.2, 3.6} us, the same bandwidth shares, no NVLS.
RingProtocols ring_protocols(CollectiveLibrary library, CollectiveKind kind) {
  const double ll = kind == CollectiveKind::all_reduce ? 1.0 / 4.0 : 1.0 / 3.0;
  if (library == CollectiveLibrary::rccl) {
    return {{12e-6, 12e-6, 17e-6}, {0.8e-6, 2.2e-6, 3.6e-6}, {ll, 0.92, 1.0}, 0.0};
  }
  return {{6.6e-6, 14e-6, 8.4e-6}, {0.6e-6, 1.9e-6, 3.4e-6}, {ll, 0.92, 1.0}, 23e-6};
}

// The ring inside one domain under the protocol that finishes first: the protocol's fixed
// latency, its per-step latency times the ring's steps, the bytes at its share of `bw`.
double library_ring_time(CollectiveKind kind, double s, double p, double bw, const RingProtocols& r) {
  if (p <= 1) return 0.0;
  // Steps as flat_time counts them: flat_time with a unit latency.
  const double steps = flat_time(kind, CollectiveAlgorithm::ring, 0.0, p, bw, 1.0);
  double best = kInf;
  for (int i = 0; i < 3; ++i) {
    best = std::min(best, r.base_s[i] + steps * r.step_s[i] +
                              flat_time(kind, CollectiveAlgorithm::ring, s, p, bw * r.bandwidth_share[i], 0.0));
  }
  return best;
}

}  // namespace

CollectiveEstimate estimate_collective(const CollectiveQuery& q, const SystemSpec& sys) {
  sys.validate();
  require_in_range("a collective", "its size in bytes", q.bytes, kNonNegative);
  ACCELSIM_CHECK(q.ranks >= 1, "a collective needs at least one rank");
  const int64_t per_domain =
      q.ranks_per_domain > 0 ? q.ranks_per_domain
                             : std::min<int64_t>(q.ranks, sys.scaleup_domain);
  ACCELSIM_CHECK(per_domain <= sys.scaleup_domain,
                 std::to_string(per_domain) + " ranks per domain do not fit the system's " +
                     std::to_string(sys.scaleup_domain) + "-GPU scale-up domain");
  ACCELSIM_CHECK(q.ranks % per_domain == 0, std::to_string(q.ranks) + " ranks do not split into domains of " +
                                                std::to_string(per_domain));
  const double s = q.bytes, p = static_cast<double>(q.ranks), g = static_cast<double>(per_domain);
  const double domains = p / g;
  // On a full mesh (xGMI) a GPU reaches each peer over its own links: a group of g of the
  // domain's GPUs uses (g - 1) / (domain - 1) of its bandwidth (AMD-AGI/Primus,
  // primus/core/projection/module_profilers/collective_model.py).
  const double mesh_share =
      sys.mesh && sys.scaleup_domain > 1
          ? std::min(1.0, (static_cast<double>(per_domain) - 1.0) / (sys.scaleup_domain - 1.0))
          : 1.0;
  const double up_bw = sys.scaleup.bandwidth_bytes_per_s * sys.scaleup.efficiency * mesh_share;
  const double up_alpha = sys.scaleup.latency_s;
  // A GPU's share of the scale-out: its NICs (all-to-all: one, as NCCL runs it).
  const double nic_bw = sys.scaleout.bandwidth_bytes_per_s * sys.scaleout.efficiency;
  const double out_bw = nic_bw * sys.nics_per_gpu;
  const double out_alpha = sys.scaleout.latency_s;
  if (domains > 1) {
    ACCELSIM_CHECK(sys.nics_per_gpu > 0 && sys.scaleout.bandwidth_bytes_per_s > 0,
                   "system '" + sys.id + "' has no scale-out network for " + std::to_string(q.ranks) +
                       " ranks beyond its " + std::to_string(per_domain) + "-rank domains");
  }

  // An infinite time below means an algorithm that does not run the collective; a fabric so slow
  // that moving the bytes takes infinitely long is an input out of physical range instead.
  require_non_negative("estimate_collective", "the time to move the bytes over the scale-up fabric",
                       s / up_bw);
  if (domains > 1) {
    require_non_negative("estimate_collective", "the time to move the bytes over the scale-out NICs",
                         s / nic_bw);
  }

  CollectiveEstimate e;
  e.crosses_domains = domains > 1;
  double best = kInf;
  auto consider = [&](CollectiveAlgorithm algo, double t) {
    if (q.algorithm != CollectiveAlgorithm::automatic && q.algorithm != algo) return;
    if (t < best) {
      best = t;
      e.algorithm = algo;
    }
  };
  const bool reduce = q.kind == CollectiveKind::all_reduce;
  if (domains <= 1 && sys.library != CollectiveLibrary::none) {
    // The library's tuner inside the domain: the ring (or the NVLS all-reduce) under its
    // protocols; a tree or halving-doubling only when asked for, in the plain form.
    const RingProtocols r = ring_protocols(sys.library, q.kind);
    consider(CollectiveAlgorithm::ring, library_ring_time(q.kind, s, p, up_bw, r));
    if (reduce && sys.in_network_reduction && p > 1 && r.nvls_s > 0) {
      consider(CollectiveAlgorithm::nvls, r.nvls_s + s / (sys.scaleup.bandwidth_bytes_per_s * sys.nvls_efficiency));
    }
    if (q.algorithm == CollectiveAlgorithm::tree || q.algorithm == CollectiveAlgorithm::halving_doubling) {
      consider(q.algorithm, flat_time(q.kind, q.algorithm, s, p, up_bw, up_alpha));
    }
  } else if (domains <= 1) {
    for (CollectiveAlgorithm algo : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree,
                                     CollectiveAlgorithm::halving_doubling}) {
      consider(algo, flat_time(q.kind, algo, s, p, up_bw, up_alpha));
    }
    if (reduce && sys.in_network_reduction && p > 1) {
      consider(CollectiveAlgorithm::nvls,
               up_alpha + s / (sys.scaleup.bandwidth_bytes_per_s * sys.nvls_efficiency));
    }
  } else {
    // A flat ring (NCCL's multi-node ring) runs one channel per NIC: each domain's g GPUs send
    // the ring's traffic out over all their NICs together, so it runs at the slower of the
    // scale-up bandwidth and the domain's NICs, out_bw x g; each step pays the network latency.
    const double slow = std::min(up_bw, out_bw * g);
    for (CollectiveAlgorithm algo : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree,
                                     CollectiveAlgorithm::halving_doubling}) {
      if (q.kind != CollectiveKind::all_to_all) consider(algo, flat_time(q.kind, algo, s, p, slow, out_alpha));
    }
    double hier = kInf;
    switch (q.kind) {
      case CollectiveKind::all_reduce: {
        // Reduce-scatter inside each domain, all-reduce of the 1/g shards across domains (each
        // GPU on its own rails), all-gather inside: NVLS inside when the switch can reduce.
        const double inside = sys.in_network_reduction
                                  ? up_alpha + s / (sys.scaleup.bandwidth_bytes_per_s * sys.nvls_efficiency)
                                  : flat_time(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, s, g,
                                              up_bw, up_alpha);
        const double across = std::min(
            flat_time(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, s / g, domains, out_bw, out_alpha),
            flat_time(CollectiveKind::all_reduce, CollectiveAlgorithm::tree, s / g, domains, out_bw, out_alpha));
        hier = inside + across;
        break;
      }
      case CollectiveKind::all_gather:
      case CollectiveKind::reduce_scatter:
        hier = flat_time(q.kind, CollectiveAlgorithm::ring, s, g, up_bw, up_alpha) +
               flat_time(q.kind, CollectiveAlgorithm::ring, s / g, domains, out_bw, out_alpha);
        break;
      case CollectiveKind::all_to_all: {
        // The share bound for other domains leaves on one NIC per GPU (or its share of one);
        // the rest stays inside.
        const double away = s * (p - g) / p, home = s * (g - 1) / p;
        const double nic = nic_bw * std::min(1.0, sys.nics_per_gpu);
        hier = (p - 1) * out_alpha + std::max(away / nic, home / up_bw);
        // PXN (NCCL 2.12's PCI x NVLink, DeepEP's NVLink forwarding): each GPU first hands the
        // data bound for another domain to the GPU of its own domain on the destination's rail,
        // over the scale-up fabric, which sends what its domain has for that peer as one message:
        // domains - 1 network messages a GPU instead of p - g, each g times larger; the scale-up
        // fabric carries the away share as well as the home one, the two stages pipelined
        // (NVIDIA, "Doubling all2all Performance with NVIDIA Collective Communication Library
        // 2.12", 2022: https://developer.nvidia.com/blog/doubling-all2all-performance-with-nvidia-collective-communication-library-2-12/).
        consider(CollectiveAlgorithm::pxn,
                 (domains - 1) * out_alpha + (g - 1) * up_alpha + std::max(away / nic, (away + home) / up_bw));
        break;
      }
      case CollectiveKind::broadcast:
        hier = flat_time(q.kind, CollectiveAlgorithm::tree, s, domains, out_bw, out_alpha) +
               flat_time(q.kind, CollectiveAlgorithm::ring, s, g, up_bw, up_alpha);
        break;
      case CollectiveKind::send_recv:
        hier = out_alpha + s / nic_bw;
        break;
    }
    consider(CollectiveAlgorithm::hierarchical, hier);
  }
  if (reduce && domains <= 1 && p > 1 && sys.custom_allreduce_s > 0 && s <= sys.custom_allreduce_max_bytes) {
    consider(CollectiveAlgorithm::custom, sys.custom_allreduce_s + s / sys.custom_allreduce_bytes_per_s);
  }
  if (p > 1) {
    ACCELSIM_CHECK(best < kInf,
                   std::string("algorithm '") + std::string(collective_algorithm_name(q.algorithm)) +
                       "' does not run " + std::string(collective_kind_name(q.kind)) + " on system '" +
                       sys.id + "'" + (q.algorithm == CollectiveAlgorithm::nvls
                                           ? " (NVLS needs in-network reduction, an all-reduce, one domain)"
                                           : ""));
    // The engine's own kernel is timed whole (its measurement includes its launch).
    e.time_s = best + (e.algorithm == CollectiveAlgorithm::custom ? 0.0 : sys.launch_s);
  }
  if (e.time_s > 0) {
    e.algbw_bytes_per_s = s / e.time_s;
    e.busbw_bytes_per_s = e.algbw_bytes_per_s * busbw_factor(q.kind, q.ranks);
  }
  require_non_negative("estimate_collective", "time_s", e.time_s);
  require_non_negative("estimate_collective", "algbw_bytes_per_s", e.algbw_bytes_per_s);
  require_non_negative("estimate_collective", "busbw_bytes_per_s", e.busbw_bytes_per_s);
  return e;
}

}  // namespace accelsim
