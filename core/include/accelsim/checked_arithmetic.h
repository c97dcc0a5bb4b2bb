// Checked 64-bit integer arithmetic for element, parameter and byte counts.
//
// A product of model dimensions (hidden x vocab x bytes, batch x seq x hidden x bytes, layers x
// a layer's parameters) can exceed 64 bits although every factor is representable; wrapping
// would turn it into a negative or a small byte count that looks plausible. These functions throw
// ConfigError naming the quantity instead:
//
//   checked_product("hidden_size x vocab_size x bytes", h, v, 2);
//   // throws "hidden_size x vocab_size x bytes overflows 64-bit byte counts"
//
// `what` is only turned into a string when the check fails, so a string literal costs nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "accelsim/error.h"

namespace accelsim {

[[noreturn]] inline void throw_count_overflow(std::string_view what) {
  throw ConfigError(std::string(what) + " overflows 64-bit byte counts");
}

inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) throw_count_overflow(what);
  return result;
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) throw_count_overflow(what);
  return result;
}

// The product of all factors, left to right.
template <typename... Factors>
int64_t checked_product(std::string_view what, int64_t first, Factors... rest) {
  int64_t result = first;
  ((result = checked_mul(result, static_cast<int64_t>(rest), what)), ...);
  return result;
}

// The sum of all terms, left to right.
template <typename... Terms>
int64_t checked_sum(std::string_view what, int64_t first, Terms... rest) {
  int64_t result = first;
  ((result = checked_add(result, static_cast<int64_t>(rest), what)), ...);
  return result;
}

}  // namespace accelsim
