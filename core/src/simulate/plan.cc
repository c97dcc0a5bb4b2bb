#include "accelsim/plan.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/memory.h"
#include "accelsim/physical_range.h"
#include "../common/parallel_for.h"
#include "training_stage.h"

namespace accelsim {

using namespace training_detail;

namespace {

std::vector<int64_t> powers_of_two(int64_t limit) {
  std::vector<int64_t> v;
  for (int64_t x = 1; x <= limit; x *= 2) v.push_back(x);
  return v;
}

// The stage-profile key of a candidate: its TP/SP/CP/EP degrees and their placement, its
// micro-batch and recompute policy.
struct ProfileKey {
  int64_t tp, tp_in, cp, cp_in, ep, ep_in, sp, mb, rc, summa;
  bool operator==(const ProfileKey&) const = default;
};
struct ProfileKeyHash {
  size_t operator()(const ProfileKey& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t x : {k.tp, k.tp_in, k.cp, k.cp_in, k.ep, k.ep_in, k.sp, k.mb, k.rc, k.summa}) {
      h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    }
    return h;
  }
};

// Candidate order: faster first; ties by the layout, so threads do not change the answer.
auto layout_tuple(const PlanCandidate& c) {
  const ParallelLayout& l = c.layout;
  return std::make_tuple(l.tp, l.pp, l.dp, l.cp, l.ep, l.micro_batch, l.virtual_stages, l.zero,
                         recompute_rank(c.recompute), l.sequence_parallel, l.summa, l.order, l.offload_optimizer,
                         l.offload_parameters, l.offload_activations);
}
bool faster(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.estimate.step_s != b.estimate.step_s) return a.estimate.step_s < b.estimate.step_s;
  return layout_tuple(a) < layout_tuple(b);
}

// The `k` fastest of what is pushed. Items gather unsorted; each trim sorts them, keeps the k
// fastest and remembers the k-th, which nothing slower can displace.
struct TopK {
  size_t k;
  std::vector<PlanCandidate> items;
  std::optional<PlanCandidate> kth;
  void push(PlanCandidate c) {
    if (kth && !faster(c, *kth)) return;
    items.push_back(std::move(c));
    if (items.size() > 4 * k + 16) trim();
  }
  void trim() {
    std::sort(items.begin(), items.end(), faster);
    if (items.size() > k) items.resize(k);
    if (k > 0 && items.size() == k) kth = items.back();
  }
};

}  // namespace

void apply_offload(ParallelLayout& layout, int set) {
  layout.offload_optimizer = (set & kOffloadOptimizer) != 0;
  layout.offload_parameters = (set & kOffloadParameters) != 0;
  layout.offload_activations = (set & kOffloadActivations) != 0;
}

PlanSpace default_plan_space(const ModelSpec& model, int64_t gpus, int64_t global_batch, int64_t seq) {
  PlanSpace s;
  s.gpus = gpus;
  s.global_batch = global_batch;
  s.tp = powers_of_two(std::min<int64_t>(128, gpus));
  for (int64_t cp : powers_of_two(std::min<int64_t>(32, gpus))) {
    if (seq % (2 * cp) == 0 || cp == 1) s.cp.push_back(cp);
  }
  s.ep = model.moe.enabled() ? powers_of_two(std::min(model.moe.num_experts, gpus)) : std::vector<int64_t>{1};
  s.pp = powers_of_two(std::min(model.num_layers, gpus));
  s.micro_batch = powers_of_two(std::min<int64_t>(32, global_batch));
  for (int64_t v = 1; v <= 16; ++v) s.virtual_stages.push_back(v);
  s.zero = {0, 1, 2, 3};
  s.recompute = {Recompute::none, Recompute::selective, Recompute::full};
  s.sequence_parallel = {0, 1};
  // Every order of tp, cp, dp and pp (ep just inside dp, as Megatron-LM nests it): which groups
  // the scale-up domain holds first, and how much of the one it splits, as the NERSC model
  // searches the assignment of its groups to the NVLink domain (arXiv 2410.00273). Orders that
  // place a layout as an earlier one does are pruned before composing.
  std::array<std::string, 4> groups{"tp", "cp", "dp", "pp"};
  std::sort(groups.begin(), groups.end());
  do {
    std::string order;
    for (const std::string& g : groups) order += (order.empty() ? "" : "-") + (g == "dp" ? "ep-dp" : g);
    s.orders.push_back(order);
  } while (std::next_permutation(groups.begin(), groups.end()));
  // The usual first: TP innermost, then CP (Megatron-LM's default), CP innermost, PP before DP.
  for (const char* first : {"tp-cp-pp-ep-dp", "cp-tp-ep-dp-pp", "tp-cp-ep-dp-pp"}) {
    const auto it = std::find(s.orders.begin(), s.orders.end(), first);
    if (it != s.orders.end()) std::rotate(s.orders.begin(), it, it + 1);
  }
  return s;
}

