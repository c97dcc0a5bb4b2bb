// largest_fitting(): the largest batch or sequence length whose peak memory fits a device.
//
// `fit` asks, per device, for the largest value along one axis (batch size, sequence length)
// whose predicted peak memory stays within the device's memory. A probe (building or capturing
// the graph at that value and running the liveness analysis) costs from a millisecond (the
// model builder) to a second (a capture), so the search probes few values: 1 and 2, then the
// value where the straight line through them meets the capacity (peak memory is affine in the
// batch for a fixed graph, nearly so in the sequence length), that value + 1, and bisection
// within whatever bracket is left when the line misses (attention's quadratic terms).
//
//   FitResult r = largest_fitting([&](int64_t b) { return peak_bytes_at(b); }, 80e9, 4096);
#pragma once

#include <cstdint>
#include <functional>

namespace accelsim {

struct FitResult {
  int64_t largest = 0;          // 0: not even the value 1 fits
  int64_t peak_bytes = 0;       // peak at `largest` (at 1 when nothing fits)
  int64_t next_peak_bytes = -1; // peak at largest + 1; -1 when largest is the search limit
  bool at_limit = false;        // largest == max_value: larger values were not tried
  int probes = 0;               // distinct values probed
  // false when a larger value probed lower than a smaller one (the caching allocator's segments
  // can dip where sizes pack better): `largest` then still fits and largest + 1 does not, but a
  // value beyond may fit again.
  bool monotone = true;
};

// REQUIRES: max_value >= 1; peak_at(v) >= 0. The search assumes the peak grows with v; where it
// does not, it still returns a value that fits followed by one that does not. Throws
// ConfigError for a bad limit or a negative peak.
FitResult largest_fitting(const std::function<int64_t(int64_t)>& peak_at, double capacity_bytes,
                          int64_t max_value);

}  // namespace accelsim
