#include "server/main/shutdown_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdint>

namespace relserve {
namespace {

// Written by the fallback handler, read by the watching thread. Set up once, never closed: a
// handler may run in any thread at any time.
int handler_pipe[2] = {-1, -1};

void ForwardingHandler(int signal) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  if (handler_pipe[1] >= 0) (void)!write(handler_pipe[1], &byte, 1);
  errno = saved;
}

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

const char* ShutdownSignalName(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "signal";
  }
}

ShutdownSignals::ShutdownSignals(std::function<void(int signal, int count)> on_signal)
    : on_signal_(std::move(on_signal)) {
  const sigset_t set = ShutdownSet();
  BlockShutdownSignals();
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (handler_pipe[0] < 0 && pipe2(handler_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
    struct sigaction action = {};
    action.sa_handler = ForwardingHandler;
    sigfillset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  }
  thread_ = std::thread([this] { Run(); });
}

ShutdownSignals::~ShutdownSignals() {
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof one);
  thread_.join();
  close(stop_fd_);
  if (signal_fd_ >= 0) close(signal_fd_);
}

void ShutdownSignals::Run() {
  for (;;) {
    pollfd fds[3] = {{stop_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}, {handler_pipe[0], POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    int signal = 0;
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      if (read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) signal = static_cast<int>(info.ssi_signo);
    } else if (fds[2].revents & POLLIN) {
      unsigned char byte = 0;
      if (read(handler_pipe[0], &byte, 1) == 1) signal = byte;
    }
    if (signal != 0) on_signal_(signal, count_.fetch_add(1) + 1);
  }
}

}  // namespace relserve
