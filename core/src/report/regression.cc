#include "accelsim/regression.h"

#include <cmath>

#include "accelsim/error.h"

namespace accelsim {

MetricCheck check_metric(const std::string& metric, double baseline, double current,
                         double max_increase_fraction) {
  // A NaN or infinite figure would compare as "not exceeded" and pass any check.
  ACCELSIM_CHECK(std::isfinite(baseline) && std::isfinite(current),
                 "metric '" + metric + "' must be a finite number");
  ACCELSIM_CHECK(baseline >= 0 && current >= 0,
                 "metric '" + metric + "' must not be negative");
  ACCELSIM_CHECK(std::isfinite(max_increase_fraction) && max_increase_fraction >= 0,
                 "allowed increase for '" + metric + "' must be finite and not negative");
  MetricCheck c{.metric = metric,
                .baseline = baseline,
                .current = current,
                .max_increase_fraction = max_increase_fraction};
  if (baseline > 0) {
    c.change_fraction = (current - baseline) / baseline;
    c.exceeded = c.change_fraction > max_increase_fraction;
  } else {
    c.exceeded = current > 0;
  }
  return c;
}

}  // namespace accelsim
