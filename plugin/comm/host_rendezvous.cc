#include "plugin/comm/host_rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

namespace nccl_lamport {

namespace {

constexpr uint32_t kMagic = 0x4c52445a;  // "LRDZ"
constexpr uint32_t kVersion = 1;

using Clock = std::chrono::steady_clock;

struct JoinHeader {
  uint32_t magic, version;
  uint64_t commId;
  uint32_t nRanks, capable;
  uint64_t hostHash;
  uint32_t pid, payloadBytes;
  uint64_t nonce;
};

struct VerdictHeader {
  uint32_t magic, ok, count, index;
};

struct Word {
  uint32_t magic, ok;
};

struct Participant {
  int fd = -1;  // -1: the leader itself
  JoinHeader header{};
  std::vector<uint8_t> payload;
};

int remainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(std::min<int64_t>(left, 1 << 30)) : 0;
}

bool waitReadable(int fd, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, remainingMs(deadline));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

bool recvAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    if (!waitReadable(fd, deadline)) return false;
    const ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool sendAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t sent = send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

uint64_t hostHash() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* c = name; *c != '\0'; ++c) h = (h ^ static_cast<uint8_t>(*c)) * 1099511628211ull;
  return h;
}

sockaddr_un addressOf(const RendezvousJoin& join, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): nothing on disk to clean up after a crash.
  const std::string name = hostRendezvousName(join);
  const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

/**
 * Connects without blocking. A listener whose queue is full (a stopped or wedged holder of the
 * name, or a process of another uid that never accepts, which our own retries below would fill)
 * answers EAGAIN at once, where a blocking connect() would park this rank in the kernel past its
 * deadline. Once connected the socket is blocking again: every receive waits in poll() with a
 * deadline, and the sends are a few KB into an empty socket buffer.
 */
bool connectNow(int fd, const sockaddr_un& addr, socklen_t length) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  int r;
  do {
    r = connect(fd, reinterpret_cast<const sockaddr*>(&addr), length);
  } while (r != 0 && errno == EINTR);
  return r == 0 && fcntl(fd, F_SETFL, flags) == 0;
}

bool samePeerUser(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

JoinHeader headerOf(const RendezvousJoin& join, uint64_t nonce) {
  JoinHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.commId = join.commId;
  h.nRanks = join.nRanks;
  h.capable = join.capable ? 1 : 0;
  h.hostHash = hostHash();
  h.pid = static_cast<uint32_t>(getpid());
  h.payloadBytes = static_cast<uint32_t>(join.payload.size());
  h.nonce = nonce;
  return h;
}

RendezvousResult failed(const std::string& reason) {
  RendezvousResult r;
  r.reason = reason;
  return r;
}

// The leader: gathers, decides, commits. `listener` is bound and listening.
RendezvousResult lead(int listener, const RendezvousJoin& join, uint64_t nonce, uint64_t timeoutMs) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  std::vector<Participant> parts(1);
  parts[0].header = headerOf(join, nonce);
  parts[0].payload = join.payload;
  std::string problem;
  while (parts.size() < join.nRanks && Clock::now() < deadline) {
    if (!waitReadable(listener, deadline)) break;
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Participant p;
    p.fd = fd;
    const bool ok = samePeerUser(fd) && recvAll(fd, &p.header, sizeof(p.header), deadline) &&
                    p.header.magic == kMagic && p.header.version == kVersion &&
                    p.header.payloadBytes <= kMaxRendezvousPayload;
    if (ok) {
      p.payload.resize(p.header.payloadBytes);
      if (recvAll(fd, p.payload.data(), p.payload.size(), deadline)) {
        parts.push_back(std::move(p));
        continue;
      }
    }
    close(fd);  // a stranger or a broken join: not one of ours
  }
  // The name is free again from here: a later communicator with the same key meets afresh.
  close(listener);

  bool ok = parts.size() == join.nRanks;
  if (!ok) {
    problem = std::to_string(parts.size()) + " of " + std::to_string(join.nRanks) + " ranks joined within " +
              std::to_string(timeoutMs) + " ms";
  }
  for (const Participant& p : parts) {
    if (ok && (p.header.commId != join.commId || p.header.nRanks != join.nRanks)) {
      ok = false;
      problem = "a rank joined with another commId or nRanks";
    }
    if (ok && !p.header.capable) {
      ok = false;
      problem = "a rank is not capable";
    }
  }
  // The agreed order: (host, pid, nonce), the same whoever leads.
  std::sort(parts.begin(), parts.end(), [](const Participant& a, const Participant& b) {
    if (a.header.hostHash != b.header.hostHash) return a.header.hostHash < b.header.hostHash;
    if (a.header.pid != b.header.pid) return a.header.pid < b.header.pid;
    return a.header.nonce < b.header.nonce;
  });
  std::vector<uint8_t> table;  // every header + payload, in order
  for (const Participant& p : parts) {
    const auto* h = reinterpret_cast<const uint8_t*>(&p.header);
    table.insert(table.end(), h, h + sizeof(p.header));
    table.insert(table.end(), p.payload.begin(), p.payload.end());
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].fd < 0) continue;
    VerdictHeader v{kMagic, ok ? 1u : 0u, static_cast<uint32_t>(parts.size()), static_cast<uint32_t>(i)};
    if (!sendAll(parts[i].fd, &v, sizeof(v)) || !sendAll(parts[i].fd, table.data(), table.size())) {
      if (ok) problem = "a rank left before the verdict";
      ok = false;
    }
  }
  const Clock::time_point ackDeadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (const Participant& p : parts) {
    if (p.fd < 0) continue;
    Word ack{};
    if (!recvAll(p.fd, &ack, sizeof(ack), ackDeadline) || ack.magic != kMagic || ack.ok != 1) {
      if (ok) problem = "a rank did not acknowledge the verdict";
      ok = false;
    }
  }
  const Word commit{kMagic, ok ? 1u : 0u};
  for (const Participant& p : parts) {
    if (p.fd < 0) continue;
    sendAll(p.fd, &commit, sizeof(commit));
    close(p.fd);
  }
  RendezvousResult r;
  r.ok = ok;
  r.reason = problem;
  if (ok) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].fd < 0) r.index = static_cast<int>(i);
      r.payloads.push_back(parts[i].payload);
    }
  }
  return r;
}

