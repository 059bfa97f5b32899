// Helpers of the fd_exchange tests (test_fd_exchange.cc, test_fd_exchange_robustness.cc): memfds
// with known content, reading a descriptor back, the FD_CLOEXEC flag, counting this process's open
// descriptors, waiting for a forked child, and a millisecond clock. No gtest assertions: they run
// in forked children too.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>

namespace nccl_lamport {
namespace fdtest {

/** The clock of the timeout checks. */
using Clock = std::chrono::steady_clock;

/** Milliseconds since `since`. */
inline int64_t elapsedMs(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

/** Open descriptors of this process (/proc/self/fd), or -1 if it cannot be read. */
inline int countOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;  // includes the directory's own descriptor, the same way every time
}

/** A close-on-exec memfd holding `content`, or -1. */
inline int makeMemfd(const std::string& content) {
  int fd = memfd_create("lamport-fd-exchange-test", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

/** The whole content of `fd`, read with pread from offset 0 (the file offset is not moved). */
inline std::string readAll(int fd) {
  std::string out;
  char buf[256];
  off_t offset = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), offset);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

/** Whether `fd` has FD_CLOEXEC set. */
inline bool isCloexec(int fd) {
  int flags = fcntl(fd, F_GETFD);
  return flags >= 0 && (flags & FD_CLOEXEC) != 0;
}

/** Waits for a child and returns its exit status (or 1000 + signal). */
inline int waitChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return -1;
}

/** The payload the tests put in the memfds they pass. */
inline constexpr char kContent[] = "lamport handle payload 0123456789";

}  // namespace fdtest
}  // namespace nccl_lamport
