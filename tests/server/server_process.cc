#include "tests/server/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace relserve::testing {
namespace {

int Decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

}  // namespace

ServerProcess ServerProcess::Launch(const std::string& binary, const std::vector<std::string>& args,
                                    const std::function<void()>& in_child) {
  ServerProcess p;
  // A fresh file per launch: the port is read from it, and an old one would name an old port.
  static int launches = 0;
  p.log_path = ::testing::TempDir() + "relserve-process-" + std::to_string(getpid()) + "-" +
               std::to_string(++launches) + ".log";
  std::remove(p.log_path.c_str());
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return p;
  p.pid = fork();
  if (p.pid == 0) {
    close(exec_pipe[0]);
    if (std::freopen(p.log_path.c_str(), "w", stderr) == nullptr) _exit(126);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    std::vector<char*> argv;
    std::string bin = binary;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (in_child) in_child();
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(exec_pipe[1]);
  char byte;
  // End of file once the child's exec closed its (close-on-exec) end.
  while (read(exec_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  close(exec_pipe[0]);
  return p;
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int ServerProcess::WaitForPort() const {
  std::smatch m;
  for (int i = 0; i < 1200; ++i) {
    const std::string log = Log();
    if (std::regex_search(log, m, std::regex("on port ([0-9]+)"))) return std::stoi(m[1]);
    if (waitpid(pid, nullptr, WNOHANG) == pid) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

int ServerProcess::WaitExit() const {
  int status = 0;
  waitpid(pid, &status, 0);
  return Decode(status);
}

bool ServerProcess::ExitsWithin(double seconds, int* code) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *code = Decode(status);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

KillOnExit::~KillOnExit() {
  if (pid > 0 && kill(pid, 0) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

}  // namespace relserve::testing
