// libFuzzer target: what receiveFd (plugin/transport/fd_exchange.h) makes of any message a peer's socket
// may send. The input plays the server: byte 0 says how many descriptors to attach (0-3, as
// SCM_RIGHTS, duplicates of /dev/null) and whether to close before sending; the rest is the
// payload. Checks that receiveFd returns -1 or one open descriptor, and that no descriptor leaks
// (the process's open-descriptor count is the same after every input). Built and run by
// tests/reliability/fuzz.sh.
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "plugin/transport/fd_exchange.h"
#include "common/log.h"

namespace {

void discard(const char*) {}

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

/** A listening abstract socket with a name of its own per process. */
int listenOn(const std::string& name) {
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (sock < 0 || bind(sock, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(sock, 4) != 0) abort();
  return sock;
}

void serveOnce(int listener, const uint8_t* data, size_t size) {
  int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  const int nFds = size > 0 ? data[0] & 3 : 0;
  const bool closeFirst = size > 0 && (data[0] & 4) != 0;
  if (!closeFirst) {
    int fds[3];
    for (int i = 0; i < nFds; ++i) fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char empty = 0;
    iovec iov{size > 1 ? const_cast<uint8_t*>(data + 1) : reinterpret_cast<uint8_t*>(&empty),
              size > 1 ? size - 1 : (nFds > 0 ? size_t{1} : size_t{0})};
    union {
      cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * 3)];
    } control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nFds > 0) {
      msg.msg_control = control.buf;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * nFds);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * nFds);
      memcpy(CMSG_DATA(c), fds, sizeof(int) * nFds);
    }
    if (iov.iov_len > 0 || nFds > 0) sendmsg(conn, &msg, MSG_NOSIGNAL);
    for (int i = 0; i < nFds; ++i) close(fds[i]);
  }
  close(conn);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string name = "nccl-lamport-fuzz-" + std::to_string(getpid());
  static const int listener = [] {
    nccl_lamport::setLogSinkForTest(&discard);
    return listenOn(name);
  }();
  const int before = openFds();
  std::thread server(serveOnce, listener, data, size);
  const int fd = nccl_lamport::receiveFd(name, 2000);
  server.join();
  if (fd >= 0) {
    if (fcntl(fd, F_GETFD) < 0) {
      fprintf(stderr, "fuzz_fd_exchange: receiveFd returned %d, which is not open\n", fd);
      abort();
    }
    close(fd);
  }
  const int after = openFds();
  if (after != before) {
    fprintf(stderr, "fuzz_fd_exchange: %d descriptors open before, %d after (returned %d)\n", before, after, fd);
    abort();
  }
  return 0;
}