PlanResult plan_training(const ModelSpec& model, const BuildOptions& base, const PlanSpace& space,
                         const DeviceSpec& device, const SystemSpec& system,
                         const SimulateOptions& options, int64_t top, int threads,
                         const std::function<void(int64_t, int64_t)>& progress,
                         const PlanThreadStart& start_thread) {
  model.validate();
  device.validate();
  system.validate();
  ACCELSIM_CHECK(space.gpus >= 1 && space.global_batch >= 1, "a plan needs at least one GPU and one sequence per step");
  ACCELSIM_CHECK(threads >= 0 && threads <= kMaxPlanThreads,
                 "the plan search takes 0 (all cores) to " + std::to_string(kMaxPlanThreads) + " threads (got " +
                     std::to_string(threads) + ")");
  for (const auto* dim : {&space.tp, &space.cp, &space.ep, &space.pp, &space.micro_batch, &space.virtual_stages}) {
    ACCELSIM_CHECK(!dim->empty(), "every dimension of the plan's space needs at least one value");
    for (int64_t x : *dim) ACCELSIM_CHECK(x >= 1, "parallel degrees, micro-batches and virtual stages must be at least 1");
  }
  ACCELSIM_CHECK(!space.zero.empty() && !space.recompute.empty() && !space.sequence_parallel.empty() &&
                     !space.orders.empty() && !space.offload.empty() && !space.summa.empty(),
                 "every dimension of the plan's space needs at least one value");
  for (int set : space.offload) {
    ACCELSIM_CHECK(set >= 0 && set <= (kOffloadOptimizer | kOffloadParameters | kOffloadActivations),
                   "an offload set is a sum of kOffloadOptimizer (1), kOffloadParameters (2) and kOffloadActivations (4)");
    ACCELSIM_CHECK(set == 0 || system.host.given(),
                   "system '" + system.id + "' gives no host memory, host DRAM bandwidth and host link (its host "
                   "block): offload needs all three");
  }
  for (const std::string& o : space.orders) {
    ACCELSIM_CHECK(!parse_order(o).empty(), "the rank order '" + o + "' is not a permutation of tp, cp, ep, dp, pp");
  }

  // Outer items: (tp, cp, ep, order, sp, micro-batch, recompute); inner: (pp, v, zero, offload).
  struct Outer {
    int64_t tp, cp, ep, mb;
    size_t order;
    int sp, summa;
    Recompute rc;
  };
  std::vector<Outer> outers;
  for (int64_t tp : space.tp)
    for (int64_t cp : space.cp)
      for (int64_t ep : space.ep)
        for (size_t o = 0; o < space.orders.size(); ++o)
          for (int sp : space.sequence_parallel)
            for (int summa : space.summa)
              for (int64_t mb : space.micro_batch)
                for (Recompute rc : space.recompute) outers.push_back({tp, cp, ep, mb, o, sp, summa, rc});
  const auto inner = static_cast<int64_t>(space.pp.size() * space.virtual_stages.size() * space.zero.size() *
                                          space.offload.size());

  PlanResult result;
  result.candidates = static_cast<int64_t>(outers.size()) * inner;

  // A candidate's layout, or the reason it is pruned before its step is composed.
  auto layout_of = [&](const Outer& o, int64_t pp, int64_t v, int zero, int offload, ParallelLayout& l) -> const char* {
    if (o.sp && o.tp == 1) return "sequence parallelism needs tp > 1";
    if (o.summa && !(o.sp && o.tp > 1 && o.cp > 1)) return "2D SUMMA needs tp and cp above 1 with sequence parallelism";
    if (space.gpus % (o.tp * o.cp * pp) != 0) return "tp x cp x pp does not divide the GPUs";
    l = ParallelLayout{.tp = o.tp, .pp = pp, .dp = space.gpus / (o.tp * o.cp * pp), .cp = o.cp, .ep = o.ep,
                       .sequence_parallel = o.sp != 0, .summa = o.summa != 0, .micro_batch = o.mb,
                       .global_batch = space.global_batch, .virtual_stages = v, .zero = zero,
                       .order = space.orders[o.order]};
    if (l.dp % o.ep != 0) return "ep does not divide dp";
    apply_offload(l, offload);
    if ((offload & kOffloadOptimizer) && zero < 1) return "optimizer offload needs ZeRO >= 1";
    if ((offload & kOffloadParameters) && zero != 3) return "parameter offload needs ZeRO-3";
    if ((offload & kOffloadActivations) && pp > 1) return "activation offload runs with pp = 1";
    if ((offload & kOffloadActivations) && o.rc != Recompute::none) return "activation offload runs without recomputation";
    // With one data- and context-parallel rank, ZeRO shards nothing: only offload tells the
    // stages apart (which stage's offload, as DeepSpeed's ZeRO-Offload on one GPU).
    if (zero > 0 && l.dp * l.cp == 1 && !(offload & (kOffloadOptimizer | kOffloadParameters))) {
      return "ZeRO with dp x cp = 1 is ZeRO-0";
    }
    if (v > 1 && pp == 1) return "virtual stages need pp > 1";
    if (model.num_layers < pp * v) return "fewer layers than pp x virtual stages";
    if (space.global_batch % (l.dp * o.mb) != 0) return "global batch not a multiple of dp x micro-batch";
    if (v > 1 && (space.global_batch / (l.dp * o.mb)) % pp != 0) return "interleaving needs micro-batches a multiple of pp";
    return nullptr;
  };
  // Orders that place the groups as an earlier order does are the same candidate.
  auto placement_key = [&](const ParallelLayout& l) {
    const Placement p = place(l, system);
    std::array<int64_t, 5> k{};
    for (size_t i = 0; i < 5; ++i) k[i] = p.groups[i].ranks_per_domain;
    return k;
  };
  // Which orders place a layout's groups as an earlier order does, by its (tp, cp, ep, pp) (dp
  // follows), worked out once for every combination the space holds.
  std::map<std::array<int64_t, 4>, std::vector<char>> duplicates;
  for (int64_t tp : space.tp) {
    for (int64_t cp : space.cp) {
      for (int64_t ep : space.ep) {
        for (int64_t pp : space.pp) {
          if (space.gpus % (tp * cp * pp) != 0) continue;
          ParallelLayout l{.tp = tp, .pp = pp, .dp = space.gpus / (tp * cp * pp), .cp = cp, .ep = ep};
          std::vector<std::array<int64_t, 5>> keys;
          std::vector<char> dup(space.orders.size(), 0);
          for (size_t o = 0; o < space.orders.size(); ++o) {
            l.order = space.orders[o];
            keys.push_back(placement_key(l));
            dup[o] = std::find(keys.begin(), keys.end() - 1, keys.back()) != keys.end() - 1;
          }
          duplicates.emplace(std::array<int64_t, 4>{tp, cp, ep, pp}, std::move(dup));
        }
      }
    }
  }
  auto duplicate_order = [&](const ParallelLayout& l, size_t order) {
    if (order == 0) return false;
    const auto it = duplicates.find({l.tp, l.cp, l.ep, l.pp});
    return it != duplicates.end() && it->second[order] != 0;
  };
  auto key_of = [&](const ParallelLayout& l, Recompute rc) {
    const Placement p = place(l, system);
    return ProfileKey{l.tp, p.groups[0].ranks_per_domain, l.cp, p.groups[1].ranks_per_domain, l.ep,
                      p.groups[2].ranks_per_domain, l.sequence_parallel ? 1 : 0, l.micro_batch,
                      recompute_rank(rc), l.summa ? 1 : 0};
  };

  // Pass 1: the distinct stage profiles the unpruned candidates need.
  std::unordered_map<ProfileKey, size_t, ProfileKeyHash> index;
  std::vector<std::pair<ProfileKey, ParallelLayout>> keys;
  for (const Outer& o : outers) {
    for (int64_t pp : space.pp) {
      for (int64_t v : space.virtual_stages) {
        ParallelLayout l;
        if (layout_of(o, pp, v, 0, 0, l) != nullptr && layout_of(o, pp, v, 1, 0, l) != nullptr &&
            layout_of(o, pp, v, 1, kOffloadOptimizer, l) != nullptr) {
          continue;
        }
        if (duplicate_order(l, o.order)) continue;
        const ProfileKey k = key_of(l, o.rc);
        if (index.emplace(k, keys.size()).second) keys.emplace_back(k, l);
      }
    }
  }
  result.profiles = static_cast<int64_t>(keys.size());
  // The profiles that differ only in where their TP, CP and EP groups sit share their graphs.
  std::vector<std::vector<size_t>> sharing_graphs;
  {
    std::unordered_map<ProfileKey, size_t, ProfileKeyHash> group_of;
    for (size_t i = 0; i < keys.size(); ++i) {
      ProfileKey unplaced = keys[i].first;
      unplaced.tp_in = unplaced.cp_in = unplaced.ep_in = 0;
      const auto [it, added] = group_of.emplace(unplaced, sharing_graphs.size());
      if (added) sharing_graphs.emplace_back();
      sharing_graphs[it->second].push_back(i);
    }
  }

  const int workers = std::max(1, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  const auto total = static_cast<int64_t>(sharing_graphs.size() + outers.size());
  std::atomic<int64_t> done{0};
  // Runs body(i, worker) for i < count on the pool (parallel_for.h), counting the items done for
  // the progress reported from this thread.
  auto run = [&](size_t count, const std::function<void(size_t, int)>& body) {
    detail::parallel_for(
        count, workers,
        [&](size_t i, int t) {
          body(i, t);
          ++done;
        },
        progress ? std::function<void()>([&] { progress(done.load(), total); }) : std::function<void()>(),
        start_thread);
  };

  // Pass 2: the profiles, in parallel, each stage's graphs built once for all its placements.
  std::vector<StageProfile> profiles(keys.size());
  run(sharing_graphs.size(), [&](size_t g, int) {
    const size_t first = sharing_graphs[g].front();
    BuildOptions b = base;
    b.recompute = static_cast<Recompute>(keys[first].first.rc);
    const StageGraphs graphs = build_or_reject(model, stage_build_options(b, keys[first].second), options.release_policy);
    for (size_t i : sharing_graphs[g]) {
      const Placement p = place(keys[i].second, system);
      profiles[i] = profile_built_stage(model, graphs, {p.groups[0], p.groups[1], p.groups[2]}, device, system, options);
    }
  });

  // Pass 3: every candidate's step, in parallel over the outer items.
  struct Partial {
    TopK best, over;
    int64_t evaluated = 0, feasible = 0;
    std::map<std::string, int64_t> pruned;
    std::vector<std::pair<const char*, int64_t>> fixed;  // pruned under layout_of's fixed reasons
  };
  const auto k = static_cast<size_t>(std::max<int64_t>(1, top));
  std::vector<Partial> partials(static_cast<size_t>(workers), Partial{TopK{k, {}}, TopK{k, {}}, 0, 0, {}, {}});
  run(outers.size(), [&](size_t i, int worker) {
    Partial& part = partials[static_cast<size_t>(worker)];
    const Outer& o = outers[i];
    BuildOptions b = base;
    b.recompute = o.rc;
    // Counts a pruned candidate under a fixed reason (compared by address: no string per count).
    auto prune = [&](const char* why) {
      for (auto& [reason, n] : part.fixed) {
        if (reason == why) {
          ++n;
          return;
        }
      }
      part.fixed.emplace_back(why, 1);
    };
    for (int64_t pp : space.pp) {
      // What depends only on pp beside the outer item: whether an earlier order places the
      // groups so, and the stage profile.
      const StageProfile* profile = nullptr;
      bool duplicate = false;
      if (space.gpus % (o.tp * o.cp * pp) == 0) {
        ParallelLayout l{.tp = o.tp, .pp = pp, .dp = space.gpus / (o.tp * o.cp * pp), .cp = o.cp, .ep = o.ep,
                         .sequence_parallel = o.sp != 0, .summa = o.summa != 0, .micro_batch = o.mb,
                         .order = space.orders[o.order]};
        duplicate = duplicate_order(l, o.order);
        const auto it = index.find(key_of(l, o.rc));
        if (it != index.end()) profile = &profiles[it->second];
      }
      for (int64_t v : space.virtual_stages) {
        for (int zero : space.zero) {
          for (int offload : space.offload) {
            ParallelLayout l;
            if (const char* why = layout_of(o, pp, v, zero, offload, l)) {
              prune(why);
              continue;
            }
            if (duplicate) {
              prune("the same placement as an earlier rank order");
              continue;
            }
            if (profile == nullptr) {  // pass 1 profiles every layout that passes layout_of
              throw std::logic_error("plan_training: a candidate without its stage profile");
            }
            if (!profile->feasible) {
              ++part.pruned["the stage does not build: " + profile->reason];
              continue;
            }
            PlanCandidate c{l, o.rc, compose_training(model, b, l, *profile, device, system)};
            ++part.evaluated;
            if (c.estimate.feasible) {
              ++part.feasible;
              part.best.push(std::move(c));
            } else if (c.estimate.step_s > 0) {
              part.over.push(std::move(c));
            } else {
              ++part.pruned[c.estimate.reason];
            }
          }
        }
      }
    }
  });
  if (progress) progress(total, total);

  TopK best{k, {}}, over{k, {}};
  for (Partial& part : partials) {
    result.evaluated += part.evaluated;
    result.feasible += part.feasible;
    for (auto& [why, count] : part.pruned) result.pruned[why] += count;
    for (auto& [why, count] : part.fixed) result.pruned[why] += count;
    for (PlanCandidate& c : part.best.items) best.push(std::move(c));
    for (PlanCandidate& c : part.over.items) over.push(std::move(c));
  }
  best.trim();
  over.trim();
  result.best = std::move(best.items);
  result.best_infeasible = std::move(over.items);
  return result;
}

}  // namespace accelsim
