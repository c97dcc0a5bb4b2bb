// The serving simulation's metrics: percentiles of a sample, and the timeline of KV-cache use,
// queue and batch, bin by bin (ServeResult::timeline).
#include "serve_engine.h"

namespace accelsim::serve_detail {

Percentiles summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  double sum = 0.0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  auto at = [&](double q) {
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(v.size()))));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank - 1), v.end());
    return v[rank - 1];
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = *std::max_element(v.begin(), v.end());
  return p;
}

namespace {

TimelinePoint merged(const TimelinePoint& a, const TimelinePoint& b) {
  const double wa = a.t_s - a.start_s, wb = b.t_s - b.start_s;
  const double w = wa + wb > 0 ? wa + wb : 1.0;
  return {a.start_s, b.t_s, (a.kv_utilization * wa + b.kv_utilization * wb) / w,
          (a.waiting * wa + b.waiting * wb) / w, (a.running * wa + b.running * wb) / w,
          std::max(a.kv_utilization_max, b.kv_utilization_max), std::max(a.waiting_max, b.waiting_max),
          std::max(a.running_max, b.running_max)};
}

std::vector<TimelinePoint> merged_pairs(const std::vector<TimelinePoint>& points) {
  std::vector<TimelinePoint> half;
  half.reserve(points.size() / 2 + 1);
  for (size_t i = 0; i < points.size(); i += 2) {
    half.push_back(i + 1 < points.size() ? merged(points[i], points[i + 1]) : points[i]);
  }
  return half;
}

// A bin's integrals over its width: the means.
TimelinePoint closed(TimelinePoint p) {
  const double w = p.t_s - p.start_s;
  if (w > 0) {
    p.kv_utilization /= w;
    p.waiting /= w;
    p.running /= w;
  } else {
    p.kv_utilization = p.kv_utilization_max;
    p.waiting = p.waiting_max;
    p.running = p.running_max;
  }
  return p;
}

// The figures held over (from, to] go into each bin that interval covers; a state that lasts no
// time (to == from) still counts towards the maxima of the bin holding `to`.
}  // namespace

void Simulation::record_timeline(double from, double to, double kv, double waiting, double running) {
  const int64_t bins = std::max<int64_t>(1, c_.timeline_bins);
  for (;;) {
    const double end = open_bin_.start_s + bin_;
    const double upto = std::min(to, end);
    const double dt = upto - from;
    if (dt > 0) {
      open_bin_.kv_utilization += dt * kv;
      open_bin_.waiting += dt * waiting;
      open_bin_.running += dt * running;
    }
    if (dt > 0 || to <= end) {
      open_bin_.kv_utilization_max = std::max(open_bin_.kv_utilization_max, kv);
      open_bin_.waiting_max = std::max(open_bin_.waiting_max, waiting);
      open_bin_.running_max = std::max(open_bin_.running_max, running);
      open_bin_used_ = true;
      open_bin_.t_s = std::max(open_bin_.t_s, upto);
    }
    if (to <= end) return;
    open_bin_.t_s = end;
    timeline_.push_back(closed(open_bin_));
    open_bin_ = TimelinePoint{};
    open_bin_.start_s = open_bin_.t_s = end;
    open_bin_used_ = false;
    from = end;
    // A run much longer than its arrivals: merge neighbouring bins and widen them.
    if (static_cast<int64_t>(timeline_.size()) >= 4 * bins) {
      timeline_ = merged_pairs(timeline_);
      bin_ *= 2.0;
    }
  }
}

// The closed bins, the open one up to the last event, merged pairwise down to the bins asked for.
std::vector<TimelinePoint> Simulation::timeline() const {
  std::vector<TimelinePoint> tl = timeline_;
  if (open_bin_used_) tl.push_back(closed(open_bin_));
  while (c_.timeline_bins > 0 && static_cast<int64_t>(tl.size()) > c_.timeline_bins) tl = merged_pairs(tl);
  return tl;
}

}  // namespace accelsim::serve_detail
