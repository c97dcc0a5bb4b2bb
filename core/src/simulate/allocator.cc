#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/memory.h"

namespace accelsim {
namespace {

// Constants of c10/cuda/CUDACachingAllocator.cpp.
constexpr int64_t kMinBlockSize = 512;          // every request rounds up to a multiple
constexpr int64_t kSmallSize = 1 << 20;         // largest request served by the small pool
constexpr int64_t kSmallBuffer = 2 << 20;       // segment size of the small pool
constexpr int64_t kLargeBuffer = 20 << 20;      // segment size for requests under kMinLargeAlloc
constexpr int64_t kMinLargeAlloc = 10 << 20;
constexpr int64_t kRoundLarge = 2 << 20;        // larger segments round up to this

constexpr const char* kOverflow = "the caching allocator's memory";

int64_t round_up(int64_t v, int64_t m) { return checked_mul(ceil_div(v, m), m, kOverflow); }

struct Block {
  int64_t size = 0;
  bool allocated = false;
};

class CachingAllocator {
 public:
  void allocate(int64_t id, int64_t request) {
    const int64_t size = request < kMinBlockSize ? kMinBlockSize : round_up(request, kMinBlockSize);
    const bool small = size <= kSmallSize;
    auto& pool = free_[small];
    // Best fit: the smallest cached free block that is large enough (then the lowest segment).
    auto it = pool.lower_bound({size, -1, -1});
    int64_t seg, offset;
    if (it != pool.end()) {
      std::tie(std::ignore, seg, offset) = *it;
      pool.erase(it);
    } else {
      const int64_t bytes = small ? kSmallBuffer
                            : size < kMinLargeAlloc ? kLargeBuffer
                                                    : round_up(size, kRoundLarge);
      seg = static_cast<int64_t>(segments_.size());
      segments_.push_back({});
      segment_small_.push_back(small);
      segment_live_.push_back(0);
      segment_bytes_.push_back(bytes);
      segments_[seg][0] = Block{bytes, false};
      offset = 0;
      reserved_ = checked_add(reserved_, bytes, kOverflow);
      peak_.peak_reserved_bytes = std::max(peak_.peak_reserved_bytes, reserved_);
    }
    Block& b = segments_[seg][offset];
    const int64_t remaining = b.size - size;
    if (remaining >= (small ? kMinBlockSize : kSmallSize + 1)) {
      segments_[seg][offset + size] = Block{remaining, false};
      free_[small].insert({remaining, seg, offset + size});
      b.size = size;
    }
    b.allocated = true;
    allocated_ = checked_add(allocated_, b.size, kOverflow);
    if (segment_live_[seg]++ == 0) segment_in_use_ = checked_add(segment_in_use_, segment_bytes_[seg], kOverflow);
    if (static_cast<size_t>(id) >= where_.size()) where_.resize(static_cast<size_t>(id) + 1, {-1, -1});
    where_[id] = {seg, offset};
    peak_.peak_allocated_bytes = std::max(peak_.peak_allocated_bytes, allocated_);
    peak_.peak_segment_bytes = std::max(peak_.peak_segment_bytes, segment_in_use_);
  }

  void release(int64_t id) {
    ACCELSIM_CHECK(id >= 0 && static_cast<size_t>(id) < where_.size() && where_[id].first >= 0,
                   "freeing storage " + std::to_string(id) + ", which is not allocated");
    auto [seg, offset] = where_[id];
    where_[id] = {-1, -1};
    auto& blocks = segments_[seg];
    const bool small = segment_small_[seg];
    auto it = blocks.find(offset);
    allocated_ -= it->second.size;
    it->second.allocated = false;
    if (--segment_live_[seg] == 0) segment_in_use_ -= segment_bytes_[seg];
    // Merge with free neighbours.
    auto next = std::next(it);
    if (next != blocks.end() && !next->second.allocated) {
      free_[small].erase({next->second.size, seg, next->first});
      it->second.size += next->second.size;
      blocks.erase(next);
    }
    if (it != blocks.begin()) {
      auto prev = std::prev(it);
      if (!prev->second.allocated) {
        free_[small].erase({prev->second.size, seg, prev->first});
        prev->second.size += it->second.size;
        blocks.erase(it);
        it = prev;
      }
    }
    free_[small].insert({it->second.size, seg, it->first});
  }

  AllocatorPeaks peaks() const { return peak_; }

 private:
  std::vector<std::map<int64_t, Block>> segments_;  // per segment: blocks by offset
  std::vector<char> segment_small_;
  std::vector<int64_t> segment_live_;   // allocated blocks per segment
  std::vector<int64_t> segment_bytes_;
  std::set<std::tuple<int64_t, int64_t, int64_t>> free_[2];  // (size, segment, offset); [1]: small pool
  std::vector<std::pair<int64_t, int64_t>> where_;  // by id: (segment, offset); -1 when free
  int64_t allocated_ = 0, reserved_ = 0, segment_in_use_ = 0;
  AllocatorPeaks peak_;
};

}  // namespace

AllocatorPeaks replay_caching_allocator(const std::vector<AllocatorEvent>& events) {
  CachingAllocator a;
  for (const AllocatorEvent& e : events) {
    if (e.allocate) {
      a.allocate(e.id, e.bytes);
    } else {
      a.release(e.id);
    }
  }
  return a.peaks();
}

}  // namespace accelsim