// A follower on a connected socket. Returns false in *retry when the connection ended before
// any verdict (a listener that closed with us in its backlog): the caller then tries again.
RendezvousResult follow(int fd, const RendezvousJoin& join, uint64_t nonce, uint64_t timeoutMs,
                        const char* testHooks, bool* retry) {
  *retry = false;
  const JoinHeader h = headerOf(join, nonce);
  if (!sendAll(fd, &h, sizeof(h)) || !sendAll(fd, join.payload.data(), join.payload.size())) {
    *retry = true;
    return failed("lost the leader before joining");
  }
  if (testHooks != nullptr && std::strcmp(testHooks, "die-after-join") == 0) _exit(3);
  // The leader may wait the whole timeout for the last rank, then commits within another.
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(2 * timeoutMs + 1000);
  VerdictHeader v{};
  if (!recvAll(fd, &v, sizeof(v), deadline)) {
    *retry = Clock::now() < deadline;
    return failed("no verdict from the leader");
  }
  if (v.magic != kMagic || v.count > join.nRanks || v.index >= v.count) return failed("a malformed verdict");
  RendezvousResult r;
  r.index = static_cast<int>(v.index);
  for (uint32_t i = 0; i < v.count; ++i) {
    JoinHeader p{};
    if (!recvAll(fd, &p, sizeof(p), deadline) || p.payloadBytes > kMaxRendezvousPayload) {
      return failed("a truncated verdict");
    }
    std::vector<uint8_t> payload(p.payloadBytes);
    if (!recvAll(fd, payload.data(), payload.size(), deadline)) return failed("a truncated verdict");
    r.payloads.push_back(std::move(payload));
  }
  const Word ack{kMagic, v.ok};
  if (!sendAll(fd, &ack, sizeof(ack))) return failed("lost the leader before the commit");
  Word commit{};
  if (!recvAll(fd, &commit, sizeof(commit), deadline) || commit.magic != kMagic) {
    return failed("no commit from the leader");
  }
  if (commit.ok != 1) return failed(v.ok ? "the leader withdrew the verdict" : "the leader's verdict: no");
  r.ok = true;
  return r;
}

}  // namespace

std::string hostRendezvousName(const RendezvousJoin& join) {
  char name[96];
  std::snprintf(name, sizeof(name), "nccl-lamport-rdv-%u-%016llx-%u", static_cast<unsigned>(getuid()),
                static_cast<unsigned long long>(join.commId), join.nRanks);
  return name;
}

RendezvousResult hostRendezvous(const RendezvousJoin& join, uint64_t timeoutMs, const char* testHooks) {
  try {
    if (join.nRanks == 0 || join.payload.size() > kMaxRendezvousPayload) return failed("invalid join");
    std::random_device rd;
    const uint64_t nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    socklen_t length = 0;
    const sockaddr_un addr = addressOf(join, &length);
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
    std::string last = "no leader found";
    for (;;) {
      const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return failed("socket() failed");
      if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), length) == 0) {
        if (listen(fd, static_cast<int>(join.nRanks) + 8) != 0) {
          close(fd);
          return failed("listen() failed");
        }
        const uint64_t left = static_cast<uint64_t>(remainingMs(deadline));
        return lead(fd, join, nonce, std::max<uint64_t>(left, 1));
      }
      if (connectNow(fd, addr, length) && samePeerUser(fd)) {
        bool retry = false;
        RendezvousResult r = follow(fd, join, nonce, timeoutMs, testHooks, &retry);
        close(fd);
        if (!retry || Clock::now() >= deadline) return r;
        last = r.reason;
      } else {
        close(fd);
      }
      if (Clock::now() >= deadline) return failed(last + " within " + std::to_string(timeoutMs) + " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } catch (...) {
    return failed("out of memory");
  }
}

}  // namespace nccl_lamport
