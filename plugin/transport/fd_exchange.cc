// Descriptor passing over abstract Unix-domain sockets (see fd_exchange.h).
//
// Design notes:
// - Abstract names (sun_path[0] == '\0') leave nothing on disk and vanish with the socket.
// - Every socket is SOCK_CLOEXEC; received descriptors are O_CLOEXEC (MSG_CMSG_CLOEXEC).
// - Nothing here ever blocks without a bound: the listening and the client sockets are
//   non-blocking and every wait is a poll() with what is left of the caller's timeout.
// - Abstract sockets can be reached by any process of the same network namespace, so the server
//   only hands the descriptor to peers running under our own effective uid (SO_PEERCRED); a
//   stranger's connection is dropped and does not count as a client.
// - No global state besides an atomic counter: servers and clients may run concurrently on any
//   number of threads.
#include "plugin/transport/fd_exchange.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "common/log.h"

namespace nccl_lamport {

namespace {

constexpr char kNamePrefix[] = "nccl-lamport";
constexpr char kPayload = 'F';
// Control buffer with room for a few descriptors: a misbehaving peer sending more than one must
// not make us lose track of (and leak) the extra ones through MSG_CTRUNC.
constexpr int kMaxFdsPerMessage = 4;

std::atomic<uint64_t> gNameCounter{0};

int64_t nowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

/** Milliseconds left before deadline, clamped to [0, INT_MAX]. */
int remainingMs(int64_t deadline) {
  int64_t left = deadline - nowMs();
  if (left <= 0) return 0;
  if (left > 0x7fffffff) return 0x7fffffff;
  return static_cast<int>(left);
}

void closeFd(int fd) {
  // Linux always releases the descriptor, even when close() reports EINTR: never retry.
  if (fd >= 0) (void)::close(fd);
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/** 64 random bits: getrandom(), or a mix of clocks and ids if the kernel refuses. */
uint64_t randomNonce() {
  uint64_t value = 0;
  size_t got = 0;
  while (got < sizeof(value)) {
    ssize_t n = getrandom(reinterpret_cast<char*>(&value) + got, sizeof(value) - got, GRND_NONBLOCK);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got == sizeof(value)) return value;
  struct timespec a, b;
  clock_gettime(CLOCK_REALTIME, &a);
  clock_gettime(CLOCK_MONOTONIC, &b);
  uint64_t x = mix64(static_cast<uint64_t>(a.tv_sec) * 1000000000ull + a.tv_nsec);
  x = mix64(x ^ (static_cast<uint64_t>(b.tv_sec) * 1000000000ull + b.tv_nsec));
  x = mix64(x ^ static_cast<uint64_t>(getpid()) ^ (static_cast<uint64_t>(syscall(SYS_gettid)) << 32));
  x = mix64(x ^ reinterpret_cast<uintptr_t>(&value));
  return x;
}

/** Fills *addr with the abstract address for name; false if the name is empty or too long. */
bool makeAddress(const std::string& name, struct sockaddr_un* addr, socklen_t* len) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr->sun_path)) return false;
  if (std::memchr(name.data(), '\0', name.size()) != nullptr) return false;
  addr->sun_path[0] = '\0';  // abstract namespace
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + name.size());
  return true;
}

std::string makeName() {
  char buf[kFdServerNameBytes + 32];
  uint64_t counter = gNameCounter.fetch_add(1, std::memory_order_relaxed);
  int n = std::snprintf(buf, sizeof(buf), "%s.%ld.%016" PRIx64 ".%" PRIu64, kNamePrefix,
                        static_cast<long>(getpid()), randomNonce(), counter);
  if (n <= 0) return std::string();
  return std::string(buf, static_cast<size_t>(n));
}

/**
 * A one-byte message with room for kFds descriptors of ancillary data (SCM_RIGHTS), as
 * sendDescriptor and receiveFd exchange it. msg points into the object itself: not copyable.
 */
template <size_t kFds>
struct OneByteFdMessage {
  char payload = 0;
  struct iovec iov;
  struct msghdr msg;
  union {
    struct cmsghdr align;  // last: cmsghdr ends in a flexible array member
    char buf[CMSG_SPACE(sizeof(int) * kFds)];
  } control;

  OneByteFdMessage() {
    iov.iov_base = &payload;
    iov.iov_len = 1;
    std::memset(&control, 0, sizeof(control));
    std::memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
  }
  OneByteFdMessage(const OneByteFdMessage&) = delete;
  OneByteFdMessage& operator=(const OneByteFdMessage&) = delete;
};

