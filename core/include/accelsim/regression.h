// Regression checks for CI: did a metric grow past its allowed fraction over a baseline?
#pragma once

#include <string>
#include <vector>

namespace accelsim {

struct MetricCheck {
  std::string metric;      // "latency_s", "peak_memory_bytes", ...
  double baseline = 0.0;
  double current = 0.0;
  double change_fraction = 0.0;  // (current - baseline) / baseline; 0 when baseline is 0
  double max_increase_fraction = 0.0;
  bool exceeded = false;  // current grew by more than max_increase_fraction
};

// REQUIRES: baseline, current and max_increase_fraction finite and >= 0 (throws ConfigError).
// A zero baseline counts any positive current as exceeded.
MetricCheck check_metric(const std::string& metric, double baseline, double current,
                         double max_increase_fraction);

}  // namespace accelsim
