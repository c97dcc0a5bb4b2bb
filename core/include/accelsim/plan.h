// plan_training(): the search over a model's parallel training configurations on a cluster for
// the fastest steps, each composed as estimate_training() composes one (training.h). The search
// builds one stage profile per TP/SP/CP/EP degree, placement, micro-batch and recompute policy,
// shared by every pipeline depth, data-parallel degree, ZeRO stage and rank order that uses it,
// and composes the rest arithmetically; candidates that cannot divide, place or fit are pruned
// before they are composed and counted by reason.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "accelsim/training.h"

namespace accelsim {

// The candidates plan_training() tries: every combination of these values (dp = gpus / (tp pp
// cp)). default_plan_space() fills them for a model and a GPU count.
struct PlanSpace {
  int64_t gpus = 1;
  int64_t global_batch = 1;  // sequences per step
  std::vector<int64_t> tp, cp, ep, pp, micro_batch, virtual_stages;
  std::vector<int> zero;
  std::vector<Recompute> recompute;
  std::vector<int> sequence_parallel;  // 0 / 1 (1 only with tp > 1)
  std::vector<int> summa{0};           // 0 / 1: 2D SUMMA on the tp x cp grid (1 only with SP, tp and cp > 1)
  std::vector<std::string> orders;
  // What each candidate offloads to host memory, a set of kOffload* bits (0: nothing).
  std::vector<int> offload{0};
};

// The bits of PlanSpace::offload: ParallelLayout::offload_optimizer, _parameters, _activations.
inline constexpr int kOffloadOptimizer = 1, kOffloadParameters = 2, kOffloadActivations = 4;
// The layout with the offload bits `set` applied.
void apply_offload(ParallelLayout& layout, int set);

// Powers of two for tp (up to 128), cp (up to 32, dividing seq / 2), ep (MoE: up to the experts)
// and pp (up to the layers), micro-batches 1 to 32, virtual stages 1 to 16, ZeRO 0 to 3, the three
// recompute policies, SP on and off, the 24 rank orders of tp, cp, dp and pp (ep inside dp;
// Megatron-LM's tp-cp-ep-dp-pp first); no offload, no SUMMA.
PlanSpace default_plan_space(const ModelSpec& model, int64_t gpus, int64_t global_batch, int64_t seq);

struct PlanCandidate {
  ParallelLayout layout;
  Recompute recompute = Recompute::none;
  TrainingEstimate estimate;
};

struct PlanResult {
  int64_t candidates = 0;  // the size of the space: every combination, before pruning
  int64_t evaluated = 0;   // candidates whose step was composed
  int64_t feasible = 0;    // of those, the ones that fit
  int64_t profiles = 0;    // stage profiles built
  std::vector<PlanCandidate> best;        // fastest first
  std::vector<PlanCandidate> best_infeasible;  // the fastest that do not fit, with the reason
  std::map<std::string, int64_t> pruned;  // why candidates were not composed, and how many
};

// The most threads plan_training takes. The search is CPU-bound, so threads beyond the cores only
// take turns; each reserves a stack (8 MiB of address space by default on Linux), so 1,024
// reserve 8 GiB.
inline constexpr int kMaxPlanThreads = 1024;

// How plan_training starts each of its threads: returns a thread running `work`, or throws
// std::system_error as std::thread's constructor does when the system has no thread or no room
// for its stack left. Empty: std::thread's constructor. A test passes one that refuses.
using PlanThreadStart = std::function<std::thread(std::function<void()> work)>;

// Searches `space` on `threads` threads (0: all hardware threads; at most kMaxPlanThreads, and
// no more than the search has work items; threads the system cannot start are done without)
// for the `top` fastest steps.
// `progress(done, total)` is called from the calling thread now and then while it runs. Ties
// are broken by the layout, so the answer does not depend on the threads.
PlanResult plan_training(const ModelSpec& model, const BuildOptions& base, const PlanSpace& space,
                         const DeviceSpec& device, const SystemSpec& system,
                         const SimulateOptions& options, int64_t top = 10, int threads = 0,
                         const std::function<void(int64_t, int64_t)>& progress = {},
                         const PlanThreadStart& start_thread = {});

}  // namespace accelsim
