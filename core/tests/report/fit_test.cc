// The largest-fitting search against brute force over hand-made peak-memory curves.
#include "accelsim/fit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "accelsim/error.h"

namespace accelsim {
namespace {

TEST(FitTest, AffinePeakTakesFourProbes) {
  // 1000 + 300 v bytes against 10,000: v = 30 fits exactly (10,000), 31 does not (10,300).
  std::set<int64_t> probed;
  auto peak = [&](int64_t v) {
    probed.insert(v);
    return 1000 + 300 * v;
  };
  const FitResult r = largest_fitting(peak, 10000, 1 << 20);
  EXPECT_EQ(r.largest, 30);
  EXPECT_EQ(r.peak_bytes, 10000);
  EXPECT_EQ(r.next_peak_bytes, 10300);
  EXPECT_FALSE(r.at_limit);
  EXPECT_EQ(probed, (std::set<int64_t>{1, 2, 30, 31}));
  EXPECT_EQ(r.probes, 4);
}

TEST(FitTest, AgreesWithBruteForceOnCurvedPeaks) {
  // Quadratic (attention scores over the sequence) and stepped (allocator rounding) curves, at
  // many capacities: the answer is the largest v whose peak fits, as a linear scan finds it.
  auto quadratic = [](int64_t v) { return 1000 + 50 * v + 100 * v * v; };
  auto stepped = [](int64_t v) { return 2048 * ((700 * v + 2047) / 2048); };
  for (auto peak : {std::function<int64_t(int64_t)>(quadratic), std::function<int64_t(int64_t)>(stepped)}) {
    for (double capacity = 500; capacity < 2e6; capacity *= 1.37) {
      int64_t brute = 0;
      for (int64_t v = 1; v <= 500 && static_cast<double>(peak(v)) <= capacity; ++v) brute = v;
      const FitResult r = largest_fitting(peak, capacity, 500);
      EXPECT_EQ(r.largest, brute) << capacity;
      EXPECT_EQ(r.at_limit, brute == 500);
    }
  }
}

TEST(FitTest, NothingFitsOrEverythingFits) {
  auto peak = [](int64_t v) { return 100 * v; };
  const FitResult none = largest_fitting(peak, 50, 64);
  EXPECT_EQ(none.largest, 0);
  EXPECT_EQ(none.peak_bytes, 100);
  const FitResult all = largest_fitting(peak, 1e9, 64);
  EXPECT_EQ(all.largest, 64);
  EXPECT_TRUE(all.at_limit);
  EXPECT_EQ(all.next_peak_bytes, -1);
}

TEST(FitTest, ADipInThePeakIsReportedAndTheBoundaryStillHolds) {
  // 100 v, but 50 bytes less at every multiple of 7 (a size that packs better): still a value
  // that fits followed by one that does not, and the dip is reported when probed.
  auto peak = [](int64_t v) { return 100 * v - (v % 7 == 0 ? 150 : 0); };
  for (double capacity : {1000.0, 2345.0, 6950.0}) {
    const FitResult r = largest_fitting(peak, capacity, 1000);
    EXPECT_LE(static_cast<double>(peak(r.largest)), capacity);
    EXPECT_GT(static_cast<double>(peak(r.largest + 1)), capacity);
  }
  // 6950: the line through 100 and 200 meets it at 69 (6900), 70 dips to 6850 and fits,
  // 71 (7100) does not: the answer is 70 and the dip below 69's peak is reported.
  const FitResult dip = largest_fitting(peak, 6950, 1000);
  EXPECT_EQ(dip.largest, 70);
  EXPECT_FALSE(dip.monotone);
  EXPECT_TRUE(largest_fitting([](int64_t v) { return 100 * v; }, 6950, 1000).monotone);
  EXPECT_THROW(largest_fitting([](int64_t) { return int64_t{1}; }, 10, 0), ConfigError);
}

}  // namespace
}  // namespace accelsim
