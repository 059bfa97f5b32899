// Waits for a forked test child with a deadline, for tests whose failure mode is a hang (the
// lock-order tests): the child is killed when it outlives the deadline.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace nccl_lamport::testing {

/** "exit N", "signal N", "fork failed" (pid < 0), or "deadlock" when the child was still running
 *  after `timeout` (it is then killed and reaped). */
inline std::string waitForChild(pid_t pid, std::chrono::seconds timeout) {
  if (pid < 0) return "fork failed";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "deadlock";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  return "signal " + std::to_string(WTERMSIG(status));
}

}  // namespace nccl_lamport::testing
