#include "accelsim/fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "accelsim/error.h"

namespace accelsim {

FitResult largest_fitting(const std::function<int64_t(int64_t)>& peak_at, double capacity_bytes,
                          int64_t max_value) {
  ACCELSIM_CHECK(max_value >= 1, "the search limit must be at least 1");
  std::map<int64_t, int64_t> seen;
  auto peak = [&](int64_t v) {
    auto it = seen.find(v);
    if (it != seen.end()) return it->second;
    const int64_t p = peak_at(v);
    ACCELSIM_CHECK(p >= 0, "a probe returned a negative peak at " + std::to_string(v));
    seen.emplace(v, p);
    // Monotonicity against the neighbours probed so far.
    auto next = seen.upper_bound(v);
    if (next != seen.end()) {
      ACCELSIM_CHECK(next->second >= p, "peak memory decreases from " + std::to_string(v) +
                                            " to " + std::to_string(next->first));
    }
    auto here = seen.find(v);
    if (here != seen.begin()) {
      ACCELSIM_CHECK(std::prev(here)->second <= p,
                     "peak memory decreases from " + std::to_string(std::prev(here)->first) +
                         " to " + std::to_string(v));
    }
    return p;
  };
  auto fits = [&](int64_t v) { return static_cast<double>(peak(v)) <= capacity_bytes; };
  FitResult r;
  auto finish = [&](int64_t largest) {
    r.largest = largest;
    r.peak_bytes = peak(std::max<int64_t>(largest, 1));
    r.at_limit = largest == max_value;
    r.next_peak_bytes = largest < max_value ? peak(largest + 1) : -1;
    r.probes = static_cast<int>(seen.size());
    return r;
  };
  if (!fits(1)) return finish(0);
  if (max_value == 1) return finish(1);
  if (!fits(2)) return finish(1);
  int64_t lo = 2, hi = -1;  // lo fits; hi (when known) does not
  // The line through the peaks at 1 and 2, met with the capacity.
  const double slope = static_cast<double>(peak(2) - peak(1));
  int64_t guess = max_value;
  if (slope > 0) {
    const double at = 1.0 + std::floor((capacity_bytes - static_cast<double>(peak(1))) / slope);
    guess = static_cast<int64_t>(std::min(at, static_cast<double>(max_value)));
  }
  guess = std::clamp<int64_t>(guess, lo, max_value);
  if (fits(guess)) {
    lo = guess;
    if (lo == max_value) return finish(lo);
    if (!fits(lo + 1)) return finish(lo);
    lo = lo + 1;
  } else {
    hi = guess;
  }
  // Grow until a value fails (or the limit fits), then bisect.
  while (hi < 0) {
    const int64_t v = std::min(max_value, lo * 2);
    if (fits(v)) {
      lo = v;
      if (lo == max_value) return finish(lo);
    } else {
      hi = v;
    }
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return finish(lo);
}

}  // namespace accelsim
