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

}  // namespace accelsim

// Throws ConfigError(message) unless `condition` holds. `message` is any expression that yields
// a std::string; it is only evaluated when the check fails.
#define ACCELSIM_CHECK(condition, message)              \
  do {                                                  \
    if (!(condition)) throw ::accelsim::ConfigError(message); \
  } while (false)
