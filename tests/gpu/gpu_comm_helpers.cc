// Bounded waits and extra communicators for the GPU tests that drive several communicators,
// non-blocking ones, or calls that might never end: every wait has a deadline, and a late one is
// a failure that says what was stuck.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {

// ---------------------------------------------------------------- bounded waits, extra communicators

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void failf(Harness& h, const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  h.fail(h.slots[0], buf);
}

cudaError_t pollStream(cudaStream_t stream, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  cudaError_t err = cudaErrorNotReady;
  while ((err = cudaStreamQuery(stream)) == cudaErrorNotReady && secondsSince(start) < seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return err;
}

bool waitStreams(Harness& h, const std::vector<cudaStream_t>& streams, double seconds, const char* what) {
  for (cudaStream_t stream : streams) {
    const cudaError_t err = pollStream(stream, seconds);
    if (err != cudaSuccess) {
      failf(h, "%s: stream %p: %s", what, static_cast<void*>(stream),
            err == cudaErrorNotReady ? format("still busy after %.0f s (a kernel is stuck)", seconds).c_str()
                                     : cudaGetErrorString(err));
      return false;
    }
  }
  return true;
}

double timedOnThread(Harness& h, const char* what, double limit, const std::function<void()>& fn) {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  const int device = h.slots[0].device;
  const auto start = std::chrono::steady_clock::now();
  std::thread worker([&] {
    cudaSetDevice(device);
    fn();
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    cv.notify_all();
  });
  bool late = false;
  {
    std::unique_lock<std::mutex> lock(mutex);
    late = !cv.wait_for(lock, std::chrono::duration<double>(limit), [&] { return done; });
  }
  if (late) failf(h, "%s has not returned after %.1f s", what, limit);
  worker.join();
  const double seconds = secondsSince(start);
  if (late) failf(h, "%s returned after %.2f s (limit %.1f s)", what, seconds, limit);
  fprintf(stderr, "rank %d: %s took %.3f s\n", h.slots[0].rank, what, seconds);
  return seconds;
}

ncclComm_t splitAccelerated(Harness& h, int key, ncclConfig_t* config) {
  ncclComm_t child = nullptr;
  const ncclResult_t rc = ncclCommSplit(h.slots[0].comm, 0, key < 0 ? h.slots[0].rank : key, &child, config);
  if (rc != ncclSuccess || child == nullptr) {
    failf(h, "ncclCommSplit returned %d (%s)", rc, ncclGetErrorString(rc));
    return nullptr;
  }
  const ncclLamportCommInfo_t info = commInfo(child);
  if (!info.known || !info.eligible || info.nRanks != h.slots[0].nRanks || info.workspaceBytes == 0) {
    failf(h, "the split communicator is not accelerated (known %d eligible %d nRanks %d workspace %zu: %s)",
          info.known, info.eligible, info.nRanks, info.workspaceBytes, info.reason);
  }
  return child;
}

Harness harnessFor(const Harness& h, ncclComm_t comm, cudaStream_t stream) {
  Harness other = h;
  RankSlot& s = other.slots[0];
  s.comm = comm;
  s.stream = stream;
  int rank = -1, count = 0;
  if (comm != nullptr && ncclCommUserRank(comm, &rank) == ncclSuccess && ncclCommCount(comm, &count) == ncclSuccess) {
    s.rank = rank;
    s.nRanks = count;
  }
  other.begin();
  return other;
}

void abortQuietly(ncclComm_t* comm) {
  if (*comm != nullptr) ncclCommAbort(*comm);
  *comm = nullptr;
}

ncclResult_t pollAsyncError(ncclComm_t comm, double seconds, double* waited) {
  const auto start = std::chrono::steady_clock::now();
  ncclResult_t state = ncclInProgress;
  while (true) {
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) state = rc;
    if (state != ncclInProgress || secondsSince(start) >= seconds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (waited != nullptr) *waited = secondsSince(start);
  return state;
}

bool waitCommReady(Harness& h, ncclComm_t comm, double seconds, const char* what) {
  double waited = 0;
  const ncclResult_t state = pollAsyncError(comm, seconds, &waited);
  if (state == ncclSuccess) return true;
  failf(h, "%s: ncclCommGetAsyncError reports %d (%s) after %.1f s%s", what, state, ncclGetErrorString(state), waited,
        state == ncclInProgress ? " (still in progress: never became ready)" : "");
  return false;
}

bool shareUniqueId(Harness& h, ncclUniqueId* id) {
  RankSlot& s = h.slots[0];
  struct Payload {
    int32_t ok;
    ncclUniqueId id;
  } payload{};
  if (s.rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&payload.id);
    payload.ok = rc == ncclSuccess ? 1 : 0;
    if (rc != ncclSuccess) failf(h, "ncclGetUniqueId returned %d", rc);
  }
  DeviceGuard guard(s.device);
  void* buf = nullptr;
  if (cudaMalloc(&buf, sizeof(payload)) != cudaSuccess) {
    failf(h, "shareUniqueId: cudaMalloc failed");
    return false;
  }
  bool ok = cudaMemcpy(buf, &payload, sizeof(payload), cudaMemcpyHostToDevice) == cudaSuccess;
  const ncclResult_t rc = pncclBroadcast(buf, buf, sizeof(payload), ncclUint8, 0, s.comm, s.stream);
  if (rc != ncclSuccess) failf(h, "shareUniqueId: pncclBroadcast returned %d", rc);
  ok = ok && rc == ncclSuccess && waitStreams(h, {s.stream}, 60, "shareUniqueId broadcast");
  ok = ok && cudaMemcpy(&payload, buf, sizeof(payload), cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(buf);
  if (ok && payload.ok != 1) failf(h, "shareUniqueId: rank 0 could not make a unique id");
  if (!ok || payload.ok != 1) return false;
  *id = payload.id;
  return true;
}

ncclLamportCommInfo_t commInfo(ncclComm_t comm) {
  ncclLamportCommInfo_t info{};
  if (ncclLamportGetCommInfo(comm, &info) != ncclSuccess) info = ncclLamportCommInfo_t{};
  return info;
}

void requireAccelerated(Harness& h, ncclComm_t comm, int nRanks, int rank, const char* what) {
  const ncclLamportCommInfo_t info = commInfo(comm);
  h.failures->addCheck();
  if (!info.known || !info.eligible || info.workspaceBytes == 0 || info.nRanks != nRanks ||
      (rank >= 0 && info.rank != rank)) {
    failf(h, "%s: not accelerated as expected: known %d eligible %d workspace %zu nRanks %d (expected %d) rank %d "
          "(expected %d): %s", what, info.known, info.eligible, info.workspaceBytes, info.nRanks, nRanks, info.rank,
          rank, info.reason);
  }
}

void checkLamportGrowth(Harness& hx, uint64_t expected, const char* what) {
  const RankSlot& s = hx.slots[0];
  const ncclLamportCommInfo_t now = commInfo(s.comm);
  const uint64_t lamport = now.lamportCalls - s.base.lamportCalls, nccl = now.ncclCalls - s.base.ncclCalls;
  hx.checkNoAsyncError(what);
  hx.checkCounters(what);
  hx.failures->addCheck();
  if (expected == 0 || lamport != expected) {
    failf(hx, "%s: %llu allreduces ran on Lamport, expected %llu (eligible %d: %s)", what,
          static_cast<unsigned long long>(lamport), static_cast<unsigned long long>(expected), now.eligible,
          now.reason);
  }
  fprintf(stderr, "rank %d: %s: %llu calls on Lamport, %llu on NCCL\n", s.rank, what,
          static_cast<unsigned long long>(lamport), static_cast<unsigned long long>(nccl));
}

}  // namespace gputest
}  // namespace nccl_lamport
