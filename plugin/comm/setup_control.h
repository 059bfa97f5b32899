// How a workspace set-up that runs off the user's thread (non-blocking communicators) can be
// stopped, for one of its communicators or all, by ncclCommAbort / ncclCommDestroy /
// ncclCommRevoke without ever touching a freed communicator.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <absl/functional/function_ref.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace nccl_lamport {

class RoundDevice;

/**
 * Shared between a deferred set-up and the wrappers that may end it. Every NCCL call the set-up
 * makes on a communicator holds ncclMutex and first checks stopped(comm); a wrapper that is
 * about to abort, destroy or revoke one of them calls stop(comm) under the same mutex. So once
 * the wrapper holds the mutex, the set-up never calls NCCL on that communicator again, while
 * the others created with it finish their set-up with their peers. `cancelled` stops the whole
 * set-up (its own failure).
 */
struct SetupControl {
  SetupControl() = default;
  /** A control whose communicators can be stopped one by one. */
  explicit SetupControl(const std::vector<ncclComm_t>& comms)
      : comms_(comms), stopped_(new std::atomic<bool>[comms.size()]) {
    for (size_t i = 0; i < comms.size(); ++i) stopped_[i].store(false);
  }
  SetupControl(const SetupControl&) = delete;
  SetupControl& operator=(const SetupControl&) = delete;

  std::mutex ncclMutex;
  std::atomic<bool> cancelled{false};

  /** Under ncclMutex: the set-up calls NCCL on comm no more, waits for its stream no longer and
   *  registers nothing for it. A comm this control was not made with: no effect. */
  void stop(ncclComm_t comm) {
    const size_t i = indexOf(comm);
    if (i < comms_.size()) stopped_[i].store(true);
  }
  /** comm was stopped, or the whole set-up cancelled. Lock-free, for waits; a decision to call
   *  NCCL on comm reads it under ncclMutex. */
  bool stopped(ncclComm_t comm) const {
    if (cancelled.load()) return true;
    const size_t i = indexOf(comm);
    return i < comms_.size() && stopped_[i].load();
  }

 private:
  size_t indexOf(ncclComm_t comm) const {
    return static_cast<size_t>(std::find(comms_.begin(), comms_.end(), comm) - comms_.begin());
  }
  const std::vector<ncclComm_t> comms_;
  const std::unique_ptr<std::atomic<bool>[]> stopped_;
};

/** What setupWorkspaces needs to know beyond the communicators. */
struct SetupOptions {
  /** The communicators are non-blocking: a grouped call may return ncclInProgress, and the
   *  set-up then polls ncclCommGetAsyncError before it relies on the stream. */
  bool nonBlocking = false;
  /** Null for set-ups on the user's thread (blocking communicators): nothing can cancel them. */
  SetupControl* control = nullptr;
  /** The device side of the exchange rounds (plugin/comm/exchange_rounds.h); null: CUDA. */
  RoundDevice* device = nullptr;
};

/**
 * Which of the set-up's two exchange rounds a wait belongs to, and so how long it may last.
 * Round 1 (the records) may give up after NCCL_LAMPORT_TIMEOUT_MS: a peer is gone, so this rank
 * skips round 2 (it would queue behind round 1's stuck all-gather) and reports the communicator
 * failed (plugin/comm/exchange_rounds.h); a rank that only failed locally still takes part in
 * round 2 and says "not ok" there, so every rank reaches the same verdict.
 * Round 2 (the ok words) has no later round that could reconcile a rank-local give-up, and
 * round 1 has proved every peer alive: it waits until it completes or the set-up is cancelled.
 */
enum class ExchangeRound { kFirst, kSecond };

/**
 * After a grouped call on non-blocking communicators returned ncclInProgress: polls the real
 * ncclCommGetAsyncError of each, commAt(i) for i < count (null, or stopped meanwhile: skipped),
 * until none is in progress. Allocates nothing. Returns
 * the first error, ncclSuccess, ncclInvalidUsage if the whole set-up was cancelled meanwhile, or
 * ncclRemoteError once round 1's deadline has passed (a peer that died after init keeps NCCL's
 * enqueue waiting). `control` may be null (then round 2 waits without bound).
 */
ncclResult_t waitUntilEnqueued(size_t count, absl::FunctionRef<ncclComm_t(size_t i)> commAt, SetupControl* control,
                               ExchangeRound round);

/** Polls the real ncclCommGetAsyncError of each of comms until NCCL reports every one ready
 *  (ncclSuccess). No deadline: NCCL's own init is what is in progress, as it would be without
 *  us. Returns ncclSuccess, the first error NCCL reports, or ncclInvalidUsage once `control` is
 *  cancelled. */
ncclResult_t waitUntilNcclReady(const std::vector<ncclComm_t>& comms, SetupControl* control);

/** Polls `query` (cudaStreamQuery of comm's set-up stream) until it returns anything but
 *  cudaErrorNotReady, with backoff; cudaErrorNotReady once `control` is cancelled or comm stopped
 *  (comm may be null: only the cancel) or, in round 1, after NCCL_LAMPORT_TIMEOUT_MS. */
cudaError_t waitForQuery(const std::function<cudaError_t()>& query, SetupControl* control, ExchangeRound round,
                         ncclComm_t comm = nullptr);

/** waitForQuery on cudaStreamQuery(stream) of comm's set-up; with no control,
 *  cudaStreamSynchronize. */
cudaError_t waitStream(cudaStream_t stream, SetupControl* control, ExchangeRound round, ncclComm_t comm = nullptr);

}  // namespace nccl_lamport
