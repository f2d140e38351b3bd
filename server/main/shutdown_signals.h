#ifndef RELSERVE_SERVER_MAIN_SHUTDOWN_SIGNALS_H_
#define RELSERVE_SERVER_MAIN_SHUTDOWN_SIGNALS_H_

#include <atomic>
#include <functional>
#include <thread>

namespace relserve {

// SIGTERM and SIGINT, handled by the server alone, in every thread.
//
// A process-directed signal goes to any thread that does not block it, and a thread where the
// default action applies ends the whole process. Libraries start threads before main() runs
// (OpenBLAS starts its workers when it loads), so blocking the signals in main() is too late:
// BlockShutdownSignals() must run before any library constructor. The relserve executable calls
// it from its .preinit_array, which the dynamic loader runs before the constructors of every
// shared library; threads inherit the mask, and execve keeps both the mask and any signal that
// arrived meanwhile (pending), so the re-exec of TuneProcessForInference loses nothing.
//
// ShutdownSignals then takes the blocked signals on one owned thread (signalfd). As a second
// line, a handler is installed for both: if some thread unblocks them anyway, the handler runs
// there instead of the default action and passes the signal on through a pipe.
void BlockShutdownSignals();  // async-signal-safe; idempotent

class ShutdownSignals {
 public:
  // Starts the watching thread. `on_signal(signal, count)` runs on it for every SIGTERM or
  // SIGINT, `count` counting both from 1. Call BlockShutdownSignals() first.
  explicit ShutdownSignals(std::function<void(int signal, int count)> on_signal);
  ~ShutdownSignals();  // stops and joins the thread; signals stay blocked
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  int count() const { return count_.load(); }

 private:
  void Run();

  std::function<void(int, int)> on_signal_;
  std::atomic<int> count_{0};
  int signal_fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
};

const char* ShutdownSignalName(int signal);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MAIN_SHUTDOWN_SIGNALS_H_
