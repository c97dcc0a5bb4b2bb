// simulate_serving(): the discrete-event simulation of serving engines (serve.h): the event loop
// and the engines' steps here; the schedulers in schedulers.cc, the metrics in metrics.cc, the
// rate search in max_qps.cc; what they share in serve_engine.h.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/physical_range.h"
#include "accelsim/serve.h"

#include "serve_engine.h"

namespace accelsim {
namespace serve_detail {

void Simulation::start(Engine& e, double now) {
  if (e.busy) return;
  StepBatch b;
  if (e.role == Role::decode) {
    // Decode engines: every running sequence decodes (their whole length was reserved on
    // arrival, so none is ever short of a block).
    for (Seq& s : e.running) {
      s.sched = 1;
      ++b.decode_seqs;
      b.decode_context += s.computed;
    }
    b.sampling = b.decode_seqs;
    if (b.decode_seqs == 0) return;
  } else if (!schedule(e, now, b)) {
    return;
  }
  const double dt = costs_.step_time(b).total_s();
  e.busy = true;
  e.step_start = now;
  e.busy_until = now + dt;
  e.step_prefill_seqs = static_cast<int32_t>(b.prefill.size());
  e.step_prefill_tokens = 0;
  for (const auto& [n, c] : b.prefill) e.step_prefill_tokens += static_cast<int32_t>(n);
  e.step_decode_seqs = static_cast<int32_t>(b.decode_seqs);
  ++steps_;
  batch_sum_ += static_cast<double>(b.prefill.size() + static_cast<size_t>(b.decode_seqs));
  busy_s_ += dt;
}

void Simulation::token(Seq& s, double now) {
  const auto r = static_cast<size_t>(s.req);
  ++s.generated;
  if (std::isnan(first_token_[r])) {
    first_token_[r] = now;
  } else {
    itl_.add(now - s.last_token_s);
  }
  s.last_token_s = now;
}

void Simulation::finish(Engine& e, double now) {
  e.busy = false;
  e.busy_until = kInf;
  integrate(now);
  std::vector<Seq> keep;
  keep.reserve(e.running.size());
  bool all_done = true;
  for (Seq& s : e.running) {
    const int32_t n = s.sched;
    s.sched = 0;
    int32_t emitted = 0;
    if (n > 0) {
      if (s.in_prefill) {
        s.computed += n;
        if (s.computed >= s.len()) {
          s.in_prefill = false;
          publish_prefix(e, s);
          emitted = 1;
        }
      } else {
        emitted = accepted(s);
        s.computed += emitted;
      }
    }
    for (int32_t i = 0; i < emitted; ++i) token(s, now);
    const bool finished = !s.done && s.generated >= s.output;
    if (finished) {
      finish_[static_cast<size_t>(s.req)] = now;
      ++completed_;
      if (progress_ && (completed_ % 65536 == 0)) progress_(completed_, static_cast<int64_t>(w_.requests.size()));
    }
    if (s_.kind == SchedulerKind::static_batch && e.role == Role::mixed) {
      if (finished) s.done = true;
      all_done = all_done && s.done;
      keep.push_back(s);
      continue;
    }
    if (finished) {
      free_seq(e, s);
      --running_total_;
      continue;
    }
    if (e.role == Role::prefill && !s.in_prefill) {
      // The prompt is done: ship the cache to a decode engine.
      free_seq(e, s);
      --running_total_;
      const double bytes = static_cast<double>(s.computed) * costs_.memory().kv_bytes_per_token *
                           static_cast<double>(costs_.gpus_per_engine());
      const double arrive = now + bytes / c_.kv_transfer_bytes_per_s;
      s.blocks = 0;
      in_transfer_[s.req] = s;
      transfers_.emplace(arrive, s.req);
      continue;
    }
    keep.push_back(s);
  }
  if (s_.kind == SchedulerKind::static_batch && e.role == Role::mixed && all_done) {
    for (Seq& s : keep) free_seq(e, s);
    running_total_ -= static_cast<int64_t>(keep.size());
    keep.clear();
  }
  e.running = std::move(keep);
  if (static_cast<int64_t>(records_.size()) < c_.record_steps) {
    records_.push_back({e.id, e.step_start, now, e.step_prefill_tokens, e.step_prefill_seqs, e.step_decode_seqs,
                        e.total_blocks > 0 ? 1.0 - static_cast<double>(e.free_blocks) / static_cast<double>(e.total_blocks)
                                           : 0.0});
  }
}

// Two neighbouring bins as one: means weighted by the bins' widths, the larger maxima.
ServeResult Simulation::run() {
  const auto& reqs = w_.requests;
  size_t next = 0;
  auto pick = [&](Role role, size_t& rr) -> Engine& {
    std::vector<Engine*> pool;
    for (Engine& e : engines_) {
      if (e.role == role) pool.push_back(&e);
    }
    if (c_.router == RouterKind::round_robin) return *pool[rr++ % pool.size()];
    Engine* best = pool.front();
    for (Engine* e : pool) {
      if (e->outstanding() < best->outstanding()) best = e;
    }
    return *best;
  };
  const Role entry = c_.prefill_replicas > 0 ? Role::prefill : Role::mixed;
  for (;;) {
    const double ta = next < reqs.size() ? reqs[next].arrival_s : kInf;
    const double tt = transfers_.empty() ? kInf : transfers_.top().first;
    Engine* soonest = nullptr;
    for (Engine& e : engines_) {
      if (e.busy && (soonest == nullptr || e.busy_until < soonest->busy_until)) soonest = &e;
    }
    const double te = soonest ? soonest->busy_until : kInf;
    if (ta == kInf && tt == kInf && te == kInf) break;
    if (ta <= te && ta <= tt) {
      // Every request arriving at this instant is queued before any engine schedules, so that
      // simultaneous arrivals share a step.
      integrate(ta);
      touched_.clear();
      while (next < reqs.size() && reqs[next].arrival_s == ta) {
        const auto req = static_cast<int32_t>(next++);
        Engine& e = pick(entry, rr_);
        if (!admissible(e, req)) {
          ++rejected_;
          continue;
        }
        enqueue(e, req);
        touched_.push_back(&e);
      }
      for (Engine* e : touched_) start(*e, ta);
    } else if (tt <= te) {
      const int32_t req = transfers_.top().second;
      transfers_.pop();
      integrate(tt);
      Engine& e = pick(Role::decode, rr_decode_);
      Seq s = in_transfer_.at(req);
      in_transfer_.erase(req);
      // Decode engines reserve the whole request; a full engine queues it.
      e.parked[req] = s;
      e.fifo.push_back(req);
      ++waiting_total_;
      admit_transfers(e);
      start(e, tt);
    } else {
      Engine& e = *soonest;
      finish(e, te);
      if (e.role == Role::decode) admit_transfers(e);
      start(e, te);
    }
  }
  if (progress_) progress_(completed_, static_cast<int64_t>(reqs.size()));

  ServeResult r;
  r.requests = static_cast<int64_t>(reqs.size());
  r.completed = completed_;
  r.rejected = rejected_;
  r.gpus = c_.replicas * costs_.gpus();
  r.preemptions = preemptions_;
  r.steps = steps_;
  const double t0 = reqs.empty() ? 0.0 : reqs.front().arrival_s;
  double end = t0;
  std::vector<double> ttft, tpot, e2e, queue;
  ttft.reserve(reqs.size());
  int64_t out_tokens = 0, in_tokens = 0, good = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (std::isnan(finish_[i])) continue;
    end = std::max(end, finish_[i]);
    const double a = reqs[i].arrival_s;
    const double t = first_token_[i] - a;
    ttft.push_back(t);
    e2e.push_back(finish_[i] - a);
    queue.push_back(scheduled_[i] - a);
    double per_token = 0.0;
    if (reqs[i].output_len > 1) {
      per_token = (finish_[i] - first_token_[i]) / static_cast<double>(reqs[i].output_len - 1);
      tpot.push_back(per_token);
    }
    out_tokens += reqs[i].output_len;
    in_tokens += reqs[i].input_len;
    const bool ok = (c_.slo_ttft_s <= 0 || t <= c_.slo_ttft_s) && (c_.slo_tpot_s <= 0 || per_token <= c_.slo_tpot_s);
    good += ok ? 1 : 0;
  }
  r.makespan_s = end - t0;
  r.ttft = summarize(ttft);
  r.tpot = summarize(tpot);
  r.e2e = summarize(e2e);
  r.queueing = summarize(queue);
  r.itl = itl_.summary();
  if (r.makespan_s > 0) {
    r.requests_per_s = static_cast<double>(completed_) / r.makespan_s;
    r.output_tokens_per_s = static_cast<double>(out_tokens) / r.makespan_s;
    r.output_tokens_per_s_per_gpu = r.output_tokens_per_s / static_cast<double>(r.gpus);
    r.total_tokens_per_s = static_cast<double>(out_tokens + in_tokens) / r.makespan_s;
    r.goodput_requests_per_s = static_cast<double>(good) / r.makespan_s;
    r.kv_utilization_mean = kv_integral_ / (last_t_ - t0 > 0 ? last_t_ - t0 : 1.0);
    r.waiting_mean = waiting_integral_ / (last_t_ - t0 > 0 ? last_t_ - t0 : 1.0);
    r.busy_fraction = busy_s_ / (r.makespan_s * static_cast<double>(engines_.size()));
  }
  r.slo_attainment = completed_ > 0 ? static_cast<double>(good) / static_cast<double>(completed_) : 0.0;
  r.kv_utilization_max = kv_max_;
  r.waiting_max = waiting_max_;
  r.mean_batch_size = steps_ > 0 ? batch_sum_ / static_cast<double>(steps_) : 0.0;
  r.prefix_hit_rate = prompt_tokens_ > 0 ? static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_) : 0.0;
  if (c_.price_usd_per_gpu_hour > 0 && out_tokens > 0) {
    const double dollars = c_.price_usd_per_gpu_hour * static_cast<double>(r.gpus) * r.makespan_s / 3600.0;
    r.cost_per_million_output_tokens_usd = dollars / (static_cast<double>(out_tokens) / 1e6);
    r.cost_per_million_total_tokens_usd = dollars / (static_cast<double>(out_tokens + in_tokens) / 1e6);
  }
  r.timeline = timeline();
  r.steps_recorded = std::move(records_);
  r.request_ttft_s.resize(reqs.size());
  r.request_e2e_s.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    r.request_ttft_s[i] = std::isnan(finish_[i]) ? std::nan("") : first_token_[i] - reqs[i].arrival_s;
    r.request_e2e_s[i] = std::isnan(finish_[i]) ? std::nan("") : finish_[i] - reqs[i].arrival_s;
  }
  return r;
}

}  // namespace serve_detail