/** Sends fd (one payload byte plus SCM_RIGHTS) over a connected socket; never blocks. */
bool sendDescriptor(int sock, int fd) {
  OneByteFdMessage<1> m;
  m.payload = kPayload;
  struct msghdr& msg = m.msg;
  struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

/** True if the peer of a connected socket runs under our effective uid. */
bool peerIsSameUser(int sock) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return false;
  }
  return cred.uid == geteuid();
}

}  // namespace

FdServer::~FdServer() {
  closeFd(listenFd_);
  listenFd_ = -1;
}

bool FdServer::open(std::string* name) {
  if (name == nullptr) {
    LAMPORT_WARN("FdServer::open called without a name buffer");
    return false;
  }
  name->clear();
  closeFd(listenFd_);  // a second open() replaces the previous socket
  listenFd_ = -1;

  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) {
    LAMPORT_WARN("fd exchange: socket() failed: %s", std::strerror(errno));
    return false;
  }
  // A clash with another process is astronomically unlikely (pid + 64 random bits + counter),
  // but a fresh name is cheap: try a few before giving up.
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string candidate = makeName();
    struct sockaddr_un addr;
    socklen_t len = 0;
    if (candidate.size() >= static_cast<size_t>(kFdServerNameBytes) ||
        !makeAddress(candidate, &addr, &len)) {
      LAMPORT_WARN("fd exchange: cannot build a socket name");
      closeFd(sock);
      return false;
    }
    if (::bind(sock, reinterpret_cast<struct sockaddr*>(&addr), len) != 0) {
      if (errno == EADDRINUSE) continue;
      LAMPORT_WARN("fd exchange: bind(@%s) failed: %s", candidate.c_str(),
                   std::strerror(errno));
      closeFd(sock);
      return false;
    }
    if (::listen(sock, SOMAXCONN) != 0) {
      LAMPORT_WARN("fd exchange: listen(@%s) failed: %s", candidate.c_str(),
                   std::strerror(errno));
      closeFd(sock);
      return false;
    }
    listenFd_ = sock;
    *name = candidate;
    LAMPORT_TRACE(kSubsysInit, "fd exchange: listening on @%s", candidate.c_str());
    return true;
  }
  LAMPORT_WARN("fd exchange: no free socket name after several attempts");
  closeFd(sock);
  return false;
}

bool FdServer::serve(int fd, int clients, int timeoutMs) {
  int sock = listenFd_;
  listenFd_ = -1;  // closed below on every path
  if (sock < 0) {
    LAMPORT_WARN("fd exchange: serve() without a successful open()");
    return false;
  }
  if (fd < 0) {
    LAMPORT_WARN("fd exchange: serve() given an invalid descriptor");
    closeFd(sock);
    return false;
  }
  const int64_t deadline = nowMs() + (timeoutMs > 0 ? timeoutMs : 0);
  int served = 0;
  bool ok = true;
  while (served < clients) {
    struct pollfd pfd;
    pfd.fd = sock;
    pfd.events = POLLIN;
    pfd.revents = 0;
    int wait = remainingMs(deadline);
    int rc = ::poll(&pfd, 1, wait);
    if (rc < 0) {
      if (errno == EINTR) continue;
      LAMPORT_WARN("fd exchange: poll() failed: %s", std::strerror(errno));
      ok = false;
      break;
    }
    if (rc == 0) {
      if (remainingMs(deadline) > 0) continue;  // woke a little early
      LAMPORT_WARN("fd exchange: only %d of %d peers fetched the handle within %d ms",
                   served, clients, timeoutMs);
      ok = false;
      break;
    }
    if (pfd.revents & (POLLERR | POLLNVAL)) {
      LAMPORT_WARN("fd exchange: listening socket error (revents 0x%x)", pfd.revents);
      ok = false;
      break;
    }
    int conn = ::accept4(sock, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      int err = errno;
      // Transient: nothing queued after all, or the client went away before we accepted it.
      if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK || err == ECONNABORTED ||
          err == EPROTO) {
        continue;
      }
      LAMPORT_WARN("fd exchange: accept() failed: %s", std::strerror(err));
      ok = false;
      break;
    }
    if (!peerIsSameUser(conn)) {
      LAMPORT_WARN("fd exchange: dropped a connection from another user");
      closeFd(conn);
      continue;
    }
    if (sendDescriptor(conn, fd)) {
      ++served;
    } else {
      // The client gave up (closed) before we sent: it does not count, keep waiting for others.
      LAMPORT_INFO(kSubsysInit, "fd exchange: sending the handle failed: %s",
                   std::strerror(errno));
    }
    // Data already queued stays readable by the client after we close our end.
    closeFd(conn);
  }
  closeFd(sock);
  return ok;
}

