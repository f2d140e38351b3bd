#ifndef RELSERVE_TESTS_SERVER_SERVER_PROCESS_H_
#define RELSERVE_TESTS_SERVER_SERVER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace relserve::testing {

// The relserve binary run as an operator runs it, its standard error in a log file.
struct ServerProcess {
  pid_t pid = -1;
  std::string log_path;

  // Forks and execs `binary` with `args`; returns once the child has exec'ed (not merely
  // forked), so a signal sent afterwards reaches the program, not the test's copy of itself.
  // `in_child` (may be empty) runs in the child just before exec, e.g. to set a limit; it must
  // only make system calls.
  static ServerProcess Launch(const std::string& binary, const std::vector<std::string>& args,
                              const std::function<void()>& in_child = nullptr);
  std::string Log() const;
  // Waits for "on port N" in the log; 0 if the server never says it (or exits first).
  int WaitForPort() const;
  // Waits for the exit: the exit code, or -signal when a signal ended it.
  int WaitExit() const;
  // Whether the process has exited after `seconds` (reaping it if so; *code as WaitExit).
  bool ExitsWithin(double seconds, int* code) const;
};

// Whatever happens in a test, its server does not outlive it.
struct KillOnExit {
  pid_t pid;
  ~KillOnExit();
};

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_SERVER_SERVER_PROCESS_H_
