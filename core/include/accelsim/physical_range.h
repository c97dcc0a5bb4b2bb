// The last line of defence of every entry point that returns figures (simulate, estimate_training,
// plan_training, simulate_serving, find_max_qps, estimate_collective, estimate_kernel, ...): before
// returning, each checks that every figure is finite and every byte count, time and rate
// non-negative. Inputs are validated first (DeviceSpec::validate, SystemSpec::validate,
// ModelSpec::validate, the options' validation); a figure that is still infinite, NaN or negative
// means an input was out of physical range in a way validation did not foresee, and the caller
// gets a ConfigError (PhysicalRangeError) instead of `latency inf s`:
//
//   require_finite("simulate", "latency_s", r.latency_s);
//   // throws "simulate: latency_s is not finite (inf); an input is out of physical range"
#pragma once

#include <cmath>
#include <string>
#include <string_view>

namespace accelsim {

// Throws PhysicalRangeError (a ConfigError, error.h): "<where>: <figure> is not finite (<value>);
// an input is out of physical range", or "... is negative (<value>) ..." for a finite negative
// value.
[[noreturn]] void throw_out_of_physical_range(std::string_view where, std::string_view figure, double value);

// A figure that may take any sign (a difference, a saving).
inline void require_finite(std::string_view where, std::string_view figure, double value) {
  if (!std::isfinite(value)) throw_out_of_physical_range(where, figure, value);
}

// A time, rate, count or byte count: finite and >= 0.
inline void require_non_negative(std::string_view where, std::string_view figure, double value) {
  if (!(std::isfinite(value) && value >= 0.0)) throw_out_of_physical_range(where, figure, value);
}

}  // namespace accelsim