int receiveFd(const std::string& name, int timeoutMs, FdServerState server) {
  struct sockaddr_un addr;
  socklen_t addrLen = 0;
  if (!makeAddress(name, &addr, &addrLen)) {
    LAMPORT_WARN("fd exchange: invalid server name (%zu bytes)", name.size());
    return -1;
  }
  const int64_t deadline = nowMs() + (timeoutMs > 0 ? timeoutMs : 0);

  // 1. Connect, retrying while its backlog is full or the server may not be there yet.
  int sock = -1;
  int backoffMs = 1;
  for (;;) {
    sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0) {
      LAMPORT_WARN("fd exchange: socket() failed: %s", std::strerror(errno));
      return -1;
    }
    int rc = ::connect(sock, reinterpret_cast<struct sockaddr*>(&addr), addrLen);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // Not expected for AF_UNIX, but handle it the portable way.
      struct pollfd pfd;
      pfd.fd = sock;
      pfd.events = POLLOUT;
      pfd.revents = 0;
      int prc;
      do {
        prc = ::poll(&pfd, 1, remainingMs(deadline));
      } while (prc < 0 && errno == EINTR);
      if (prc > 0) {
        socklen_t len = sizeof(err);
        if (getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      } else {
        err = prc == 0 ? ETIMEDOUT : errno;
      }
    }
    if (err == 0) break;
    closeFd(sock);
    sock = -1;
    // A full backlog (EAGAIN) is always worth another try; no listener only while the server may
    // still be opening.
    const bool noListener = err == ECONNREFUSED || err == ENOENT;
    bool retry = err == EAGAIN || err == EINTR || (noListener && server == FdServerState::kMayNotListenYet);
    if (!retry || remainingMs(deadline) == 0) {
      LAMPORT_WARN("fd exchange: cannot connect to @%s: %s", name.c_str(),
                   retry ? "timed out" : std::strerror(err));
      return -1;
    }
    int sleepMs = backoffMs < remainingMs(deadline) ? backoffMs : remainingMs(deadline);
    struct timespec ts;
    ts.tv_sec = sleepMs / 1000;
    ts.tv_nsec = static_cast<long>(sleepMs % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    if (backoffMs < 20) backoffMs *= 2;
  }

  // 2. Receive one byte with the descriptor attached.
  int received = -1;
  for (;;) {
    struct pollfd pfd;
    pfd.fd = sock;
    pfd.events = POLLIN;
    pfd.revents = 0;
    int prc = ::poll(&pfd, 1, remainingMs(deadline));
    if (prc < 0) {
      if (errno == EINTR) continue;
      LAMPORT_WARN("fd exchange: poll() failed: %s", std::strerror(errno));
      break;
    }
    if (prc == 0) {
      if (remainingMs(deadline) > 0) continue;
      LAMPORT_WARN("fd exchange: no handle from @%s within %d ms", name.c_str(),
                   timeoutMs);
      break;
    }
    OneByteFdMessage<kMaxFdsPerMessage> m;
    struct msghdr& msg = m.msg;
    ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      LAMPORT_WARN("fd exchange: recvmsg() failed: %s", std::strerror(errno));
      break;
    }
    // Collect every descriptor that arrived, keep the first, close the rest.
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (received < 0) {
          received = got;
        } else {
          closeFd(got);
        }
      }
    }
    if (n == 0 && received < 0) {
      LAMPORT_WARN("fd exchange: @%s closed the connection without a handle",
                   name.c_str());
    } else if (msg.msg_flags & MSG_CTRUNC) {
      LAMPORT_WARN("fd exchange: control data from @%s truncated", name.c_str());
      closeFd(received);
      received = -1;
    } else if (received < 0) {
      LAMPORT_WARN("fd exchange: message from @%s carried no descriptor", name.c_str());
    }
    break;
  }
  closeFd(sock);
  return received;
}

}  // namespace nccl_lamport