namespace {

using serve_detail::Simulation;

void check(const ServeConfig& c) {
  ACCELSIM_CHECK(c.replicas >= 1, "replicas must be at least 1");
  ACCELSIM_CHECK(c.scheduler.max_seqs >= 1, "max sequences per batch must be at least 1");
  ACCELSIM_CHECK(c.scheduler.max_batched_tokens >= 1, "max batched tokens must be at least 1");
  ACCELSIM_CHECK(c.scheduler.chunk >= 1, "the chunk (token budget per step) must be at least 1");
  require_in_range("", "the watermark", c.scheduler.watermark, {.lo = 0.0, .hi = 1.0, .hi_open = true});
  ACCELSIM_CHECK(c.prefill_replicas >= 0 && (c.prefill_replicas == 0 || c.prefill_replicas < c.replicas),
                 "disaggregation needs at least one prefill and one decode replica");
  require_in_range("", "the KV transfer bandwidth", c.kv_transfer_bytes_per_s, kNonNegative);
  // An infinite SLO is no target; NaN fails the comparison.
  ACCELSIM_CHECK(c.slo_ttft_s >= 0 && c.slo_tpot_s >= 0, "SLO targets must not be negative");
  require_in_range("", "the price per GPU-hour", c.price_usd_per_gpu_hour, kNonNegative);
}

// simulate_serving()'s promise (physical_range.h): every figure finite and not negative; a
// request's TTFT and end-to-end time are NaN only when it did not complete.
void require_physical(const ServeResult& r) {
  constexpr const char* kWhere = "the serving simulation";
  // A figure inside a percentile set, a timeline bin or a recorded step: "timeline.waiting_max".
  auto require_each = [&](const char* set, const auto& item) {
    for_each_figure(item, [&](const char* figure, double value) {
      if (!(std::isfinite(value) && value >= 0.0)) {
        throw_out_of_physical_range(kWhere, std::string(set) + "." + figure, value);
      }
    });
  };
  for_each_figure(r, [&](const char* figure, const auto& value) {
    using Figure = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<Figure, double>) {
      require_non_negative(kWhere, figure, value);
    } else if constexpr (std::is_same_v<Figure, Percentiles>) {
      require_each(figure, value);
    } else if constexpr (std::is_same_v<Figure, std::vector<double>>) {
      for (double v : value) {
        if (!std::isnan(v)) require_non_negative(kWhere, figure, v);
      }
    } else {
      for (const auto& item : value) require_each(figure, item);
    }
  });
}

