// parallel_for() (parallel_for.h).
#include "parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <vector>

namespace accelsim::detail {

void parallel_for(size_t count, int workers, const std::function<void(size_t, int)>& body,
                  const std::function<void()>& tick, const ThreadStart& start_thread) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto fail = [&] {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (!failure) failure = std::current_exception();
    next = count;
  };
  auto work = [&](int t) {
    for (size_t i = next++; i < count; i = next++) {
      try {
        body(i, t);
      } catch (...) {
        fail();
      }
    }
  };
  const int wanted = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, workers)), count));
  std::vector<std::thread> pool;
  try {
    pool.reserve(static_cast<size_t>(wanted));
    for (int t = 0; t < wanted; ++t) {
      pool.push_back(start_thread ? start_thread([&work, t] { work(t); }) : std::thread(work, t));
    }
  } catch (const std::system_error&) {  // EAGAIN: no thread left, or no room for its stack
  } catch (const std::bad_alloc&) {     // no room for the pool itself
  }
  if (pool.empty()) {
    work(0);
  } else {
    try {
      while (tick && next.load() < count) {
        tick();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    } catch (...) {
      fail();
    }
  }
  for (std::thread& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace accelsim::detail
