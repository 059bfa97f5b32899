// Hands POSIX file descriptors (exported CUDA VMM handles) to other processes of the same host,
// over abstract Unix-domain sockets with SCM_RIGHTS, as NCCL hands over its own cuMem handles
// (src/misc/ipcsocket.cc). No files on disk, nothing to clean up after a crash.
#pragma once

#include <string>

namespace nccl_lamport {

/** Longest socket name an FdServer produces, NUL included (fits the exchange record). */
constexpr int kFdServerNameBytes = 64;

/**
 * One listening socket that gives the same descriptor to a known number of clients.
 * Typical use: open() before the handle all-gather (its name goes into the record), serve() on a
 * thread while this process fetches its peers' descriptors with receiveFd().
 */
class FdServer {
 public:
  FdServer() = default;
  ~FdServer();
  FdServer(const FdServer&) = delete;
  FdServer& operator=(const FdServer&) = delete;

  /** Creates and listens on a new abstract socket; its name (< kFdServerNameBytes) is returned
   *  in *name. False (and a WARN) on failure. */
  bool open(std::string* name);

  /** Accepts `clients` connections and sends each a duplicate of fd. Returns false if they did
   *  not all come within timeoutMs, or on a socket error. Closes the socket at the end. */
  bool serve(int fd, int clients, int timeoutMs);

 private:
  int listenFd_ = -1;
};

/** What a refused connection tells receiveFd about the server. */
enum class FdServerState {
  kMayNotListenYet,  // it may open later: a refused connection is retried until the timeout
  kListening,        // it listened before its name was handed out (the workspace set-up opens it
                     // before round 1): a refused connection means it is gone, not retried
};

/** Connects to the FdServer called `name` and receives one descriptor, within timeoutMs. -1 on
 *  error or timeout. */
int receiveFd(const std::string& name, int timeoutMs, FdServerState server = FdServerState::kMayNotListenYet);

}  // namespace nccl_lamport