// find_max_qps()'s promise: its rates finite and not negative (its run was checked when it ran).
}  // namespace


double default_kv_transfer_bytes_per_s(const IterationModel& costs) {
  // Each GPU of a replica sends its share of the cache over its NICs (the system's scale-out
  // fabric, at its efficiency).
  const std::optional<SystemSpec>& system = costs.replica().system;
  ACCELSIM_CHECK(system.has_value(), "disaggregation needs the system whose NICs move the KV cache, or its bandwidth");
  return system->scaleout.bandwidth_bytes_per_s * system->scaleout.efficiency * system->nics_per_gpu *
         static_cast<double>(costs.gpus_per_engine());
}

ServeResult simulate_serving(IterationModel& costs, const Workload& workload, const ServeConfig& config,
                             const std::function<void(int64_t, int64_t)>& progress) {
  check(config);
  ServeConfig c = config;
  if (c.prefill_replicas > 0 && c.kv_transfer_bytes_per_s == 0.0) c.kv_transfer_bytes_per_s = default_kv_transfer_bytes_per_s(costs);
  if (c.prefill_replicas > 0 && c.scheduler.kind != SchedulerKind::sarathi) {
    // Prefill engines run prompts in chunks of the token budget whatever the scheduler.
    c.scheduler.kind = SchedulerKind::sarathi;
  }
  Simulation sim(costs, workload, c, progress);
  ServeResult result = sim.run();
  require_physical(result);
  return result;
}

}  // namespace accelsim
