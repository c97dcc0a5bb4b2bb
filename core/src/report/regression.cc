#include "accelsim/regression.h"

#include <cmath>

#include "accelsim/error.h"

namespace accelsim {

MetricCheck check_metric(const std::string& metric, double baseline, double current,
                         double max_increase_fraction) {
  // A NaN or infinite figure would compare as "not exceeded" and pass any check.
  const std::string who = "metric '" + metric + "'";
  require_in_range(who, "baseline", baseline, kNonNegative);
  require_in_range(who, "current value", current, kNonNegative);
  require_in_range(who, "allowed increase", max_increase_fraction, kNonNegative);
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
