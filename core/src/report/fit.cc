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
  require_in_range("", "the capacity to fit", capacity_bytes, kNonNegative);
  std::map<int64_t, int64_t> seen;
  bool monotone = true;
  auto peak = [&](int64_t v) {
    auto it = seen.find(v);
    if (it != seen.end()) return it->second;
    const int64_t p = peak_at(v);
    ACCELSIM_CHECK(p >= 0, "a probe returned a negative peak at " + std::to_string(v));
    seen.emplace(v, p);
    // Monotonicity against the neighbours probed so far: the allocator's segments can dip
    // where a size happens to pack better; the search goes on, and says so.
    auto here = seen.find(v);
    auto next = std::next(here);
    if (next != seen.end() && next->second < p) monotone = false;
    if (here != seen.begin() && std::prev(here)->second > p) monotone = false;
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
    r.monotone = monotone;
    return r;
  };
  if (!fits(1)) return finish(0);
  if (max_value == 1) return finish(1);
  if (!fits(2)) return finish(1);
  // Secant steps: through the two probes nearest the boundary, to where the line meets the
  // capacity; each guess that fits is followed by guess + 1, each that does not by guess - 1,
  // which ends the search when the line was right. Every other step bisects a remaining bracket,
  // so a curved or dipping peak still converges in logarithmically many probes.
  int64_t prev = 1, lo = 2, hi = -1;  // lo fits; hi (when known) does not
  auto meet = [&](int64_t a, int64_t b) {  // where the line through a and b meets the capacity
    const double slope = static_cast<double>(peak(b) - peak(a)) / static_cast<double>(b - a);
    if (slope <= 0) return static_cast<double>(max_value);
    return static_cast<double>(a) +
           std::floor((capacity_bytes - static_cast<double>(peak(a))) / slope);
  };
  for (int step = 0; hi < 0 || hi - lo > 1; ++step) {
    int64_t guess;
    if (hi < 0) {
      // After two extrapolations that fell short, at least double (a peak growing faster than
      // linearly would otherwise creep up on the capacity).
      const double floor_at = static_cast<double>(step >= 2 ? 2 * lo : lo + 1);
      const double at = std::max(meet(prev, lo), floor_at);
      guess = static_cast<int64_t>(std::min(at, static_cast<double>(max_value)));
    } else if (step % 2 == 0) {
      guess = static_cast<int64_t>(
          std::clamp(meet(lo, hi), static_cast<double>(lo) + 1.0, static_cast<double>(hi) - 1.0));
    } else {
      guess = lo + (hi - lo) / 2;
    }
    if (fits(guess)) {
      prev = lo;
      lo = guess;
      if (lo == max_value) return finish(lo);
      if (hi < 0 || lo + 1 < hi) {
        if (!fits(lo + 1)) return finish(lo);
        prev = lo;
        lo = lo + 1;
        if (lo == max_value) return finish(lo);
      }
    } else {
      hi = guess;
      if (hi - 1 > lo) {
        if (fits(hi - 1)) return finish(hi - 1);
        hi = hi - 1;
      }
    }
  }
  return finish(lo);
}

}  // namespace accelsim
