// find_max_qps(): the highest request rate a deployment sustains within its SLOs (serve.h), by
// bracketing and bisection over simulate_serving; replicas_for_rate().
#include <algorithm>
#include <cmath>
#include <limits>

#include "accelsim/error.h"
#include "accelsim/physical_range.h"
#include "accelsim/serve.h"

namespace accelsim {
namespace {

void require_physical(const MaxQpsResult& found) {
  for_each_figure(found, [](const char* figure, double value) { require_non_negative("find_max_qps", figure, value); });
}

}  // namespace

MaxQpsResult find_max_qps(IterationModel& costs, const WorkloadSpec& spec, const ServeConfig& config,
                          const std::function<void(int64_t, int64_t)>& progress) {
  ACCELSIM_CHECK(config.slo_ttft_s > 0 || config.slo_tpot_s > 0, "finding the maximum rate needs an SLO (TTFT or TPOT)");
  MaxQpsResult out;
  // The answer: the rate found, the run at it, and the rate per replica and per GPU.
  auto found = [&](double qps, const ServeResult& at) {
    out.qps = qps;
    out.at_max = at;
    out.qps_per_replica = qps / static_cast<double>(config.replicas);
    out.qps_per_gpu = out.qps_per_replica / static_cast<double>(costs.gpus());
    require_physical(out);
    return out;
  };
  auto meets = [&](const ServeResult& r) {
    return r.rejected == 0 && r.completed == r.requests && (config.slo_ttft_s <= 0 || r.ttft.p99 <= config.slo_ttft_s) &&
           (config.slo_tpot_s <= 0 || r.tpot.p99 <= config.slo_tpot_s);
  };
  auto trial = [&](double qps) {
    WorkloadSpec s = spec;
    s.qps = qps;
    ++out.trials;
    if (progress) progress(out.trials, 0);
    return simulate_serving(costs, generate_workload(s), config);
  };
  // Bracket: start from the rate the replicas could at best sustain (one request's decode-bound
  // service over the largest batch), then halve or double.
  Workload probe = generate_workload(spec);
  double mean_out = 0.0;
  for (const Request& r : probe.requests) mean_out += r.output_len;
  mean_out /= static_cast<double>(probe.requests.size());
  const double step = costs.step_time({{}, config.scheduler.max_seqs, 0, -1}).total_s();
  double hi = std::max(1e-3, static_cast<double>(config.replicas * costs.replica().pp * costs.replica().dp_attention) *
                                 config.scheduler.max_seqs /
                                 (mean_out * std::max(step, 1e-6)));
  double lo = 0.0;
  ServeResult best;
  ServeResult r = trial(hi);
  if (meets(r)) {
    // The heaviest load first: every request at once. If the SLOs hold even then, no rate breaks
    // them (queueing only grows with the rate): the answer is a lower bound, 2^30 x the first
    // rate, and the run the all-at-once one.
    WorkloadSpec all = spec;
    all.qps = 0.0;
    ++out.trials;
    if (progress) progress(out.trials, 0);
    const ServeResult burst = simulate_serving(costs, generate_workload(all), config);
    if (meets(burst)) {
      out.unbounded = true;
      return found(hi * std::exp2(30.0), burst);
    }
    for (int i = 0; i < 30 && meets(r); ++i) {
      lo = hi;
      best = r;
      hi *= 2.0;
      r = trial(hi);
    }
    if (meets(r)) {  // the SLOs hold even with every request arriving nearly at once
      out.unbounded = true;
      return found(hi, r);
    }
  } else {
    double q = hi;
    for (int i = 0; i < 30; ++i) {
      q /= 2.0;
      r = trial(q);
      if (meets(r)) {
        lo = q;
        best = r;
        break;
      }
      hi = q;
    }
    if (lo == 0.0) {
      out.qps = 0.0;
      out.at_max = r;
      return out;
    }
  }
  while (hi - lo > 0.02 * lo) {
    const double mid = 0.5 * (lo + hi);
    r = trial(mid);
    if (meets(r)) {
      lo = mid;
      best = r;
    } else {
      hi = mid;
    }
  }
  return found(lo, best);
}

int64_t replicas_for_rate(const MaxQpsResult& found, double qps) {
  ACCELSIM_CHECK(qps > 0, "the target rate must be positive");
  if (!(found.qps_per_replica > 0)) return 0;
  return static_cast<int64_t>(std::ceil(qps / found.qps_per_replica * (1.0 - 1e-12)));
}

}  // namespace accelsim
