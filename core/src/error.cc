#include "accelsim/error.h"

#include <sstream>

namespace accelsim {

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

void throw_out_of_range(std::string_view who, std::string_view field, double value, const Interval& range) {
  std::string message;
  if (!who.empty()) message.append(who).append(": ");
  message.append(field);
  const bool bounded_below = std::isfinite(range.lo), bounded_above = std::isfinite(range.hi);
  if (!std::isfinite(value)) {
    message += " must be finite";
  } else if (bounded_below && bounded_above) {
    message += std::string(" must be in ") + (range.lo_open ? "(" : "[") + number_text(range.lo) + ", " +
               number_text(range.hi) + (range.hi_open ? ")" : "]");
  } else if (bounded_below && range.lo == 0.0) {
    message += range.lo_open ? " must be positive" : " must not be negative";
  } else if (bounded_below) {
    message += (range.lo_open ? " must be above " : " must be at least ") + number_text(range.lo);
  } else {
    message += (range.hi_open ? " must be below " : " must be at most ") + number_text(range.hi);
  }
  message += " (got " + number_text(value) + ")";
  throw ConfigError(message);
}

}  // namespace accelsim
