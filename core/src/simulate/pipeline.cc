#include "accelsim/pipeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "accelsim/error.h"
#include "accelsim/physical_range.h"

namespace accelsim {
namespace {

struct Pass {
  PipelineWork work;
  int64_t chunk;
  int64_t micro_batch;
};

// Megatron-LM schedules.py, forward_backward_pipelining_without_interleaving.
std::vector<Pass> one_f_one_b(int64_t stages, int64_t stage, int64_t m) {
  const int64_t warmup = std::min(stages - stage - 1, m);
  std::vector<Pass> passes;
  passes.reserve(static_cast<size_t>(2 * m));
  for (int64_t i = 0; i < warmup; ++i) passes.push_back({PipelineWork::forward, 0, i});
  for (int64_t i = 0; i < m - warmup; ++i) {
    passes.push_back({PipelineWork::forward, 0, warmup + i});
    passes.push_back({PipelineWork::backward, 0, i});
  }
  for (int64_t i = m - warmup; i < m; ++i) passes.push_back({PipelineWork::backward, 0, i});
  return passes;
}

// Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving: pass k of a stage
// (k = 0 .. m v - 1) runs chunk (k mod pp v) / pp, reversed for backwards, on micro-batch
// (k / (pp v)) pp + k mod pp (get_model_chunk_id, get_microbatch_id_in_model_chunk).
std::vector<Pass> interleaved(int64_t stages, int64_t v, int64_t stage, int64_t m) {
  const int64_t total = m * v;
  const int64_t warmup = m == stages ? total
                                     : std::min((stages - stage - 1) * 2 + (v - 1) * stages, total);
  const auto pass = [&](int64_t k, PipelineWork work) {
    int64_t chunk = (k % (stages * v)) / stages;
    if (work == PipelineWork::backward) chunk = v - 1 - chunk;
    return Pass{work, chunk, (k / (stages * v)) * stages + k % stages};
  };
  std::vector<Pass> passes;
  passes.reserve(static_cast<size_t>(2 * total));
  for (int64_t k = 0; k < warmup; ++k) passes.push_back(pass(k, PipelineWork::forward));
  for (int64_t k = 0; k < total - warmup; ++k) {
    passes.push_back(pass(warmup + k, PipelineWork::forward));
    passes.push_back(pass(k, PipelineWork::backward));
  }
  for (int64_t k = total - warmup; k < total; ++k) passes.push_back(pass(k, PipelineWork::backward));
  return passes;
}

}  // namespace

PipelineSchedule schedule_pipeline(int64_t stages, int64_t virtual_stages, int64_t micro_batches,
                                   double forward_s, double backward_s, double p2p_s) {
  const int64_t pp = stages, v = virtual_stages, m = micro_batches;
  ACCELSIM_CHECK(pp >= 1 && v >= 1 && m >= 1,
                 "pipeline schedule: stages, virtual stages and micro-batches must be at least 1, got " +
                     std::to_string(pp) + ", " + std::to_string(v) + ", " + std::to_string(m));
  require_in_range("pipeline schedule", "forward_s", forward_s, kNonNegative);
  require_in_range("pipeline schedule", "backward_s", backward_s, kNonNegative);
  require_in_range("pipeline schedule", "p2p_s", p2p_s, kNonNegative);
  ACCELSIM_CHECK(v == 1 || m % pp == 0,
                 "interleaved 1F1B needs the micro-batches (" + std::to_string(m) +
                     ") to be a multiple of the pipeline stages (" + std::to_string(pp) + ")");

  std::vector<std::vector<Pass>> passes(static_cast<size_t>(pp));
  for (int64_t s = 0; s < pp; ++s) {
    passes[static_cast<size_t>(s)] = v == 1 ? one_f_one_b(pp, s, m) : interleaved(pp, v, s, m);
  }

  // Arrival time of each pass's input on its stage, per model stage j and micro-batch; NaN until
  // the producing pass (and its send) is scheduled.
  const int64_t model_stages = pp * v;
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  const auto at = [m](int64_t j, int64_t i) { return static_cast<size_t>(j * m + i); };
  std::vector<double> forward_input(static_cast<size_t>(model_stages * m), unknown);
  std::vector<double> backward_input(static_cast<size_t>(model_stages * m), unknown);
  for (int64_t i = 0; i < m; ++i) forward_input[at(0, i)] = 0.0;
  std::vector<double> link_free(static_cast<size_t>(pp * pp), 0.0);  // [sender][receiver]
  std::vector<double> stage_free(static_cast<size_t>(pp), 0.0);
  std::vector<size_t> next(static_cast<size_t>(pp), 0);

  PipelineSchedule schedule;
  schedule.events.reserve(static_cast<size_t>(pp * m * v * 4));
  // Delivers the output of a pass on `stage` to model stage `to` (whose input is `input`).
  const auto deliver = [&](int64_t stage, const Pass& p, double end, int64_t to, double& input) {
    const int64_t receiver = to % pp;
    if (receiver == stage) {
      input = end;
      return;
    }
    double& free = link_free[static_cast<size_t>(stage * pp + receiver)];
    const double start = std::max(end, free);
    free = start + p2p_s;
    input = free;
    if (p2p_s > 0.0) {
      schedule.events.push_back(
          {stage, p.chunk, p.micro_batch, PipelineWork::send, start, free, receiver, p.work});
    }
  };

  // Each stage runs its passes in order as far as their inputs have arrived; sweep the stages
  // until none can go on. The schedules are deadlock-free, so every pass runs.
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < pp; ++s) {
      const std::vector<Pass>& list = passes[static_cast<size_t>(s)];
      size_t& n = next[static_cast<size_t>(s)];
      for (; n < list.size(); ++n) {
        const Pass& p = list[n];
        const int64_t j = p.chunk * pp + s;
        const bool forward = p.work == PipelineWork::forward;
        const double ready = forward ? forward_input[at(j, p.micro_batch)] : backward_input[at(j, p.micro_batch)];
        if (std::isnan(ready)) break;
        double& free = stage_free[static_cast<size_t>(s)];
        const double start = std::max(free, ready);
        free = start + (forward ? forward_s : backward_s);
        schedule.events.push_back({s, p.chunk, p.micro_batch, p.work, start, free, -1, p.work});
        if (forward && j + 1 < model_stages) {
          deliver(s, p, free, j + 1, forward_input[at(j + 1, p.micro_batch)]);
        } else if (forward) {
          backward_input[at(j, p.micro_batch)] = free;  // the loss: the last model stage's own output
        } else if (j > 0) {
          deliver(s, p, free, j - 1, backward_input[at(j - 1, p.micro_batch)]);
        }
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < pp; ++s) {
    if (next[static_cast<size_t>(s)] != passes[static_cast<size_t>(s)].size()) {
      throw std::logic_error("pipeline schedule: stage " + std::to_string(s) + " deadlocked");
    }
  }

  std::stable_sort(schedule.events.begin(), schedule.events.end(),
                   [](const PipelineEvent& a, const PipelineEvent& b) {
                     if (a.start_s != b.start_s) return a.start_s < b.start_s;
                     return a.stage < b.stage;
                   });
  for (const PipelineEvent& e : schedule.events) schedule.makespan_s = std::max(schedule.makespan_s, e.end_s);
  // Never below 0: with one stage the makespan is the passes' sum, which rounding can put an ulp
  // under their product.
  schedule.bubble_s =
      std::max(0.0, schedule.makespan_s - static_cast<double>(m * v) * (forward_s + backward_s));
  require_non_negative("schedule_pipeline", "makespan_s", schedule.makespan_s);
  require_non_negative("schedule_pipeline", "bubble_s", schedule.bubble_s);
  return schedule;
}

}  // namespace accelsim
