// Errors raised by the accelsim core.
//
// Every error carries a one-line message a user can act on: which input was wrong and why.
// The Python shell maps ConfigError to a usage error (exit code 2).
#pragma once

#include <stdexcept>
#include <string>

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

}  // namespace accelsim

// Throws ConfigError(message) unless `condition` holds. `message` is any expression that yields
// a std::string; it is only evaluated when the check fails.
#define ACCELSIM_CHECK(condition, message)              \
  do {                                                  \
    if (!(condition)) throw ::accelsim::ConfigError(message); \
  } while (false)
