// parallel_for(): work items on a pool of threads, for the searches (plan.cc, serve_plan.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <thread>

namespace accelsim::detail {

// How a search starts a worker thread (plan.h's PlanThreadStart); empty: std::thread's constructor.
using ThreadStart = std::function<std::thread(std::function<void()> work)>;

// Runs body(i, worker) for every i < count on up to `workers` threads (no more than there are
// items), worker < workers. While they run, the calling thread calls `tick()` every 100 ms (the
// searches report progress from it). A thread the system cannot start (out of threads or address
// space) is done without: the threads started share the work, and with none started the calling
// thread does it all. The first exception a body or `tick` throws stops the remaining items and
// is rethrown once every thread started has been joined.
void parallel_for(size_t count, int workers, const std::function<void(size_t, int)>& body,
                  const std::function<void()>& tick = {}, const ThreadStart& start_thread = {});

}  // namespace accelsim::detail
