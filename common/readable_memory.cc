#include "common/readable_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

namespace nccl_lamport {

namespace {

constexpr size_t kPipeChunkBytes = 64 * 1024;  // Linux's default pipe capacity

bool copyThroughPipe(const char* from, char* to, size_t bytes) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < bytes;) {
    const size_t chunk = std::min(kPipeChunkBytes, bytes - done);
    ssize_t written;
    do {
      written = write(fds[1], from + done, chunk);
    } while (written < 0 && errno == EINTR);
    if (written <= 0) {
      ok = false;  // EFAULT: not readable
      break;
    }
    for (ssize_t got = 0; got < written;) {
      const ssize_t n = read(fds[0], to + done + got, static_cast<size_t>(written - got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      got += n;
    }
    done += static_cast<size_t>(written);
  }
  close(fds[0]);
  close(fds[1]);
  return ok;
}

}  // namespace

bool copyIfReadableThroughPipe(const void* from, void* to, size_t bytes) {
  return bytes == 0 || copyThroughPipe(static_cast<const char*>(from), static_cast<char*>(to), bytes);
}

bool copyIfReadable(const void* from, void* to, size_t bytes) {
  if (bytes == 0) return true;
  iovec local{to, bytes};
  iovec remote{const_cast<void*>(from), bytes};
  const ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(bytes)) return true;
  if (n >= 0 || (errno != ENOSYS && errno != EPERM)) return false;  // a short copy or EFAULT
  return copyIfReadableThroughPipe(from, to, bytes);
}

}  // namespace nccl_lamport
