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
// `what` is a string, or a callable that returns one when a name needs building (the model's
// name, an index): it is only turned into a string when the check fails, so a string literal or
// a lambda costs nothing on the path that does not overflow:
//
//   checked_product([&] { return "model '" + m.name + "': the KV cache"; }, layers, tokens, bytes);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "accelsim/error.h"

namespace accelsim {

template <typename What>
[[noreturn, gnu::cold, gnu::noinline]] void throw_count_overflow(const What& what) {
  if constexpr (std::is_invocable_v<const What&>) {
    throw ConfigError(std::string(what()) + " overflows 64-bit byte counts");
  } else {
    throw ConfigError(std::string(std::string_view(what)) + " overflows 64-bit byte counts");
  }
}

template <typename What>
int64_t checked_mul(int64_t a, int64_t b, const What& what) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) throw_count_overflow(what);
  return result;
}

template <typename What>
int64_t checked_add(int64_t a, int64_t b, const What& what) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) throw_count_overflow(what);
  return result;
}

// The product of all factors, left to right.
template <typename What, typename... Factors>
int64_t checked_product(const What& what, int64_t first, Factors... rest) {
  int64_t result = first;
  ((result = checked_mul(result, static_cast<int64_t>(rest), what)), ...);
  return result;
}

// The sum of all terms, left to right.
template <typename What, typename... Terms>
int64_t checked_sum(const What& what, int64_t first, Terms... rest) {
  int64_t result = first;
  ((result = checked_add(result, static_cast<int64_t>(rest), what)), ...);
  return result;
}

// ceil(a / b) for a count a >= 0 and a divisor b >= 1 (blocks for tokens, layers per stage,
// tokens per rank). a / b plus one for a remainder: unlike (a + b - 1) / b it cannot overflow.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace accelsim
