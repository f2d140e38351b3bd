// relserve: starts relserve-server (beside it) with SIGTERM and SIGINT blocked.
//
// The server handles both signals on a thread of its own (shutdown_signals.h) and blocks them
// before any library constructor runs. Loading the server takes tens of milliseconds of
// relocations before even that point, during which the default action of a signal would
// still end it. This launcher is linked statically and depends on nothing, so the signals are
// blocked almost at once; the mask and any signal that arrives meanwhile (pending) carry over
// execve into the server, which then takes them as it does every other shutdown signal.
//
// The OpenMP and OpenBLAS variables the server needs before its libraries load are left to the
// server (TuneProcessForInference, util/process_tuning.h), which chooses them by the dtype the
// command line asks for and re-executes itself once with them: a policy set here would read to
// it as the user's choice, and keep it from adding GOMP_SPINCOUNT under bfloat16 and int8.
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace {

void BlockShutdownSignals(int, char**, char**) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
}
__attribute__((section(".preinit_array"), used)) void (*const block_early)(int, char**, char**) =
    &BlockShutdownSignals;

}  // namespace

int main(int argc, char** argv) {
  (void)argc;
  BlockShutdownSignals(0, nullptr, nullptr);
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    perror("relserve: cannot find its own executable (/proc/self/exe)");
    return 1;
  }
  path[n] = '\0';
  char* slash = strrchr(path, '/');
  static const char kServer[] = "relserve-server";
  if (slash == nullptr || static_cast<size_t>(slash + 1 - path) + sizeof(kServer) > sizeof(path)) return 1;
  memcpy(slash + 1, kServer, sizeof(kServer));
  execv(path, argv);
  fprintf(stderr, "relserve: cannot start %s: %s\n", path, strerror(errno));
  return 1;
}
