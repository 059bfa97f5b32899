#include "bench/rank_launcher.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

namespace nccl_lamport {

namespace {

// Header of the shared mapping: the unique id handshake, then nRanks result slices.
struct SharedHeader {
  std::atomic<int> idState;  // 0: not yet, 1: published, 2: rank 0 failed to create it
  ncclUniqueId id;
};

size_t headerBytes() { return (sizeof(SharedHeader) + 63) / 64 * 64; }

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

RankLaunch::~RankLaunch() {
  if (shared_ != nullptr) munmap(shared_, sharedBytes_);
}

RankLaunch::RankLaunch(RankLaunch&& other) noexcept { *this = std::move(other); }

RankLaunch& RankLaunch::operator=(RankLaunch&& other) noexcept {
  if (this != &other) {
    if (shared_ != nullptr) munmap(shared_, sharedBytes_);
    exits = std::move(other.exits);
    shared_ = other.shared_;
    sharedBytes_ = other.sharedBytes_;
    resultBytesPerRank_ = other.resultBytesPerRank_;
    other.shared_ = nullptr;
    other.sharedBytes_ = 0;
  }
  return *this;
}

bool RankLaunch::allSucceeded() const {
  if (exits.empty()) return false;
  for (const RankExit& e : exits) {
    if (e.exitCode != 0 || e.timedOut) return false;
  }
  return true;
}

const void* RankLaunch::resultsOf(int r) const {
  return static_cast<const char*>(shared_) + headerBytes() + r * resultBytesPerRank_;
}

std::string RankLaunch::describeFailures() const {
  std::string text;
  for (size_t r = 0; r < exits.size(); ++r) {
    if (exits[r].timedOut) {
      text += "rank " + std::to_string(r) + " timed out and was killed\n";
    } else if (exits[r].exitCode != 0) {
      text += "rank " + std::to_string(r) + " exited with " + std::to_string(exits[r].exitCode) + "\n";
    }
  }
  return text;
}

RankLaunch launchRanks(int nRanks, size_t resultBytesPerRank, double timeoutSeconds,
                       const std::function<ncclResult_t(ncclUniqueId*)>& createId,
                       const std::function<int(RankContext&)>& body) {
  RankLaunch launch;
  launch.resultBytesPerRank_ = (resultBytesPerRank + 63) / 64 * 64;
  launch.sharedBytes_ = headerBytes() + nRanks * launch.resultBytesPerRank_;
  launch.shared_ = mmap(nullptr, launch.sharedBytes_, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (launch.shared_ == MAP_FAILED) {
    launch.shared_ = nullptr;
    return launch;
  }
  memset(launch.shared_, 0, launch.sharedBytes_);
  auto* header = new (launch.shared_) SharedHeader();
  header->idState.store(0);

  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(nRanks, -1);
  for (int r = 0; r < nRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      RankContext ctx;
      ctx.rank = r;
      ctx.nRanks = nRanks;
      ctx.sharedResults = static_cast<char*>(launch.shared_) + headerBytes();
      ctx.resultBytesPerRank = launch.resultBytesPerRank_;
      // Rank 0 was forked first, so every later child knows its pid: a waiting rank gives up
      // when rank 0 died without publishing the id (instead of spinning until the timeout).
      const pid_t rank0Pid = r == 0 ? getpid() : pids[0];
      ctx.uniqueId = [header, r, rank0Pid, &createId]() {
        if (r == 0) {
          ncclUniqueId id;
          if (createId(&id) != ncclSuccess) {
            header->idState.store(2);
            _exit(3);
          }
          header->id = id;
          header->idState.store(1, std::memory_order_release);
          return id;
        }
        while (true) {
          int state = header->idState.load(std::memory_order_acquire);
          if (state == 1) return header->id;
          if (state == 2) _exit(3);
          if (rank0Pid > 0 && kill(rank0Pid, 0) != 0 && errno == ESRCH) _exit(3);
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      };
      int code = body(ctx);
      fflush(stdout);
      fflush(stderr);
      _exit(code & 0xff);
    }
    pids[r] = pid;
  }

  launch.exits.assign(nRanks, RankExit{});
  const auto start = std::chrono::steady_clock::now();
  int alive = 0;
  for (pid_t pid : pids) alive += pid > 0 ? 1 : 0;
  while (alive > 0) {
    for (int r = 0; r < nRanks; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      pid_t done = waitpid(pids[r], &status, WNOHANG);
      if (done == pids[r]) {
        launch.exits[r].exitCode =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        pids[r] = -1;
        --alive;
      }
    }
    if (alive > 0 && secondsSince(start) > timeoutSeconds) {
      for (int r = 0; r < nRanks; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        launch.exits[r].timedOut = true;
        pids[r] = -1;
        --alive;
      }
    }
    if (alive > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return launch;
}

int countCudaDevicesWithoutInit() {
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return 0;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(pipeFds[0]);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    ssize_t ignored = write(pipeFds[1], &count, sizeof(count));
    (void)ignored;
    _exit(0);
  }
  close(pipeFds[1]);
  int count = 0;
  if (pid < 0 || read(pipeFds[0], &count, sizeof(count)) != sizeof(count)) count = 0;
  close(pipeFds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return count;
}

}  // namespace nccl_lamport
