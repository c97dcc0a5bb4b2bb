// The schedulers of the serving simulation, one per policy behind a registry (SchedulerKind,
// serve.h): what each engine runs in its next step.
#include <cstddef>
#include <limits>

#include "serve_engine.h"

namespace accelsim::serve_detail {

bool Simulation::schedule(Engine& e, double now, StepBatch& b) {
  // The registry: one member function per SchedulerKind, in the enum's order (serve.h).
  using Scheduler = bool (Simulation::*)(Engine&, double, StepBatch&);
  static constexpr Scheduler kSchedulers[] = {&Simulation::schedule_static, &Simulation::schedule_orca,
                                              &Simulation::schedule_vllm, &Simulation::schedule_sarathi};
  static_assert(static_cast<int>(SchedulerKind::static_batch) == 0 && static_cast<int>(SchedulerKind::orca) == 1 &&
                static_cast<int>(SchedulerKind::vllm) == 2 && static_cast<int>(SchedulerKind::sarathi) == 3);
  b = StepBatch{};
  return (this->*kSchedulers[static_cast<size_t>(s_.kind)])(e, now, b);
}

// Static batching: a batch formed when the engine is idle runs until every row finishes.
bool Simulation::schedule_static(Engine& e, double now, StepBatch& b) {
  int64_t sampling = 0;
  if (e.running.empty()) {
    // Form a batch; reserve every request's prompt + output.
    while (has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
      const int32_t req = peek(e);
      const Request& r = w_.requests[static_cast<size_t>(req)];
      const int64_t need = blocks_for(static_cast<int64_t>(r.input_len) + r.output_len);
      if (!allocate(e, need)) break;
      pop(e);
      Seq s = make_seq(e, req);
      s.blocks = static_cast<int32_t>(need);
      admit(e, s, s.prompt, now);
      b.prefill.emplace_back(s.prompt, 0);
      ++sampling;
    }
    b.sampling = sampling;
    return !b.prefill.empty();
  }
  for (Seq& s : e.running) {  // every row, finished or not, runs each step
    s.sched = s.done ? 0 : 1;
    ++b.decode_seqs;
    b.decode_context += s.computed;
  }
  b.sampling = b.decode_seqs;
  return true;
}

// Orca: iteration-level scheduling, every request reserving its prompt and output at admission.
bool Simulation::schedule_orca(Engine& e, double now, StepBatch& b) {
  int64_t sampling = 0;
  int64_t budget = std::numeric_limits<int64_t>::max();
  schedule_decodes(e, b, budget, false);  // reserved at admission: never short
  sampling = b.decode_seqs;
  int64_t tokens = b.decode_seqs;
  while (has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
    const int32_t req = peek(e);
    const Request& r = w_.requests[static_cast<size_t>(req)];
    if (tokens + r.input_len > s_.max_batched_tokens && tokens > 0) break;
    const int64_t need = blocks_for(static_cast<int64_t>(r.input_len) + r.output_len);
    if (!allocate(e, need)) break;
    pop(e);
    Seq s = make_seq(e, req);
    s.blocks = static_cast<int32_t>(need);
    tokens += s.prompt;
    b.prefill.emplace_back(s.prompt, 0);
    ++sampling;
    admit(e, s, s.prompt, now);
  }
  b.sampling = sampling;
  return tokens > 0;
}

// vLLM (V0): whole prompts first while the token budget, max_seqs and the watermark allow; then decodes.
bool Simulation::schedule_vllm(Engine& e, double now, StepBatch& b) {
  // Prefills first: whole prompts while the budget, max_seqs and the watermark allow.
  int64_t tokens = 0;
  while (has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
    // Whole prompts; one longer than the budget runs alone.
    const int64_t budget = b.prefill.empty() ? std::numeric_limits<int64_t>::max() : s_.max_batched_tokens - tokens;
    const int64_t n = admit_waiting(e, budget, true, now, b);
    if (n == 0) break;
    tokens += n;
  }
  if (!b.prefill.empty()) {
    b.sampling = static_cast<int64_t>(b.prefill.size());
    return true;
  }
  int64_t budget = std::numeric_limits<int64_t>::max();
  schedule_decodes(e, b, budget, true);
  b.sampling = b.decode_seqs;
  return b.decode_seqs > 0;
}

// Sarathi-Serve: decodes first, then prompt chunks filling the step's token budget.
bool Simulation::schedule_sarathi(Engine& e, double now, StepBatch& b) {
  int64_t sampling = 0;
  int64_t budget = s_.chunk;
  if (e.role != Role::prefill) schedule_decodes(e, b, budget, true);
  sampling = b.decode_seqs;
  // Prompts in progress, then new ones, in chunks filling the budget.
  for (Seq& s : e.running) {
    if (!s.in_prefill || budget <= 0) continue;
    const auto n = static_cast<int32_t>(std::min<int64_t>(s.len() - s.computed, budget));
    if (!grow(e, s, s.computed + n)) break;
    s.sched = n;
    b.prefill.emplace_back(n, s.computed);
    if (s.computed + n == s.len()) ++sampling;
    budget -= n;
  }
  while (budget > 0 && has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
    const auto before = e.running.size();
    const int64_t n = admit_waiting(e, budget, false, now, b);
    if (n == 0) break;
    const Seq& s = e.running[before];
    if (s.computed + n == s.len()) ++sampling;
    budget -= n;
  }
  b.sampling = sampling;
  return b.decode_seqs > 0 || !b.prefill.empty();
}

}  // namespace accelsim::serve_detail
