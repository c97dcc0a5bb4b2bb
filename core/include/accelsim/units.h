// Unit conventions of the core.
//
// Inside the core every quantity is in SI base units and carries its unit in its name:
// seconds (`_s`), bytes (`_bytes`), FLOP (`_flops`), rates per second (`_per_s`), hertz (`_hz`).
// Conversion to ms, GB or TFLOP/s happens only at the edges (file readers, reports, CLI).
#pragma once

#include <cstdint>

namespace accelsim {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;  // binary gigabyte (GiB)
inline constexpr double kBytesPerGB = 1e9;                         // decimal gigabyte (GB)
inline constexpr double kFlopsPerTflop = 1e12;
inline constexpr double kSecondsPerMicrosecond = 1e-6;
inline constexpr double kSecondsPerHour = 3600.0;

}  // namespace accelsim
