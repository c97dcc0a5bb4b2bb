// Errors raised by the accelsim core.
//
// Every error carries a one-line message a user can act on: which input was wrong and why.
// The Python shell maps ConfigError to a usage error (exit code 2).
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace accelsim {

// Base class of all core errors.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Invalid input: a malformed graph, device or option (bad ids, negative sizes, unknown names).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(message) {}
};

// A figure a result would report is infinite, NaN or negative although its inputs validated: an
// input (a device's, a system's or an option's number) is out of physical range
// (physical_range.h). A ConfigError, so that callers treat it as bad input; its own type so that
// a search that takes a shape the builder rejects as infeasible does not take this for one.
class PhysicalRangeError : public ConfigError {
 public:
  explicit PhysicalRangeError(const std::string& message) : ConfigError(message) {}
};

// The range an input number must lie in: [lo, hi], either end excluded when marked open; an
// infinite end is no bound. Every input number must also be finite.
struct Interval {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
};

inline constexpr Interval kAnyFinite{};
inline constexpr Interval kNonNegative{.lo = 0.0};                               // [0, inf)
inline constexpr Interval kPositive{.lo = 0.0, .lo_open = true};                 // (0, inf)
inline constexpr Interval kFraction{.lo = 0.0, .hi = 1.0};                       // [0, 1]
inline constexpr Interval kPositiveFraction{.lo = 0.0, .hi = 1.0, .lo_open = true};  // (0, 1]

// A number as messages show it: up to 6 significant digits, "inf", "-inf", "nan".
std::string number_text(double value);

// Throws ConfigError "<who>: <field> must be finite (got <value>)" for an infinite or NaN value,
// else "<who>: <field> must be <the range> (got <value>)", the range read as "positive", "not
// negative", "at least 1", "in (0, 1]", ...; without "<who>: " when `who` is empty.
[[noreturn]] void throw_out_of_range(std::string_view who, std::string_view field, double value,
                                     const Interval& range);

// The one check of an input number: finite and in `range`, else throw_out_of_range.
//
//   require_in_range(who, "memory bandwidth", d.memory_bandwidth_bytes_per_s, kPositive);
//   // throws "device 'h100': memory bandwidth must be positive (got 0)"
inline void require_in_range(std::string_view who, std::string_view field, double value,
                             const Interval& range = kAnyFinite) {
  const bool above = range.lo_open ? value > range.lo : value >= range.lo;
  const bool below = range.hi_open ? value < range.hi : value <= range.hi;
  if (!(std::isfinite(value) && above && below)) throw_out_of_range(who, field, value, range);
}

}  // namespace accelsim

// Throws ConfigError(message) unless `condition` holds. `message` is any expression that yields
// a std::string; it is only evaluated when the check fails.
#define ACCELSIM_CHECK(condition, message)              \
  do {                                                  \
    if (!(condition)) throw ::accelsim::ConfigError(message); \
  } while (false)
