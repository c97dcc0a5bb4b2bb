#include "accelsim/regression.h"

#include "accelsim/error.h"

namespace accelsim {

MetricCheck check_metric(const std::string& metric, double baseline, double current,
                         double max_increase_fraction) {
  ACCELSIM_CHECK(baseline >= 0 && current >= 0,
                 "metric '" + metric + "' must not be negative");
  ACCELSIM_CHECK(max_increase_fraction >= 0,
                 "allowed increase for '" + metric + "' must not be negative");
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
