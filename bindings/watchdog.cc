// ExitWatchdog: ends the process, with a message on stderr and exit status 2, when its deadline
// passes before cancel(). It waits on a native thread that never needs the GIL, so it fires even
// while the interpreter is stuck in a C call that holds the GIL (a Python watchdog thread would
// wait for the GIL forever there). The command line arms one around a user script's import,
// get_model() and capture (`--timeout`); it is process plumbing, not part of the engine.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "accelsim/error.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {
namespace {

class ExitWatchdog {
 public:
  ExitWatchdog(double seconds, std::string message) : message_(std::move(message)) {
    require_in_range("a watchdog", "its deadline in seconds", seconds, kPositive);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds));
    thread_ = std::thread([this] { wait_then_exit(); });
  }
  ExitWatchdog(const ExitWatchdog&) = delete;
  ExitWatchdog& operator=(const ExitWatchdog&) = delete;
  ~ExitWatchdog() { cancel(); }

  // What to print when it fires (the work's phase changed).
  void set_message(std::string message) {
    const std::lock_guard lock(mutex_);
    message_ = std::move(message);
  }

  // The work ended in time: the watchdog stops and its thread is joined. Idempotent.
  void cancel() {
    {
      const std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void wait_then_exit() {
    std::unique_lock lock(mutex_);
    if (wake_.wait_until(lock, deadline_, [this] { return cancelled_; })) return;
    // The lock stays held: a cancel() racing with this waits, and the process ends first.
    std::fwrite(message_.data(), 1, message_.size(), stderr);
    std::fflush(stderr);
    std::_Exit(2);  // no atexit handlers, no destructors: other threads may be mid-work
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::string message_;
  std::chrono::steady_clock::time_point deadline_;
  bool cancelled_ = false;
  std::thread thread_;
};

}  // namespace

void bind_watchdog(nb::module_& m) {
  nb::class_<ExitWatchdog>(m, "ExitWatchdog",
                           "Ends the process with `message` on stderr and exit status 2 unless "
                           "cancel() comes within `seconds`; fires from a native thread, even while "
                           "a C call holds the GIL.")
      .def(nb::init<double, std::string>(), nb::arg("seconds"), nb::arg("message"))
      .def("set_message", &ExitWatchdog::set_message, nb::arg("message"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("cancel", &ExitWatchdog::cancel, nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace accelsim::bindings
