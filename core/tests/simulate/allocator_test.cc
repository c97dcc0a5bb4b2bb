// The caching-allocator replay against block and segment sizes worked out by hand from
// PyTorch's rules (512-byte rounding, 2 MiB small segments, 20 MiB segments for 1-10 MiB
// requests, larger ones rounded to 2 MiB, splitting thresholds, merging of free neighbours).
#include <gtest/gtest.h>

#include "accelsim/memory.h"

namespace accelsim {
namespace {

constexpr int64_t MiB = 1 << 20;

AllocatorEvent alloc(int64_t id, int64_t bytes) { return {id, bytes, true}; }
AllocatorEvent release(int64_t id) { return {id, 0, false}; }

TEST(AllocatorTest, SmallRequestsShareATwoMiBSegment) {
  // 100 bytes round up to 512; two 600 KiB requests share one 2 MiB small-pool segment.
  AllocatorPeaks p = replay_caching_allocator({alloc(0, 100)});
  EXPECT_EQ(p.peak_allocated_bytes, 512);
  EXPECT_EQ(p.peak_reserved_bytes, 2 * MiB);
  p = replay_caching_allocator({alloc(0, 600 * 1024), alloc(1, 600 * 1024)});
  EXPECT_EQ(p.peak_allocated_bytes, 1200 * 1024);
  EXPECT_EQ(p.peak_reserved_bytes, 2 * MiB);
  EXPECT_EQ(p.peak_segment_bytes, 2 * MiB);
}

TEST(AllocatorTest, LargeRequestsAndTheirSegments) {
  // 5 MiB: a 20 MiB segment, split (15 MiB left > 1 MiB); 12 MiB then fits in the remainder.
  AllocatorPeaks p = replay_caching_allocator({alloc(0, 5 * MiB), alloc(1, 12 * MiB)});
  EXPECT_EQ(p.peak_reserved_bytes, 20 * MiB);
  EXPECT_EQ(p.peak_allocated_bytes, 17 * MiB);
  // 11 MiB + 1 byte: its own segment rounded up to 12 MiB; the 1 MiB - 512 left is not split
  // off (a large-pool split needs more than 1 MiB), so the block, and the allocated bytes, are 12.
  p = replay_caching_allocator({alloc(0, 11 * MiB + 1)});
  EXPECT_EQ(p.peak_reserved_bytes, 12 * MiB);
  EXPECT_EQ(p.peak_allocated_bytes, 12 * MiB);
}

TEST(AllocatorTest, FragmentationAndMerging) {
  // A and B (8 MiB each) split one 20 MiB segment: [A 8][B 8][free 4]. Freeing A leaves free
  // blocks of 8 and 4 MiB that are not adjacent, so C (10 MiB) needs a new 10 MiB segment:
  // 30 MiB reserved for 18 MiB allocated. Freeing B merges the first segment back into one free
  // block, which D (19 MiB) then reuses whole (the 1 MiB left is not split off): no new
  // segment, and 10 + 20 MiB allocated.
  const AllocatorPeaks p = replay_caching_allocator(
      {alloc(0, 8 * MiB), alloc(1, 8 * MiB), release(0), alloc(2, 10 * MiB), release(1),
       alloc(3, 19 * MiB)});
  EXPECT_EQ(p.peak_reserved_bytes, 30 * MiB);
  EXPECT_EQ(p.peak_segment_bytes, 30 * MiB);
  EXPECT_EQ(p.peak_allocated_bytes, 30 * MiB);
}

}  // namespace
}  // namespace accelsim
